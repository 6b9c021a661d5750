"""Narrow in-memory types for the columns of a loaded release: dictionary indices in the
narrowest signed type of their dictionary, 64-bit integers in int32 when the values fit."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

#: rows decoded at a time when a release file is read (each batch is narrowed before the next).
#: Small enough that a batch's wide buffers (32-bit indices: 4 MiB a column) stay few pages:
#: Arrow's pool keeps or purges them apart from the heap NumPy allocates from next, and on a
#: virtual machine first-touched memory costs about 1.5 s of system time per GiB (5,000 SDR
#: queries on a 10^7-row release: 4.4–4.8 CPU-s with batches of 2^22 rows, 4.1 with 2^20)
READ_BATCH_ROWS = 1 << 20


def index_type(n_labels: int) -> pa.DataType:
    """The narrowest signed Arrow index type for a dictionary of ``n_labels`` entries."""
    return pa.int8() if n_labels <= 127 else pa.int16() if n_labels <= 32767 else pa.int32()


def narrow_chunk(arr: pa.Array) -> pa.Array:
    """One decoded chunk in a narrower type holding the same values: dictionary indices in
    :func:`index_type` of its dictionary, 64-bit integers in int32 when they fit (never below
    32 bits: code that multiplies ids or counts keeps its headroom)."""
    t = arr.type
    if pa.types.is_dictionary(t):
        want = index_type(len(arr.dictionary))
        return arr if t.index_type == want or t.index_type.bit_width < want.bit_width else \
            arr.cast(pa.dictionary(want, t.value_type, t.ordered))
    if pa.types.is_integer(t) and t.bit_width == 64 and len(arr):
        mm = pc.min_max(arr)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if lo is not None and -(2 ** 31) <= lo and hi < 2 ** 31:
            return arr.cast(pa.int32())
    return arr


def unify_chunks(chunks: list[pa.Array]) -> pa.ChunkedArray:
    """The narrowed chunks of one column in one type (the widest any chunk needs)."""
    types = {c.type for c in chunks}
    if len(types) > 1:
        if all(pa.types.is_dictionary(t) for t in types):
            wide = max((t.index_type for t in types), key=lambda x: x.bit_width)
            chunks = [c if c.type.index_type == wide else c.cast(pa.dictionary(wide, c.type.value_type, c.type.ordered))
                      for c in chunks]
        else:
            wide = max(types, key=lambda x: getattr(x, "bit_width", 0))
            chunks = [c if c.type == wide else c.cast(wide) for c in chunks]
    return pa.chunked_array(chunks)


def read_narrow(pf: pq.ParquetFile, columns: list[str], batch_rows: int = READ_BATCH_ROWS) -> pa.Table:
    """``pf.read(columns)`` decoded a batch at a time, each batch narrowed (:func:`narrow_chunk`)
    before the next is decoded: the peak is the narrow table plus one batch, not the file's
    columns in their stored widths (32-bit dictionary indices, 64-bit ids and counts)."""
    schema = pf.schema_arrow
    cols: dict[str, list[pa.Array]] = {c: [] for c in columns}
    for batch in pf.iter_batches(batch_size=batch_rows, columns=columns, use_threads=False):
        for c in columns:
            cols[c].append(narrow_chunk(batch.column(c)))
    if not pf.metadata.num_rows or not all(cols.values()):
        return pf.read(columns=columns)
    return pa.table({c: unify_chunks(cols[c]) for c in columns},
                    metadata=schema.metadata)


__all__ = ["READ_BATCH_ROWS", "index_type", "narrow_chunk", "read_narrow", "unify_chunks"]
