"""Count queries (SPEC §3): a conjunction of per-attribute predicates.

A predicate is a value set (IN), a range (BETWEEN, inclusive) or an equality. Queries are
written against labels; :meth:`Query.resolve` turns them into boolean masks over each
attribute's domain codes, which is what every estimator consumes.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import QueryError
from ..schema import bin_edges, label_numbers
from ..table import MISSING_LABEL


@dataclass(frozen=True)
class Predicate:
    """``kind`` is ``"in"`` (``values``), ``"eq"`` (one value) or ``"between"`` (``low``, ``high``).

    A range is inclusive unless ``low_open`` / ``high_open`` (``>`` / ``<``); a missing bound
    (None) leaves that side unbounded.
    """

    column: str
    kind: str
    values: tuple[str, ...] = ()
    low: str | float | None = None
    high: str | float | None = None
    low_open: bool = False
    high_open: bool = False

    @property
    def closed_range(self) -> bool:
        """Both bounds given and inclusive (a plain BETWEEN)."""
        return self.kind == "between" and self.low is not None and self.high is not None \
            and not (self.low_open or self.high_open)

    def to_json(self) -> dict:
        d: dict[str, object] = {"column": self.column, "kind": self.kind}
        if self.kind == "between":
            d.update(low=self.low, high=self.high)
            if self.low_open or self.high_open:
                d.update(low_open=self.low_open, high_open=self.high_open)
        else:
            d["values"] = list(self.values)
        return d

    @classmethod
    def from_json(cls, d: Mapping) -> "Predicate":
        if not isinstance(d, Mapping):
            raise QueryError(f"a predicate is a JSON object, got {type(d).__name__}")
        col, kind = d.get("column"), d.get("kind")
        if not isinstance(col, str) or not col:
            raise QueryError(f"a predicate's column is a non-empty string, got {col!r}")
        if kind == "between":
            for side in ("low", "high"):
                v = d.get(side)
                if v is not None and (isinstance(v, bool) or not isinstance(v, (str, int, float))):
                    raise QueryError(f"predicate on {col!r}: {side} bound is a label or a number, got {v!r}")
                if isinstance(v, float) and not math.isfinite(v):
                    raise QueryError(f"predicate on {col!r}: {side} bound {v!r} is not a finite number")
            if d.get("low") is None and d.get("high") is None:
                raise QueryError(f"predicate on {col!r}: a range needs a low or a high bound")
            flags = [d.get("low_open", False), d.get("high_open", False)]
            if any(not isinstance(f, bool) for f in flags):
                raise QueryError(f"predicate on {col!r}: low_open / high_open are true or false")
            return cls(col, "between", low=d.get("low"), high=d.get("high"), low_open=flags[0], high_open=flags[1])
        if kind not in ("in", "eq"):
            raise QueryError(f"predicate on {col!r}: kind is 'eq', 'in' or 'between', got {kind!r}")
        values = d.get("values")
        if not isinstance(values, list) or not values or \
                any(isinstance(v, bool) or not isinstance(v, (str, int, float)) for v in values):
            raise QueryError(f"predicate on {col!r}: values is a non-empty list of labels, got {values!r}")
        if kind == "eq" and len(values) != 1:
            raise QueryError(f"predicate on {col!r}: 'eq' takes one value, got {len(values)}")
        return cls(col, kind, tuple(normalise_label(v) for v in values))

    def mask(self, domain: Sequence[str], numeric: np.ndarray | None, lookup: Mapping[str, int] | None = None,
             edges: Any = "derive") -> np.ndarray:
        """Boolean mask over the domain's codes (``lookup``: label → code, if already built;
        ``edges``: the domain's bin edges or None, derived from its labels unless given). A
        numeric range that cuts a bin is a QueryError (:func:`check_bins`)."""
        dom = domain
        if lookup is None:
            lookup = {lab: i for i, lab in enumerate(dom)}
        if isinstance(edges, str):
            edges = bin_edges(dom)
        if numeric is None and (edges is not None or MISSING_LABEL in lookup):
            numeric = label_numbers(dom)  # a numeric column with a missing label: NaN there, matched by no range
        if self.kind in ("in", "eq"):
            m = np.zeros(len(dom), dtype=bool)
            for v in self.values:
                lab = v if isinstance(v, str) else normalise_label(v)
                i = lookup.get(lab)
                if i is not None:
                    m[i] = True
                elif lab == MISSING_LABEL:
                    continue  # IS NULL on a column without missing values: no row
                elif edges is not None and (k := unit_bin(edges, lab)) is not None:
                    m[k] = True  # an integer column's unit bin [v, v + 1) is the value v
                elif edges is not None and is_number(lab):
                    raise QueryError(f"value {lab!r} of {self.column!r} names no bin: the release knows it only by bins "
                                     f"with edges {_show_edges(edges)}; use a range on edges "
                                     f"({self.column} >= lo AND {self.column} < hi) or a bin's label")
                else:
                    raise QueryError(f"value {lab!r} is not in the domain of {self.column!r} (e.g. {list(dom)[:5]})")
            return m
        if self.kind == "between":
            p = integer_bounds(self, edges) if edges is not None else self
            if p is not self:
                return p.mask(dom, numeric, lookup, edges)
            check_bins(self, edges)
            lo, hi = self.low, self.high
            if self.closed_range and not (numeric is not None and is_number(lo) and is_number(hi)):
                try:  # BETWEEN on labels: the code range, in either order
                    a, b = lookup[normalise_label(lo)], lookup[normalise_label(hi)]
                except KeyError:
                    raise QueryError(f"range bounds {lo!r}..{hi!r} for {self.column!r} are neither numbers on a "
                                     "numeric domain nor labels") from None
                m = np.zeros(len(dom), dtype=bool)
                m[min(a, b) : max(a, b) + 1] = True
                return m
            m = np.ones(len(dom), dtype=bool)
            for bound, is_low, is_open in ((lo, True, self.low_open), (hi, False, self.high_open)):
                if bound is None:
                    continue
                if numeric is not None and is_number(bound):
                    x = float(bound)
                    m &= (numeric > x if is_open else numeric >= x) if is_low else (numeric < x if is_open else numeric <= x)
                    continue
                code = lookup.get(normalise_label(bound))
                if code is None:
                    raise QueryError(f"range bound {bound!r} for {self.column!r} is neither a number on a numeric "
                                     "domain nor a label")
                codes = np.arange(len(dom))
                m &= (codes > code if is_open else codes >= code) if is_low else (codes < code if is_open else codes <= code)
            return m
        raise QueryError(f"unknown predicate kind {self.kind!r}")


def _show_edges(edges: Sequence[float]) -> str:
    if len(edges) <= 12:
        return ", ".join(f"{e:g}" for e in edges)
    return f"{', '.join(f'{e:g}' for e in edges[:4])}, …, {', '.join(f'{e:g}' for e in edges[-3:])} ({len(edges) - 1} bins)"


def unit_bin(edges: Sequence[float], value) -> int | None:
    """The index of the bin ``[v, v + 1)`` of ``edges`` when ``value`` is an integer v and that
    bin is a half-open unit-width bin (on an integer column it holds exactly the value v); else
    None. The last bin ``[v, v + 1]`` is closed, holds two integers, and names neither."""
    if not is_number(value) or not float(value).is_integer():
        return None
    x = float(value)
    i = int(np.searchsorted(np.asarray(edges, dtype=float), x))
    if i < len(edges) - 2 and edges[i] == x and edges[i + 1] == x + 1:
        return i
    return None


def integer_bounds(p: Predicate, edges: Sequence[float]) -> Predicate:
    """A range on an integer column binned by unit-width bins, read as integers: an inclusive
    upper bound ``<= v`` (or BETWEEN's) that names the bin ``[v, v + 1)`` becomes ``< v + 1``,
    and an exclusive lower bound ``> v`` becomes ``>= v + 1`` — the bins the bounds name. Any
    other bound is kept (and :func:`check_bins` refuses one that cuts a bin)."""
    low, high, low_open, high_open = p.low, p.high, p.low_open, p.high_open
    if high is not None and not high_open and unit_bin(edges, high) is not None:
        high, high_open = float(high) + 1, True
    if low is not None and low_open and unit_bin(edges, low) is not None:
        low, low_open = float(low) + 1, False
    if (low, high, low_open, high_open) == (p.low, p.high, p.low_open, p.high_open):
        return p
    return Predicate(p.column, "between", low=low, high=high, low_open=low_open, high_open=high_open)


def check_bins(p: Predicate, edges) -> None:
    """A numeric range on a binned column must not cut a bin: each bin ``[a, b)`` (the last
    ``[a, b]``) lies wholly inside or wholly outside it, else a QueryError names the edges
    (the release holds no information on where inside a bin a record lies)."""
    if edges is None:
        return
    bounds = [b for b in (p.low, p.high) if b is not None]
    if not bounds or not all(is_number(b) for b in bounds):
        return  # bounds given as bin labels select whole bins
    lo = -math.inf if p.low is None else float(p.low)
    hi = math.inf if p.high is None else float(p.high)
    for i in range(len(edges) - 1):
        a, b = edges[i], edges[i + 1]
        last = i == len(edges) - 2
        # the bin's points x: a <= x < b (or <= b for the last); the range's: lo <(=) x <(=) hi
        above = b < lo or (b == lo and (not last or p.low_open))
        below = a > hi or (a == hi and p.high_open)
        inside = (a > lo or (a == lo and not p.low_open)) and (b < hi or (b == hi and (not last or not p.high_open)))
        if not (above or below or inside):
            shown = _show_edges(edges)
            parts = []
            if math.isfinite(lo):
                parts.append(f"{p.column} >= {max((e for e in edges if e <= lo), default=edges[0]):g}")
            if math.isfinite(hi):
                up = min((e for e in edges if e >= hi), default=edges[-1])
                parts.append(f"{p.column} {'<=' if up == edges[-1] else '<'} {up:g}")
            hint = f"; e.g. {' AND '.join(parts)}" if parts else ""
            raise QueryError(f"the range on {p.column!r} cuts its bin [{a:g}, {b:g}{']' if last else ')'}; the release "
                             f"knows {p.column!r} only by bins with edges {shown}: bound the range on edges (x >= lo AND "
                             f"x < hi){hint}")


def is_number(x) -> bool:
    """``float(x)`` is a finite number (a bound that can compare against a numeric domain);
    ``nan`` and ``inf`` are not (a NaN bound would silently match nothing)."""
    if isinstance(x, bool):
        return False
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError, OverflowError):
        return False


def normalise_label(v) -> str:
    """The domain label a query value stands for: ``3.0`` → ``"3"``, strings unchanged."""
    if isinstance(v, str):
        return v
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def sql_identifier(name: str) -> str:
    """A column name as SQL: bare when it is a plain word that the SQL parser reads back as that
    column (not a keyword, nor a word it takes for a function such as ``IF``), else
    double-quoted."""
    return name if _bare_ok(name) else '"' + name.replace('"', '""') + '"'


@functools.lru_cache(maxsize=4096)
def _bare_ok(name: str) -> bool:
    import sqlglot
    from sqlglot import exp
    from sqlglot.tokens import Tokenizer

    if not _PLAIN_NAME.fullmatch(name) or name.upper() in Tokenizer.KEYWORDS:
        return False
    try:
        cond = sqlglot.parse_one(f"SELECT 1 WHERE {name} = ''").args.get("where")
    except sqlglot.errors.SqlglotError:
        return False
    col = cond.this.this if cond is not None and isinstance(cond.this, exp.EQ) else None
    return isinstance(col, exp.Column) and col.name == name and not col.table


def sql_value(v) -> str:
    """A label or bound as a SQL string literal (quotes doubled)."""
    return "'" + normalise_label(v).replace("'", "''") + "'"


# Old private names, still imported by releases/histogram.py until it moves to the public ones.
_is_number, _normalise = is_number, normalise_label


@dataclass(frozen=True)
class Query:
    """A conjunction of predicates, at most one per column."""

    predicates: tuple[Predicate, ...] = field(default_factory=tuple)

    def __post_init__(self):
        cols = [p.column for p in self.predicates]
        if len(set(cols)) != len(cols):
            raise QueryError(f"a query has at most one predicate per column, got {cols}")

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(p.column for p in self.predicates)

    def resolve(self, domains: Mapping[str, Sequence[str]], numeric: Mapping[str, np.ndarray | None] | None = None) -> dict[str, np.ndarray]:
        """Column → boolean mask over its domain; unknown columns raise :class:`QueryError`."""
        return Resolver(domains, numeric)(self)

    def to_json(self) -> dict:
        return {"predicates": [p.to_json() for p in self.predicates]}

    @classmethod
    def from_json(cls, d: Mapping) -> "Query":
        if not isinstance(d, Mapping) or not isinstance(d.get("predicates"), list):
            raise QueryError('a query is a JSON object {"predicates": [...]} or {"where": "..."}')
        return cls(tuple(Predicate.from_json(p) for p in d["predicates"]))

    def __str__(self) -> str:
        """The query as SQL that :func:`ppdp.queries.parse_where` reads back to this query."""
        parts = []
        for p in self.predicates:
            c = sql_identifier(p.column)
            if p.closed_range:
                parts.append(f"{c} BETWEEN {sql_value(p.low)} AND {sql_value(p.high)}")
            elif p.kind == "between":
                if p.low is not None:
                    parts.append(f"{c} {'>' if p.low_open else '>='} {sql_value(p.low)}")
                if p.high is not None:
                    parts.append(f"{c} {'<' if p.high_open else '<='} {sql_value(p.high)}")
            elif p.kind == "eq":
                parts.append(f"{c} = {sql_value(p.values[0])}")
            else:
                parts.append(f"{c} IN ({', '.join(sql_value(v) for v in p.values)})")
        return " AND ".join(parts) or "TRUE"


class Resolver:
    """Turns queries into domain masks; label lookups are built once per column and shared
    by every query of a workload."""

    def __init__(self, domains: Mapping[str, Sequence[str]], numeric: Mapping[str, np.ndarray | None] | None = None):
        self.domains = domains
        self.numeric = numeric or {}
        self._lookups: dict[str, dict[str, int]] = {}
        self._bins: dict[str, tuple[float, ...] | None] = {}
        self._masks: dict[Predicate, np.ndarray] = {}  # a predicate met again (a workload repeats many) is not resolved again

    def __call__(self, query: "Query") -> dict[str, np.ndarray]:
        out = {}
        for p in query.predicates:
            c = p.column
            got = self._masks.get(p)
            if got is None:
                if c not in self.domains:
                    raise QueryError(f"unknown attribute {c!r}; the release has {sorted(self.domains)}")
                lk = self._lookups.get(c)
                if lk is None:
                    lk = self._lookups[c] = {lab: i for i, lab in enumerate(self.domains[c])}
                got = self._masks[p] = p.mask(self.domains[c], self.numeric.get(c), lk, edges=self._edges(c))
            out[c] = got.copy()  # each query its own mask (a caller may change it)
        return out

    def _edges(self, column: str):
        if column not in self._bins:
            self._bins[column] = bin_edges(self.domains[column])
        return self._bins[column]

    def all(self, queries: Iterable["Query"]) -> list[dict[str, np.ndarray]]:
        return [self(q) for q in queries]
