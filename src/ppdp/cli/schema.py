"""``ppdp schema infer FILE``: a starting schema file, every guess spelled out as a comment."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import re
from pathlib import Path

import click

from . import cli

#: separators tried, longest first (", " before ",")
_SEPS = (", ", "\t", ";", "|", ",")
_NA_CANDIDATES = ("?", "NA", "N/A", "n/a", "#N/A", "NULL", "null", "None", "NaN", "nan", "-", ".")
#: a text column with at most this many values gets its domain written out
_DOMAIN_MAX = 40


@cli.group()
def schema():
    """Schema files: how to read a table and what each column is (see docs/schema.md)."""


@schema.command("infer")
@click.argument("input_path", metavar="FILE", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False), default=None,
              help="Write the schema here (default: print it).")
@click.option("--encoding", default=None, help="Text encoding of FILE (default: guessed, utf-8 or latin-1).")
def infer(input_path, out, encoding):
    """Guess how to read FILE (separator, header, missing markers, encoding) and what each
    column is; write a TOML schema with every guess as a comment, to review and edit."""
    from ..errors import PpdpError
    from ..schema import FileOptions, check_encoding, compression_of, read_frame

    p = Path(input_path)
    if p.suffix.lower() in (".parquet", ".pq"):
        return _infer_parquet(p, out)
    raw = p.read_bytes()[: 1 << 16]
    packed = compression_of(p)
    if packed is not None:  # gzip, bz2, zstd: sniff the text, as the reader decompresses it
        import pyarrow as pa

        with pa.input_stream(p, compression=packed) as f:
            raw = f.read(1 << 16)
    if encoding:
        enc = check_encoding(encoding)
        why_enc = "given"
    elif raw[:2] in (b"\xff\xfe", b"\xfe\xff"):  # a spreadsheet's "Unicode text"
        enc, why_enc = "utf-16", "a UTF-16 byte-order mark"
        raw = raw[: len(raw) // 2 * 2]
    else:
        try:
            raw.decode("utf-8")
            enc, why_enc = "utf-8", "the first 64 KiB decode as UTF-8"
        except UnicodeDecodeError as e:
            if e.start > len(raw) - 4:  # a multi-byte character cut at the sample's end
                enc, why_enc = "utf-8", "the first 64 KiB decode as UTF-8"
            else:
                enc, why_enc = "latin-1", f"not UTF-8 (byte {raw[e.start:e.start + 1]!r} at offset {e.start})"
    text = raw.decode(enc, errors="ignore")
    physical = text.splitlines()[:200]
    at = [i for i, ln in enumerate(physical) if ln.strip()]  # the physical line of each non-blank one
    lines = [physical[i] for i in at]
    if len(lines) > 1 and len(raw) == 1 << 16:
        lines = lines[:-1]  # the last line may be cut
    if not lines:
        raise PpdpError(f"{p.name} is empty")
    sep, why_sep = _guess_sep(lines)
    skip, why_skip = 0, ""
    if why_sep.startswith("no separator"):  # a title above the header? the lines below it agree
        for k in range(1, min(10, len(lines) - 2)):
            s2, w2 = _guess_sep(lines[k:])
            if not w2.startswith("no separator"):
                sep, why_sep, skip = s2, w2 + f" below line {at[k]}", at[k]
                why_skip = f"the first {at[k]} line(s) are no table ({physical[0].strip()[:40]!r} …)"
                lines = lines[k:]
                break
    raw_rows = [_split(ln, sep) for ln in lines]
    rows = [[f.strip() for f in r] for r in raw_rows]
    header, why_header = _guess_header(rows)
    names = [r.strip() for r in rows[0]] if header else [f"col{i + 1}" for i in range(len(rows[0]))]
    na = [m for m in _NA_CANDIDATES if any(m in r for r in rows[1 if header else 0:])]
    opts = FileOptions(sep=sep, header=header, names=None if header else tuple(names), encoding=enc,
                       na=tuple(na), strip=sep == ", ", missing="category" if na else "error", skip=skip)
    df = read_frame(p, opts)
    reasons = {"sep": why_sep, "header": why_header, "encoding": why_enc, "skip": why_skip}
    # spaces around values anywhere in the file (not only in the sampled lines)
    strip = sep == ", " or any(_padded(df[c]) for c in df.columns)
    thousands, why_thousands = _guess_thousands(df, na, sep)
    decimal, why_decimal = None, ""
    if thousands is None:
        decimal, thousands, why_decimal = _guess_decimal(df, na)
    codes, why_codes = _guess_codes(df, na)
    markers, na = na, na + codes
    opts = dataclasses.replace(opts, na=tuple(na), strip=strip, thousands=thousands, decimal=decimal or ".",
                               missing="category" if na else "error")
    if strip or thousands or codes or opts.decimal != ".":
        df = read_frame(p, opts)
    cased = _case_variants(df, na)
    if cased:
        opts = dataclasses.replace(opts, lowercase=True)
        df = read_frame(p, opts)
    _write_schema(p, out, df, opts, reasons, markers, codes, why_codes, why_thousands or why_decimal, cased)


def _infer_parquet(p: Path, out) -> None:
    """A Parquet file: its columns and types are the file's own (nothing to sniff)."""
    from ..schema import FileOptions, read_frame

    df = read_frame(p, FileOptions(na=()))
    missing = bool(df.isna().to_numpy().any())
    opts = FileOptions(na=(), missing="category" if missing else "error")
    reasons = {"sep": "a Parquet file: read with pyarrow, sep, header and encoding do not apply",
               "header": "the file's own column names", "encoding": "not used for Parquet"}
    _write_schema(p, out, df, opts, reasons, [], [], "", "", {})


def _write_schema(p: Path, out, df, opts, reasons: dict, markers: list, codes: list, why_codes: str,
                  why_thousands: str, cased: dict) -> None:
    from ..schema import load_schema, looks_numeric

    sep, header, enc, na, strip, thousands = opts.sep, opts.header, opts.encoding, list(opts.na), opts.strip, opts.thousands
    why_sep, why_header, why_enc = reasons["sep"], reasons["header"], reasons["encoding"]
    names = list(opts.names or [])
    n = len(df)
    cols = []
    for c in df.columns:
        s = df[c]
        present = s[~s.isin(list(na)) & s.notna() & (s != "")]
        k = int(present.nunique())
        numeric = looks_numeric(s, na)
        cols.append((str(c), numeric, k, present, int(len(s) - len(present))))
    text_cols = [c for c in cols if not c[1]]
    dates = {c[0]: _date_range(c[3]) for c in text_cols}
    sa = next((c[0] for c in reversed(text_cols) if 2 <= c[2] <= _DOMAIN_MAX and not _IDENTIFIER_NAME.search(c[0])
               and not dates[c[0]]), None)
    if any(c[4] for c in cols) and opts.missing == "error":  # empty cells: missing without a marker
        opts = dataclasses.replace(opts, missing="category")
    out_lines = [
        f"# Schema for {p.name}, written by `ppdp schema infer` from its {n} rows. Review every guess:",
        "# roles above all (quasi = what an adversary may know, sensitive = what to protect, drop = not published).",
        "",
        "[file]",
    ]
    if opts.skip:
        out_lines.append(f"skip = {opts.skip}   # guessed: {reasons.get('skip', '')}")
    out_lines += [
        f"sep = {_toml(sep)}" + f"   # guessed: {why_sep}",
        f"header = {'true' if header else 'false'}" + f"   # guessed: {why_header}",
    ]
    if not header:
        out_lines.append(f"names = {_toml(names)}   # the file has no names: rename these")
    out_lines += [
        f"encoding = {_toml(enc)}   # guessed: {why_enc}",
        f"na = {_toml(na)}   # " + "; ".join(
            ([f"guessed: these markers occur in the file ({', '.join(markers)})"] if markers else [])
            + ([f"guessed: {why_codes}"] if codes else [])
            or ["no missing-value marker seen (an empty cell is always missing)"]),
        f"strip = {'true' if strip else 'false'}   # " + ("spaces around values seen" if strip else "no spaces around values"),
    ]
    if opts.decimal != ".":
        out_lines.append(f"decimal = {_toml(opts.decimal)}   # guessed: {why_thousands}")
    if thousands:
        out_lines.append(f"thousands = {_toml(thousands)}   # guessed: "
                         + ("the decimal mark's companion" if opts.decimal != "." else why_thousands))
    if cased:
        ex = "; ".join(f"{c}: {' / '.join(map(repr, v))}" for c, v in list(cased.items())[:3])
        out_lines.append(f"lowercase = true   # guessed: labels differing only in case ({ex}): one label each; "
                         "set false if case matters")
    out_lines += [
        f"missing = {_toml(opts.missing)}   # " + ("missing values kept as the category \"(missing)\"" if opts.missing == "category" else
                                                   "a missing value is an error"),
        "",
    ]
    for name, numeric, k, present, n_missing in cols:
        out_lines.append(f"[columns.{_key(name)}]")
        miss = f", {n_missing} missing" if n_missing else ""
        if numeric:
            vals = present.astype(float)
            lo, hi = float(vals.min()), float(vals.max())
            role, why = "quasi", "numeric, binned below" if k > 20 else "numeric, few values: used value by value"
            if k > 0.5 * n and k > 100:
                whole = bool((vals % 1 == 0).all())
                role, why = "drop", ("nearly every value distinct: an identifier or a weight?" if whole else
                                     "nearly every value distinct, fractional: an exact amount or a weight (nothing an "
                                     "adversary knows to the unit); to publish it, give it a role and bins")
            elif weight_like(name, k, n):
                role, why = "drop", (f"weight-like ({k} distinct values"
                                     + (", a weight's name" if _WEIGHT_NAME.search(name) else "")
                                     + "): a survey weight or an exact amount is nothing an adversary knows about a "
                                       "person; to publish it anyway, set role = \"quasi\" and bins")
            out_lines.append(f"role = {_toml(role)}   # guessed: {why}")
            out_lines.append(f"type = \"numeric\"   # every value is a number ({k} distinct, {lo:g} … {hi:g}{miss})")
            if role == "quasi" and k > 20:
                w, a, b = _nice_bins(lo, hi)
                out_lines.append(f"bins = {{ width = {w:g}, min = {a:g}, max = {b:g} }}   # about 10 equal bins over "
                                 "the data's range: replace min/max by public bounds for a DP release")
        else:
            if name == sa:
                role, why = "sensitive", f"the last text column with few values ({k})"
            elif _IDENTIFIER_NAME.search(name):
                role, why = "drop", (f"a direct identifier by its name ({k} distinct values): a name, address, "
                                     "phone or e-mail is never published")
            elif dates[name]:
                role, why = "drop", (f"dates ({dates[name]}, {k} distinct): read as text, one label per day; publish "
                                     "a coarser column derived from it (year, month, week) as a quasi-identifier")
            elif k > _DOMAIN_MAX and (k > 0.2 * n or k > 1000):
                role, why = "drop", f"{k} distinct values: an identifier?"
            else:
                role, why = "quasi", f"text, {k} distinct values"
            out_lines.append(f"role = {_toml(role)}   # guessed: {why}{miss}")
            if k <= _DOMAIN_MAX and role != "drop":
                dom = sorted(present.astype(str).unique())
                out_lines.append(f"domain = {_toml(dom)}   # the values seen; a public domain lists every possible one")
        out_lines.append("")
    result = "\n".join(out_lines)
    if out:
        Path(out).write_text(result, encoding="utf-8")
        load_schema(out)  # what we wrote reads back
        click.echo(f"wrote {out}: sep {sep!r}, header {header}, encoding {enc}, na {na}; "
                   f"{sum(1 for ln in out_lines if ln.startswith('[columns.'))} columns — review the roles")
    else:
        click.echo(result)


#: column names of sampling weights (wgt, weight, wt, pwt, perwt, fnlwgt, wt_final …)
_WEIGHT_NAME = re.compile(r"(?i)(wgt|weight|(^|[^a-z])p?(er)?wt(\d|[^a-z]|$))")


def weight_like(name: str, k: int, n: int) -> bool:
    """A numeric column with many distinct values — more than 1,000, or more than a fifth of
    the rows (and over 100) — or over 100 under a weight's name: a survey weight, or an amount
    so fine that no adversary knows it to the unit."""
    return k > 100 and (k > 1000 or k > 0.2 * n or bool(_WEIGHT_NAME.search(name)))


def _toml(v) -> str:
    return json.dumps(v, ensure_ascii=False)


def _key(name: str) -> str:
    import re

    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name, ensure_ascii=False)


def _split(line: str, sep: str) -> list[str]:
    """The fields of one line, a separator inside double quotes kept in its field (as the
    reader does: "1,018.52" is one field of a ','-separated line)."""
    return next(csv.reader([line], delimiter=sep[0], skipinitialspace=sep == ", "), [])


def _guess_sep(lines: list[str]) -> tuple[str, str]:
    """The separator splitting every sampled line into the same number (> 1) of fields
    (fields in double quotes may hold it)."""
    for sep in _SEPS:
        counts = {len(_split(ln, sep)) for ln in lines}
        if len(counts) == 1 and counts.pop() > 1:
            if sep == ", " and any(ln.count(",") != ln.count(", ") for ln in lines):
                continue
            quoted = any('"' in ln for ln in lines)
            return sep, f"every sampled line has the same number of {sep!r}" + (" outside quotes" if quoted else "")
    return ",", "no separator splits every line evenly; check it"


def _padded(s) -> bool:
    """Some value of a text column has spaces around it."""
    v = s.dropna().astype(str)
    return bool((v != v.str.strip()).any())


def _guess_thousands(df, na: list[str], sep: str) -> tuple[str | None, str]:
    """A thousands separator when some column holds only numbers, some of them grouped
    ("1,018.52" beside "354.94")."""
    from ..schema import THOUSANDS, thousands_pattern, ungroup_thousands

    for t in THOUSANDS:
        if t == ".":  # "1.234" is more often a decimal than a grouped thousand
            continue
        pat = thousands_pattern(t)
        cols = [c for c in df.columns if df[c].astype(str).str.contains(t, regex=False).any()
                and _uniques(df[c]).str.fullmatch(pat.pattern).any()]
        if not cols:
            continue
        fixed = ungroup_thousands(df[cols], t, na)
        got = [c for c in cols if not fixed[c].equals(df[c])]
        if got:
            ex = next(v for v in _uniques(df[got[0]]) if pat.fullmatch(v))
            return t, f"numbers written with {t!r} between thousands in {', '.join(got)} (e.g. {ex!r})"
    return None, ""


#: column names of direct identifiers: a person's name, address, phone, e-mail, social security number
_IDENTIFIER_NAME = re.compile(
    r"(?i)(^((fake|patient|person|client|customer|member|first|last|given|family|full|middle|maiden|sur|fore|user)"
    r"[ _-]?)+name$|^name$|e-?mail|phone|^ssn$|social.?security|street|^address)")
_DATE = re.compile(r"(\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{4})([ T]\d{1,2}:\d{2}(:\d{2})?)?")


def _uniques(s):
    """The distinct present values of a column, as text (a Series)."""
    import pandas as pd

    return pd.Series(pd.unique(s.dropna().astype(str)), dtype=object)


def _date_range(present) -> str:
    """'first … last' when every present value of a text column is a date (2020-03-04,
    4/3/2020, with or without a time), else ''."""
    v = _uniques(present)
    if not len(v) or not v.str.fullmatch(_DATE.pattern).all():
        return ""
    return f"{min(v)} … {max(v)}"


def _case_variants(df, na: list[str]) -> dict[str, list[str]]:
    """Text columns holding labels that differ only in case ('WHITE', 'white'): per column,
    one such group of spellings."""
    out = {}
    for c in df.columns:
        v = df[c].dropna().astype(str)
        v = v[~v.isin(["", *na])]
        u = v.unique()
        if len(u) < 2 or len(u) > 1000 or all(_is_num(x) for x in u[:50]):
            continue
        groups: dict[str, list[str]] = {}
        for x in u:
            groups.setdefault(x.lower(), []).append(x)
        multi = [sorted(g) for g in groups.values() if len(g) > 1]
        if multi:
            out[str(c)] = multi[0]
    return out


def _guess_decimal(df, na: list[str]) -> tuple[str | None, str | None, str]:
    """A decimal comma ("12,5"; with "." between thousands, "1.234,5") when some text column
    holds only such numbers and one of them at least has a fraction that is no group of three
    digits (so that "1,234" alone stays a thousand)."""
    from ..schema import normalize_numbers

    frac = re.compile(r"[+-]?\d+(?:[. ]\d{3})*,(\d+)")
    best: tuple[str | None, list] = (None, [])
    for t in (None, ".", " "):  # the thousands separator that makes the most columns numbers
        fixed = normalize_numbers(df, t, ",", na)
        got = [c for c in df.columns if not fixed[c].equals(df[c])]
        if len(got) > len(best[1]):
            best = (t, got)
    t, got = best
    decided = any(m is not None and len(m.group(1)) != 3 for c in got for m in map(frac.fullmatch, df[c].dropna().astype(str)))
    if not got or not decided:
        return None, None, ""
    ex = next(v for v in df[got[0]].dropna().astype(str) if "," in v)
    return ",", t, (f"numbers written with a decimal comma in {', '.join(got[:5])}" + (" …" if len(got) > 5 else "")
                    + f" (e.g. {ex!r})" + (f", {t!r} between thousands" if t else ""))


#: numbers that surveys use as missing-value codes
_CODES = ("999", "9999", "99999", "-9", "-99", "-999", "-9999", "-1", "-8", "-88", "-888")


def _guess_codes(df, na: list[str]) -> tuple[list[str], str]:
    """Missing-value codes written as numbers (999, -9 …): a code that, in some numeric
    column, lies far outside the column's other values (above twice their largest, or negative
    below values that are never negative)."""
    import numpy as np
    import pandas as pd

    found: dict[str, list[str]] = {}
    for c in df.columns:
        if pd.api.types.is_bool_dtype(df[c].dtype):
            continue
        s = _uniques(df[c])  # the distinct values: a code is one of them
        s = s[~s.isin(["", *na])]
        nums = pd.to_numeric(s, errors="coerce")
        if not len(s) or nums.isna().any():
            continue
        for code in _CODES:
            hit = (s == code).to_numpy()
            if not hit.any() or hit.all():
                continue
            rest = nums.to_numpy(float)[~hit]
            v = float(code)
            far = v > 2 * max(np.max(rest), 1.0) if v > 0 else (np.min(rest) >= 0 and np.unique(rest).size > 1)
            if far:
                found.setdefault(code, []).append(str(c))
    # a negative code only when it also marks a second column: -1 alone is too often a value
    codes = [k for k, cs in found.items() if float(k) > 0 or len(cs) > 1]
    why = "; ".join(f"{k} looks like a missing-value code in {', '.join(found[k][:5])}"
                    + (" …" if len(found[k]) > 5 else "") + " (far outside the other values)" for k in codes)
    return codes, why


def _is_num(x: str) -> bool:
    try:
        return math.isfinite(float(x))
    except ValueError:
        return False


def _guess_header(rows: list[list[str]]) -> tuple[bool, str]:
    if len(rows) < 2:
        return True, "a single line"
    first, rest = rows[0], rows[1:]
    for j, v in enumerate(first):
        col = [r[j] for r in rest if j < len(r) and r[j]]
        if not _is_num(v) and col and all(_is_num(x) for x in col):
            return True, f"field {j + 1} of the first row ({v!r}) is text above numbers"
    if any(_is_num(v) for v in first):
        return False, "the first row holds numbers"
    seen = [any(r[j] == v for r in rest if j < len(r)) for j, v in enumerate(first)]
    if not any(seen):
        return True, "no value of the first row recurs below it"
    return False, "values of the first row recur in the data"


def _nice_bins(lo: float, hi: float) -> tuple[float, float, float]:
    span = max(hi - lo, 1e-9)
    raw = span / 10
    mag = 10 ** math.floor(math.log10(raw))
    w = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    a = math.floor(lo / w) * w
    b = max(math.ceil(hi / w) * w, a + w)
    return w, a, b
