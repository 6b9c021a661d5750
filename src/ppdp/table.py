"""The data model (SPEC §1): a table of categorical attributes with ordered domains.

Every attribute is stored as integer codes (``int32``) into an ordered tuple of string
labels. Numeric attributes are either used value by value (labels are the values, ordered
numerically) or binned with explicit edges (labels ``"[lo, hi)"``, ordered by edge).
Missing values are either an explicit category (``missing="category"``, label
``MISSING_LABEL``, last in the domain) or an error (``missing="error"``, the default).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import PpdpError, SchemaError

MISSING_LABEL = "(missing)"
_META_KEY = b"ppdp"


def _label_of_number(v: float) -> str:
    if float(v).is_integer():
        return str(int(v))
    return repr(float(v))


def _bin_labels(edges: Sequence[float]) -> list[str]:
    out = []
    for i in range(len(edges) - 1):
        lo, hi = edges[i], edges[i + 1]
        close = "]" if i == len(edges) - 2 else ")"
        out.append(f"[{_label_of_number(lo)}, {_label_of_number(hi)}{close}")
    return out


@dataclass(frozen=True)
class Binning:
    """Explicit bin edges for a numeric column: bins ``[e0,e1), [e1,e2), …, [e_{k-1}, e_k]``."""

    edges: tuple[float, ...]

    def __post_init__(self):
        e = np.asarray(self.edges, dtype=float)
        if e.ndim != 1 or len(e) < 2 or not np.all(np.diff(e) > 0) or not np.all(np.isfinite(e)):
            raise SchemaError(f"bin edges must be at least two finite, strictly increasing numbers, got {self.edges!r}")

    @property
    def labels(self) -> list[str]:
        return _bin_labels(self.edges)

    def codes(self, values: np.ndarray, column: str) -> np.ndarray:
        e = np.asarray(self.edges, dtype=float)
        idx = np.searchsorted(e, values, side="right") - 1
        idx[values == e[-1]] = len(e) - 2
        bad = (idx < 0) | (idx > len(e) - 2)
        if bad.any():
            example = values[bad][0]
            raise SchemaError(
                f"column {column!r}: bins {list(self.edges)} leave {int(bad.sum())} value(s) uncovered "
                f"(e.g. {_label_of_number(example)})"
            )
        return idx.astype(np.int32)


class Table:
    """N rows of categorical attributes with ordered domains and schema roles.

    ``quasi`` are the quasi-identifiers, ``sensitive`` the sensitive attribute(s); other
    columns are kept in the table but dropped from releases unless a mechanism lists them.
    """

    def __init__(
        self,
        columns: Mapping[str, np.ndarray],
        domains: Mapping[str, Sequence[str]],
        quasi: Sequence[str] = (),
        sensitive: Sequence[str] = (),
        numeric: Mapping[str, Sequence[float] | np.ndarray | None] | None = None,
    ) -> None:
        self._codes: dict[str, np.ndarray] = {}
        self._domains: dict[str, tuple[str, ...]] = {}
        n = None
        for name, codes in columns.items():
            codes = np.ascontiguousarray(codes, dtype=np.int32)
            dom = tuple(str(x) for x in domains[name])
            if len(set(dom)) != len(dom):
                raise SchemaError(f"column {name!r}: domain has duplicate labels")
            if codes.ndim != 1:
                raise SchemaError(f"column {name!r}: codes must be one-dimensional")
            if len(codes) and (codes.min() < 0 or codes.max() >= len(dom)):
                raise SchemaError(f"column {name!r}: codes outside its domain of {len(dom)} labels")
            if n is None:
                n = len(codes)
            elif len(codes) != n:
                raise SchemaError("all columns must have the same number of rows")
            self._codes[name] = codes
            self._domains[name] = dom
        self._n = int(n or 0)
        self._numeric: dict[str, np.ndarray | None] = {}
        for name in self._codes:
            vals: Sequence[float] | np.ndarray | None = (numeric or {}).get(name)
            if vals is None:
                vals = domain_numeric_values(self._domains[name])
            self._numeric[name] = None if vals is None else np.asarray(vals, dtype=float)
        self.quasi = tuple(quasi)
        self.sensitive = tuple(sensitive)
        for c in (*self.quasi, *self.sensitive):
            if c not in self._codes:
                raise SchemaError(f"unknown column {c!r}; the table has {sorted(self._codes)}")
        overlap = set(self.quasi) & set(self.sensitive)
        if overlap:
            raise SchemaError(f"columns {sorted(overlap)} cannot be both quasi-identifier and sensitive")

    # ------------------------------------------------------------------ access
    @property
    def n_rows(self) -> int:
        return self._n

    def __len__(self) -> int:
        return self._n

    @property
    def column_names(self) -> list[str]:
        return list(self._codes)

    def codes(self, column: str) -> np.ndarray:
        self._check(column)
        return self._codes[column]

    def domain(self, column: str) -> tuple[str, ...]:
        self._check(column)
        return self._domains[column]

    @property
    def domains(self) -> dict[str, tuple[str, ...]]:
        return dict(self._domains)

    def numeric_values(self, column: str) -> np.ndarray | None:
        """The numeric value of each domain label (bin lower edge for bins), or None."""
        self._check(column)
        return self._numeric[column]

    def labels(self, column: str) -> np.ndarray:
        return np.asarray(self.domain(column), dtype=object)[self.codes(column)]

    def counts(self, column: str) -> np.ndarray:
        """Number of rows per domain label (int64, length = domain size)."""
        return np.bincount(self.codes(column), minlength=len(self.domain(column))).astype(np.int64)

    @property
    def sa(self) -> str:
        """The (single) sensitive attribute; an error if there is none or several."""
        if len(self.sensitive) != 1:
            raise SchemaError(f"this operation needs exactly one sensitive attribute, the table has {list(self.sensitive)}")
        return self.sensitive[0]

    def _check(self, column: str) -> None:
        if column not in self._codes:
            raise SchemaError(f"unknown column {column!r}; the table has {sorted(self._codes)}")

    # --------------------------------------------------------------- derived
    def with_roles(self, quasi: Sequence[str] | None = None, sensitive: Sequence[str] | None = None) -> "Table":
        return Table(
            self._codes,
            self._domains,
            self.quasi if quasi is None else quasi,
            self.sensitive if sensitive is None else sensitive,
            numeric=self._numeric,
        )

    def select(self, columns: Iterable[str]) -> "Table":
        cols = list(dict.fromkeys(columns))
        for c in cols:
            self._check(c)
        return Table(
            {c: self._codes[c] for c in cols},
            {c: self._domains[c] for c in cols},
            [c for c in self.quasi if c in cols],
            [c for c in self.sensitive if c in cols],
            numeric={c: self._numeric[c] for c in cols},
        )

    def take(self, indices: np.ndarray) -> "Table":
        idx = np.asarray(indices)
        return Table(
            {c: v[idx] for c, v in self._codes.items()},
            self._domains,
            self.quasi,
            self.sensitive,
            numeric=self._numeric,
        )

    def sample(self, n: int, seed: int | None = 0) -> tuple["Table", bool]:
        """n rows drawn at random: without replacement when n ≤ N, else with replacement.

        Returns the table and whether it was drawn with replacement.
        """
        rng = np.random.default_rng(seed)
        replace = n > self._n
        idx = rng.choice(self._n, size=n, replace=replace)
        if not replace:
            idx.sort()
        return self.take(idx), replace

    # ------------------------------------------------------------ conversion
    def to_pandas(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        cols = list(columns) if columns is not None else list(self._codes)
        data = {
            c: pd.Categorical.from_codes(self.codes(c), categories=list(self.domain(c)), validate=False)
            for c in cols
        }
        return pd.DataFrame(data)

    def to_arrow(self, columns: Sequence[str] | None = None) -> pa.Table:
        cols = list(columns) if columns is not None else list(self._codes)
        arrays = [
            pa.DictionaryArray.from_arrays(pa.array(self.codes(c), pa.int32()), pa.array(list(self.domain(c)), pa.string()))
            for c in cols
        ]
        meta = {
            "quasi": [c for c in self.quasi if c in cols],
            "sensitive": [c for c in self.sensitive if c in cols],
            "numeric": {c: (None if (v := self._numeric[c]) is None else v.tolist()) for c in cols},
        }
        schema = pa.schema([pa.field(c, a.type) for c, a in zip(cols, arrays)], metadata={_META_KEY: json.dumps(meta)})
        return pa.Table.from_arrays(arrays, schema=schema)

    def to_parquet(self, path: str | os.PathLike, columns: Sequence[str] | None = None) -> None:
        pq.write_table(self.to_arrow(columns), path, compression="zstd")

    def to_csv(self, path: str | os.PathLike, columns: Sequence[str] | None = None) -> None:
        self.to_pandas(columns).to_csv(path, index=False)

    @classmethod
    def from_pandas(
        cls,
        df: pd.DataFrame,
        quasi: Sequence[str] = (),
        sensitive: Sequence[str] = (),
        columns: Sequence[str] | None = None,
        bins: Mapping[str, Sequence[float]] | None = None,
        domains: Mapping[str, Sequence[str]] | None = None,
        missing: str = "error",
        na_values: Sequence[str] = ("?",),
    ) -> "Table":
        """Encode a DataFrame. ``columns`` defaults to quasi + sensitive (all columns if both empty).

        ``bins`` maps numeric columns to explicit edges; ``domains`` fixes a column's label order
        (values outside it are an error); ``missing`` is ``"error"`` or ``"category"``.
        """
        if missing not in ("error", "category"):
            raise SchemaError(f"missing must be 'error' or 'category', got {missing!r}")
        if columns is None:
            columns = list(dict.fromkeys([*quasi, *sensitive])) or list(df.columns)
        for c in [*columns, *quasi, *sensitive, *(bins or {}), *(domains or {})]:
            if c not in df.columns:
                raise SchemaError(f"unknown column {c!r}; the input has {[str(x) for x in df.columns]}")
        if len(df) == 0:
            raise PpdpError("the input table is empty")
        codes, doms, numeric = {}, {}, {}
        for c in columns:
            codes[c], doms[c], numeric[c] = _encode_column(
                df[c], c, (bins or {}).get(c), (domains or {}).get(c), missing, tuple(na_values)
            )
        return cls(codes, doms, quasi, sensitive, numeric=numeric)

    @classmethod
    def from_arrow(cls, table: pa.Table, quasi: Sequence[str] = (), sensitive: Sequence[str] = (), **kw) -> "Table":
        meta = (table.schema.metadata or {}).get(_META_KEY)
        if meta is not None and not kw.get("bins"):
            info = json.loads(meta)
            cols = kw.get("columns") or [*quasi, *sensitive] or table.column_names
            q = list(quasi) or [c for c in info.get("quasi", []) if c in cols]
            s = list(sensitive) or [c for c in info.get("sensitive", []) if c in cols]
            codes, doms, numeric = {}, {}, {}
            for c in cols:
                if c not in table.column_names:
                    raise SchemaError(f"unknown column {c!r}; the input has {table.column_names}")
                col = table.column(c).combine_chunks()
                if not pa.types.is_dictionary(col.type):
                    break
                codes[c] = col.indices.to_numpy(zero_copy_only=False).astype(np.int32)
                doms[c] = col.dictionary.to_pylist()
                numeric[c] = info.get("numeric", {}).get(c)
            else:
                if table.num_rows == 0:
                    raise PpdpError("the input table is empty")
                return cls(codes, doms, q, s, numeric=numeric)
        return cls.from_pandas(table.to_pandas(), quasi, sensitive, **kw)

    @classmethod
    def from_parquet(cls, path: str | os.PathLike, quasi: Sequence[str] = (), sensitive: Sequence[str] = (), **kw) -> "Table":
        try:
            t = pq.read_table(path)
        except (OSError, pa.ArrowInvalid) as e:
            raise PpdpError(f"cannot read Parquet file {str(path)!r}: {e}") from None
        return cls.from_arrow(t, quasi, sensitive, **kw)

    @classmethod
    def from_csv(cls, path: str | os.PathLike, quasi: Sequence[str] = (), sensitive: Sequence[str] = (), **kw) -> "Table":
        """Read a CSV with a header row. A malformed row (wrong field count) is an error naming its line."""
        import pyarrow.csv as pcsv

        p = Path(path)
        if not p.exists():
            raise PpdpError(f"no such file: {str(path)!r}")
        try:
            t = pcsv.read_csv(
                p,
                read_options=pcsv.ReadOptions(),
                convert_options=pcsv.ConvertOptions(strings_can_be_null=False),
            )
        except pa.ArrowInvalid as e:
            msg = str(e).splitlines()[0]
            raise PpdpError(f"malformed CSV {p.name}: {msg}") from None
        return cls.from_pandas(t.to_pandas(), quasi, sensitive, **kw)

    @classmethod
    def from_polars(cls, df, quasi: Sequence[str] = (), sensitive: Sequence[str] = (), **kw) -> "Table":
        return cls.from_arrow(df.to_arrow(), quasi, sensitive, **kw)

    @classmethod
    def read(cls, path: str | os.PathLike, quasi: Sequence[str] = (), sensitive: Sequence[str] = (), **kw) -> "Table":
        """Read CSV or Parquet by file extension."""
        s = str(path).lower()
        if s.endswith(".parquet") or s.endswith(".pq"):
            return cls.from_parquet(path, quasi, sensitive, **kw)
        return cls.from_csv(path, quasi, sensitive, **kw)

    def __repr__(self) -> str:
        return f"Table(n_rows={self._n}, quasi={list(self.quasi)}, sensitive={list(self.sensitive)})"


def domain_numeric_values(domain: Sequence[str]) -> np.ndarray | None:
    """The labels of a domain as numbers, if every label is one (else None)."""
    try:
        vals = [float(x) for x in domain]
    except ValueError:
        return None
    if any(math.isnan(v) for v in vals):
        return None
    return np.asarray(vals)


# The old private name, still imported by releases/base.py and engines/spark.py until they move.
_numeric_values = domain_numeric_values


def _encode_column(s: pd.Series, name: str, bins, domain, missing: str, na_values: tuple[str, ...]):
    """Encode one column → (codes, labels, numeric values of labels or None)."""
    values = s.to_numpy(dtype=object) if not pd.api.types.is_numeric_dtype(s) else s.to_numpy()
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        arr = np.asarray(values, dtype=float)
        isna = np.isnan(arr)
    else:
        obj = pd.Series(values, dtype=object)
        isna = obj.isna().to_numpy()
        stripped = obj.where(isna, obj.astype(str).str.strip())
        isna = isna | stripped.isin(na_values).to_numpy()
        arr = stripped.to_numpy(dtype=object)
        # numeric text (e.g. read from CSV as strings) is treated as numbers when bins ask for it
        if bins is not None:
            try:
                arr = np.where(isna, np.nan, arr).astype(float)
            except (TypeError, ValueError):
                raise SchemaError(f"column {name!r}: bins given but the column is not numeric") from None
    if isna.any() and missing == "error":
        raise SchemaError(
            f"column {name!r} has {int(isna.sum())} missing value(s); pass missing='category' to keep them as "
            f"the category {MISSING_LABEL!r}"
        )
    present = ~isna
    numeric = None
    if bins is not None:
        b = bins if isinstance(bins, Binning) else Binning(tuple(float(x) for x in bins))
        codes = np.zeros(len(arr), dtype=np.int32)
        codes[present] = b.codes(np.asarray(arr[present], dtype=float), name)
        labels = b.labels
        numeric = list(b.edges[:-1])
    elif domain is not None:
        labels = [str(x) for x in domain]
        lookup = {lab: i for i, lab in enumerate(labels)}
        texts = pd.Series(arr[present]).map(_as_label)
        mapped = texts.map(lookup)
        if mapped.isna().any():
            unknown = sorted(set(texts[mapped.isna()]))[:5]
            raise SchemaError(f"column {name!r}: values {unknown} are not in the given domain")
        codes = np.zeros(len(arr), dtype=np.int32)
        codes[present] = mapped.to_numpy(dtype=np.int32)
    elif arr.dtype.kind in "fiub":
        vals = np.asarray(arr[present], dtype=float)
        uniq, inv = np.unique(vals, return_inverse=True)
        labels = [_label_of_number(v) for v in uniq]
        numeric = uniq.tolist()
        codes = np.zeros(len(arr), dtype=np.int32)
        codes[present] = inv
    else:
        texts = pd.Series(arr[present]).map(_as_label).to_numpy(dtype=object)
        uniq, inv = np.unique(texts.astype(str), return_inverse=True)
        nv = domain_numeric_values(list(uniq))
        if nv is not None:  # numbers given as text: order numerically
            order = np.argsort(nv, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(len(order))
            uniq, inv = uniq[order], rank[inv]
        labels = list(uniq)
        codes = np.zeros(len(arr), dtype=np.int32)
        codes[present] = inv
    if isna.any():
        labels = list(labels) + [MISSING_LABEL]
        codes[isna] = len(labels) - 1
        if numeric is not None:
            numeric = None
    return codes, labels, numeric


def _as_label(v) -> str:
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return str(v)
