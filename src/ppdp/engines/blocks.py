"""Stages over spill blocks, shared by the Spark engine (:mod:`ppdp.engines.spark`) and the
streaming engine (:mod:`ppdp.engines.stream`).

A publication that needs every row placed by a global rule (bucketization: a rank of every row
within its SA value) reads the input once and scatters its rows, as narrow integer codes, to B
blocks chosen uniformly at random (Arrow IPC spill files beside the release); the driver makes
the plan from the counts per block; then one task per block applies it and writes parts. A
*task* runs on Spark's executors (``mapInArrow`` over a frame of task ids) or, with no Spark
session, in this process one after the other (:func:`run_tasks`): the streaming engine is the
same stages without a cluster. The Spark engine's module documentation describes the stages,
their randomness and what the driver holds (counts, plans, O(types) layouts — never an array
of one entry per row or per bucket).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..claims import disclosure_of, state_disclosure
from ..errors import PpdpError, SchemaError
from ..kernels.permutation import EXPLICIT_MAX, KeyedPermutation
from ..mechanisms.bucketization.apply import (draw_plan_fakes, published_schema, st_range_typed, st_table_typed,
                                                 streamed_disclosure)
from ..mechanisms.bucketization.plan import BucketizationPlan, SACounts
from ..provenance import VERSION
from ..releases.base import recorded_bins, stamp_manifest
from ..releases.bucketized import BucketizedRelease, bucket_statistics, types_disclosure
from ..releases.custodian import save_custodian
from ..releases.partitioned import finish_partitioned
from ..releases.storage import custodian_path, temp_path
from ..table import Table

# ----------------------------------------------------------------------------- schema
@dataclass(frozen=True)
class DatasetSchema:
    """Column roles, ordered domains and numeric values of a dataset, as ``ppdp.Table`` has them."""

    quasi: tuple[str, ...]
    sensitive: tuple[str, ...]
    domains: Mapping[str, tuple[str, ...]]
    numeric: Mapping[str, list | None]

    def table(self) -> Table:
        """An empty Table with these columns, roles and domains (schema only)."""
        cols = [*self.quasi, *self.sensitive]
        return Table({c: np.zeros(0, dtype=np.int32) for c in cols}, {c: list(self.domains[c]) for c in cols},
                     list(self.quasi), list(self.sensitive),
                     numeric={c: (None if self.numeric.get(c) is None else np.asarray(self.numeric[c], float)) for c in cols})

    def manifest_schema(self) -> dict:
        cols = [*self.quasi, *self.sensitive]
        return {"quasi": list(self.quasi), "sensitive": list(self.sensitive),
                "domains": {c: list(self.domains[c]) for c in cols},
                "numeric": {c: _floats(self.numeric.get(c)) for c in cols}}


def _floats(values) -> list[float] | None:
    return None if values is None else [float(x) for x in values]


def label_codes(arr: pa.Array | pa.ChunkedArray, domain: Sequence[str], column: str) -> np.ndarray:
    """Codes (int64) of a column chunk in its ordered domain (vectorised; dictionary columns
    are mapped through their dictionary)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    dom = pa.array(list(domain), pa.string())
    if pa.types.is_dictionary(arr.type):
        lut = pc.index_in(_as_label(arr.dictionary), value_set=dom)
        if lut.null_count:
            raise SchemaError(f"column {column!r} holds values outside its domain")
        return lut.to_numpy(zero_copy_only=False).astype(np.int64)[arr.indices.to_numpy(zero_copy_only=False)]
    idx = pc.index_in(_as_label(arr), value_set=dom)
    if idx.null_count:
        bad = pc.filter(arr, pc.is_null(idx)).to_pylist()[:3]
        raise SchemaError(f"column {column!r} holds values outside its domain, e.g. {bad}")
    return idx.to_numpy(zero_copy_only=False).astype(np.int64)


def _as_label(arr: pa.Array) -> pa.Array:
    if pa.types.is_floating(arr.type):
        vals = arr.to_numpy(zero_copy_only=False)
        return pa.array([str(int(v)) if float(v).is_integer() else repr(float(v)) for v in vals], pa.string())
    return arr.cast(pa.string())


class FileScan:
    """The row groups of a Parquet dataset, split into read units (consecutive row groups of
    one file, about ``unit_rows`` rows each): one Spark task per unit reads them with pyarrow."""

    def __init__(self, units: list[tuple[str, list[int]]], n_rows: int):
        self.units, self.n_rows = units, n_rows

    @classmethod
    def of(cls, path, unit_rows: int = 2_000_000) -> "FileScan":
        import pyarrow.dataset as pads

        units: list[tuple[str, list[int]]] = []
        n = 0
        for frag in pads.dataset(str(path), format="parquet").get_fragments():
            md = frag.metadata
            cur: list[int] = []
            rows = 0
            for g in range(md.num_row_groups):
                k = md.row_group(g).num_rows
                if cur and rows + k > unit_rows:
                    units.append((frag.path, cur))
                    cur, rows = [], 0
                cur.append(g)
                rows += k
                n += k
            if cur:
                units.append((frag.path, cur))
        return cls(units, n)

    def batches(self, unit: int, columns: Sequence[str], batch_rows: int = 200_000):
        import pyarrow.parquet as pq

        path, groups = self.units[unit]
        f = pq.ParquetFile(path)
        yield from f.iter_batches(batch_size=batch_rows, row_groups=groups, columns=list(columns))


def frame_rows(frame) -> int:
    """Rows of a FileScan (footers) or a frame (``count()``: no column read for a file scan)."""
    return frame.n_rows if isinstance(frame, FileScan) else int(frame.count())


def file_scan(sdf, direct: bool | None) -> "FileScan | None":
    """The :class:`FileScan` of a frame straight from :func:`read_dataset`, else None."""
    if direct is False:
        return None
    return getattr(sdf, "_ppdp_scan", None) if "_ppdp_scan" in getattr(sdf, "__dict__", {}) else None


def _long_fields(names: Sequence[str]):
    """The Spark schema of a task's output: int64 columns ``names``."""
    from pyspark.sql import types as T

    return T.StructType([T.StructField(x, T.LongType(), False) for x in names])


def run_tasks(spark, n: int, fn, names: Sequence[str]) -> list:
    """``fn`` — a generator from record batches of task ids (column ``id``) to record batches
    of int64 columns ``names`` — on the ids 0 … n − 1: on Spark's executors, one task per id;
    or, with ``spark`` None (the streaming engine), in this process, one id after the other.
    Returns the rows it yields (indexable)."""
    if spark is None:
        ids = pa.record_batch([pa.array(np.arange(n, dtype=np.int64))], names=["id"])
        rows: list = []
        for b in fn(iter([ids])):
            rows.extend(zip(*(b.column(i).to_pylist() for i in range(b.num_columns))))
        return rows
    return per_block_frame(spark, n).mapInArrow(fn, _long_fields(names)).collect()


def run_units(frame_or_scan, fn, names: Sequence[str], spark=None):
    """``fn(unit_id, batches)`` (a generator of record batches) on every input partition of a
    frame (``mapInArrow``) or every read unit of a :class:`FileScan` (one task per unit, on
    Spark's executors or, ``spark`` None, in this process: :func:`run_tasks`); returns the
    collected rows."""
    if isinstance(frame_or_scan, FileScan):
        scan = frame_or_scan

        def per_unit(batches):
            for b in batches:
                for u in b.column("id").to_numpy().tolist():
                    yield from fn(u, None)

        return run_tasks(spark, len(scan.units), per_unit, names)
    return frame_or_scan.mapInArrow(lambda batches: fn(_partition_id(), batches), _long_fields(names)).collect()


# -------------------------------------------------------------------------- randomness
class PartitionStreams:
    """Per-(stage, partition) generators derived from the publication's generator."""

    def __init__(self, seed: int | None, rng: np.random.Generator):
        self.seed = seed
        self.key = None if seed is not None else int(rng.integers(0, 2**63, dtype=np.int64)) << 64 | int(
            rng.integers(0, 2**63, dtype=np.int64))

    def get(self, stage: int, part: int) -> np.random.Generator:
        if self.seed is not None:
            return np.random.default_rng(np.random.SeedSequence([int(self.seed), stage, part]))
        from randomgen import AESCounter

        return np.random.Generator(AESCounter(key=self.key, counter=(stage << 100) | (part << 64)))


def _partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return int(ctx.partitionId()) if ctx is not None else 0


def per_block_frame(spark, B: int):
    """A frame of B rows ``id`` = 0..B-1, one per partition: one task per block."""
    return spark.range(0, B, 1, numPartitions=B)


def spill_schema(cols: Sequence[str], doms: Mapping[str, Sequence[str]]) -> pa.Schema:
    return pa.schema([pa.field(c, pa.int16() if len(doms[c]) < 2**15 else pa.int32()) for c in cols])


def scatter_blocks(frame, cols: Sequence[str], doms: Mapping[str, Sequence[str]], count_cols: Sequence[str], B: int,
             spill: Path, streams: PartitionStreams, stage: int = 5, spark=None) -> list[np.ndarray]:
    """Read the input once on the executors (a frame's partitions with ``mapInArrow``, or a
    :class:`FileScan`'s units with pyarrow): code every column over its
    domain and send every row to one of ``B`` blocks chosen uniformly at random (independently
    of the row), as narrow integer codes in ``spill/BBBBB/PPPPP.arrow`` (one Arrow IPC file per
    block and input partition, written under a temporary name and renamed: a retried task
    rewrites all of its files). Returns, per column of ``count_cols``, the (B × |domain|) rows
    of each value in each block — the only thing the driver receives. ``spark`` None: the
    tasks run in this process (:func:`run_tasks`; the streaming engine)."""
    schema = spill_schema(cols, doms)
    widths = {c: schema.field(c).type.to_pandas_dtype() for c in cols}
    for blk in range(B):
        (spill / f"{blk:05d}").mkdir(parents=True, exist_ok=True)

    scan = frame if isinstance(frame, FileScan) else None  # (the closure must not hold a DataFrame)

    def scatter(p, batches):
        import pyarrow.ipc as ipc

        if batches is None:
            batches = scan.batches(p, cols)
        prng = streams.get(stage, p)
        names = [(spill / f"{blk:05d}" / f".{p:05d}-{os.getpid()}.tmp", spill / f"{blk:05d}" / f"{p:05d}.arrow")
                 for blk in range(B)]
        writers = [ipc.new_file(str(t), schema) for t, _ in names]
        acc = [np.zeros((B, len(doms[c])), dtype=np.int64) for c in count_cols]
        try:
            for b in batches:
                k = b.num_rows
                if not k:
                    continue
                codes = {c: arrow_codes(b.column(c), doms[c], c).astype(widths[c]) for c in cols}
                dest = prng.integers(0, B, size=k)
                for i, c in enumerate(count_cols):
                    m_c = len(doms[c])
                    acc[i] += np.bincount(dest * m_c + codes[c], minlength=B * m_c).reshape(B, m_c)
                order = stable_order(dest, B)
                bounds = np.searchsorted(dest[order], np.arange(B + 1))
                whole = pa.RecordBatch.from_arrays([pa.array(codes[c][order]) for c in cols], schema=schema)
                for blk in range(B):
                    if bounds[blk + 1] > bounds[blk]:
                        writers[blk].write_batch(whole.slice(int(bounds[blk]), int(bounds[blk + 1] - bounds[blk])))
        finally:
            for w in writers:
                w.close()
        for t, final in names:
            os.replace(t, final)
        rows = [np.stack([np.full(a.size, i), np.repeat(np.arange(B), a.shape[1]), np.tile(np.arange(a.shape[1]), B),
                          a.ravel()], axis=1) for i, a in enumerate(acc)]
        arr = np.concatenate(rows).astype(np.int64)
        arr = arr[arr[:, 3] > 0]
        yield pa.RecordBatch.from_arrays([pa.array(arr[:, j]) for j in range(4)], ["c", "b", "v", "n"])

    out = [np.zeros((B, len(doms[c])), dtype=np.int64) for c in count_cols]
    for i, blk, v, k in run_units(frame, scatter, ("c", "b", "v", "n"), spark):
        out[i][blk, v] += k
    return out


def stable_order(key: np.ndarray, bound: int) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` for integer keys in [0, bound), as least-significant-first
    radix passes over 16-bit digits (NumPy's stable sort of 16-bit integers is a radix sort; of
    wider ones a merge sort): the same order, O(rows) per digit."""
    key = np.asarray(key)
    if bound <= 1 << 16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    order = np.argsort((key & 0xFFFF).astype(np.uint16), kind="stable")
    shift = 16
    while bound > 1 << shift:
        order = order[np.argsort(((key[order] >> shift) & 0xFFFF).astype(np.uint16), kind="stable")]
        shift += 16
    return order


def arrow_codes(arr: pa.Array, domain: Sequence[str], column: str) -> np.ndarray:
    """Codes of a column chunk over its domain: text is dictionary-encoded first (one hash per
    row), then the few distinct labels are looked up (:func:`ppdp.engines.stream.label_codes`)."""
    import pyarrow.compute as pc

    if arr.null_count:
        raise SchemaError(f"column {column!r} has missing values; recode them first")
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        arr = pc.dictionary_encode(arr)
    return label_codes(arr, domain, column)


def read_block(spill: Path, blk: int, cols: Sequence[str]) -> tuple[dict[str, np.ndarray], int]:
    """The codes of every row scattered to block ``blk`` (input partitions in order)."""
    import pyarrow.ipc as ipc

    parts = sorted((spill / f"{blk:05d}").glob("*.arrow"))
    tables = []
    for f in parts:
        with pa.memory_map(str(f)) as src:
            tables.append(ipc.open_file(src).read_all())
    if not tables:
        return {c: np.zeros(0, dtype=np.int64) for c in cols}, 0
    t = pa.concat_tables(tables)
    codes = {c: t.column(c).to_numpy() for c in cols}
    return codes, t.num_rows


def parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """Parquet encodings of a part: dictionary pages for the label columns and ``count`` (few
    distinct values), none for ``bid`` (about one distinct value in three rows: the dictionary
    would fill and fall back to plain pages after the work of building it), whose values,
    sorted, are delta-encoded."""
    names = schema.names
    return {"compression": "zstd", "use_dictionary": [c for c in names if c != "bid"],
            **({"column_encoding": {"bid": "DELTA_BINARY_PACKED"}} if "bid" in names else {})}


def write_part(directory: Path, pid: int, table: pa.Table) -> None:
    """Write one part file from an executor: a temporary name, then an atomic rename (a
    retried task replaces its part; a failed attempt leaves no ``part-*`` file)."""
    import pyarrow.parquet as pq

    part = directory / f"part-{pid:05d}.parquet"
    partial = directory / f".part-{pid:05d}-{os.getpid()}.tmp"
    pq.write_table(table, partial, **parquet_options(table.schema))
    os.replace(partial, part)


#: wall seconds of the phases of the last publication in this process (for benchmarks)
LAST_PHASES: dict[str, float] = {}


class PhaseClock:
    def __init__(self):
        import time

        self.time = time.perf_counter
        self.t = self.time()
        LAST_PHASES.clear()

    def lap(self, phase: str) -> None:
        t = self.time()
        LAST_PHASES[phase] = LAST_PHASES.get(phase, 0.0) + t - self.t
        self.t = t


def finish_release(rel, mechanism, seed, tmp: Path, target: Path, rows, small, overwrite: bool,
            allow_full_disclosure: bool = False, written: Mapping[str, int] | None = None) -> dict:
    """Disclosure (re-derivable by verify), the shared manifest fields, bins, then the files
    (``written``: single-file tables already in ``tmp``, see :func:`finish_partitioned`)."""
    state_disclosure(rel, allow_full_disclosure)
    bins = recorded_bins(rel.domains)
    if bins:  # as ppdp.publish records them
        rel.manifest["schema"]["bins"] = bins
    stamp_manifest(rel, mechanism.name, mechanism.get_params(), seed, VERSION)
    m = finish_partitioned(tmp, target, rel.manifest, rows, small, overwrite=overwrite, written=written)
    if isinstance(rel, PlanQITRelease) and rel.layout.plan.fake_values:
        save_custodian(custodian_path(target), rel.custodian, replace=overwrite, fakes=_FakeRanges(rel.layout))
    elif rel.custodian:
        save_custodian(custodian_path(target), rel.custodian, replace=overwrite)
    return m


def bucketize(sdf, schema: DatasetSchema, out, seed: int | None, rng: np.random.Generator, plan_for, *,
               out_partitions: int | None = None, overwrite: bool = False, mechanism=None,
               allow_full_disclosure: bool = False, part_rows: int = 4_000_000, direct: bool | None = None,
               scan: "FileScan | None" = None) -> dict:
    """Bucketization in three executor stages and no JVM shuffle. (A) :func:`scatter_blocks`: one
    read of the input, every row to a uniformly random block, the SA counts per block back to
    the driver, which makes (or checks) the plan. (B) one task per block: the block's rows of
    each value in a uniformly random order take consecutive ranks after the ranks of the
    earlier blocks' rows of that value — a uniformly random rank of every row within its value
    (the blocks are a uniformly random split) — and the rank maps to a bucket through the
    typed plan; every row then goes to the output part of its bucket id's range (part j: the
    ids j·n_buckets/P … (j + 1)·n_buckets/P − 1, spill files again; the ids being a keyed random
    permutation of the planner's buckets, the parts hold about as many rows each).
    (C) one task per part: its rows ordered by bucket id (random order inside a bucket),
    written as ``qit/part-NNNNN.parquet`` — the QIT, parts in order, is ordered by bucket id as
    the in-memory engine writes it (a reader finds each bucket's rows as one run). (D) one task per group of ranges of buckets: the ST
    (:func:`_write_st`). The driver then states the disclosure and writes the manifest and the
    custodian file, a range of buckets at a time (:class:`TypedLayout`).

    ``sdf`` None and a :class:`FileScan` ``scan``: the streaming engine — the same stages, each
    task run in this process one after the other (:func:`run_tasks`), no Spark."""
    sa = schema.sensitive[0]
    quasi = list(schema.quasi)
    cols = [*quasi, sa]
    doms = {c: list(schema.domains[c]) for c in cols}
    streams = PartitionStreams(seed, rng)
    target = Path(out)
    if os.path.lexists(target) and not overwrite:
        raise PpdpError(f"{str(target)!r} exists; choose a new directory or pass overwrite=True")
    tmp = temp_path(target)
    qit_dir, spill, spill2 = tmp / "qit", tmp / "_spill", tmp / "_spill2"
    qit_dir.mkdir(parents=True)
    spark = sdf.sparkSession if sdf is not None else None
    local = spark is None  # the streaming engine: the tasks run here, once each
    clock = PhaseClock()
    fake_dir: Path | None = None
    try:
        if scan is None:
            scan = file_scan(sdf, direct)
        frame = scan if scan is not None else sdf.select(*cols)
        B = out_partitions or max(2, -(-frame_rows(frame) // part_rows))
        counts_b = scatter_blocks(frame, cols, doms, [sa], B, spill, streams, stage=8, spark=spark)[0]
        clock.lap("read, code and scatter (statistics)")
        plan = plan_for(SACounts(sa, tuple(doms[sa]), counts_b.sum(axis=0)))
        if not isinstance(plan, BucketizationPlan):
            raise PpdpError(f"the Spark engine applies a BucketizationPlan; got {type(plan).__name__}")
        if plan.negative_associations or ((plan.details or {}).get("negative_association_learning") or {}).get("enabled"):
            raise PpdpError("negative associations for fake values (given or learned) are not supported on the Spark engine")
        if tuple(doms[sa]) != tuple(plan.labels):
            raise SchemaError(f"the plan's SA labels differ from the domain of {sa!r}")
        clock.lap("plan")
        # the typed plan (bucket types × multiplicity; never the n_buckets × m matrix): the rows of
        # value i, in rank order, fill the (value, type) segments in planner order, as the local
        # engine's assign_typed does; a segment covers mult_k·types[k, i] consecutive positions
        types = np.asarray(plan.types, dtype=np.int64)
        mult = np.asarray(plan.multiplicity, dtype=np.int64)
        K, m = types.shape
        first_bucket = np.cumsum(mult) - mult
        seg_len = (types * mult[:, None]).T.ravel()          # value-major
        seg_start = np.cumsum(seg_len) - seg_len
        live = np.flatnonzero(seg_len)
        s_start, s_type, s_value = seg_start[live], live % K, live // K
        s_per, s_first = types[s_type, s_value], first_bucket[s_type]
        value_start = seg_start[np.arange(m) * K]            # position of value i's rank 0
        value_count = (types * mult[:, None]).sum(axis=0)
        if not np.array_equal(counts_b.sum(axis=0), value_count):
            raise PpdpError("the data's SA counts differ from the records the plan places (plan and data disagree)")
        block_start = value_start[None, :] + np.cumsum(counts_b, axis=0) - counts_b   # (B × m) first position
        cert = typed_certificate(plan)  # the bucket statistics from the types and their multiplicities
        # published bucket id = a keyed pseudorandom permutation of the planner's bucket index, which
        # every task evaluates from the key (no array of one entry per bucket anywhere)
        layout = TypedLayout(plan, streams)
        n_out = B
        for j in range(n_out):
            (spill2 / f"{j:05d}").mkdir(parents=True, exist_ok=True)
        qschema = pa.schema([*spill_schema(quasi, doms), pa.field("bid", pa.int64())])

        def to_buckets(batches):  # block → ranks → buckets → the output part of each bucket id's range
            import pyarrow.ipc as ipc

            for b in batches:
                for blk in b.column("id").to_numpy().tolist():
                    codes, k = read_block(spill, blk, cols)
                    prng = streams.get(9, blk)
                    x = codes[sa]
                    idx = prng.permutation(k)
                    idx = idx[stable_order(x[idx], m)]               # by value, random order within
                    xs = x[idx].astype(np.int64)
                    n_v = np.bincount(xs, minlength=m)
                    pos = block_start[blk, xs] + np.arange(k) - (np.cumsum(n_v) - n_v)[xs]  # rank within the value
                    seg = np.searchsorted(s_start, pos, side="right") - 1
                    bid = layout.relabel.forward(s_first[seg] + (pos - s_start[seg]) // s_per[seg])
                    dest = bid * n_out // max(layout.n_buckets, 1)
                    order = stable_order(dest, n_out)
                    bounds = np.searchsorted(dest[order], np.arange(n_out + 1))
                    rows = idx[order]
                    whole = pa.RecordBatch.from_arrays([*(pa.array(codes[c][rows]) for c in quasi),
                                                        pa.array(bid[order], pa.int64())], schema=qschema)
                    for j in range(n_out):
                        tmpf = spill2 / f"{j:05d}" / f".{blk:05d}-{os.getpid()}.tmp"
                        with ipc.new_file(str(tmpf), qschema) as w:
                            if bounds[j + 1] > bounds[j]:
                                w.write_batch(whole.slice(int(bounds[j]), int(bounds[j + 1] - bounds[j])))
                        os.replace(tmpf, spill2 / f"{j:05d}" / f"{blk:05d}.arrow")
                    if local:  # no task is retried in this process: a block read is freed at once (disk)
                        shutil.rmtree(spill / f"{blk:05d}", ignore_errors=True)
                    yield pa.RecordBatch.from_arrays([pa.array([blk], pa.int64()), pa.array([k], pa.int64())], ["p", "n"])

        def write_qit_part(batches):  # one output part: rows grouped by bucket id, random order inside
            for b in batches:
                for j in b.column("id").to_numpy().tolist():
                    got, k = read_block(spill2, j, [*quasi, "bid"])
                    if k:
                        prng = streams.get(10, j)
                        order = prng.permutation(k)
                        order = order[stable_order(got["bid"][order], layout.n_buckets)]
                        arrays = [pa.DictionaryArray.from_arrays(pa.array(got[c][order].astype(np.int32)),
                                                                 pa.array(doms[c], pa.string())) for c in quasi]
                        arrays.append(pa.array(got["bid"][order], pa.int64()))
                        write_part(qit_dir, j, pa.Table.from_arrays(arrays, names=[*quasi, "bid"]))
                    if local:
                        shutil.rmtree(spill2 / f"{j:05d}", ignore_errors=True)
                    yield pa.RecordBatch.from_arrays([pa.array([j], pa.int64()), pa.array([k], pa.int64())], ["p", "n"])

        run_tasks(spark, B, to_buckets, ("p", "n"))
        shutil.rmtree(spill, ignore_errors=True)
        clock.lap("rank and bucket")
        written = run_tasks(spark, n_out, write_qit_part, ("p", "n"))
        shutil.rmtree(spill2, ignore_errors=True)
        if sum(int(r[1]) for r in written) != plan.n_records:
            raise PpdpError(f"the executors wrote {sum(int(r[1]) for r in written):,} QIT rows, the plan places {plan.n_records:,}")
        clock.lap("write")
        if plan.fake_values:  # beside the release (not in it): removed once the custodian file is written
            fake_dir = temp_path(target, "fakes")
            fake_dir.mkdir()
        n_st = _write_st(spark, layout, tmp / "st", fake_dir)
        clock.lap("ST")
        numeric = {c: (None if schema.numeric.get(c) is None else np.asarray(schema.numeric[c], float)) for c in cols}
        # the disclosure is computed once: here for a plan applied alone, else by finish_release (state_disclosure)
        rel = plan_release(layout, cert, quasi, doms, numeric, disclose=mechanism is None,
                            engine="spark" if sdf is not None else "stream")
        rows = {"qit": plan.n_records, "st": n_st}
        if mechanism is None:  # the plan applied alone: the caller stamps mechanism and seed
            return finish_partitioned(tmp, target, rel.manifest, rows, overwrite=overwrite)
        m = finish_release(rel, mechanism, seed, tmp, target, rows, None, overwrite, allow_full_disclosure=allow_full_disclosure)
        clock.lap("disclosure, manifest and custodian file")
        return m
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if fake_dir is not None:
            shutil.rmtree(fake_dir, ignore_errors=True)


#: ST cells (buckets × SA values) per range of buckets written, and streamed for the disclosure, at a time
ST_RANGE_CELLS = 1 << 22


#: ST cells written by one executor task (consecutive ranges, one part file, one row group per range)
ST_TASK_CELLS = 1 << 24


#: at most this many ST parts (five-digit part names sort in range order)
MAX_ST_PARTS = 99_999


#: the stage of the ST ranges' generators (:class:`PartitionStreams`)
ST_STAGE = 11


#: the stage of the bucket relabelling's key (:class:`~ppdp.kernels.permutation.KeyedPermutation`)
PERM_STAGE = 12


#: up to this many buckets the relabelling is drawn exactly (a Feistel network above)
RELABEL_EXPLICIT_MAX = EXPLICIT_MAX


class _RevealedTotals:
    """What the fakes' draw reads of a plan's claim (the SA totals its thresholds reveal, −1 where
    they do not: :func:`~ppdp.releases.bucketized.revealed_absent`), computed on the driver."""

    def __init__(self, totals: np.ndarray):
        self.totals = totals

    def revealed_totals(self, labels: Sequence[str], n: int) -> np.ndarray:
        return self.totals


class TypedLayout:
    """The published buckets of a typed plan, a range at a time, from O(types) state.

    The planner's buckets are the types' buckets in type order (``multiplicity[k]`` of type k);
    published bucket g is planner bucket ``relabel.inverse(g)``, a keyed pseudorandom
    permutation (:class:`~ppdp.kernels.permutation.KeyedPermutation`, its key from the
    publication's streams), so g's type is a binary search over the cumulative multiplicities.
    The ST rows and the fakes of range r come from that range's own generator
    (``streams.get(ST_STAGE, r)``): any process can draw them again (the driver reads the fakes
    back from the file the ST's writers left, ``fake_dir``, rather than drawing them once per
    disclosure pass), and no array of one entry per bucket is held anywhere. Pickled to the
    executors without the relabelling's tables (rebuilt from the key on first use)."""

    def __init__(self, plan: BucketizationPlan, streams: PartitionStreams):
        self.plan, self.streams = plan, streams
        self.types = np.asarray(plan.types, dtype=np.int64)
        self.mult = np.asarray(plan.multiplicity, dtype=np.int64)
        self.ends = np.cumsum(self.mult)
        self.n_buckets = int(self.mult.sum())
        self.m = len(plan.labels)
        self.step = max(1, ST_RANGE_CELLS // max(self.m, 1))   # buckets per range
        self.per = max(1, ST_TASK_CELLS // (self.step * max(self.m, 1)), -(-self.n_ranges // MAX_ST_PARTS))  # per part
        self.fake_dir: Path | None = None  # the fakes' codes as the ST's writer drew them (:func:`_write_st`)
        self.explicit_max = RELABEL_EXPLICIT_MAX
        self._relabel: KeyedPermutation | None = None

    def __getstate__(self) -> dict:
        # the plan's claim and details hold frozen mappings, which do not pickle: the executors'
        # copy of the plan carries, instead of the claim, the one thing the fakes' draw reads of it
        p = self.plan
        totals = getattr(p.claim, "revealed_totals", None)
        fields = {"sa": p.sa, "labels": p.labels, "sa_counts": p.sa_counts, "thresholds": p.thresholds, "types": p.types,
                  "fake_values": p.fake_values, "negative_associations": p.negative_associations,
                  "multiplicity": p.multiplicity,
                  "claim": _RevealedTotals(np.full(len(p.labels), -1, np.int64) if totals is None else
                                           np.asarray(totals(list(p.labels), p.n_records), dtype=np.int64))}
        return {**self.__dict__, "_relabel": None, "plan": None, "_plan_fields": fields}

    def __setstate__(self, state: dict) -> None:
        fields = state.pop("_plan_fields")
        self.__dict__.update(state)
        self.plan = BucketizationPlan(**fields)

    @property
    def relabel(self) -> KeyedPermutation:
        """Planner bucket index → published bucket id (``forward``), and back (``inverse``)."""
        if self._relabel is None:
            self._relabel = KeyedPermutation(self.n_buckets, self.streams.get(PERM_STAGE, 0),
                                             explicit_max=self.explicit_max)
        return self._relabel

    @property
    def n_ranges(self) -> int:
        return -(-self.n_buckets // self.step)

    def bounds(self, r: int) -> tuple[int, int]:
        lo = r * self.step
        return lo, min(self.n_buckets, lo + self.step)

    def type_of(self, lo: int, hi: int) -> np.ndarray:
        """The types of the published buckets lo … hi − 1."""
        return np.searchsorted(self.ends, self.relabel.inverse(np.arange(lo, hi, dtype=np.int64)), side="right")

    def st_range(self, r: int) -> tuple[pa.Table, np.ndarray | None]:
        """Range r's ST rows and fakes (:func:`st_range_typed` with the range's generator)."""
        lo, hi = self.bounds(r)
        return st_range_typed(self.plan, self.type_of(lo, hi), lo, self.streams.get(ST_STAGE, r))

    def fake_codes(self, r: int, type_of: np.ndarray | None = None) -> np.ndarray | None:
        """Range r's fakes as SA codes, σ per bucket, bucket by bucket (ascending within a
        bucket); None when σ = 0. Read from the file the ST's writer left (:func:`_write_st`),
        else drawn again: the draws :func:`st_range_typed` makes first from the range's
        generator (:func:`draw_plan_fakes`)."""
        if not self.plan.fake_values or self.n_buckets == 0:
            return None
        if self.fake_dir is not None:
            import pyarrow.ipc as ipc

            with pa.memory_map(str(self.fake_dir / f"{r // self.per:05d}.arrow")) as src:
                return ipc.open_file(src).get_batch(r % self.per).column(0).to_numpy().copy()
        t = self.type_of(*self.bounds(r)) if type_of is None else type_of
        return np.nonzero(draw_plan_fakes(self.plan, self.types[t], self.streams.get(ST_STAGE, r)))[1]

    def fakes(self, r: int, type_of: np.ndarray | None = None) -> np.ndarray | None:
        """Range r's fakes as a boolean (buckets × m) matrix (None when σ = 0)."""
        codes = self.fake_codes(r, type_of)
        if codes is None:
            return None
        lo, hi = self.bounds(r)
        fake = np.zeros((hi - lo, self.m), dtype=bool)
        fake[np.repeat(np.arange(hi - lo), self.plan.fake_values), codes] = True
        return fake

    def chunks(self):
        """``(observed ST counts, bucket sizes)`` of every range in order (for
        :func:`~ppdp.releases.bucketized.streamed_disclosure`)."""
        sizes = self.types.sum(axis=1)
        for r in range(self.n_ranges):
            t = self.type_of(*self.bounds(r))
            fake = self.fakes(r, t)
            yield (self.types[t] if fake is None else self.types[t] + fake), sizes[t]

    def first_of(self, kinds: np.ndarray) -> int:
        """The type, among ``kinds``, of the first published bucket having one of them (ranges
        scanned from bucket 0 until one appears)."""
        for r in range(self.n_ranges):
            t = self.type_of(*self.bounds(r))
            hit = np.flatnonzero(np.isin(t, kinds))
            if hit.size:
                return int(t[hit[0]])
        raise PpdpError("no published bucket has one of these types")


def typed_certificate(plan: BucketizationPlan) -> dict[str, Any]:
    """``plan.certificate()`` with the bucket statistics from the types' sizes and
    multiplicities (:func:`~ppdp.releases.bucketized.bucket_statistics`), O(types), instead of
    one size per bucket."""
    cert = plan.certificate(np.zeros(0, dtype=np.int64))
    cert.update(bucket_statistics(np.asarray(plan.types, dtype=np.int64).sum(axis=1), plan.n_records,
                                  multiplicity=plan.multiplicity))
    return cert


def _write_st(spark, layout: TypedLayout, directory: Path, fake_dir: Path | None = None) -> int:
    """Write the ST from the executors as ``directory/part-GGGGG.parquet``: one task per group
    of consecutive ranges of buckets writes them with pyarrow, one row group per range
    (:meth:`TypedLayout.st_range`: the range's own generator), so neither the driver nor a task
    holds more than a range of the ST. With ``fake_dir`` (σ > 0), each task also writes the
    fakes it drew as narrow SA codes (``fake_dir/GGGGG.arrow``, one record batch per range),
    which the layout then reads for the disclosure and the custodian file instead of drawing
    them again. Returns the ST's rows. ``spark`` None: the tasks run in this process."""
    directory.mkdir()
    n_ranges = layout.n_ranges
    if n_ranges == 0:  # no bucket: one empty part with the ST's columns
        plan = layout.plan
        st, _ = st_table_typed(plan.types, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                               np.random.default_rng(0), plan.sa, plan.labels)
        write_part(directory, 0, st)
        return 0
    per = layout.per
    fschema = pa.schema([pa.field("code", pa.int16() if layout.m <= 1 << 15 else pa.int32())])

    def write(batches):
        import pyarrow.ipc as ipc
        import pyarrow.parquet as pq

        for b in batches:
            for g in b.column("id").to_numpy().tolist():
                partial = directory / f".part-{g:05d}-{os.getpid()}.tmp"
                fpartial = None if fake_dir is None else fake_dir / f".{g:05d}-{os.getpid()}.tmp"
                rows, writer, fwriter = 0, None, None
                try:
                    if fpartial is not None:
                        fwriter = ipc.new_file(str(fpartial), fschema)
                    for r in range(g * per, min(n_ranges, (g + 1) * per)):
                        st, fake = layout.st_range(r)
                        if writer is None:
                            writer = pq.ParquetWriter(str(partial), st.schema, **parquet_options(st.schema))
                        writer.write_table(st)
                        rows += st.num_rows
                        if fwriter is not None and fake is not None:  # σ per bucket, bucket by bucket
                            fwriter.write_batch(pa.record_batch([pa.array(np.nonzero(fake)[1].astype(
                                fschema.field("code").type.to_pandas_dtype()))], schema=fschema))
                finally:
                    if writer is not None:
                        writer.close()
                    if fwriter is not None:
                        fwriter.close()
                os.replace(partial, directory / f"part-{g:05d}.parquet")
                if fpartial is not None and fake_dir is not None:
                    os.replace(fpartial, fake_dir / f"{g:05d}.arrow")
                yield pa.RecordBatch.from_arrays([pa.array([g], pa.int64()), pa.array([rows], pa.int64())], ["p", "n"])

    n_st = sum(int(r[1]) for r in run_tasks(spark, -(-n_ranges // per), write, ("p", "n")))
    layout.fake_dir = fake_dir
    return n_st


class PlanQITRelease(BucketizedRelease):
    """A bucketized release whose files are on disk — QIT and ST parts written by the
    executors — described by the plan through its :class:`TypedLayout`: published bucket g
    holds the real counts of its type and the fakes of its range's generator. The manifest's
    certificate and disclosure are computed from that, never from the release's tables nor from
    an array of one entry per bucket: σ = 0 from the types and multiplicities (:func:`~ppdp.releases.bucketized.types_disclosure`),
    σ > 0 over the ranges one at a time (:meth:`TypedLayout.chunks`,
    :func:`~ppdp.releases.bucketized.streamed_disclosure`) — both equal to what
    ``disclosure_of`` derives from the files."""

    layout: TypedLayout

    def disclosure(self, known_totals: np.ndarray | None = None) -> dict[str, Any]:
        labels = self.domains[self.sa]
        if self.fake_values == 0:
            return types_disclosure(self.layout.types, self.layout.mult, labels, self.layout.first_of)
        return streamed_disclosure(self.layout.chunks, self.fake_values, self.thresholds(), labels, known_totals)


class _FakeRanges:
    """The fakes of a release (σ per bucket), a range of buckets at a time
    (:meth:`TypedLayout.fake_codes`), for the custodian file's Parquet sidecar
    (:func:`~ppdp.releases.custodian.save_custodian`): the driver holds one range's fakes,
    never a list of every fake."""

    def __init__(self, layout: TypedLayout):
        self.layout = layout
        self.labels = [str(x) for x in layout.plan.labels]

    def bid_bound(self) -> int:
        return self.layout.n_buckets

    def blocks(self):
        sigma = self.layout.plan.fake_values
        for r in range(self.layout.n_ranges):
            code = self.layout.fake_codes(r)
            if code is not None:
                yield np.repeat(np.arange(*self.layout.bounds(r), dtype=np.int64), sigma), code


def plan_release(layout: TypedLayout, certificate: dict, quasi, doms, numeric, disclose: bool = True,
                  engine: str = "spark") -> PlanQITRelease:
    plan = layout.plan
    manifest = {"schema": published_schema(quasi, plan.sa, doms, numeric), "n_input": plan.n_records, "n_published": plan.n_records, "dropped": 0,
                "engine": engine, "certificate": certificate}
    rel = PlanQITRelease(manifest, {}, {})
    rel.layout = layout
    if disclose:
        rel.manifest["disclosure"] = disclosure_of(rel)
    return rel
