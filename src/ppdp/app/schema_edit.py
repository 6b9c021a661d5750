"""A schema file (TOML, docs/schema.md) as the rows of the page's editable table, and back.

Reading keeps the comments ``ppdp schema infer`` writes beside each guess (its reasons); writing
produces a schema file that :func:`ppdp.schema.load_schema` then checks — the app never judges a
schema itself."""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

from ..errors import PpdpError

#: the per-column keys the page edits, in the table's order
COLUMN_FIELDS = ("role", "type", "bins", "domain", "missing", "sensitive_values")
FILE_FIELDS = ("sep", "header", "encoding", "na", "strip", "missing", "names", "thousands", "decimal", "lowercase", "skip")
_SECTION = re.compile(r"^\s*\[(.+?)\]\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\"-]+)\s*=.*?(?:#\s*(.*))?$")


def _toml_value(v: Any) -> str:
    """A TOML literal of a JSON-like value (strings as basic strings: JSON's escapes are TOML's)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise PpdpError(f"cannot write {v!r} in a schema file")


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name, ensure_ascii=False)


def _comments(text: str) -> dict[tuple[str, str], str]:
    """(section, key) → the comment written after the key's value (``ppdp schema infer``'s reason)."""
    out: dict[tuple[str, str], str] = {}
    section = ""
    for ln in text.splitlines():
        m = _SECTION.match(ln)
        if m:
            section = m.group(1).strip()
            continue
        m = _KEY.match(ln)
        if m and m.group(2):
            out[(section, m.group(1).strip('"'))] = m.group(2).strip()
    return out


def to_rows(text: str) -> dict[str, Any]:
    """The schema file's text → ``{"file": {...}, "columns": [{name, role, type, bins, domain,
    missing, sensitive_values (TOML text of each value, '' when absent), reasons}]}``."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PpdpError(f"--schema: not a TOML file ({e})") from None
    notes = _comments(text)
    cols = []
    for name, spec in (doc.get("columns") or {}).items():
        section = f"columns.{_key(name)}"
        row: dict[str, Any] = {"name": name}
        for f in COLUMN_FIELDS:
            v = spec.get(f)
            row[f] = "" if v is None else (v if f in ("role", "type", "missing") and isinstance(v, str) else _toml_value(v))
        row["reasons"] = [f"{f}: {notes[(section, f)]}" for f in COLUMN_FIELDS if (section, f) in notes]
        cols.append(row)
    fdoc = doc.get("file") or {}
    file = {f: _toml_value(fdoc[f]) for f in FILE_FIELDS if f in fdoc}
    file_notes = {f: notes[("file", f)] for f in FILE_FIELDS if ("file", f) in notes}
    head = [ln[1:].strip() for ln in text.splitlines()[:3] if ln.startswith("#")]
    return {"file": file, "file_notes": file_notes, "columns": cols, "header": head}


def _parse(value: str, where: str) -> Any:
    try:
        return tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        raise PpdpError(f"{where}: {value!r} is not a TOML value (a list is written [\"a\", \"b\"], "
                        "bins [0, 10, 20] or { width = 10, min = 0, max = 100 })") from None


def from_rows(data: dict[str, Any]) -> str:
    """The page's table → the text of a schema file. A field left empty is left out."""
    lines = ["# Schema written by `ppdp app` (docs/schema.md).", "", "[file]"]
    for f, v in (data.get("file") or {}).items():
        if f not in FILE_FIELDS:
            raise PpdpError(f"file.{f} is not a key of a schema file's [file] table")
        if str(v).strip():
            lines.append(f"{f} = {_toml_value(_parse(str(v), f'file.{f}'))}")
    lines.append("")
    for row in data.get("columns") or []:
        name = str(row.get("name", ""))
        if not name:
            raise PpdpError("a column without a name")
        lines.append(f"[columns.{_key(name)}]")
        for f in COLUMN_FIELDS:
            v = str(row.get(f) or "").strip()
            if not v:
                continue
            val = v if f in ("role", "type", "missing") else _parse(v, f"columns.{name}.{f}")
            lines.append(f"{f} = {_toml_value(val)}")
        lines.append("")
    return "\n".join(lines)
