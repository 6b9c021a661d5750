"""Declarative parameter constraints (in the style of scikit-learn's ``_parameter_constraints``).

Every mechanism and estimator declares one table ``name → Constraint``; :func:`validate_params`
checks every value at construction, normalises it (``int`` → ``float`` for reals, lists →
tuples, mappings → :class:`FrozenDict`) and raises :class:`~ppdp.errors.ParameterError` naming
the parameter. NaN, ±inf and ``bool`` are rejected wherever a number is expected. Values are
stored immutably all the way down; :func:`to_json` thaws them for manifests and ``get_params``.

A constraint also knows how the CLI spells it (:meth:`Constraint.cli`): the publish commands
are generated from these tables, so a parameter is declared exactly once.
"""

from __future__ import annotations

import math
import numbers
import inspect
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Callable, ClassVar

from .errors import ParameterError

__all__ = ["check_level", "Constraint", "Real", "Integer", "Options", "Flag", "Text", "Labels", "LabelMap", "Triples", "Edges",
           "Optional", "FrozenDict", "validate_params", "to_json", "freeze", "Parametrized"]


class FrozenDict(Mapping):
    """An immutable, hashable mapping (a parameter value that cannot change after freezing)."""

    __slots__ = ("_d", "_h")
    _d: dict[Any, Any]
    _h: int | None

    def __init__(self, *args: Any, **kw: Any):
        object.__setattr__(self, "_d", dict(*args, **kw))
        object.__setattr__(self, "_h", None)

    def __getitem__(self, k: Any) -> Any:
        return self._d[k]

    def __iter__(self) -> Iterator:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __hash__(self) -> int:
        if self._h is None:
            object.__setattr__(self, "_h", hash(tuple(sorted(self._d.items(), key=lambda kv: str(kv[0])))))
        return self._h  # type: ignore[return-value]

    def __setattr__(self, k: str, v: Any) -> None:
        raise AttributeError("FrozenDict is immutable")

    def __repr__(self) -> str:
        return repr(self._d)


def freeze(v: Any) -> Any:
    """Deeply immutable copy: lists/tuples → tuples, mappings → FrozenDict."""
    if isinstance(v, Mapping):
        return FrozenDict({k: freeze(x) for k, x in v.items()})
    if isinstance(v, (list, tuple)):
        return tuple(freeze(x) for x in v)
    return v


def to_json(v: Any) -> Any:
    """The JSON form of a (frozen) parameter value: tuples → lists, FrozenDict → dict."""
    if isinstance(v, Mapping):
        return {str(k): to_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    return v


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


class Constraint:
    """One parameter's allowed values. ``check`` returns the normalised (frozen) value."""

    def check(self, name: str, value: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    # --- CLI: the option's click type, whether it repeats, and how to turn the text into a value
    def cli(self) -> dict[str, Any]:
        return {"type": str}

    def from_cli(self, value: Any) -> Any:
        return value

    def _fail(self, name: str, value: Any) -> ParameterError:
        return ParameterError(f"{name} must be {self.describe()}, got {value!r}", param=name)


class Real(Constraint):
    """A finite real number in an interval; ``closed`` says which ends are included."""

    def __init__(self, lo: float | None = None, hi: float | None = None, closed: str = "both"):
        self.lo, self.hi, self.closed = lo, hi, closed

    def _in(self, x: float) -> bool:
        lo_ok = self.lo is None or (x >= self.lo if self.closed in ("both", "left") else x > self.lo)
        hi_ok = self.hi is None or (x <= self.hi if self.closed in ("both", "right") else x < self.hi)
        return lo_ok and hi_ok

    def _range(self) -> str:
        if self.lo is None and self.hi is None:
            return ""
        if self.hi is None:
            return f" {'≥' if self.closed in ('both', 'left') else '>'} {self.lo:g}"
        if self.lo is None:
            return f" {'≤' if self.closed in ('both', 'right') else '<'} {self.hi:g}"
        left = "[" if self.closed in ("both", "left") else "("
        right = "]" if self.closed in ("both", "right") else ")"
        return f" in {left}{self.lo:g}, {self.hi:g}{right}"

    def describe(self) -> str:
        return "a finite number" + self._range()

    def check(self, name: str, value: Any) -> Any:
        if not _is_number(value):
            raise self._fail(name, value)
        x = float(value)
        if not math.isfinite(x) or not self._in(x):
            raise self._fail(name, value)
        return x

    def cli(self) -> dict[str, Any]:
        return {"type": float}


class Integer(Real):
    """A whole number (``int`` or NumPy integer; ``2.0`` is refused) in an interval."""

    def describe(self) -> str:
        return "a whole number" + self._range()

    def check(self, name: str, value: Any) -> Any:
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise self._fail(name, value)
        x = int(value)
        if not self._in(x):
            raise self._fail(name, value)
        return x

    def cli(self) -> dict[str, Any]:
        return {"type": int}


class Options(Constraint):
    """One of a fixed set of strings."""

    def __init__(self, *options: str):
        self.options = tuple(options)

    def describe(self) -> str:
        return "one of " + ", ".join(repr(o) for o in self.options)

    def check(self, name: str, value: Any) -> Any:
        if not isinstance(value, str) or value not in self.options:
            raise self._fail(name, value)
        return value

    def cli(self) -> dict[str, Any]:
        import click

        return {"type": click.Choice(self.options)}


class Flag(Constraint):
    """``True`` or ``False`` (not 0/1)."""

    def describe(self) -> str:
        return "True or False"

    def check(self, name: str, value: Any) -> Any:
        if not isinstance(value, bool):
            raise self._fail(name, value)
        return value

    def cli(self) -> dict[str, Any]:
        return {"flag": True}


class Text(Constraint):
    """A non-empty string."""

    def describe(self) -> str:
        return "a non-empty string"

    def check(self, name: str, value: Any) -> Any:
        if not isinstance(value, str) or not value:
            raise self._fail(name, value)
        return value


def _as_sequence(value: Any) -> Sequence | None:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        try:
            import numpy as np

            if isinstance(value, np.ndarray):
                return list(value.tolist())
        except ImportError:  # pragma: no cover
            pass
        return None
    return value


class Labels(Constraint):
    """A sequence of distinct labels (strings; numbers are turned into their text).
    A single string is accepted as a one-element list. CLI: repeatable, commas split."""

    def __init__(self, min_len: int = 1, distinct: bool = True):
        self.min_len, self.distinct = min_len, distinct

    def describe(self) -> str:
        return f"a list of {'distinct ' if self.distinct else ''}labels (at least {self.min_len})"

    def check(self, name: str, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]
        seq = _as_sequence(value)
        if seq is None or any(not isinstance(x, (str, numbers.Integral)) or isinstance(x, bool) for x in seq):
            raise self._fail(name, value)
        out = tuple(str(x) for x in seq)
        if len(out) < self.min_len or any(not x for x in out):
            raise self._fail(name, value)
        if self.distinct and len(set(out)) != len(out):
            raise ParameterError(f"{name} repeats a label: {list(out)}", param=name)
        return out

    def cli(self) -> dict[str, Any]:
        return {"type": str, "multiple": True, "metavar": "LABEL[,LABEL…]"}

    def from_cli(self, value: Any) -> Any:
        out = [x.strip() for v in value for x in str(v).split(",") if x.strip()]
        return out or None


class LabelMap(Constraint):
    """A mapping label → value (each value checked by ``values``). CLI: repeatable KEY=VALUE."""

    def __init__(self, values: Constraint, metavar: str = "LABEL=VALUE"):
        self.values, self.metavar = values, metavar

    def describe(self) -> str:
        return f"a mapping of labels to {self.values.describe()}"

    def check(self, name: str, value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise self._fail(name, value)
        out = {}
        for k, v in value.items():
            if not isinstance(k, (str, numbers.Integral)) or isinstance(k, bool):
                raise self._fail(name, value)
            out[str(k)] = self.values.check(f"{name}[{k!r}]", v)
        return FrozenDict(out)

    def cli(self) -> dict[str, Any]:
        return {"type": str, "multiple": True, "metavar": self.metavar}

    def from_cli(self, value: Any) -> Any:
        out: dict[str, Any] = {}
        for item in value:
            key, sep, text = str(item).rpartition("=")
            if not sep or not key.strip():
                raise ParameterError(f"takes {self.metavar}, got {item!r}")
            out[key.strip()] = _parse_scalar(text, self.values)
        return out or None


class Edges(LabelMap):
    """dimension → strictly increasing finite bin edges (≥ 2). CLI: repeatable DIM=E0,E1,…"""

    def __init__(self) -> None:
        super().__init__(Real(), metavar="DIM=E0,E1,…")

    def describe(self) -> str:
        return "a mapping of dimensions to ≥ 2 strictly increasing finite edges"

    def check(self, name: str, value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise self._fail(name, value)
        out = {}
        for k, edges in value.items():
            seq = _as_sequence(edges)
            if not isinstance(k, str) or seq is None or len(seq) < 2:
                raise self._fail(name, value)
            xs = tuple(Real().check(f"{name}[{k!r}]", e) for e in seq)
            if any(b <= a for a, b in zip(xs, xs[1:])):
                raise ParameterError(f"{name}[{k!r}] edges must be strictly increasing, got {list(xs)}", param=name)
            out[k] = xs
        return FrozenDict(out)

    def from_cli(self, value: Any) -> Any:
        out: dict[str, Any] = {}
        for item in value:
            dim, sep, text = str(item).partition("=")
            if not sep or not dim.strip():
                raise ParameterError(f"takes {self.metavar}, got {item!r}")
            try:
                out[dim.strip()] = [float(e) for e in text.split(",") if e.strip()]
            except ValueError:
                raise ParameterError(f"{item!r}: edges must be numbers") from None
        return out or None


class Triples(Constraint):
    """A list of (column, QI label, SA label) triples. CLI: repeatable COLUMN=VALUE:SA_VALUE."""

    metavar = "COLUMN=VALUE:SA_VALUE"

    def describe(self) -> str:
        return "a list of (QI column, QI value, SA value) triples"

    def check(self, name: str, value: Any) -> Any:
        seq = _as_sequence(value)
        if seq is None:
            raise self._fail(name, value)
        out = []
        for a in seq:
            t = _as_sequence(a)
            if t is None or len(t) != 3 or any(not isinstance(x, (str, numbers.Integral)) or isinstance(x, bool) for x in t):
                raise ParameterError(f"{name}: a negative association is (QI column, QI value, SA value), got {a!r}",
                                     param=name)
            out.append(tuple(str(x) for x in t))
        return tuple(out)

    def cli(self) -> dict[str, Any]:
        return {"type": str, "multiple": True, "metavar": self.metavar}

    def from_cli(self, value: Any) -> Any:
        out = []
        for item in value:
            left, sep, sa_value = str(item).rpartition(":")
            col, sep2, qi_value = left.partition("=")
            if not sep or not sep2 or not col or not qi_value or not sa_value:
                raise ParameterError(f"takes {self.metavar}, got {item!r}")
            out.append([col, qi_value, sa_value])
        return out or None


class Optional(Constraint):
    """``None`` or a value meeting ``inner``."""

    def __init__(self, inner: Constraint):
        self.inner = inner

    def describe(self) -> str:
        return f"None or {self.inner.describe()}"

    def check(self, name: str, value: Any) -> Any:
        if value is None:
            return None
        try:
            return self.inner.check(name, value)
        except ParameterError as e:
            raise ParameterError(str(e).replace(f"must be {self.inner.describe()}", f"must be {self.describe()}"),
                                 param=name) from None

    def cli(self) -> dict[str, Any]:
        return self.inner.cli()

    def from_cli(self, value: Any) -> Any:
        return None if value is None else self.inner.from_cli(value)


def _parse_scalar(text: str, constraint: Constraint) -> Any:
    t = text.strip()
    if isinstance(constraint, Integer):
        try:
            return int(t)
        except ValueError:
            return t
    if isinstance(constraint, Real):
        try:
            return float(t)
        except ValueError:
            return t
    return t


def validate_params(owner: str, constraints: Mapping[str, Constraint], params: Mapping[str, Any],
                    check: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Check and normalise every parameter against its constraint; ``check`` runs the
    cross-parameter rules on the normalised values. Unknown or unconstrained names are errors."""
    unknown = [k for k in params if k not in constraints]
    if unknown:
        raise ParameterError(f"{owner} has no parameter {', '.join(map(repr, unknown))}; "
                             f"valid parameters: {', '.join(constraints)}", param=unknown[0])
    out = {k: constraints[k].check(k, v) for k, v in params.items()}
    if check is not None:
        check(out)
    return out


class Parametrized:
    """Immutable parameter object: ``__init__`` takes every parameter explicitly and calls
    ``self._set_params(locals())``; values are validated against ``_parameter_constraints``
    (one entry per ``__init__`` parameter), cross-checked by ``_check_params`` and frozen."""

    _parameter_constraints: ClassVar[dict[str, Constraint]] = {}
    _parameter_help: ClassVar[dict[str, str]] = {}

    @classmethod
    def _check_constraint_table(cls) -> None:
        names = cls._param_names()
        missing = [n for n in names if n not in cls._parameter_constraints]
        extra = [n for n in cls._parameter_constraints if n not in names]
        if missing or extra:
            raise TypeError(f"{cls.__name__}: constraints must cover exactly the __init__ parameters "
                            f"(missing {missing}, extra {extra})")

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values()
                if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]

    @classmethod
    def param_defaults(cls) -> dict[str, Any]:
        """Parameter name → default (``inspect.Parameter.empty`` when required)."""
        sig = inspect.signature(cls.__init__)
        return {p.name: p.default for p in sig.parameters.values() if p.name in cls._parameter_constraints}

    def _set_params(self, values: Mapping[str, Any]) -> None:
        params = {k: values[k] for k in self._param_names()}
        checked = validate_params(type(self).__name__, self._parameter_constraints, params, self._check_params)
        for k, v in checked.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_frozen", True)

    def _check_params(self, params: dict[str, Any]) -> None:
        """Cross-parameter rules on the normalised values (may resolve documented defaults in place)."""

    def get_params(self) -> dict[str, Any]:
        """Parameters as JSON values; ``type(x)(**x.get_params())`` rebuilds an equal object."""
        return {k: to_json(getattr(self, k)) for k in self._param_names()}

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; make a new one")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.get_params() == self.get_params()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def check_level(level: float) -> float:
    """The interval level as a float in (0, 1), or a :class:`ParameterError` naming ``level``."""
    try:
        lv = float(level)
    except (TypeError, ValueError):
        raise ParameterError(f"level must be a number in (0, 1), not {level!r}", param="level") from None
    if not (0.0 < lv < 1.0):
        raise ParameterError(f"level must be in (0, 1) (e.g. 0.95), not {level!r}", param="level")
    return lv
