"""Partitioned releases: a ``ppdp-release/1`` directory whose large file is a directory of
Parquet parts instead of one file (SPEC §5, written by the Spark and streaming engines).

Layout: ``manifest.json`` and ``README.md`` as usual; a large table ``STEM`` is the directory
``STEM/`` holding ``part-*.parquet`` files (any number, any order); the manifest's table of
contents marks it ``{"rows": N, "partitioned": true}``. Small tables stay single files. The
loader (:func:`ppdp.releases.base.load_release`) reads such a directory with
:func:`read_partitioned`: only regular ``part-*.parquet`` files are read (anything else in the
directory is reported, never read), the footers' row counts are summed and checked against
the manifest before any data page is decoded, and every labelled column is decoded straight
to dictionary codes over the published domain (a label outside it is a
:class:`~ppdp.errors.ReleaseError`), so a loaded partitioned release is the same Arrow tables
as a single-file one and every family's ``verify`` and estimators apply unchanged.

:func:`iter_partitioned` streams the parts batch by batch (bounded memory) for the streaming
verify and queries of :mod:`ppdp.engines.stream`; :func:`finish_partitioned` writes the
manifest and README beside parts written by an engine and moves the directory into place.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import ReleaseError
from .narrow import index_type, narrow_chunk, unify_chunks
from .readme import README_NAME, render_readme
from .storage import fsync_path, json_default, os_reason, publish_directory

#: name pattern of a part file
PART_PREFIX = "part-"
PART_SUFFIX = ".parquet"


def part_files(directory: Path, problems: list[str] | None = None) -> list[Path]:
    """The regular ``part-*.parquet`` files of a partitioned table, sorted by name; anything
    else (a symlink, a sub-directory, another file) is recorded in ``problems``."""
    out = []
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as err:
        raise ReleaseError(f"{str(directory)!r}: cannot list the partitioned table: {os_reason(err)}") from None
    for ent in entries:
        ok = ent.name.startswith(PART_PREFIX) and ent.name.endswith(PART_SUFFIX)
        if ok and not ent.is_symlink() and ent.is_file(follow_symlinks=False):
            out.append(Path(ent.path))
        elif problems is not None:
            problems.append(f"{directory.name}/{ent.name} is not a part file of the release (not read)")
    return out


def encode_labels(values: pa.Array | pa.ChunkedArray, domain: Sequence[str], column: str) -> pa.DictionaryArray:
    """Labels → a dictionary array over ``domain`` (codes in the narrowest signed index type,
    :func:`~ppdp.releases.base.index_type`; vectorised); a label outside the domain (or a null)
    is a :class:`ReleaseError`."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    dom = pa.array([str(x) for x in domain], pa.string())
    if pa.types.is_dictionary(arr.type):
        inner = pc.index_in(arr.dictionary.cast(pa.string()), value_set=dom)
        if inner.null_count:
            bad = pc.filter(arr.dictionary, pc.is_null(inner)).to_pylist()[:3]
            raise ReleaseError(f"column {column!r} holds labels outside its published domain, e.g. {bad}")
        lut = inner.to_numpy(zero_copy_only=False).astype(np.int32)
        if arr.null_count:
            raise ReleaseError(f"column {column!r} holds missing values")
        codes = lut[arr.indices.to_numpy(zero_copy_only=False)]
    else:
        idx = pc.index_in(arr.cast(pa.string()), value_set=dom)
        if idx.null_count:
            bad = pc.filter(arr, pc.is_null(idx)).to_pylist()[:3]
            raise ReleaseError(f"column {column!r} holds labels outside its published domain, e.g. {bad}")
        codes = idx.to_numpy(zero_copy_only=False).astype(np.int32)
    it = index_type(len(dom))
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(it.to_pandas_dtype(), copy=False), it), dom)


def _checked_parts(directory: Path, stated_rows: int, max_rows: int, problems: list[str]) -> list[Path]:
    parts = part_files(directory, problems)
    rows = 0
    for p in parts:
        try:
            rows += int(pq.ParquetFile(p).metadata.num_rows)
        except (OSError, pa.ArrowException, ValueError) as e:
            raise ReleaseError(f"{p}: unreadable Parquet ({e})") from None
    if rows > stated_rows or rows > max_rows:
        raise ReleaseError(f"{directory}: {rows:,} rows in {len(parts)} parts, the manifest states {stated_rows:,}; not decoded")
    if rows < stated_rows:
        problems.append(f"{directory.name}/ has {rows:,} rows, the manifest's table of contents states {stated_rows:,}")
    return parts


def read_partitioned(directory: Path, stated_rows: int, required: list[str], optional: list[str],
                     domains: Mapping[str, Sequence[str]], max_rows: int, problems: list[str]) -> pa.Table:
    """One Arrow table from the parts of ``directory`` (labelled columns as dictionary arrays
    over their published domain; other columns as stored)."""
    parts = _checked_parts(directory, stated_rows, max_rows, problems)
    cols: dict[str, list] = {}
    names: list[str] | None = None
    for p in parts:
        pf = pq.ParquetFile(p)
        have = list(pf.schema_arrow.names)
        extra = [c for c in have if c not in required and c not in optional]
        if extra:
            problems.append(f"{directory.name}/{p.name} holds column(s) {extra} that the format does not define (not read)")
        wanted = [c for c in have if c not in extra]
        if names is None:
            names = wanted
        elif wanted != names:
            raise ReleaseError(f"{p}: columns {wanted} differ from the other parts' {names}")
        t = pf.read(columns=wanted)
        for c in wanted:
            col = t.column(c)
            cols.setdefault(c, []).append(encode_labels(col, domains[c], c) if c in domains else narrow_chunk(col.combine_chunks()))
    if names is None:  # no part: an empty table of the required columns
        return pa.table({c: pa.array([], pa.string()) for c in required})
    out = {}
    for c in names:
        chunks = cols[c]
        out[c] = unify_chunks(chunks) if chunks else pa.chunked_array([], pa.string())
    return pa.table(out)


def iter_partitioned(directory: str | os.PathLike, columns: Sequence[str] | None = None,
                     batch_rows: int = 1 << 20) -> Iterator[pa.RecordBatch]:
    """Stream the parts of a partitioned table batch by batch (bounded memory)."""
    for p in part_files(Path(directory)):
        pf = pq.ParquetFile(p)
        yield from pf.iter_batches(batch_size=batch_rows, columns=list(columns) if columns is not None else None)


def finish_partitioned(tmp: Path, target: Path, manifest: Mapping[str, Any], rows: Mapping[str, int],
                       small: Mapping[str, pa.Table] | None = None, overwrite: bool = False,
                       written: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Complete a release whose large tables an engine wrote as ``tmp/STEM/part-*.parquet``:
    write the small tables (``written``: single files ``tmp/STEM.parquet`` the engine wrote
    itself, streamed, with their rows), the manifest (table of contents marking the partitioned tables) and
    the README into ``tmp``, then move ``tmp`` onto ``target`` (no-replace unless ``overwrite``,
    see :func:`ppdp.releases.storage.publish_directory`). Returns the manifest as written."""
    m = dict(manifest)
    files: dict[str, dict] = {stem: {"rows": int(n), "partitioned": True} for stem, n in rows.items()}
    for stem, t in (small or {}).items():
        pq.write_table(t, tmp / f"{stem}.parquet", compression="zstd")
        fsync_path(tmp / f"{stem}.parquet")
        files[stem] = {"rows": int(t.num_rows)}
    for stem, n in (written or {}).items():
        fsync_path(tmp / f"{stem}.parquet")
        files[stem] = {"rows": int(n)}
    m["files"] = files
    for stem in rows:  # engine by-products (success markers, checksums) are not part of the format
        for e in os.scandir(tmp / stem):
            if not (e.name.startswith(PART_PREFIX) and e.name.endswith(PART_SUFFIX)):
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path)
                else:
                    os.unlink(e.path)
    text = json.dumps(m, indent=2, allow_nan=False, default=json_default) + "\n"
    (tmp / "manifest.json").write_text(text, encoding="utf-8")
    (tmp / README_NAME).write_text(render_readme(json.loads(text)), encoding="utf-8")
    fsync_path(tmp)
    publish_directory(tmp, Path(target), replace=overwrite)
    return m



__all__ = ["encode_labels", "finish_partitioned", "iter_partitioned", "part_files", "read_partitioned"]
