"""The data model (SPEC §1): a table of categorical attributes with ordered domains.

Every attribute is stored as integer codes into an ordered tuple of string labels, in the
narrowest unsigned type that holds the domain (:func:`code_dtype`: ``uint8`` up to 256
labels, ``uint16`` up to 65,536, else ``uint32``) — 10^8 rows of 8 columns take 0.8 GB.
Arithmetic on codes must widen first (``codes.astype(np.int64)``). Numeric attributes are either used value by value (labels are the values, ordered
numerically) or binned with explicit edges (labels ``"[lo, hi)"``, ordered by edge).
Missing values are either an explicit category (``missing="category"``, label
``MISSING_LABEL``, last in the domain) or an error (``missing="error"``, the default).

Input is kept exactly (SPEC §1): a column is text unless declared numeric, and a text label is
the input string itself (``02134`` stays ``02134``; ``1``, ``1.0`` and ``01`` are three labels;
no whitespace is stripped); an empty field or an ``na_values`` entry is missing, never the
label ``''``; two distinct input values never share a label. A numeric column — one named in
``numeric=[...]``, a binned one, or (when ``numeric`` is not given) a DataFrame/Arrow column
of a numeric type — holds finite numbers, ordered by value; a non-finite or non-numeric entry
is one clear error. Text domains are ordered by their labels (code point order).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

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


def code_dtype(n_labels: int) -> np.dtype:
    """The narrowest unsigned integer type holding codes 0 … n_labels − 1."""
    if n_labels <= 1 << 8:
        return np.dtype(np.uint8)
    if n_labels <= 1 << 16:
        return np.dtype(np.uint16)
    return np.dtype(np.uint32)


#: codes per block of :func:`code_counts` (np.bincount copies narrow codes to intp: 8 MiB a block)
COUNT_BLOCK = 1 << 20


def code_counts(codes: np.ndarray, k: int) -> np.ndarray:
    """Number of codes equal to each of 0 … k−1 (int64), counted a block at a time so that no
    intp copy of the whole column is made."""
    out = np.zeros(k, dtype=np.int64)
    if k:
        for a in range(0, len(codes), COUNT_BLOCK):
            out += np.bincount(codes[a:a + COUNT_BLOCK], minlength=k)[:k]
    return out


def narrow_codes(codes, n_labels: int, name: str = "?") -> np.ndarray:
    """``codes`` checked to lie in [0, n_labels) and stored in :func:`code_dtype` (no copy when
    they already are); a :class:`SchemaError` otherwise."""
    try:
        a = np.asarray(codes)
    except (TypeError, ValueError, OverflowError):
        raise SchemaError(f"column {name!r}: codes must be integers") from None
    if a.dtype == object or a.dtype.kind not in "iub":
        try:
            a = np.asarray(codes, dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            raise SchemaError(f"column {name!r}: codes must be integers") from None
    if a.ndim != 1:
        raise SchemaError(f"column {name!r}: codes must be one-dimensional")
    if len(a) and (int(a.min()) < 0 or int(a.max()) >= n_labels):
        raise SchemaError(f"column {name!r}: codes outside its domain of {n_labels} labels")
    return np.ascontiguousarray(a, dtype=code_dtype(n_labels))


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
        if not isinstance(columns, Mapping) or not isinstance(domains, Mapping):
            raise SchemaError("Table(columns, domains): both must be mappings from column name to codes / labels "
                              f"(got {type(columns).__name__} and {type(domains).__name__})")
        quasi, sensitive = _names(quasi, "quasi"), _names(sensitive, "sensitive")
        self._codes: dict[str, np.ndarray] = {}
        self._domains: dict[str, tuple[str, ...]] = {}
        n = None
        for name, codes in columns.items():
            if not isinstance(name, str):
                raise SchemaError(f"column names must be strings, got {name!r}")
            if name not in domains:
                raise SchemaError(f"column {name!r} has no domain")
            dom = tuple(str(x) for x in domains[name])
            if len(set(dom)) != len(dom):
                raise SchemaError(f"column {name!r}: domain has duplicate labels")
            codes = narrow_codes(codes, len(dom), name)
            if n is None:
                n = len(codes)
            elif len(codes) != n:
                raise SchemaError("all columns must have the same number of rows")
            self._codes[name] = codes
            self._domains[name] = dom
        self._n = int(n or 0)
        # ``numeric``: column → the number of each label; a column given as None is text, a column
        # left out is numeric exactly when every label reads as a finite number
        self._numeric: dict[str, np.ndarray | None] = {}
        given = numeric or {}
        for name in self._codes:
            vals: Sequence[float] | np.ndarray | None
            vals = given[name] if name in given else domain_numeric_values(self._domains[name])
            if vals is not None:
                try:
                    vals = np.asarray(vals, dtype=float)
                except (TypeError, ValueError):
                    raise SchemaError(f"column {name!r}: numeric values must be numbers") from None
                if vals.shape != (len(self._domains[name]),) or not np.all(np.isfinite(vals)):
                    raise SchemaError(f"column {name!r}: numeric values must be one finite number per label")
            self._numeric[name] = vals
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
        """The column's codes (:func:`code_dtype` of its domain; read-only — widen before arithmetic)."""
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
        return code_counts(self.codes(column), len(self.domain(column)))

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

    def over_domains(self, domains: Mapping[str, Sequence[str]]) -> "Table":
        """This table with each column named in ``domains`` coded over that domain (the same
        rows and labels, other codes) where the domain holds the same labels in another order —
        e.g. a source table read with its labels sorted (a CSV read) or in a file's dictionary
        order against a release's schema. Other columns, and columns whose labels differ as a
        set, are kept as they are (a comparison then sees the difference)."""
        codes, doms, numeric = dict(self._codes), dict(self._domains), dict(self._numeric)
        for c, dom in domains.items():
            if c not in self._codes or not isinstance(dom, (list, tuple)):
                continue
            new = tuple(str(x) for x in dom)
            if new == self._domains[c] or len(set(new)) != len(new) or set(new) != set(self._domains[c]):
                continue
            pos = {lab: i for i, lab in enumerate(new)}
            lut = np.array([pos[lab] for lab in self._domains[c]], dtype=np.int64)
            codes[c], doms[c] = lut[self._codes[c]], new
            old = self._numeric[c]
            numeric[c] = None if old is None else old[np.argsort(lut)]  # each label keeps its number
        if codes.keys() == self._codes.keys() and all(codes[c] is self._codes[c] for c in codes):
            return self
        out = Table(codes, doms, self.quasi, self.sensitive, numeric=numeric)
        out.drawn_with_replacement = self.drawn_with_replacement
        return out

    #: True for a table drawn with replacement (:meth:`sample` past N): people repeat, so a
    #: release of it publishes some people several times with independent randomness and is
    #: never fit for publication (``ppdp.publish`` marks it so)
    drawn_with_replacement: bool = False

    #: rows left out because a column's missing values are dropped (set by
    #: :func:`ppdp.schema.read_table`): ``{"rows_read", "rows_dropped", "by_column": {column: n}}``
    #: (``by_column`` counts each column's missing cells among the rows read); None when no
    #: column drops its missing values
    missing_dropped: dict | None = None

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
        t = self.take(idx)
        t.drawn_with_replacement = replace
        return t, replace

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
        missing: str | Mapping[str, str] = "error",
        na_values: Sequence[str] = ("?",),
        numeric: Sequence[str] | None = None,
    ) -> "Table":
        """Encode a DataFrame. ``columns`` defaults to quasi + sensitive (all columns if both empty).

        ``numeric`` lists the columns holding numbers (ordered by value; anything but a finite
        number or a missing entry is an error); every other column is text, kept exactly. Left
        out (None), the columns of a numeric dtype are the numeric ones. ``bins`` maps numeric
        columns to explicit edges; ``domains`` fixes a column's label order (values outside it
        are an error); ``missing`` is ``"error"`` or ``"category"``, for every column or per
        column (a mapping; a column left out: ``"error"``) — an empty field, None/NaN or an entry
        of ``na_values`` is missing.
        """
        if not isinstance(df, pd.DataFrame):
            raise SchemaError(f"from_pandas() needs a pandas DataFrame, got {type(df).__name__}")
        per_col = dict(missing) if isinstance(missing, Mapping) else None
        for m in (per_col.values() if per_col is not None else [missing]):
            if m not in ("error", "category"):
                raise SchemaError(f"missing must be 'error' or 'category', got {m!r}")
        quasi, sensitive = _names(quasi, "quasi"), _names(sensitive, "sensitive")
        if any(not isinstance(c, str) for c in df.columns):
            df = df.rename(columns=str)
        dup = sorted({str(c) for c in df.columns[df.columns.duplicated()]})
        if dup:
            raise SchemaError(f"the input has duplicate column name(s) {dup}; every column needs its own name")
        declared = None if numeric is None else _names(numeric, "numeric")
        if columns is None:
            columns = list(dict.fromkeys([*quasi, *sensitive])) or list(df.columns)
        else:
            columns = _names(columns, "columns")
        na = tuple(_names(na_values, "na_values"))
        for c in [*columns, *quasi, *sensitive, *(bins or {}), *(domains or {}), *(declared or ())]:
            if c not in df.columns:
                raise SchemaError(f"unknown column {c!r}; the input has {[str(x) for x in df.columns]}")
        if len(df) == 0:
            raise PpdpError("the input table is empty")
        codes, doms, nums = {}, {}, {}
        for c in columns:
            is_num = _numeric_dtype(df[c]) if declared is None else c in declared
            codes[c], doms[c], nums[c] = _encode_column(
                df[c], c, (bins or {}).get(c), (domains or {}).get(c),
                per_col.get(c, "error") if per_col is not None else str(missing), na, is_num
            )
        return cls(codes, doms, quasi, sensitive, numeric=nums)

    @classmethod
    def from_arrow(cls, table: pa.Table, quasi: Sequence[str] = (), sensitive: Sequence[str] = (), **kw) -> "Table":
        """Encode an Arrow table; a table written by :meth:`to_arrow` keeps its domains, roles
        and numeric columns (unless ``bins`` or ``numeric`` re-declare them)."""
        if not isinstance(table, pa.Table):
            raise SchemaError(f"from_arrow() needs a pyarrow Table, got {type(table).__name__}")
        quasi, sensitive = _names(quasi, "quasi"), _names(sensitive, "sensitive")
        meta = (table.schema.metadata or {}).get(_META_KEY)
        if len(set(table.column_names)) != len(table.column_names):
            dup = sorted({c for c in table.column_names if table.column_names.count(c) > 1})
            raise SchemaError(f"the input has duplicate column name(s) {dup}; every column needs its own name")
        if meta is not None and not kw.get("bins") and kw.get("numeric") is None:
            try:
                info = json.loads(meta)
            except (ValueError, RecursionError):
                raise SchemaError("the input's ppdp metadata is not valid JSON") from None
            cols = kw.get("columns") or [*quasi, *sensitive] or table.column_names
            q = list(quasi) or [c for c in info.get("quasi", []) if c in cols]
            s = list(sensitive) or [c for c in info.get("sensitive", []) if c in cols]
            codes, doms, numeric = {}, {}, {}
            for c in cols:
                if c not in table.column_names:
                    raise SchemaError(f"unknown column {c!r}; the input has {table.column_names}")
                col = table.column(c).combine_chunks()
                if not pa.types.is_dictionary(col.type) or col.null_count:
                    break
                codes[c] = col.indices.to_numpy(zero_copy_only=False)
                doms[c] = col.dictionary.to_pylist()
                known = info.get("numeric", {})
                if c in known:
                    numeric[c] = known[c]
            else:
                if table.num_rows == 0:
                    raise PpdpError("the input table is empty")
                return cls(codes, doms, q, s, numeric=numeric)
        return cls.from_pandas(table.to_pandas(), quasi, sensitive, **kw)

    @classmethod
    def from_parquet(cls, path: str | os.PathLike, quasi: Sequence[str] = (), sensitive: Sequence[str] = (), **kw) -> "Table":
        """Read a Parquet file. One written by :meth:`to_parquet` (or
        :func:`ppdp.datasets.synthetic.write_synthetic`) is read a column at a time straight to
        narrow codes — never the whole file as Arrow arrays (a 10^8-row file of eight columns
        then peaks near its codes' size, not four times it); any other, as :meth:`from_arrow`."""
        p = _input_path(path)
        try:
            got = _parquet_by_column(cls, p, quasi, sensitive, kw)
            if got is not None:
                return got
            t = pq.read_table(p)
        except (OSError, pa.ArrowException, ValueError) as e:
            if isinstance(e, PpdpError):
                raise
            raise PpdpError(f"cannot read Parquet file {str(path)!r}: {_one_line(e)}") from None
        return cls.from_arrow(t, quasi, sensitive, **kw)

    @classmethod
    def from_csv(cls, path: str | os.PathLike, quasi: Sequence[str] = (), sensitive: Sequence[str] = (), **kw) -> "Table":
        """Read a UTF-8 CSV with a header row, every field as text (``numeric=[...]`` declares the
        numeric columns). A malformed row (wrong field count) is an error naming its line; so are
        a duplicate or empty header name and bytes that are not UTF-8."""
        import pyarrow.csv as pcsv

        p = _input_path(path)
        names = _csv_header(p)
        try:
            t = pcsv.read_csv(
                p,
                read_options=pcsv.ReadOptions(),
                convert_options=pcsv.ConvertOptions(column_types={n: pa.string() for n in names},
                                                    strings_can_be_null=False, quoted_strings_can_be_null=False),
            )
        except pa.ArrowInvalid as e:
            msg = _one_line(e)
            if "UTF8" in msg or "UTF-8" in msg:
                raise PpdpError(f"{str(path)!r} is not UTF-8 text ({msg})") from None
            raise PpdpError(f"malformed CSV {p.name}: {msg}") from None
        except OSError as e:
            raise PpdpError(f"cannot read {str(path)!r}: {_one_line(e)}") from None
        return cls.from_pandas(t.to_pandas(), quasi, sensitive, **kw)

    @classmethod
    def from_polars(cls, df, quasi: Sequence[str] = (), sensitive: Sequence[str] = (), **kw) -> "Table":
        if not hasattr(df, "to_arrow"):
            raise SchemaError(f"from_polars() needs a polars DataFrame, got {type(df).__name__}")
        return cls.from_arrow(df.to_arrow(), quasi, sensitive, **kw)

    @classmethod
    def read(cls, path: str | os.PathLike, quasi: Sequence[str] = (), sensitive: Sequence[str] = (), schema=None,
             **kw) -> "Table":
        """Read CSV or Parquet by file extension; with ``schema`` (a ``ppdp.Schema``, e.g.
        ``ppdp.load_schema(path)``), as the schema says (``ppdp.read_table``)."""
        if schema is not None:
            if quasi or sensitive or kw:
                raise SchemaError("Table.read(path, schema=…): the schema gives the roles and how to read the file; "
                                  "pass nothing else (or use ppdp.read_table)")
            if not callable(getattr(schema, "read", None)):
                raise SchemaError(f"schema= takes a ppdp Schema (ppdp.load_schema(path)), got {type(schema).__name__}; "
                                  "ppdp.read_table(path, schema=FILE) takes a schema file's path")
            return schema.read(path)
        s = str(_input_path(path)).lower()
        if s.endswith(".parquet") or s.endswith(".pq"):
            return cls.from_parquet(path, quasi, sensitive, **kw)
        return cls.from_csv(path, quasi, sensitive, **kw)

    def __repr__(self) -> str:
        return f"Table(n_rows={self._n}, quasi={list(self.quasi)}, sensitive={list(self.sensitive)})"


def domain_numeric_values(domain: Sequence[str]) -> np.ndarray | None:
    """The labels of a domain as numbers, if every label is a finite number (else None)."""
    try:
        vals = [float(x) for x in domain]
    except (TypeError, ValueError):
        return None
    if not all(math.isfinite(v) for v in vals):
        return None
    return np.asarray(vals)


# The old private name, still imported by releases/base.py and engines/spark.py until they move.
_numeric_values = domain_numeric_values

#: a number as written in a numeric column: decimal, optional sign, fraction and exponent
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")


def _parquet_by_column(cls, p, quasi: Sequence[str], sensitive: Sequence[str], kw: Mapping[str, Any]):
    """:meth:`Table.from_parquet` of a file with ppdp's metadata whose columns are all
    dictionary-encoded without nulls, one column at a time: each row group's indices into a
    narrow code array (every row group must carry the first one's dictionary). None when the
    file is not such a file or ``kw`` re-declares bins or numeric columns (then
    :meth:`Table.from_arrow` reads it, with the same result)."""
    if kw.get("bins") or kw.get("numeric") is not None or set(kw) - {"columns", "bins", "numeric"}:
        return None
    pf = pq.ParquetFile(p)
    schema = pf.schema_arrow
    meta = (schema.metadata or {}).get(_META_KEY)
    names = schema.names
    if meta is None or len(set(names)) != len(names):
        return None
    try:
        info = json.loads(meta)
    except (ValueError, RecursionError):
        return None
    quasi, sensitive = _names(quasi, "quasi"), _names(sensitive, "sensitive")
    cols = kw.get("columns") or [*quasi, *sensitive] or names
    if any(c not in names or not pa.types.is_dictionary(schema.field(c).type) for c in cols):
        return None
    codes: dict[str, np.ndarray] = {}
    doms: dict[str, list] = {}
    for c in cols:
        col = pf.read(columns=[c]).column(c)
        if col.null_count or not col.num_chunks:
            return None
        dom = col.chunk(0).dictionary
        out = np.empty(len(col), dtype=code_dtype(len(dom)))
        pos = 0
        for ch in col.chunks:
            if not ch.dictionary.equals(dom):
                return None
            idx = ch.indices.to_numpy(zero_copy_only=False)
            out[pos:pos + len(idx)] = idx
            pos += len(idx)
        del col
        codes[c], doms[c] = out, dom.to_pylist()
    if pf.metadata.num_rows == 0:
        raise PpdpError("the input table is empty")
    q = list(quasi) or [c for c in info.get("quasi", []) if c in cols]
    s = list(sensitive) or [c for c in info.get("sensitive", []) if c in cols]
    known = info.get("numeric", {})
    return cls(codes, doms, q, s, numeric={c: known[c] for c in cols if c in known})


def _names(value, what: str) -> list[str]:
    """A list of column names (one name given as a string is a list of one)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    try:
        out = list(value)
    except TypeError:
        raise SchemaError(f"{what} must be a list of column names, got {type(value).__name__}") from None
    bad = [v for v in out if not isinstance(v, str)]
    if bad:
        raise SchemaError(f"{what} must be a list of column names (strings), got {bad[0]!r}")
    return out


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _input_path(path) -> Path:
    """An input file's path, checked: a path-like naming an existing regular file."""
    if not isinstance(path, (str, os.PathLike)):
        raise PpdpError(f"an input path must be a string or path, got {type(path).__name__}")
    p = Path(path)
    try:
        if not p.exists():
            raise PpdpError(f"no such file: {str(path)!r}")
        if p.is_dir() and p.suffix.lower() not in (".parquet", ".pq"):
            raise PpdpError(f"{str(path)!r} is a directory, not a CSV or Parquet file")
    except OSError as e:
        raise PpdpError(f"cannot read {str(path)!r}: {e.strerror or _one_line(e)}") from None
    return p


def _csv_header(p: Path) -> list[str]:
    """The header row of a CSV: UTF-8, every name present and distinct."""
    import csv

    try:
        with open(p, newline="", encoding="utf-8-sig") as f:
            header = next(csv.reader(f), None)
    except UnicodeDecodeError as e:
        raise PpdpError(f"{str(p)!r} is not UTF-8 text (byte {e.object[e.start:e.start + 1]!r} at offset "
                        f"{e.start} of the header); re-encode it as UTF-8") from None
    except csv.Error as e:
        raise PpdpError(f"malformed CSV {p.name}: header row: {_one_line(e)}") from None
    except OSError as e:
        raise PpdpError(f"cannot read {str(p)!r}: {e.strerror or _one_line(e)}") from None
    if not header:
        raise PpdpError(f"{str(p)!r} is empty: a CSV needs a header row")
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise SchemaError(f"{p.name}: duplicate column name(s) {dup} in the header; every column needs its own name")
    if any(h == "" for h in header):
        raise SchemaError(f"{p.name}: column {header.index('') + 1} of the header has no name")
    return header


def _numeric_dtype(s: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype))


def _text_label(v, name: str) -> str:
    """The label of one input value of a text column (strings are kept exactly)."""
    if isinstance(v, str):
        return v
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        if not math.isfinite(v):
            raise SchemaError(f"column {name!r} holds the non-finite number {float(v)!r}; numbers must be finite")
        return _label_of_number(float(v))
    return str(v)


def _number(v, name: str):
    """One input value of a numeric column as an exact number (int when integral)."""
    if isinstance(v, str):
        if _INTEGER.fullmatch(v):
            return int(v)
        if not _NUMBER.fullmatch(v):
            grouped = re.fullmatch(r"[+-]?\d{1,3}([,. '_])\d{3}(\1\d{3})*(\.\d+)?", v)
            hint = (f"a thousands separator? give --thousands '{grouped.group(1)}' or thousands = "
                    f"\"{grouped.group(1)}\" under [file] in the schema" if grouped else "declare it as text, or fix the value")
            raise SchemaError(f"column {name!r} is numeric but holds {v!r}, which is not a finite number ({hint})")
        x = float(v)
    elif isinstance(v, (bool, np.bool_)):
        raise SchemaError(f"column {name!r} is numeric but holds the boolean {v!r}")
    elif isinstance(v, (int, np.integer)):
        return int(v)
    elif isinstance(v, (float, np.floating)):
        x = float(v)
    else:
        raise SchemaError(f"column {name!r} is numeric but holds {v!r} ({type(v).__name__})")
    if not math.isfinite(x):
        raise SchemaError(f"column {name!r} holds the non-finite number {x!r}; numbers must be finite")
    return int(x) if x.is_integer() else x


def _number_label(x) -> str:
    return str(x) if isinstance(x, int) else repr(float(x))


def _encode_column(s: pd.Series, name: str, bins, domain, missing: str, na_values: tuple[str, ...],
                   numeric: bool = False):
    """Encode one column → (codes, labels, numeric value of each label or None for text).

    The distinct input values are found first (hashing, one pass); each is then turned into
    a label (text) or a number (numeric) once, so a column costs one Python call per distinct
    value, not per row."""
    numeric = numeric or bins is not None
    raw, uniques = pd.factorize(s, use_na_sentinel=True)
    uniques = list(uniques)
    blank = [i for i, v in enumerate(uniques) if isinstance(v, str) and (v == "" or v in na_values)]
    code_of = np.arange(len(uniques) + 1, dtype=np.int64)  # last slot: missing
    code_of[blank] = -1
    raw = np.where(raw < 0, -1, code_of[raw])
    isna = raw < 0
    if isna.any() and missing == "error":
        raise SchemaError(
            f"column {name!r} has {int(isna.sum())} missing value(s) (empty, None/NaN or one of {list(na_values)}); "
            f"to keep them as the category {MISSING_LABEL!r} or leave their rows out, give --missing category|drop "
            f"(or missing = \"category\" / \"drop\" under [columns.{name}] or [file] in a --schema file)"
        )
    keep = [i for i in range(len(uniques)) if code_of[i] >= 0]
    nums = None
    if numeric:
        keyed = {i: _number(uniques[i], name) for i in keep}
        if bins is not None:
            b = bins if isinstance(bins, Binning) else Binning(tuple(float(x) for x in bins))
            per_unique = np.zeros(len(uniques), dtype=np.int32)
            if keep:
                per_unique[keep] = b.codes(np.asarray([float(keyed[i]) for i in keep]), name)
            labels = b.labels
            nums = list(b.edges[:-1])
            slot = per_unique
        elif domain is not None:
            labels = [str(x) for x in domain]
            given = domain_numeric_values(labels)
            if given is None:
                raise SchemaError(f"column {name!r} is numeric but its given domain has labels that are not finite numbers")
            nums = [float(v) for v in given]
            slot = _lookup(labels, {i: _number_label(keyed[i]) for i in keep}, len(uniques), name)
        else:
            distinct = sorted(set(keyed.values()))
            rank = {x: j for j, x in enumerate(distinct)}
            labels = [_number_label(x) for x in distinct]
            nums = [float(x) for x in distinct]
            slot = np.zeros(len(uniques), dtype=np.int32)
            for i in keep:
                slot[i] = rank[keyed[i]]
    else:
        if bins is not None:  # unreachable: bins make the column numeric
            raise SchemaError(f"column {name!r}: bins given but the column is not numeric")
        texts = {i: _text_label(uniques[i], name) for i in keep}
        seen: dict[str, int] = {}
        for i, lab in texts.items():
            j = seen.setdefault(lab, i)
            if j != i:
                raise SchemaError(f"column {name!r}: the distinct values {uniques[j]!r} and {uniques[i]!r} would share "
                                  f"the label {lab!r}; make the column all text or declare it numeric")
        if domain is not None:
            labels = [str(x) for x in domain]
            slot = _lookup(labels, texts, len(uniques), name)
        else:
            labels = sorted(texts.values())
            rank = {lab: j for j, lab in enumerate(labels)}
            slot = np.zeros(len(uniques), dtype=np.int32)
            for i, lab in texts.items():
                slot[i] = rank[lab]
    codes = np.zeros(len(raw), dtype=np.int32)
    codes[~isna] = np.asarray(slot, dtype=np.int32)[raw[~isna]]
    if isna.any():
        if MISSING_LABEL in labels:
            raise SchemaError(f"column {name!r} holds the label {MISSING_LABEL!r}, which is reserved for missing values")
        labels = list(labels) + [MISSING_LABEL]
        codes[isna] = len(labels) - 1
        nums = None
    return codes, labels, (None if nums is None else list(nums))


def _lookup(labels: list[str], texts: Mapping[int, str], n_uniques: int, name: str) -> np.ndarray:
    """Code of each distinct input value in a given domain; values outside it are an error."""
    pos = {lab: j for j, lab in enumerate(labels)}
    unknown = sorted({t for t in texts.values() if t not in pos})
    if unknown:
        raise SchemaError(f"column {name!r}: values {unknown[:5]} are not in the given domain")
    slot = np.zeros(n_uniques, dtype=np.int32)
    for i, t in texts.items():
        slot[i] = pos[t]
    return slot
