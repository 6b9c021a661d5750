"""The custodian-side file: what only the data custodian keeps, beside a release, never in it.

``Release.save(dir)`` writes ``<dir>.custodian.json``: a small JSON object (the seed of a
seeded test run, the negative associations learned for the fakes …). The one large entry —
which published ST values are fakes (σ per bucket; 22.6 M at 10^8 rows with σ = 1) — goes to
a Parquet sidecar beside it, referenced from the JSON::

    "fake": {"file": "<dir>.custodian.fake-<sha256[:16]>.parquet", "rows": R,
             "bytes": B, "sha256": "<hex>"}

The sidecar holds two columns, ``bid`` (the published bucket id, int32 when every id fits,
else int64; delta-encoded, the ids ascend) and ``value`` (the SA label, dictionary-encoded
with int16 indices), one row per fake, written a block of rows at a time (a Parquet row group
of up to 2^20 rows each). The JSON stays small
(bounded as the manifest is, :data:`~ppdp.releases.storage.MAX_JSON_BYTES`) whatever the size
of the release.

Every release with fakes uses the sidecar, small or large: one format, so the path that 10^8
rows take is the path every test takes. The older form, the fakes inline in the JSON
(``"fake": {"bid": [...], "value": [...]}``), is still read.

Reading (:func:`load_custodian`) is bounded and strict: the sidecar is named by a plain file
name in the JSON's directory, opened without following a symlink, its size and SHA-256 must be
the JSON's (a changed, truncated or swapped sidecar is one :class:`ReleaseError` saying so),
its footer is at most :data:`~ppdp.releases.base.MAX_FOOTER_BYTES`, its row count is the
JSON's, its columns exactly ``bid`` (integer) and ``value`` (labels). The file's SHA-256 is
read through the same descriptor that is then decoded.

Writing (:func:`save_custodian`) is atomic: the sidecar is written to a temporary sibling,
synced, hashed and moved to its content-addressed name; then the JSON is written as before (a
synced temporary file, then ``link`` — never replaces — or, with ``replace``, ``rename``).
Replacing a custodian file therefore never leaves the JSON pointing at another sidecar: the
new sidecar has its own name, and the old one is removed only after the new JSON is in place.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Protocol, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import ReleaseError
from .storage import json_default, open_parquet, open_regular, os_reason, read_json, temp_path, write_custodian

FAKE_KEY = "fake"
#: rows of the sidecar per Parquet row group (and per block written or decoded)
SIDECAR_BLOCK = 1 << 20
#: largest number of rows read from a sidecar
MAX_SIDECAR_ROWS = 2_000_000_000
#: largest sidecar footer read (bytes)
MAX_SIDECAR_FOOTER = 64 * 2**20
_HASH_CHUNK = 1 << 20
_SIDECAR_NAME = re.compile(r"^[^/\\\x00]+\.fake-[0-9a-f]{16}\.parquet$")


class FakeSource(Protocol):
    """What the sidecar writer needs of a list of fakes: the SA labels, an exclusive upper bound
    on the bucket ids, and the fakes a block at a time as (bucket ids, SA codes)."""

    @property
    def labels(self) -> Sequence[str]: ...

    def bid_bound(self) -> int: ...

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]: ...


@dataclass(eq=False)
class FakeList:
    """The fake SA values of a bucketized release: published bucket id (``bid``, int64) and SA
    code (``code``, an index into ``labels``) of each, one entry per fake."""

    bid: np.ndarray
    code: np.ndarray
    labels: tuple[str, ...]

    def __post_init__(self):
        self.bid = np.asarray(self.bid, dtype=np.int64)
        self.code = np.asarray(self.code)
        if not np.issubdtype(self.code.dtype, np.integer):
            raise ReleaseError("the fakes' SA codes are not integers")
        self.labels = tuple(str(x) for x in self.labels)
        if self.bid.ndim != 1 or self.code.shape != self.bid.shape:
            raise ReleaseError("the fakes' bucket ids and values differ in length")
        if len(self.code) and (int(self.code.min()) < 0 or int(self.code.max()) >= len(self.labels)):
            raise ReleaseError("the fakes' SA codes lie outside their labels")

    def __len__(self) -> int:
        return len(self.bid)

    def values(self) -> list[str]:
        """The SA label of every fake (a Python list: for small lists and tests)."""
        return [self.labels[c] for c in self.code.tolist()]

    def to_json(self) -> dict[str, list]:
        """The inline form ``{"bid": [...], "value": [...]}`` (older custodian files)."""
        return {"bid": self.bid.tolist(), "value": self.values()}

    def codes_in(self, domain: Sequence[str], column: str = "the SA") -> np.ndarray:
        """Every fake's code in ``domain`` (int32); a label outside it is a ReleaseError."""
        index = {str(x): i for i, x in enumerate(domain)}
        missing = [lab for lab in self.labels if lab not in index]
        lookup = np.array([index.get(lab, -1) for lab in self.labels], dtype=np.int32)
        codes = lookup[self.code] if len(self.code) else np.zeros(0, dtype=np.int32)
        if missing and (codes < 0).any():
            raise ReleaseError(f"the custodian file names fake values outside {column}'s domain, e.g. "
                               f"{sorted(set(self.labels[c] for c in self.code[codes < 0][:3].tolist()))}")
        return codes

    def digest(self) -> str:
        """A SHA-256 of the list (for caches keyed by what the custodian file says)."""
        h = hashlib.sha256()
        h.update(json.dumps(self.labels).encode())
        h.update(np.ascontiguousarray(self.bid).tobytes())
        h.update(np.ascontiguousarray(self.code, dtype=np.int64).tobytes())
        return h.hexdigest()

    def __eq__(self, other) -> bool:
        if not isinstance(other, FakeList):
            return NotImplemented
        return (np.array_equal(self.bid, other.bid)
                and np.array_equal(np.asarray(self.labels, dtype=object)[self.code] if len(self) else [],
                                   np.asarray(other.labels, dtype=object)[other.code] if len(other) else []))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FakeList({len(self):,} fakes, {len(self.labels)} labels)"

    # the FakeSource protocol
    def bid_bound(self) -> int:
        return int(self.bid.max()) + 1 if len(self.bid) else 0

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for a in range(0, len(self.bid), SIDECAR_BLOCK):
            yield self.bid[a:a + SIDECAR_BLOCK], self.code[a:a + SIDECAR_BLOCK]


def fake_list(spec: Any, where: str = "the custodian file") -> FakeList:
    """A :class:`FakeList` from a custodian entry: a FakeList, or the inline JSON form
    ``{"bid": [...], "value": [...]}`` (older custodian files); ReleaseError otherwise."""
    if isinstance(spec, FakeList):
        return spec
    if not isinstance(spec, Mapping) or not isinstance(spec.get("bid"), (list, np.ndarray)) \
            or not isinstance(spec.get("value"), (list, np.ndarray)) or len(spec["bid"]) != len(spec["value"]):
        raise ReleaseError(f"{where}'s 'fake' entry must be {{'bid': [...], 'value': [...]}} of equal lengths, or a "
                           "reference to its Parquet sidecar")
    bids = spec["bid"]
    if any(isinstance(b, bool) or not isinstance(b, (int, np.integer)) for b in bids):
        raise ReleaseError(f"{where}'s fake bucket ids are not integers")
    try:
        bid = np.asarray(bids, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise ReleaseError(f"{where}'s fake bucket ids are not integers") from None
    if not len(bid):
        return FakeList(bid, np.zeros(0, dtype=np.int32), ())
    labels, code = np.unique(np.asarray([str(v) for v in spec["value"]], dtype=str), return_inverse=True)
    return FakeList(bid, np.asarray(code, dtype=np.int32), tuple(str(x) for x in labels.tolist()))


# ------------------------------------------------------------------------------ writing
def sidecar_schema(bid_bound: int) -> pa.Schema:
    bid_type = pa.int32() if bid_bound <= 2**31 else pa.int64()
    return pa.schema([pa.field("bid", bid_type, nullable=False),
                      pa.field("value", pa.dictionary(pa.int16(), pa.string()), nullable=False)])


def _sidecar_name(path: Path, digest: str) -> str:
    stem = path.name[:-5] if path.name.endswith(".json") else path.name
    return f"{stem}.fake-{digest[:16]}.parquet"


def _file_digest(fd: int) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        chunk = os.read(fd, _HASH_CHUNK)
        if not chunk:
            break
        h.update(chunk)
        size += len(chunk)
    return h.hexdigest(), size


def write_sidecar(tmp: Path, fakes: FakeSource) -> int:
    """Write the fakes to the Parquet file ``tmp`` (created exclusively, a block of rows per
    row group, synced); returns its rows."""
    labels = pa.array([str(x) for x in fakes.labels], pa.string())
    if len(labels) > 2**15:
        raise ReleaseError("more than 32,768 SA labels: the custodian sidecar's value column holds int16 indices")
    schema = sidecar_schema(fakes.bid_bound())
    bid_np = np.int32 if schema.field("bid").type == pa.int32() else np.int64
    rows = 0
    pending: list[tuple[np.ndarray, np.ndarray]] = []
    held = 0

    def flush(w) -> None:  # one row group of the blocks held (small blocks are gathered first)
        nonlocal held
        if not pending:
            return
        bid = np.concatenate([b for b, _ in pending]).astype(bid_np, copy=False)
        code = np.concatenate([c for _, c in pending]).astype(np.int16, copy=False)
        pending.clear()
        held = 0
        w.write_table(pa.table({"bid": pa.array(bid), "value": pa.DictionaryArray.from_arrays(pa.array(code), labels)},
                               schema=schema), row_group_size=max(len(bid), 1))

    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    with os.fdopen(fd, "wb") as f:
        # bucket ids ascend (σ per bucket): delta-encoded they take well under a byte each
        with pq.ParquetWriter(f, schema, compression="zstd", use_dictionary=["value"],
                              column_encoding={"bid": "DELTA_BINARY_PACKED"}) as w:
            for bid, code in fakes.blocks():
                if len(bid) != len(code):
                    raise ReleaseError("the fakes' bucket ids and values differ in length")
                if not len(bid):
                    continue
                pending.append((np.asarray(bid), np.asarray(code)))
                held += len(bid)
                rows += len(bid)
                if held >= SIDECAR_BLOCK:
                    flush(w)
            flush(w)
        f.flush()
        os.fsync(f.fileno())
    return rows


def save_custodian(path: str | os.PathLike, custodian: Mapping[str, Any], replace: bool = False,
                   fakes: FakeSource | None = None) -> None:
    """Write the custodian file ``path`` (and its Parquet sidecar when there are fakes:
    ``custodian["fake"]`` or ``fakes``, a :class:`FakeSource` written a block at a time),
    atomically (see the module docs). ``replace``: an existing custodian file is replaced
    (its old sidecar removed after the new JSON is in place); otherwise it must not exist."""
    path = Path(path)
    entries = dict(custodian)
    source: FakeSource | None = fakes
    if source is None and entries.get(FAKE_KEY) is not None:
        source = fake_list(entries[FAKE_KEY], "the custodian entry")
    entries.pop(FAKE_KEY, None)
    old_sidecar = _referenced_sidecar(path) if replace else None
    made: Path | None = None
    try:
        if source is not None:
            tmp = temp_path(path)
            try:
                rows = write_sidecar(tmp, source)
                fd = open_regular(tmp, "custodian sidecar")
                try:
                    digest, size = _file_digest(fd)
                finally:
                    os.close(fd)
                final = path.with_name(_sidecar_name(path, digest))
                existed = os.path.lexists(final)
                os.replace(tmp, final)  # a content-addressed name: an existing one holds these very bytes
                if not existed:  # removed again if the JSON cannot be written; a sidecar that was there stays
                    made = final
            finally:
                if os.path.lexists(tmp):
                    os.unlink(tmp)
            entries[FAKE_KEY] = {"file": final.name, "rows": rows, "bytes": size, "sha256": digest}
        text = json.dumps(entries, indent=2, default=json_default, allow_nan=False) + "\n"
        write_custodian(path, text, replace=replace)
    except OSError as e:
        if made is not None and made != old_sidecar and os.path.lexists(made):
            os.unlink(made)
        raise ReleaseError(f"cannot write the custodian file {str(path)!r}: {os_reason(e)}") from None
    except BaseException:
        if made is not None and made != old_sidecar and os.path.lexists(made):
            os.unlink(made)
        raise
    if old_sidecar is not None and old_sidecar.name != entries.get(FAKE_KEY, {}).get("file"):
        try:
            os.unlink(old_sidecar)
        except OSError:
            pass


def _referenced_sidecar(path: Path) -> Path | None:
    """The sidecar an existing custodian file at ``path`` names (None if none, or unreadable)."""
    if not os.path.lexists(path):
        return None
    try:
        data = read_json(path, "custodian file")
    except ReleaseError:
        return None
    ref = data.get(FAKE_KEY) if isinstance(data, dict) else None
    name = ref.get("file") if isinstance(ref, dict) else None
    if isinstance(name, str) and _SIDECAR_NAME.match(name) and not name.startswith("."):
        p = path.with_name(name)
        return p if os.path.isfile(p) and not os.path.islink(p) else None
    return None


# ------------------------------------------------------------------------------ reading
def load_custodian(path: str | os.PathLike) -> dict[str, Any]:
    """Read a custodian-side file written by :meth:`Release.save` (bounded, strict JSON); its
    fakes (a sidecar reference, or the older inline lists) become a :class:`FakeList`. Any
    problem is one :class:`ReleaseError` naming the file."""
    path = Path(path)
    data = read_json(path, "custodian file")
    if not isinstance(data, dict):
        raise ReleaseError(f"{str(path)!r}: a custodian file holds a JSON object")
    spec = data.get(FAKE_KEY)
    if spec is None:
        return data
    if isinstance(spec, dict) and "file" in spec:
        data[FAKE_KEY] = read_sidecar(path, spec)
    else:
        data[FAKE_KEY] = fake_list(spec, f"{str(path)!r}: the custodian file")
    return data


def _int_field(ref: Mapping, key: str, where: str, top: int) -> int:
    v = ref.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= top:
        raise ReleaseError(f"{where}: the fakes' sidecar reference needs '{key}' as an integer in 0..{top:,}")
    return v


def read_sidecar(path: Path, ref: Mapping[str, Any]) -> FakeList:
    """The fakes of the sidecar that the custodian file ``path`` references with ``ref``
    (``{"file", "rows", "bytes", "sha256"}``), read within bounds (see the module docs)."""
    where = repr(str(path))
    if set(ref) != {"file", "rows", "bytes", "sha256"}:
        raise ReleaseError(f"{where}: the fakes' sidecar reference must hold exactly 'file', 'rows', 'bytes' and "
                           f"'sha256', it holds {sorted(ref)}")
    name, digest = ref["file"], ref["sha256"]
    if not isinstance(name, str) or name.startswith(".") or not _SIDECAR_NAME.match(name):
        raise ReleaseError(f"{where}: the fakes' sidecar {name!r} is not a plain '<name>.fake-<hash>.parquet' "
                           "file name beside the custodian file")
    if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ReleaseError(f"{where}: the fakes' sidecar reference's 'sha256' is not 64 lower-case hex digits")
    rows = _int_field(ref, "rows", where, MAX_SIDECAR_ROWS)
    size = _int_field(ref, "bytes", where, 2**62)
    side = path.with_name(name)
    fd = open_regular(side, "custodian file's sidecar")
    with os.fdopen(fd, "rb") as f:
        actual = os.fstat(f.fileno()).st_size
        if actual != size:
            raise ReleaseError(f"{str(side)!r}: the custodian file's sidecar has {actual:,} bytes, the custodian file "
                               f"states {size:,} (truncated, changed, or another release's)")
        got, _ = _file_digest(f.fileno())
        if got != digest:
            raise ReleaseError(f"{str(side)!r}: the custodian file's sidecar does not have the SHA-256 the custodian "
                               "file states (changed, or another release's)")
        f.seek(0)
        return _decode_sidecar(f, side, rows, size)


def _decode_sidecar(f, side: Path, rows: int, size: int) -> FakeList:
    what = f"{str(side)!r}: the custodian file's sidecar"
    pf = open_parquet(f, size, f"{str(side)!r} (the custodian file's sidecar)", MAX_SIDECAR_FOOTER)
    md, schema = pf.metadata, pf.schema_arrow
    if int(md.num_rows) != rows:
        raise ReleaseError(f"{what} has {int(md.num_rows):,} rows, the custodian file states {rows:,}")
    if schema.names != ["bid", "value"]:
        raise ReleaseError(f"{what} has columns {schema.names}, not ['bid', 'value']")
    vt = schema.field("value").type
    if not pa.types.is_integer(schema.field("bid").type) or not (
            pa.types.is_dictionary(vt) and pa.types.is_integer(vt.index_type)
            and (pa.types.is_string(vt.value_type) or pa.types.is_large_string(vt.value_type))):
        raise ReleaseError(f"{what} has column types {schema.types}, not an integer 'bid' and a dictionary of labels")
    unc = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
    if unc > 16 * 2**20 + 64 * max(rows, 1):
        raise ReleaseError(f"{what} decodes to {unc:,} bytes for {rows:,} rows; not decoded")
    bid = np.empty(rows, dtype=np.int64)
    code = np.empty(rows, dtype=np.int32)
    index: dict[str, int] = {}
    pos = 0
    try:
        for i in range(md.num_row_groups):
            t = pf.read_row_group(i)
            if pos + t.num_rows > rows:
                raise ReleaseError(f"{what} holds more rows than its footer states")
            for chunk in t.column("bid").chunks:
                if chunk.null_count:
                    raise ReleaseError(f"{what} has missing bucket ids")
                bid[pos:pos + len(chunk)] = chunk.to_numpy()
                pos += len(chunk)
            vpos = pos - t.num_rows
            for chunk in t.column("value").chunks:
                if chunk.null_count or chunk.dictionary.null_count:
                    raise ReleaseError(f"{what} has missing values")
                labels = chunk.dictionary.to_pylist()
                lookup = np.array([index.setdefault(str(lab), len(index)) for lab in labels], dtype=np.int32)
                idx = chunk.indices.to_numpy()
                if len(idx) and int(idx.min()) < 0:
                    raise ReleaseError(f"{what} has negative dictionary indices")
                code[vpos:vpos + len(idx)] = lookup[idx] if len(lookup) else idx
                vpos += len(idx)
    except (OSError, pa.ArrowException, ValueError, IndexError) as e:
        raise ReleaseError(f"{what} is unreadable Parquet ({e})") from None
    if pos != rows:
        raise ReleaseError(f"{what} has {pos:,} rows, the custodian file states {rows:,}")
    labels_out = tuple(sorted(index, key=index.__getitem__))
    narrow = np.int16 if len(labels_out) <= 2**15 else np.int32
    return FakeList(bid, code.astype(narrow), labels_out)

