"""The one list of mechanisms and estimators.

A mechanism class is registered when it is defined (``Mechanism.__init_subclass__``), an
estimator class likewise (``Estimator.__init_subclass__``). Everything that lists mechanisms
reads this registry: the top-level exports, ``evaluate``'s model specs, the generated CLI
publish commands, ``audit``, the docs table and the contract tests.

The packages that define them are loaded on first use (by module name, as plugins), so that
``import ppdp`` stays light and this module imports nothing of ppdp above ``errors``.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import ParameterError

#: packages whose import defines (and so registers) every mechanism and estimator
PLUGIN_PACKAGES = ("ppdp.mechanisms.bucketization", "ppdp.mechanisms.randomization", "ppdp.mechanisms.histogram",
                   "ppdp.estimators")

_MECHANISMS: dict[str, type] = {}
_ESTIMATORS: dict[tuple[str, str], type] = {}  # (family, name) → class
_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for pkg in PLUGIN_PACKAGES:
            importlib.import_module(pkg)


def register_mechanism(cls: type) -> type:
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__} needs a non-empty class attribute 'name'")
    other = _MECHANISMS.get(name)
    if other is not None and other.__qualname__ != cls.__qualname__:
        raise TypeError(f"mechanism name {name!r} is taken by {other.__qualname__}")
    _MECHANISMS[name] = cls
    return cls


def register_estimator(cls: type) -> type:
    key = (cls.__dict__.get("family") or getattr(cls, "family"), cls.__dict__["name"])
    _ESTIMATORS[key] = cls
    return cls


def _package_rank(cls: type) -> int:
    mod = cls.__module__
    return next((i for i, p in enumerate(PLUGIN_PACKAGES) if mod == p or mod.startswith(p + ".")), len(PLUGIN_PACKAGES))


def mechanisms() -> dict[str, type[Any]]:
    """Every registered mechanism, name → class: by plugin package, then in definition order
    (the same order whichever package was imported first)."""
    _load()
    order = list(_MECHANISMS)
    return {n: _MECHANISMS[n] for n in sorted(order, key=lambda n: (_package_rank(_MECHANISMS[n]), order.index(n)))}


def mechanism(name: str) -> type[Any]:
    """The mechanism class registered under ``name`` (a ParameterError listing the valid ones)."""
    _load()
    cls = _MECHANISMS.get(str(name).strip().lower())
    if cls is None:
        raise ParameterError(f"unknown mechanism {name!r}; valid mechanisms: {', '.join(_MECHANISMS)}", param="mechanism")
    return cls


def by_class_name(name: str) -> type | None:
    """The registered mechanism class whose Python name is ``name`` (for ``ppdp.<Name>``)."""
    _load()
    for cls in _MECHANISMS.values():
        if cls.__name__ == name:
            return cls
    return None


def estimators(family: str | None = None) -> dict[str, type]:
    """Registered estimators (of one release family), name → class."""
    _load()
    return {n: c for (f, n), c in _ESTIMATORS.items() if family is None or f == family}


def estimator(family: str, name: str) -> type:
    _load()
    cls = _ESTIMATORS.get((family, name))
    if cls is None:
        valid = ", ".join(n for (f, n) in _ESTIMATORS if f == family)
        raise ParameterError(f"unknown estimator {name!r} for a {family} release; valid estimators: {valid}",
                             param="estimator")
    return cls


def describe() -> list[dict[str, Any]]:
    """One row per mechanism (name, class, family, claim, parameters) for docs and ``ppdp mechanisms``."""
    rows = []
    for name, cls in mechanisms().items():
        rows.append({"name": name, "class": cls.__name__, "family": cls.family,
                     "claim": getattr(cls, "claim_model", ""), "paper": getattr(cls, "paper", ""),
                     "parameters": list(cls._parameter_constraints)})
    return rows
