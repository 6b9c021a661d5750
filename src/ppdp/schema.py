"""A schema file: how to read a table and what each column is, declared once.

A schema is a TOML file (read with the standard library's ``tomllib``)::

    [file]
    sep = ", "              # one character, "\\t" / "tab", or a longer literal separator
    header = false          # the first row holds names (true) or data (false)
    names = ["age", "workclass", ...]   # column names (required without a header)
    encoding = "utf-8"
    na = ["?"]              # missing markers besides the empty cell
    strip = true            # strip spaces around values (names are always stripped)
    missing = "category"    # missing values of every column: "error", "category" or "drop"

    [columns.age]
    role = "quasi"          # quasi | sensitive | drop (a column left out is dropped)
    type = "numeric"        # numeric | text (default: numeric when every value is a number)
    missing = "drop"        # this column's missing values (overrides file.missing)
    bins = [17, 25, 35, 45, 55, 65, 91]             # explicit edges, or
    # bins = { width = 10, min = 10, max = 100 }   # equal width over a public range, or
    # bins = { count = 9, min = 10, max = 100 }    # so many equal bins over a public range, or
    # bins = { quantiles = 5 }                     # edges from the data (never for DP releases)

    [columns.income]
    role = "sensitive"
    domain = [">50K", "<=50K"]                     # public domain (label order)
    sensitive_values = [">50K"]                    # the protected values (default: all)

Every key is checked: an unknown key or a bad value is one :class:`SchemaError` naming the key.
Reading goes through ``pyarrow.csv`` (one-character separators) or ``pandas.read_csv`` (longer
separators); the encoded table is a :class:`ppdp.Table`. A binned column's labels are its bins
(``[lo, hi)``, the last ``[lo, hi]``); :func:`bin_edges` recovers the edges from the labels, so
a release's domains (and the ``bins`` its schema records) name them for every receiver.

Missing values (an empty cell or a ``na`` marker) follow a policy per column — the column's
``missing`` key, else ``file.missing`` (``--missing`` on the command line sets every column):
``"error"`` refuses the table, ``"category"`` keeps them as the label ``"(missing)"`` (last in
the domain), ``"drop"`` leaves out every row with a missing value in that column (counted:
:attr:`ppdp.Table.missing_dropped`). Outside differential privacy the ``(missing)`` label is
in a column's domain exactly when the column holds a missing value. An ε-DP histogram's
cells must not depend on the data, so there the ``(missing)`` cell is in a dimension's domain
exactly when the column's policy is ``"category"`` (:func:`public_domains`), whether or not a
row is missing — declare the policy per column to keep the cube small.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .errors import PpdpError, SchemaError
from .table import MISSING_LABEL, Binning, Table

ROLES = ("quasi", "sensitive", "drop")
TYPES = ("numeric", "text")
#: what to do with a column's missing values
MISSING_POLICIES = ("error", "category", "drop")
#: a numeric sensitive attribute with more distinct values than this is continuous: refused
#: unless binned (or allowed explicitly)
CONTINUOUS_SA_VALUES = 20

_FILE_KEYS = ("sep", "header", "names", "encoding", "na", "strip", "missing", "thousands", "decimal", "lowercase",
              "skip")
#: thousands separators a number may be written with ("1,234.5", "1 234", "1'234", "1_234")
THOUSANDS = (",", ".", " ", "'", "_")
_COLUMN_KEYS = ("role", "type", "domain", "bins", "sensitive_values", "missing")
_BIN_KEYS = ("width", "count", "min", "max", "quantiles")


# ------------------------------------------------------------------------------ model
@dataclass(frozen=True)
class BinSpec:
    """Bins of a numeric column: explicit ``edges``; ``width`` or ``count`` equal bins over the
    public range ``[lo, hi]``; or ``quantiles`` equal-frequency bins computed from the data."""

    edges: tuple[float, ...] | None = None
    width: float | None = None
    count: int | None = None
    lo: float | None = None
    hi: float | None = None
    quantiles: int | None = None

    @property
    def data_dependent(self) -> bool:
        """Are the edges computed from the data (and so not public)?"""
        return self.quantiles is not None

    def resolve(self, values: np.ndarray | None = None) -> tuple[float, ...]:
        """The edges; ``values`` (the column's numbers) only for quantiles."""
        if self.edges is not None:
            return self.edges
        if self.quantiles is not None:
            if values is None or not len(values):
                raise SchemaError("quantile bins need the column's values")
            qs = np.quantile(np.asarray(values, float), np.linspace(0, 1, self.quantiles + 1))
            edges = tuple(float(x) for x in np.unique(qs))
            if len(edges) < 2:
                edges = (edges[0], edges[0] + 1.0)
            return edges
        lo, hi = float(self.lo), float(self.hi)  # type: ignore[arg-type]
        if self.count is not None:
            return tuple(float(x) for x in np.linspace(lo, hi, self.count + 1))
        w = float(self.width)  # type: ignore[arg-type]
        n = max(1, math.ceil((hi - lo) / w - 1e-9))
        return tuple(lo + i * w for i in range(n + 1))

    def describe(self) -> str:
        if self.edges is not None:
            return f"edges {list(self.edges)}"
        if self.quantiles is not None:
            return f"{self.quantiles} quantile bins (edges from the data)"
        what = f"width {self.width:g}" if self.width is not None else f"{self.count} equal bins"
        return f"{what} over [{self.lo:g}, {self.hi:g}]"


@dataclass(frozen=True)
class ColumnSpec:
    role: str = "drop"
    type: str | None = None
    domain: tuple[str, ...] | None = None
    bins: BinSpec | None = None
    sensitive_values: tuple[str, ...] | None = None
    #: this column's missing-value policy (None: the file's)
    missing: str | None = None


@dataclass(frozen=True)
class FileOptions:
    sep: str = ","
    header: bool = True
    names: tuple[str, ...] | None = None
    encoding: str = "utf-8"
    na: tuple[str, ...] = ("?",)
    strip: bool = False
    missing: str = "error"
    #: the thousands separator of numbers written "1,234.56" (None: numbers have none)
    thousands: str | None = None
    #: the decimal mark of numbers ("." or ",": "12,5" is twelve and a half)
    decimal: str = "."
    #: read every text value in lower case ("WHITE", "White" and "white" are one label)
    lowercase: bool = False
    #: lines above the header (or the first row) to skip: a title, a date, a blank line
    skip: int = 0


@dataclass(frozen=True)
class Schema:
    """How to read a table (``file``) and what each column is (``columns``)."""

    file: FileOptions = field(default_factory=FileOptions)
    columns: Mapping[str, ColumnSpec] = field(default_factory=dict)
    source: str = "flags"

    # ----------------------------------------------------------------- roles
    def read(self, path: str | os.PathLike, n_rows: int | None = None, seed: int = 0) -> Table:
        """Read the table at ``path`` as this schema says (:func:`read_table`)."""
        return read_table(path, self, n_rows, seed)

    def role(self, r: str) -> list[str]:
        return [c for c, s in self.columns.items() if s.role == r]

    @property
    def quasi(self) -> list[str]:
        return self.role("quasi")

    @property
    def sensitive(self) -> list[str]:
        return self.role("sensitive")

    @property
    def bins(self) -> dict[str, BinSpec]:
        return {c: s.bins for c, s in self.columns.items() if s.bins is not None}

    @property
    def numeric(self) -> list[str]:
        return [c for c, s in self.columns.items() if s.type == "numeric" or s.bins is not None]

    @property
    def text(self) -> list[str]:
        return [c for c, s in self.columns.items() if s.type == "text"]

    @property
    def domains(self) -> dict[str, tuple[str, ...]]:
        return {c: s.domain for c, s in self.columns.items() if s.domain is not None}

    @property
    def sensitive_values(self) -> tuple[str, ...] | None:
        given = [sv for c in self.sensitive if (sv := self.columns[c].sensitive_values) is not None]
        return tuple(v for sv in given for v in sv) if given else None

    def missing_policy(self, column: str) -> str:
        """The column's missing-value policy: its own ``missing``, else the file's."""
        spec = self.columns.get(column)
        return spec.missing if spec is not None and spec.missing is not None else self.file.missing

    def with_file(self, **changes) -> "Schema":
        """A copy whose file options are changed (flags given on the command line win: a
        ``missing`` given here replaces every column's own policy too)."""
        given = {k: v for k, v in changes.items() if v is not None}
        if given.get("missing") is not None and given["missing"] not in MISSING_POLICIES:
            raise SchemaError(f"--missing: must be one of {', '.join(MISSING_POLICIES)}, got {given['missing']!r}")
        cols = self.columns
        if "missing" in given:
            cols = {c: replace(s, missing=None) for c, s in cols.items()}
        return replace(self, file=replace(self.file, **given), columns=cols)

    def with_missing(self, policy: str | None = None, columns: Mapping[str, str] | None = None) -> "Schema":
        """A copy with missing-value policies given as flags: ``policy`` for the whole file
        (replacing every column's own), then ``columns`` (column → policy) on top of it."""
        sch = self.with_file(missing=policy) if policy is not None else self
        if not columns:
            return sch
        bad = [(c, p) for c, p in columns.items() if p not in MISSING_POLICIES]
        if bad:
            raise SchemaError(f"--missing {bad[0][0]}={bad[0][1]}: the policy must be one of "
                              f"{', '.join(MISSING_POLICIES)}")
        cols = dict(sch.columns)
        for c, p in columns.items():
            cols[c] = replace(cols.get(c, ColumnSpec()), missing=p)
        return replace(sch, columns=cols)

    def with_roles(self, quasi: Sequence[str], sensitive: Sequence[str]) -> "Schema":
        """A copy in which exactly ``quasi`` and ``sensitive`` have those roles (others dropped)."""
        cols = {c: replace(s, role="drop") for c, s in self.columns.items()}
        for names, role in ((quasi, "quasi"), (sensitive, "sensitive")):
            for c in names:
                cols[c] = replace(cols.get(c, ColumnSpec()), role=role)
        return replace(self, columns=cols)

    def with_columns(self, quasi: Sequence[str] = (), sensitive: Sequence[str] = (), numeric: Sequence[str] = (),
                     bins: Mapping[str, Sequence[float]] | None = None) -> "Schema":
        """A copy with roles, numeric columns and bins given as flags; a role given as a flag
        replaces the schema's roles of that kind."""
        cols = dict(self.columns)
        if quasi:
            cols = {c: (replace(s, role="drop") if s.role == "quasi" else s) for c, s in cols.items()}
        if sensitive:
            cols = {c: (replace(s, role="drop") if s.role == "sensitive" else s) for c, s in cols.items()}
        for names, role in ((quasi, "quasi"), (sensitive, "sensitive")):
            for c in names:
                cols[c] = replace(cols.get(c, ColumnSpec()), role=role)
        for c in numeric:
            cols[c] = replace(cols.get(c, ColumnSpec()), type="numeric")
        for c, edges in (bins or {}).items():
            cols[c] = replace(cols.get(c, ColumnSpec()), bins=BinSpec(edges=tuple(float(x) for x in edges)))
        return replace(self, columns=cols)


# ---------------------------------------------------------------------- loading
def load_schema(path: str | os.PathLike) -> Schema:
    """Read and validate a schema file (TOML)."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise SchemaError(f"--schema {str(path)!r}: no such file") from None
    except OSError as e:
        raise SchemaError(f"--schema {str(path)!r}: cannot read it ({e.strerror or e})") from None
    except tomllib.TOMLDecodeError as e:
        raise SchemaError(f"schema {p.name}: not valid TOML ({e})") from None
    except UnicodeDecodeError:
        raise SchemaError(f"schema {p.name}: not UTF-8 text") from None
    return schema_from_dict(doc, p.name)


def schema_from_dict(doc: Mapping[str, Any], where: str = "schema") -> Schema:
    """A schema from its parsed document; every key and value checked."""

    def bad(key: str, what: str):
        raise SchemaError(f"schema {where}: {key}: {what}")

    _known(doc, ("file", "columns"), "", where)
    fdoc = doc.get("file", {})
    if not isinstance(fdoc, Mapping):
        bad("file", "must be a table ([file])")
    _known(fdoc, _FILE_KEYS, "file.", where)
    fo: dict[str, Any] = {}
    if "sep" in fdoc:
        fo["sep"] = parse_sep(fdoc["sep"], f"schema {where}: file.sep")
    if "header" in fdoc:
        if not isinstance(fdoc["header"], bool):
            bad("file.header", f"must be true or false, got {fdoc['header']!r}")
        fo["header"] = fdoc["header"]
    if "names" in fdoc:
        fo["names"] = _strings(fdoc["names"], "file.names", where, unique=True)
    if "encoding" in fdoc:
        fo["encoding"] = check_encoding(fdoc["encoding"], f"schema {where}: file.encoding")
    if "na" in fdoc:
        na = fdoc["na"]
        fo["na"] = (na,) if isinstance(na, str) else _strings(na, "file.na", where, empty_ok=True)
    if "strip" in fdoc:
        if not isinstance(fdoc["strip"], bool):
            bad("file.strip", f"must be true or false, got {fdoc['strip']!r}")
        fo["strip"] = fdoc["strip"]
    if "missing" in fdoc:
        if fdoc["missing"] not in MISSING_POLICIES:
            bad("file.missing", f"must be one of {', '.join(map(repr, MISSING_POLICIES))}, got {fdoc['missing']!r}")
        fo["missing"] = fdoc["missing"]
    if "thousands" in fdoc:
        if fdoc["thousands"] not in THOUSANDS:
            bad("file.thousands", f"must be one of {', '.join(map(repr, THOUSANDS))}, got {fdoc['thousands']!r}")
        fo["thousands"] = fdoc["thousands"]
    if "decimal" in fdoc:
        if fdoc["decimal"] not in (".", ","):
            bad("file.decimal", f"must be '.' or ',', got {fdoc['decimal']!r}")
        if fdoc["decimal"] == fo.get("thousands"):
            bad("file.decimal", f"{fdoc['decimal']!r} is also file.thousands")
        fo["decimal"] = fdoc["decimal"]
    if "skip" in fdoc:
        if isinstance(fdoc["skip"], bool) or not isinstance(fdoc["skip"], int) or fdoc["skip"] < 0:
            bad("file.skip", f"must be a whole number of lines ≥ 0, got {fdoc['skip']!r}")
        fo["skip"] = fdoc["skip"]
    if "lowercase" in fdoc:
        if not isinstance(fdoc["lowercase"], bool):
            bad("file.lowercase", f"must be true or false, got {fdoc['lowercase']!r}")
        fo["lowercase"] = fdoc["lowercase"]
    if fo.get("header") is False and "names" not in fo:
        bad("file.names", "required when file.header = false (the file has no row of names)")
    cdoc = doc.get("columns", {})
    if not isinstance(cdoc, Mapping):
        bad("columns", "must be a table of columns ([columns.NAME])")
    cols: dict[str, ColumnSpec] = {}
    for name, spec in cdoc.items():
        key = f"columns.{name}"
        if not isinstance(spec, Mapping):
            bad(key, "must be a table (role = …, type = …)")
        _known(spec, _COLUMN_KEYS, key + ".", where)
        role = spec.get("role", "drop")
        if role not in ROLES:
            bad(f"{key}.role", f"must be one of {', '.join(ROLES)}, got {role!r}")
        typ = spec.get("type")
        if typ is not None and typ not in TYPES:
            bad(f"{key}.type", f"must be one of {', '.join(TYPES)}, got {typ!r}")
        domain = _strings(spec["domain"], f"{key}.domain", where, unique=True) if "domain" in spec else None
        bins = _bins(spec["bins"], f"{key}.bins", where) if "bins" in spec else None
        if bins is not None and typ == "text":
            bad(f"{key}.bins", "a text column cannot be binned (bins need type = \"numeric\")")
        if bins is not None and domain is not None:
            bad(f"{key}.domain", "a binned column's domain is its bins; give one of domain and bins")
        sv = None
        if "sensitive_values" in spec:
            sv = _strings(spec["sensitive_values"], f"{key}.sensitive_values", where, unique=True, empty_ok=True)
            if role != "sensitive":
                bad(f"{key}.sensitive_values", "only a column with role = \"sensitive\" has protected values")
            if domain is not None and (unknown := [v for v in sv if v not in domain]):
                bad(f"{key}.sensitive_values", f"{unknown[0]!r} is not in its domain")
        miss = spec.get("missing")
        if miss is not None and miss not in MISSING_POLICIES:
            bad(f"{key}.missing", f"must be one of {', '.join(map(repr, MISSING_POLICIES))}, got {miss!r}")
        cols[str(name)] = ColumnSpec(role, typ, domain, bins, sv, miss)
    names = fo.get("names")
    if names is not None and (unknown := [c for c in cols if c not in names]):
        bad(f"columns.{unknown[0]}", f"is not one of file.names {list(names)}")
    return Schema(FileOptions(**fo), cols, where)


def _known(doc: Mapping, known: Sequence[str], prefix: str, where: str) -> None:
    for k in doc:
        if k not in known:
            raise SchemaError(f"schema {where}: unknown key {prefix}{k} (known: {', '.join(known)})")


def _strings(v, key: str, where: str, unique: bool = False, empty_ok: bool = False) -> tuple[str, ...]:
    if isinstance(v, str) or not isinstance(v, list) or not all(isinstance(x, (str, int, float)) and
                                                                not isinstance(x, bool) for x in v):
        raise SchemaError(f"schema {where}: {key}: must be a list of strings, got {v!r}")
    out = tuple(str(x) for x in v)
    if not out and not empty_ok:
        raise SchemaError(f"schema {where}: {key}: must not be empty")
    if unique and len(set(out)) != len(out):
        dup = next(x for x in out if out.count(x) > 1)
        raise SchemaError(f"schema {where}: {key}: {dup!r} is listed twice")
    return out


def _number(v, key: str, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise SchemaError(f"schema {where}: {key}: must be a finite number, got {v!r}")
    return float(v)


def _bins(v, key: str, where: str) -> BinSpec:
    if isinstance(v, list):
        edges = tuple(_number(x, key, where) for x in v)
        if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
            raise SchemaError(f"schema {where}: {key}: edges must be at least two strictly increasing numbers, "
                              f"got {list(v)}")
        return BinSpec(edges=edges)
    if not isinstance(v, Mapping):
        raise SchemaError(f"schema {where}: {key}: a list of edges or a table {{width|count|quantiles, min, max}}, "
                          f"got {v!r}")
    _known(v, _BIN_KEYS, key + ".", where)
    kinds = [k for k in ("width", "count", "quantiles") if k in v]
    if len(kinds) != 1:
        raise SchemaError(f"schema {where}: {key}: give exactly one of width, count, quantiles")
    if "quantiles" in v:
        q = v["quantiles"]
        if isinstance(q, bool) or not isinstance(q, int) or q < 2:
            raise SchemaError(f"schema {where}: {key}.quantiles: must be an integer ≥ 2, got {q!r}")
        if "min" in v or "max" in v:
            raise SchemaError(f"schema {where}: {key}: quantile bins take no min/max")
        return BinSpec(quantiles=q)
    if "min" not in v or "max" not in v:
        raise SchemaError(f"schema {where}: {key}: equal-width bins need min and max (a public range; the data's own "
                          "range is not public)")
    lo, hi = _number(v["min"], f"{key}.min", where), _number(v["max"], f"{key}.max", where)
    if hi <= lo:
        raise SchemaError(f"schema {where}: {key}: max must exceed min, got min {lo:g}, max {hi:g}")
    if "width" in v:
        w = _number(v["width"], f"{key}.width", where)
        if w <= 0:
            raise SchemaError(f"schema {where}: {key}.width: must be > 0, got {w:g}")
        if (hi - lo) / w > 10_000:
            raise SchemaError(f"schema {where}: {key}.width: {w:g} makes more than 10000 bins")
        return BinSpec(width=w, lo=lo, hi=hi)
    c = v["count"]
    if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= 10_000:
        raise SchemaError(f"schema {where}: {key}.count: must be an integer in 1..10000, got {c!r}")
    return BinSpec(count=c, lo=lo, hi=hi)


def parse_sep(v, key: str = "--sep") -> str:
    """A separator as written: one character, ``\\t`` / ``tab``, or a longer literal string."""
    if not isinstance(v, str) or v == "":
        raise SchemaError(f"{key}: a separator is a non-empty string, got {v!r}")
    if v.lower() in ("tab", "\\t", "tsv"):
        return "\t"
    if v.lower() in ("comma",):
        return ","
    if v in ("\n", "\r", '"') or "\n" in v:
        raise SchemaError(f"{key}: {v!r} cannot separate fields")
    return v


def check_encoding(v, key: str = "--encoding") -> str:
    import codecs

    if not isinstance(v, str):
        raise SchemaError(f"{key}: an encoding name, got {v!r}")
    try:
        return codecs.lookup(v).name
    except LookupError:
        raise SchemaError(f"{key}: unknown encoding {v!r} (e.g. utf-8, latin-1, cp1252)") from None


# ---------------------------------------------------------------------- reading
#: a compressed file's first bytes → its compression (the name's suffix may be missing or upper-case)
MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\x28\xb5\x2f\xfd", "zstd"))


def compression_of(path: str | os.PathLike) -> str | None:
    """The file's compression by its first bytes (gzip, bz2, zstd), or None for a plain file."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return None
    return next((kind for magic, kind in MAGIC if head.startswith(magic)), None)


def read_frame(path: str | os.PathLike, opts: FileOptions) -> pd.DataFrame:
    """The file as a DataFrame of text cells (missing markers still as written), read with
    ``pyarrow.csv`` (one-character separator) or ``pandas.read_csv`` (a longer separator);
    Parquet files are read with pyarrow. Column names are stripped."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    p = Path(path)
    if not p.exists():
        raise PpdpError(f"no such file: {str(path)!r}")
    if p.is_dir() and p.suffix.lower() not in (".parquet", ".pq"):
        raise PpdpError(f"{str(path)!r} is a directory, not a CSV or Parquet file")
    if p.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        try:
            df = pq.read_table(p).to_pandas()
        except (OSError, pa.ArrowException, ValueError) as e:
            raise PpdpError(f"cannot read Parquet file {str(path)!r}: {_first_line(e)}") from None
        return _finish(df, opts, p)
    sep = opts.sep
    # ", " is the one-character separator "," with the spaces after it stripped
    one = sep if len(sep) == 1 else (sep[0] if sep[1:].strip() == "" else None)
    strip = opts.strip or one != sep
    names = list(opts.names) if opts.names else None
    if one is not None:
        read = dict(encoding=opts.encoding, column_names=names,
                    skip_rows=opts.skip + (1 if opts.header and names else 0),
                    autogenerate_column_names=not opts.header and names is None)
        parse = pcsv.ParseOptions(delimiter=one)
        packed = compression_of(p)

        def src():  # the file's own compression, whatever its name says (SURVEY.CSV.GZ, gzip saved as .csv)
            return p if packed is None else pa.input_stream(p, compression=packed)

        try:
            with pcsv.open_csv(src(), read_options=pcsv.ReadOptions(**read), parse_options=parse) as r:
                found = r.schema.names  # the names only: every column is then read as text
            t = pcsv.read_csv(
                src(), read_options=pcsv.ReadOptions(**read), parse_options=parse,
                convert_options=pcsv.ConvertOptions(column_types={n: pa.string() for n in found},
                                                    strings_can_be_null=False, quoted_strings_can_be_null=False),
            )
        except pa.ArrowInvalid as e:
            msg = _first_line(e)
            if "UTF8" in msg or "UTF-8" in msg or "decode" in msg.lower():
                raise PpdpError(f"{p.name} is not {opts.encoding} text ({msg}); give --encoding "
                                "(e.g. latin-1) or file.encoding in the schema") from None
            hint = ""
            if "Expected" in msg and "columns" in msg:
                hint = (" (wrong separator? give --sep, e.g. --sep ', ' or --sep tab; --no-header --names a,b,… "
                        "for a file without a row of names)")
            raise PpdpError(f"malformed CSV {p.name}: {msg}{hint}") from None
        except OSError as e:
            raise PpdpError(f"cannot read {str(path)!r}: {_first_line(e)}") from None
        if strip:
            import pyarrow.compute as pc

            t = pa.table({n: pc.utf8_trim_whitespace(t.column(n)) for n in t.column_names})
        df = t.to_pandas()
    else:
        try:
            df = pd.read_csv(p, sep=re.escape(sep), engine="python", header=0 if opts.header else None, skiprows=opts.skip,
                             names=names, dtype=str, keep_default_na=False, na_values=[], encoding=opts.encoding,
                             compression=compression_of(p) or "infer")
        except UnicodeDecodeError as e:
            raise PpdpError(f"{p.name} is not {opts.encoding} text ({e.reason}); give --encoding") from None
        except (pd.errors.ParserError, ValueError) as e:
            raise PpdpError(f"malformed CSV {p.name}: {_first_line(e)}") from None
        if strip:
            df = df.apply(lambda s: s.str.strip())
    if not opts.header and names is None:
        df.columns = [f"col{i + 1}" for i in range(df.shape[1])]
    return _finish(df, opts, p)


def _finish(df: pd.DataFrame, opts: FileOptions, p: Path) -> pd.DataFrame:
    names = [str(c).strip() for c in df.columns]
    if opts.names and len(opts.names) != df.shape[1]:
        raise SchemaError(f"{p.name} has {df.shape[1]} columns but {len(opts.names)} names are given "
                          f"(--names / file.names)")
    # a separator at the end of every line (a spreadsheet's export): an unnamed column of nothing
    blank = [i for i, c in enumerate(names) if c == "" and df.iloc[:, i].map(lambda v: v is None or v == "" or v != v).all()]
    if blank and not opts.names:
        keep = [i for i in range(df.shape[1]) if i not in blank]
        df = df.iloc[:, keep]
        names = [names[i] for i in keep]
    empty = [i + 1 for i, c in enumerate(names) if c == ""]
    if empty:
        raise SchemaError(f"{p.name}: column {empty[0]} has no name; give --names (or file.names in the schema)")
    dup = sorted({c for c in names if names.count(c) > 1})
    if dup:
        raise SchemaError(f"{p.name}: duplicate column name(s) {dup}; every column needs its own name")
    df.columns = names
    if opts.lowercase:
        # missing markers keep their spelling: a marker 'NA' stays missing, never the label 'na'
        df = df.apply(lambda s: s.where(s.isin(list(opts.na)) | s.isna(), s.astype(str).str.lower())
                      if s.dtype == object or pd.api.types.is_string_dtype(s.dtype) else s)
    if opts.thousands or opts.decimal != ".":
        df = normalize_numbers(df, opts.thousands, opts.decimal, opts.na)
    if opts.header and df.shape[0] == 0:
        raise PpdpError(f"the input table {p.name} is empty")
    # a trailing empty line in a file without a header is one row of nothing
    if df.shape[0] and all(v in ("", None) for v in df.iloc[-1].tolist()):
        df = df.iloc[:-1]
    return df


def thousands_pattern(sep: str, decimal: str = ".") -> re.Pattern:
    """A number written with ``sep`` between groups of three digits ("1,234", "-12,345.6")."""
    t, d = re.escape(sep), re.escape(decimal)
    return re.compile(rf"[+-]?\d{{1,3}}(?:{t}\d{{3}})+(?:{d}\d+)?")


def normalize_numbers(df: pd.DataFrame, thousands: str | None, decimal: str = ".",
                      na: Sequence[str] = ()) -> pd.DataFrame:
    """Numbers as Python reads them in every text column whose present values are all numbers
    written with the file's thousands separator and decimal mark ("1,018.52" → "1018.52";
    with ``decimal=","`` and ``thousands="."``: "1.018,52" → "1018.52"); a column holding any
    other text is left as written."""
    d = re.escape(decimal)
    grouped = thousands_pattern(thousands, decimal) if thousands else None
    plain = re.compile(rf"[+-]?(?:\d+(?:{d}\d*)?|{d}\d+)(?:[eE][+-]?\d+)?")
    marks = [m for m in (thousands, decimal if decimal != "." else None) if m]
    out = {}
    for c in df.columns:
        s = df[c]
        if not (s.dtype == object or pd.api.types.is_string_dtype(s.dtype)):
            continue
        if not any(s.str.contains(m, regex=False, na=False).any() for m in marks):
            continue  # nothing written with the marks: nothing to read differently
        vals = pd.Series(s.dropna().unique(), dtype=object).astype(str)
        vals = vals[~vals.isin(["", *na])]
        if not len(vals):
            continue
        is_grouped = vals.map(lambda v: grouped.fullmatch(v) is not None) if grouped else vals.map(lambda v: False)
        is_plain = vals.map(lambda v: plain.fullmatch(v) is not None)
        changed = is_grouped | (vals.str.contains(decimal, regex=False) if decimal != "." else is_grouped)
        if not changed.any() or not (is_grouped | is_plain).all():
            continue
        todo = set(vals[changed])
        m = s.isin(todo)
        new = s[m].astype(str)
        if thousands and grouped is not None:
            g = grouped
            new = new.where(~new.map(lambda v: g.fullmatch(v) is not None), new.str.replace(thousands, "", regex=False))
        if decimal != ".":
            new = new.str.replace(decimal, ".", regex=False)
        out[c] = s.where(~m, new)
    if out:
        df = df.assign(**out)
    return df


def ungroup_thousands(df: pd.DataFrame, sep: str, na: Sequence[str] = ()) -> pd.DataFrame:
    """Remove the thousands separator from the numbers of every text column whose present
    values are all numbers, plain or grouped ("1,018.52" → "1018.52"); a column holding any
    other text is left as written."""
    return normalize_numbers(df, sep, ".", na)


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def read_table(path: str | os.PathLike, schema: Schema | str | os.PathLike, n_rows: int | None = None,
               seed: int = 0) -> Table:
    """Read a custodian's table (CSV or Parquet) at ``path`` as ``schema`` says — a
    :class:`Schema` or the path of a schema file (TOML, docs/schema.md): separator, header,
    missing-value markers, encoding, roles, numeric columns, bins, domains — and encode the
    quasi-identifiers and sensitive columns (``ppdp.read_table``; the CLI's INPUT with
    ``--schema`` is read by it). ``n_rows``: a seeded sample of that many rows."""
    if not isinstance(schema, Schema):
        schema = load_schema(schema)
    df = read_frame(path, schema.file)
    return encode(df, schema, Path(path).name, n_rows=n_rows, seed=seed)


def encode(df: pd.DataFrame, schema: Schema, where: str = "input", n_rows: int | None = None, seed: int = 0) -> Table:
    quasi, sensitive = schema.quasi, schema.sensitive
    for c in schema.columns:
        if c not in df.columns:
            hint = ""
            if df.shape[1] == 1:
                hint = " (a single column: wrong separator? give --sep, e.g. --sep ';' or --sep tab, or file.sep)"
            elif any(_numberlike(x) for x in df.columns):
                hint = (" (the first row looks like data: give --no-header --names A,B,…, or file.header = false "
                        "and file.names in the schema)")
            raise SchemaError(f"{where}: no column {c!r} (named by a flag or the schema); the input has "
                              f"{list(df.columns)[:20]}{hint}")
    if not quasi and not sensitive:
        raise SchemaError("no column has a role: give --quasi / --sensitive, or role = \"quasi\" / \"sensitive\" "
                          "in the schema")
    cols = [*quasi, *sensitive]
    if n_rows is not None:
        if n_rows > len(df):
            raise PpdpError(f"-n/--rows {n_rows} exceeds the {len(df)} rows of the table; a sample draws each row "
                            "at most once")
        idx = np.sort(np.random.default_rng(seed).choice(len(df), size=n_rows, replace=False))
        df = df.iloc[idx]
    na = tuple(schema.file.na)
    policy = {c: schema.missing_policy(c) for c in cols}
    dropped: dict[str, int] = {}
    rows_read = len(df)
    drop_cols = [c for c in cols if policy[c] == "drop"]
    if drop_cols:
        gone = np.zeros(len(df), dtype=bool)
        for c in drop_cols:
            m = missing_mask(df[c], na)
            dropped[c] = int(m.sum())
            gone |= m
        if gone.any():
            df = df.loc[~gone]
        if len(df) == 0:
            raise PpdpError(f"{where}: every row has a missing value in a column whose missing values are dropped "
                            f"({', '.join(drop_cols)}); nothing is left to publish")
    bins: dict[str, tuple[float, ...]] = {}
    for c, spec in schema.bins.items():
        if c not in cols:
            continue
        values = None
        if spec.data_dependent:
            s = df[c]
            s = s[~s.isin(na) & s.notna() & (s != "")]
            values = pd.to_numeric(s, errors="coerce").dropna().to_numpy(float)
        bins[c] = spec.resolve(values)
    numeric = [c for c in cols if c in schema.numeric]
    declared: list[str] | None = numeric
    if not any(schema.columns.get(c, ColumnSpec()).type is not None for c in cols) and not bins:
        declared = None if not all(_is_text_dtype(df[c]) for c in cols) else []
    if declared is not None:
        # columns of undeclared type: numeric when every value present reads as a number
        declared = list(declared) + [c for c in cols if schema.columns.get(c, ColumnSpec()).type is None
                                     and c not in declared and looks_numeric(df[c], na)]
    domains = {c: d for c, d in schema.domains.items() if c in cols}
    t = Table.from_pandas(df, quasi=quasi, sensitive=sensitive, columns=cols, bins=bins or None,
                          domains=domains or None, missing={c: ("error" if p == "drop" else p) for c, p in policy.items()},
                          na_values=na, numeric=declared)
    if drop_cols:
        t.missing_dropped = {"rows_read": rows_read, "rows_dropped": rows_read - t.n_rows, "by_column": dropped}
    return t


def missing_mask(s: pd.Series, na: Sequence[str] = ()) -> np.ndarray:
    """Which cells of a column are missing: None/NaN, the empty string or a ``na`` marker."""
    m = s.isna().to_numpy()
    if s.dtype == object or pd.api.types.is_string_dtype(s.dtype):
        m = m | s.isin(["", *na]).to_numpy()
    return m


def _numberlike(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _is_text_dtype(s: pd.Series) -> bool:
    return s.dtype == object


def looks_numeric(s: pd.Series, na: Sequence[str] = ()) -> bool:
    """Every present value reads as a finite number (and there is at least one)."""
    if pd.api.types.is_bool_dtype(s.dtype):
        return False
    if pd.api.types.is_numeric_dtype(s.dtype):
        return True
    vals = pd.Series(s.dropna().unique(), dtype=object).astype(str)
    vals = vals[~vals.isin(list(na)) & (vals.astype(str).str.strip() != "")]
    if not len(vals):
        return False
    nums = pd.to_numeric(vals, errors="coerce")
    return bool(nums.notna().all() and np.isfinite(nums.to_numpy(float)).all())


# ------------------------------------------------------------------------ bins
_BIN_LABEL = re.compile(r"\[([^,\[\]]+), ([^,\[\]]+)([)\]])")


def bin_edges(domain: Sequence[str]) -> tuple[float, ...] | None:
    """The edges of a binned domain (labels ``[e0, e1)``, …, ``[e_{k-1}, e_k]``, missing label
    allowed last), or None if the labels are not bins."""
    labels = [x for x in domain if x != MISSING_LABEL]
    if not labels:
        return None
    edges: list[float] = []
    for i, lab in enumerate(labels):
        m = _BIN_LABEL.fullmatch(lab)
        if m is None:
            return None
        try:
            lo, hi = float(m.group(1)), float(m.group(2))
        except ValueError:
            return None
        last = i == len(labels) - 1
        if (m.group(3) == "]") != last or hi <= lo or (edges and edges[-1] != lo):
            return None
        if not edges:
            edges.append(lo)
        edges.append(hi)
    return tuple(edges)


def _bin_labels(edges: Sequence[float]) -> list[str]:
    return Binning(tuple(edges)).labels


def label_numbers(domain: Sequence[str], numeric: np.ndarray | Sequence[float] | None = None) -> np.ndarray | None:
    """The number of each label of a numeric domain, NaN for the missing label: ``numeric``
    when given; else each bin's lower edge (a binned domain) or each label read as a number
    (a domain of numbers). None for a text domain. A missing label makes a column's recorded
    numbers None, yet its other labels keep their order and bins: this recovers them."""
    if numeric is not None:
        return np.asarray(numeric, dtype=float)
    edges = bin_edges(domain)
    labels = [x for x in domain if x != MISSING_LABEL]
    if edges is not None:
        nums = iter(edges[:-1])
    else:
        try:
            vals = [float(x) for x in labels]
        except ValueError:
            return None
        if not labels or not all(math.isfinite(v) for v in vals):
            return None
        nums = iter(vals)
    return np.asarray([math.nan if x == MISSING_LABEL else next(nums) for x in domain], dtype=float)


def continuous_sensitive(table: Table, limit: int = CONTINUOUS_SA_VALUES) -> list[tuple[str, int]]:
    """The sensitive attributes that are numeric, not binned, with more than ``limit`` values."""
    out = []
    for c in table.sensitive:
        dom = table.domain(c)
        if table.numeric_values(c) is not None and bin_edges(dom) is None and len(dom) > limit:
            out.append((c, len(dom)))
    return out


def public_domains(table: Table, schema: Schema, columns: Sequence[str]) -> dict[str, list[str]]:
    """The declared (public) domain of each column the schema declares one for, with the
    missing category exactly when the column's declared policy is ``"category"`` (a
    histogram's cells: the declaration decides, never the rows)."""
    out = {}
    for c in columns:
        d: Sequence[str] | None = schema.domains.get(c)
        category = schema.missing_policy(c) == "category"
        if d is None and category and c in table.column_names:
            edges = bin_edges(table.domain(c))  # a binned column: its bins and the missing cell
            d = None if edges is None else _bin_labels(edges)
        if d is None:
            continue
        out[c] = list(d) + ([MISSING_LABEL] if category else [])
    return out
