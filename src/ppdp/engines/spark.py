"""The Spark engine (SPEC §6): the same plan, applied by Apache Spark, for every family.

The driver sees counts only. It reads the sufficient statistics with Spark aggregations,
makes the mechanism's public plan from them, and ships the plan (small) to the executors in
the task closure; the executors apply it batch by batch in NumPy (``mapInArrow``) and write
the release's large table as a partitioned Parquet dataset (``DataFrame.write.parquet``); the
driver then writes the manifest and README beside the parts
(:func:`ppdp.releases.partitioned.finish_partitioned`). No row is collected to the driver.

- **Domains** are ordered exactly as ``ppdp.Table`` orders them: read from the footer of a
  dataset written by ``Table.to_parquet`` / ``ppdp.datasets.write_synthetic`` (the
  dictionary order), or else the distinct values ordered as Table orders a column it encodes
  (numbers by value for numeric Spark types, text lexicographically) — :func:`frame_schema`.
  ``verify`` against the source Table therefore passes.
- **Randomized family** (uniform, global, SDR, A'): statistics = rows of each SA value in each
  input partition (one ``mapInArrow`` pass returning P × |SA| counts). SDR's sub-table slots
  and A''s decoy-set slots are dealt to the partitions by multivariate hypergeometric draws on
  the driver (:func:`ppdp.engines.stream.split_counts`: counts only) and, inside a partition,
  to its batches the same way (:class:`ppdp.engines.stream.Allotment`): a uniformly random
  assignment of each value's rows to the slots, as the local engine's random permutation,
  without a global sort. A''s N mod ℓ' dropped rows: the driver deals them to partitions in
  proportion (hypergeometric), each partition drops uniformly chosen positions.
- **Bucketization** (F'-privacy, Anatomy): the rank of a row within its SA value comes from a
  window ``row_number()`` over ``partitionBy(SA).orderBy(key)``, ``key`` a random 64-bit
  number drawn per row from the partition's stream; the plan's cumulative counts map
  (SA, rank) → bucket; the ST comes from the plan alone (driver; one row per non-empty
  (bucket, value) — the plan's size, not N).
- **Histogram family** (cells, DPCube): statistics = one ``groupBy(dims).count()``: the counts
  of the distinct label combinations (at most the cube's cells); the cube, the ε plan
  (:func:`ppdp.claims.dp.budget_plan`) and the noise are the local engine's functions, so a
  seeded Spark release equals the local one. The release (cells) is small and written by the
  driver.
- **Randomness**: every partition draws from its own stream derived from the publication's
  generator: without a seed, AES-128-CTR keyed by 128 bits from the OS CSPRNG with a distinct
  counter range per (stage, partition); with a seed, PCG64 of ``SeedSequence([seed, stage,
  partition])``. A seeded run over the same input partitioning and Arrow batch size
  (``spark.sql.execution.arrow.maxRecordsPerBatch``) is reproducible. The draws differ from
  the local engine's (different consumption order), the plan — hence claim and certificate,
  except the fields that depend on the published draws (A''s swap advantage) — is the same.
- **Output order** is shuffled: every row gets a random part key and sort key from its
  partition's stream; ``repartition`` + ``sortWithinPartitions`` on them is a uniformly
  random order of the rows.

PySpark is an optional dependency: ``pip install 'ppdp[spark]'``. See docs/spark.md for a
real cluster.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..claims import disclosure_of, state_disclosure
from ..claims.diverted import DivertedClaim
from ..errors import PpdpError, SchemaError
from ..kernels.grid import cube_codes, declared_domains, dense_counts
from ..kernels.rng import publication_rng
from ..mechanisms.bucketization.apply import draw_plan_fakes_typed, st_table_typed
from ..mechanisms.bucketization.plan import BucketizationPlan, SACounts
from ..mechanisms.randomization.diverted import Diverted
from ..provenance import VERSION
from ..releases.base import recorded_bins, stamp_manifest
from ..releases.bucketized import BucketizedRelease
from ..releases.partitioned import finish_partitioned
from ..releases.storage import custodian_path, temp_path, write_custodian
from ..table import Table
from .stream import (Allotment, DatasetSchema, DivertedRows, counted_release, dataset_schema, diverted_eligible,
                     label_codes, row_plan, split_counts, table_order)


def _require_spark():
    try:
        import pyspark  # noqa: F401
    except ModuleNotFoundError:
        raise PpdpError("the Spark engine needs PySpark: pip install 'ppdp[spark]'") from None


def local_session(cores: int = 2, app: str = "ppdp", memory: str = "1g", shuffle_partitions: int | None = None):
    """A local-mode SparkSession (Java 17+) with Arrow enabled; ``memory`` caps the driver JVM
    (in local mode the executors run inside it)."""
    _require_spark()
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors use this interpreter (with NumPy, ppdp)
    return (SparkSession.builder.master(f"local[{cores}]").appName(app)
            .config("spark.pyspark.python", sys.executable)
            .config("spark.driver.memory", memory)
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.shuffle.partitions", str(shuffle_partitions or max(2, cores)))
            .config("spark.sql.parquet.compression.codec", "zstd")
            .config("spark.sql.execution.arrow.maxRecordsPerBatch", "200000")
            .config("spark.sql.files.maxPartitionBytes", "16m")
            .config("spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
            .config("spark.ui.enabled", "false")
            .getOrCreate())


# ------------------------------------------------------------------------------ schema
def frame_schema(sdf, quasi: Sequence[str], sensitive: Sequence[str] | str,
                 domains: Mapping[str, Sequence[str]] | None = None, source=None) -> DatasetSchema:
    """Roles, domains (ordered as ``ppdp.Table`` orders them) and numeric values of a DataFrame.

    ``source``: the Parquet path the frame was read from — a file written by
    ``Table.to_parquet`` gives its domains from the footer; otherwise ``domains`` fixes a
    column's order and the others are the distinct values (one ``distinct`` per column:
    labels only reach the driver) ordered as Table orders them."""
    sens = [sensitive] if isinstance(sensitive, str) else list(sensitive)
    cols = [*quasi, *sens]
    missing = [c for c in cols if c not in sdf.columns]
    if missing:
        raise SchemaError(f"unknown column(s) {missing}; the DataFrame has {sdf.columns}")
    if source is not None:
        return dataset_schema(source, quasi, sens, domains)
    from pyspark.sql import types as T

    doms: dict[str, tuple[str, ...]] = {}
    nums: dict[str, list | None] = {}
    for c in cols:
        if domains and c in domains:
            doms[c] = tuple(str(x) for x in domains[c])
            given = Table({c: np.zeros(0, np.int32)}, {c: list(doms[c])}).numeric_values(c)
            nums[c] = None if given is None else given.tolist()
            continue
        typ = sdf.schema[c].dataType
        is_num = isinstance(typ, (T.IntegralType, T.FractionalType))
        vals = [r[0] for r in sdf.select(c).distinct().collect()]
        if any(v is None for v in vals):
            raise SchemaError(f"column {c!r} has missing values; recode them first")
        labs, nlist = table_order([v if is_num else str(v) for v in vals], is_num)
        doms[c], nums[c] = tuple(labs), nlist
    return DatasetSchema(tuple(quasi), tuple(sens), doms, nums)


def read_dataset(spark, path, quasi: Sequence[str] = (), sensitive: Sequence[str] = (),
                 domains: Mapping[str, Sequence[str]] | None = None):
    """``(DataFrame, DatasetSchema)`` of a Parquet dataset; roles and domains from its footer
    when ``Table.to_parquet`` wrote it."""
    _require_spark()
    schema = dataset_schema(path, quasi, sensitive, domains)
    return spark.read.parquet(str(path)), schema


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


def _sa_partition_counts(sdf, schema: DatasetSchema, drops: np.ndarray | None, streams: PartitionStreams):
    """(P × |SA|) rows of each SA value in each input partition, per SA (one mapInArrow pass);
    with ``drops`` (rows to drop per partition) the dropped rows are left out."""
    from pyspark.sql.types import LongType, StructField, StructType

    sens = list(schema.sensitive)
    doms = {s: list(schema.domains[s]) for s in sens}

    def count(batches):
        p = _partition_id()
        drop_pos, seen, n = _drop_positions(p, drops, streams), 0, 0
        acc = [np.zeros(len(doms[s]), dtype=np.int64) for s in sens]
        for b in batches:
            keep = _keep_mask(drop_pos, seen, b.num_rows)
            seen += b.num_rows
            n += b.num_rows
            for i, s in enumerate(sens):
                c = label_codes(b.column(s), doms[s], s)
                acc[i] += np.bincount(c if keep is None else c[keep], minlength=len(doms[s]))
        rows = [(p, i, v, int(k)) for i, a in enumerate(acc) for v, k in enumerate(a.tolist()) if k]
        rows.append((p, -1, -1, n))
        arr = np.array(rows, dtype=np.int64).reshape(-1, 4)
        yield pa.RecordBatch.from_arrays([pa.array(arr[:, j]) for j in range(4)], ["p", "sa", "v", "n"])

    schema_out = StructType([StructField(x, LongType(), False) for x in ("p", "sa", "v", "n")])
    rows = sdf.select(*sens).mapInArrow(count, schema_out).collect()
    P = max(int(r[0]) for r in rows) + 1
    sizes = np.zeros(P, dtype=np.int64)
    parts = [np.zeros((P, len(doms[s])), dtype=np.int64) for s in sens]
    for p, i, v, k in rows:
        if i < 0:
            sizes[p] = k
        else:
            parts[i][p, v] = k
    return sizes, parts


def _drop_positions(p: int, drops, streams: PartitionStreams) -> np.ndarray | None:
    if drops is None or p >= len(drops) or drops[p][1] == 0:
        return None
    n_p, d_p = int(drops[p][0]), int(drops[p][1])
    return np.sort(streams.get(1, p).choice(n_p, size=d_p, replace=False))


def _keep_mask(drop_pos, seen: int, k: int) -> np.ndarray | None:
    if drop_pos is None:
        return None
    keep = np.ones(k, dtype=bool)
    keep[drop_pos[(drop_pos >= seen) & (drop_pos < seen + k)] - seen] = False
    return keep


# -------------------------------------------------------------------- randomized family
def publish_randomized(sdf, mechanism, out, schema: DatasetSchema, seed: int | None = None, *,
                       out_partitions: int | None = None, overwrite: bool = False, persist: bool = True,
                       part_rows: int = 4_000_000) -> dict:
    """Publish a DataFrame under uniform perturbation, global randomization, SDR or A' into the
    partitioned release ``out``. Returns the manifest.

    Three steps, no row reaching the driver: (1) the SA counts of every input partition, one
    aggregation in the JVM (``groupBy(spark_partition_id(), SA).count()``); (2) the executors
    apply the plan batch by batch (``mapInArrow``) and emit each row as packed integer codes
    with a random output partition and a random sort key; (3) after the shuffle (a few longs
    per row, no label strings), each output partition is ordered by its keys in NumPy (a
    uniformly random order), turned into dictionary-encoded columns and written by the
    executor as ``part-NNNNN.parquet`` with pyarrow; it returns its published counts per
    (transition group, value), from which the driver states the disclosure. The release
    directory must therefore be on a filesystem the driver and the executors share (local
    mode: any directory)."""
    _require_spark()
    from pyspark.sql import types as T

    sens = list(schema.sensitive)
    cols = [*schema.quasi, *sens]
    rng = publication_rng(seed)
    streams = PartitionStreams(seed, rng)
    frame = _stable(sdf.select(*cols), persist)
    clock = _Clock()
    sizes, parts = _sa_partition_counts_jvm(frame, schema)                     # statistics: counts only
    clock.lap("statistics")
    n = int(sizes.sum())
    if n == 0:
        raise PpdpError("the input table is empty")
    counts = [pp.sum(axis=0) for pp in parts]
    n_drop, drops = 0, None
    if isinstance(mechanism, Diverted):
        n_drop = diverted_eligible(mechanism, counts, n, schema)
        if n_drop:  # N mod ℓ' rows at random: how many in each partition, then recount
            d = rng.multivariate_hypergeometric(sizes, n_drop, method="marginals")
            drops = np.stack([sizes, d], axis=1)
            sizes, parts = _sa_partition_counts(frame, schema, drops, streams)
            counts = [pp.sum(axis=0) for pp in parts]
    rp = row_plan(mechanism, counts, schema)                                    # the public plan
    shares = [None if s is None else split_counts(s, pp, rng) for s, pp in zip(rp.slots, parts)]
    n_pub = n - n_drop
    n_out = out_partitions or max(2, -(-n_pub // part_rows))
    doms = {c: list(schema.domains[c]) for c in cols}
    out_cols = [*schema.quasi, *(["subtable"] if rp.subtable else []), *sens]
    kernel = rp.kernel()
    J = len(rp.slots[0]) if rp.subtable and rp.slots[0] is not None else 1
    # the shuffle moves packed integer codes (a few longs per row), not label strings
    wsizes = [J if c == "subtable" else len(doms[c]) for c in out_cols]
    groups = _pack_groups(wsizes)
    wnames = [f"_w{i}" for i in range(len(groups))]

    def apply(batches):                                                         # executors
        p = _partition_id()
        prng = streams.get(2, p)
        drop_pos, seen = _drop_positions(p, drops, streams), 0
        allots = [None if sh is None else Allotment(sh[p]) for sh in shares]
        for b in batches:
            keep = _keep_mask(drop_pos, seen, b.num_rows)
            seen += b.num_rows
            codes = {c: label_codes(b.column(c), doms[c], c) for c in cols}
            if keep is not None:
                codes = {c: v[keep] for c, v in codes.items()}
            xs = [codes[s] for s in sens]
            types = [None if a is None else a.take(x, prng) for a, x in zip(allots, xs)]
            codes.update(kernel.apply(xs, types, prng))
            k = len(xs[0])
            words = _pack([codes[c] for c in out_cols], wsizes, groups)
            arrays = [pa.array(w) for w in words]
            arrays += [pa.array(prng.integers(0, n_out, size=k)), pa.array(prng.integers(0, 2**62, size=k))]
            yield pa.RecordBatch.from_arrays(arrays, [*wnames, "_part", "_key"])

    target = Path(out)
    tmp = temp_path(target)
    data_dir = tmp / "data"
    data_dir.mkdir(parents=True)
    sens_idx = {s: out_cols.index(s) for s in sens}
    sub_idx = out_cols.index("subtable") if rp.subtable else None

    def write_part(batches):  # after the shuffle: one output partition → one part file
        pid = _partition_id()
        chunks: list[list[np.ndarray]] = [[] for _ in range(len(wnames) + 1)]
        for b in batches:
            for i, w in enumerate([*wnames, "_key"]):
                chunks[i].append(b.column(w).to_numpy(zero_copy_only=False))
        stats = []
        if chunks[0] and sum(len(c) for c in chunks[0]):
            cols_ = [np.concatenate(c) for c in chunks]
            del chunks
            order = np.argsort(cols_[-1], kind="stable")                         # random keys: a uniformly random order
            got = _unpack([c[order] for c in cols_[:-1]], wsizes, groups)
            del cols_, order
            arrays = [pa.array(v.astype(np.int32)) if c == "subtable" else
                      pa.DictionaryArray.from_arrays(pa.array(v.astype(np.int32)), pa.array(doms[c], pa.string()))
                      for c, v in zip(out_cols, got)]
            _write_part(data_dir, pid, pa.Table.from_arrays(arrays, names=out_cols))
            sub = got[sub_idx] if sub_idx is not None else None
            for i, s in enumerate(sens):
                m_s = len(doms[s])
                key = got[sens_idx[s]] if sub is None else sub * m_s + got[sens_idx[s]]
                c = np.bincount(key, minlength=J * m_s)
                nz = np.flatnonzero(c)
                stats.append(np.stack([np.full(len(nz), i), nz // m_s, nz % m_s, c[nz]], axis=1))
        arr = np.concatenate(stats) if stats else np.zeros((0, 4), dtype=np.int64)
        yield pa.RecordBatch.from_arrays([pa.array(arr[:, j].astype(np.int64)) for j in range(4)], ["sa", "g", "v", "n"])

    fields = [T.StructField(w, T.LongType(), False) for w in [*wnames, "_part", "_key"]]
    sfields = T.StructType([T.StructField(x, T.LongType(), False) for x in ("sa", "g", "v", "n")])
    clock.lap("plan")
    stats = (frame.mapInArrow(apply, T.StructType(fields)).repartition(n_out, "_part")
             .mapInArrow(write_part, sfields).collect())
    clock.lap("apply, shuffle and write")
    # what the release discloses is a function of the published counts (per SDR sub-table)
    pub = [np.zeros(len(doms[s]), dtype=np.int64) for s in sens]
    group_counts = {s: np.zeros((J, len(doms[s])), dtype=np.int64) for s in sens}
    for i, g, v, k in stats:
        group_counts[sens[i]][g, v] += k
    for i, s in enumerate(sens):
        pub[i] = group_counts[s].sum(axis=0)
    if int(sum(p.sum() for p in pub)) != n_pub * len(sens):
        raise PpdpError(f"the executors wrote {int(pub[0].sum()):,} rows, the plan publishes {n_pub:,}")
    if isinstance(rp, DivertedRows):  # the claim states the published counts
        claim = DivertedClaim.derive(mechanism.l_prime, sens, n_pub, n_drop, pub)
    else:
        claim = rp.claim
    manifest: dict[str, Any] = {"schema": schema.manifest_schema(), "n_input": n, "n_published": n_pub,
                                "dropped": n_drop, "engine": "spark", "certificate": claim.to_certificate()}
    clock.lap("published counts")
    if persist:
        frame.unpersist()
    return _finish(counted_release(manifest, {s: pub[i] for i, s in enumerate(sens)}, group_counts), mechanism, seed,
                   tmp, target, {"data": n_pub}, None, overwrite)


def _write_part(directory: Path, pid: int, table: pa.Table) -> None:
    """Write one part file from an executor: a temporary name, then an atomic rename (a
    retried task replaces its part; a failed attempt leaves no ``part-*`` file)."""
    import pyarrow.parquet as pq

    part = directory / f"part-{pid:05d}.parquet"
    partial = directory / f".part-{pid:05d}-{os.getpid()}.tmp"
    pq.write_table(table, partial, compression="zstd")
    os.replace(partial, part)


def _sa_partition_counts_jvm(frame, schema: DatasetSchema):
    """(rows per input partition, per SA the P × |SA| counts) by one aggregation in the JVM
    (no Python worker): ``groupBy(spark_partition_id(), *SA).count()``."""
    from pyspark.sql import functions as F

    sens = list(schema.sensitive)
    P = frame.rdd.getNumPartitions()
    pos = {s: {lab: j for j, lab in enumerate(schema.domains[s])} for s in sens}
    parts = [np.zeros((P, len(schema.domains[s])), dtype=np.int64) for s in sens]
    sizes = np.zeros(P, dtype=np.int64)
    for r in frame.groupBy(F.spark_partition_id().alias("_p"), *sens).count().collect():
        p, k = int(r[0]), int(r[-1])
        sizes[p] += k
        for i, s in enumerate(sens):
            lab = r[1 + i]
            j = None if lab is None else pos[s].get(_spark_label(lab))
            if j is None:
                raise SchemaError(f"column {s!r} holds values outside its domain, e.g. {lab!r}")
            parts[i][p, j] += k
    return sizes, parts


def _spark_label(v) -> str:
    """A Spark value as ``label_codes`` reads it (numbers as Table writes them)."""
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else repr(v)
    return str(v)


#: wall seconds of the phases of the last publication in this process (for benchmarks)
LAST_PHASES: dict[str, float] = {}


class _Clock:
    def __init__(self):
        import time

        self.time = time.perf_counter
        self.t = self.time()
        LAST_PHASES.clear()

    def lap(self, phase: str) -> None:
        t = self.time()
        LAST_PHASES[phase] = LAST_PHASES.get(phase, 0.0) + t - self.t
        self.t = t


def _stable(frame, persist: bool):
    """The frame with partitions that are the same on every evaluation: the counts pass and the
    apply pass must see the same rows in the same partitions and batches. A file scan is
    stable; a frame after a round-robin ``repartition`` or a non-deterministic expression is
    not, so by default the selected columns are persisted (executors' local disk, not the
    driver) and materialized once."""
    if not persist:
        return frame
    from pyspark import StorageLevel

    frame = frame.persist(StorageLevel.DISK_ONLY)
    frame.count()
    return frame


def _pack_groups(sizes: Sequence[int]) -> list[list[int]]:
    """Columns grouped so that the product of a group's domain sizes fits in 62 bits."""
    groups: list[list[int]] = [[]]
    prod = 1
    for i, m in enumerate(sizes):
        m = max(int(m), 1)
        if groups[-1] and prod * m >= 2**62:
            groups.append([])
            prod = 1
        groups[-1].append(i)
        prod *= m
    return groups


def _pack(codes: Sequence[np.ndarray], sizes: Sequence[int], groups) -> list[np.ndarray]:
    out = []
    for g in groups:
        w = np.zeros(len(codes[0]), dtype=np.int64)
        for i in g:
            w = w * max(int(sizes[i]), 1) + np.asarray(codes[i], dtype=np.int64)
        out.append(w)
    return out


def _unpack(words: Sequence[np.ndarray], sizes: Sequence[int], groups) -> list[np.ndarray]:
    out: list[np.ndarray] = [np.zeros(0)] * len(sizes)
    for w, g in zip(words, groups):
        w = np.asarray(w, dtype=np.int64).copy()
        for i in reversed(g):
            m = max(int(sizes[i]), 1)
            out[i] = w % m
            w //= m
    return out


def _finish(rel, mechanism, seed, tmp: Path, target: Path, rows, small, overwrite: bool,
            allow_full_disclosure: bool = False) -> dict:
    """Disclosure (re-derivable by verify), the shared manifest fields, bins, then the files."""
    state_disclosure(rel, allow_full_disclosure)
    bins = recorded_bins(rel.domains)
    if bins:  # as ppdp.publish records them
        rel.manifest["schema"]["bins"] = bins
    stamp_manifest(rel, mechanism.name, mechanism.get_params(), seed, VERSION)
    m = finish_partitioned(tmp, target, rel.manifest, rows, small, overwrite=overwrite)
    if rel.custodian:
        write_custodian(custodian_path(target), json.dumps(rel.custodian, indent=2) + "\n", replace=overwrite)
    return m


# ---------------------------------------------------------------------- bucketized family
def sa_counts(sdf, sensitive: str, labels: Sequence[str]) -> SACounts:
    """The sufficient statistics of bucketization from a Spark DataFrame (one ``groupBy``)."""
    _require_spark()
    if sensitive not in sdf.columns:
        raise SchemaError(f"unknown column {sensitive!r}; the DataFrame has {sdf.columns}")
    by_label = {str(k): int(v) for k, v in sdf.groupBy(sensitive).count().collect()}
    unknown = sorted(set(by_label) - set(map(str, labels)))
    if unknown:
        raise SchemaError(f"SA labels {unknown[:5]} are not in the given domain")
    return SACounts(sensitive, tuple(labels), np.array([by_label.get(str(lab), 0) for lab in labels], dtype=np.int64))


def apply_bucketized(plan: BucketizationPlan, sdf, schema: DatasetSchema, out, seed: int | None = None,
                     rng: np.random.Generator | None = None, *, out_partitions: int | None = None,
                     overwrite: bool = False, mechanism=None, allow_full_disclosure: bool = False) -> dict:
    """Apply a :class:`BucketizationPlan` on Spark: the same plan object the local engine
    applies; QIT parts written by the executors, the ST (from the plan alone) by the driver."""
    _require_spark()
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if not isinstance(plan, BucketizationPlan):
        raise PpdpError(f"the Spark engine applies a BucketizationPlan; got {type(plan).__name__}")
    if plan.negative_associations or ((plan.details or {}).get("negative_association_learning") or {}).get("enabled"):
        raise PpdpError("negative associations for fake values (given or learned) are not supported on the Spark engine")
    sa = plan.sa
    quasi = list(schema.quasi)
    if tuple(schema.domains[sa]) != tuple(plan.labels):
        raise SchemaError(f"the plan's SA labels differ from the domain of {sa!r}")
    rng = rng if rng is not None else publication_rng(seed)
    streams = PartitionStreams(seed, rng)
    # the typed plan (bucket types × multiplicity; never the n_buckets × m matrix): the rows of
    # value i, in rank order, fill the (value, type) segments in planner order, as the local
    # engine's assign_typed does; a segment covers mult_k·types[k, i] consecutive positions
    types = np.asarray(plan.types, dtype=np.int64)
    mult = np.asarray(plan.multiplicity, dtype=np.int64)
    K, m = types.shape
    n_buckets = int(mult.sum())
    first_bucket = np.cumsum(mult) - mult
    seg_len = (types * mult[:, None]).T.ravel()          # value-major
    seg_start = np.cumsum(seg_len) - seg_len
    live = np.flatnonzero(seg_len)
    s_start, s_type, s_value = seg_start[live], live % K, live // K
    s_per, s_first = types[s_type, s_value], first_bucket[s_type]
    value_start = seg_start[np.arange(m) * K]            # position of value i's rank 0
    value_count = (types * mult[:, None]).sum(axis=0)
    perm = rng.permutation(n_buckets).astype(np.int64)   # published bucket ids at random
    type_of = np.empty(n_buckets, dtype=np.int64)
    type_of[perm] = np.repeat(np.arange(K, dtype=np.int64), mult)
    perm_b = sdf.sparkSession.sparkContext.broadcast(perm)  # O(n_buckets): shipped once per executor
    doms = {c: list(schema.domains[c]) for c in [*quasi, sa]}
    n_out = out_partitions or max(2, sdf.rdd.getNumPartitions())

    qsizes = [len(doms[c]) for c in quasi]
    qgroups = _pack_groups(qsizes)
    qnames = [f"_w{i}" for i in range(len(qgroups))]

    def keyed(batches):  # packed QI codes, the SA code and a random 64-bit order key per row
        prng = streams.get(3, _partition_id())
        for b in batches:
            words = _pack([label_codes(b.column(c), doms[c], c) for c in quasi], qsizes, qgroups)
            yield pa.RecordBatch.from_arrays(
                [*(pa.array(w) for w in words), pa.array(label_codes(b.column(sa), doms[sa], sa).astype(np.int32)),
                 pa.array(prng.integers(-(2**63), 2**63 - 1, size=b.num_rows))], [*qnames, sa, "_key"])

    kfields = ([T.StructField(w, T.LongType(), False) for w in qnames] + [T.StructField(sa, T.IntegerType(), False)]
               + [T.StructField("_key", T.LongType(), False)])
    ranked = (sdf.select(*quasi, sa).mapInArrow(keyed, T.StructType(kfields))
              .withColumn("_rank", F.row_number().over(Window.partitionBy(sa).orderBy("_key")) - 1))

    def to_bucket(batches):
        prng = streams.get(4, _partition_id())
        for b in batches:
            x = b.column(sa).to_numpy(zero_copy_only=False).astype(np.int64)
            rank = b.column("_rank").to_numpy(zero_copy_only=False).astype(np.int64)
            if len(x) and (rank >= value_count[x]).any():
                raise PpdpError("the data hold more records of a value than the plan places (plan and data disagree)")
            p = value_start[x] + rank
            seg = np.searchsorted(s_start, p, side="right") - 1
            bid = perm_b.value[s_first[seg] + (p - s_start[seg]) // s_per[seg]]
            k = len(x)
            arrays = [b.column(w) for w in qnames]
            arrays += [pa.array(bid), pa.array(prng.integers(0, n_out, size=k)), pa.array(prng.integers(0, 2**62, size=k))]
            yield pa.RecordBatch.from_arrays(arrays, [*qnames, "bid", "_part", "_key"])

    target = Path(out)
    tmp = temp_path(target)
    qit_dir = tmp / "qit"
    qit_dir.mkdir(parents=True)

    def write_part(batches):  # after the shuffle: rows grouped by bucket id, random order inside → one part
        pid = _partition_id()
        names = [*qnames, "bid", "_key"]
        chunks: dict[str, list[np.ndarray]] = {w: [] for w in names}
        for b in batches:
            for w in names:
                chunks[w].append(b.column(w).to_numpy(zero_copy_only=False))
        k = sum(len(c) for c in chunks["bid"])
        if k:
            cols_ = {w: np.concatenate(c) for w, c in chunks.items()}
            del chunks
            order = np.lexsort((cols_["_key"], cols_["bid"]))
            got = _unpack([cols_[w][order] for w in qnames], qsizes, qgroups)
            arrays = [pa.DictionaryArray.from_arrays(pa.array(v.astype(np.int32)), pa.array(doms[c], pa.string()))
                      for c, v in zip(quasi, got)] + [pa.array(cols_["bid"][order], pa.int64())]
            del cols_, order, got
            _write_part(qit_dir, pid, pa.Table.from_arrays(arrays, names=[*quasi, "bid"]))
        yield pa.RecordBatch.from_arrays([pa.array([pid], pa.int64()), pa.array([k], pa.int64())], ["p", "n"])

    ofields = [T.StructField(x, T.LongType(), False) for x in (*qnames, "bid", "_part", "_key")]
    sfields = T.StructType([T.StructField(x, T.LongType(), False) for x in ("p", "n")])
    written = (ranked.mapInArrow(to_bucket, T.StructType(ofields)).repartition(n_out, "_part")
               .mapInArrow(write_part, sfields).collect())
    if sum(int(r[1]) for r in written) != plan.n_records:
        raise PpdpError(f"the executors wrote {sum(int(r[1]) for r in written):,} QIT rows, the plan places {plan.n_records:,}")
    perm_b.unpersist()
    fake_bid, fake_code = draw_plan_fakes_typed(plan, type_of, rng, None)
    st, custodian = st_table_typed(plan.types, type_of, fake_bid, fake_code, rng, sa, plan.labels)
    numeric = {c: (None if schema.numeric.get(c) is None else np.asarray(schema.numeric[c], float)) for c in [*quasi, sa]}
    # the disclosure is computed once: here for a plan applied alone, else by _finish (state_disclosure)
    rel = _plan_release(plan, plan.type_sizes[type_of], st, quasi, doms, numeric, custodian, disclose=mechanism is None)
    if mechanism is None:  # the plan applied alone: the caller stamps mechanism and seed
        m = finish_partitioned(tmp, target, rel.manifest, {"qit": plan.n_records}, {"st": st}, overwrite=overwrite)
        return m
    return _finish(rel, mechanism, seed, tmp, target, {"qit": plan.n_records}, {"st": st}, overwrite,
                   allow_full_disclosure=allow_full_disclosure)


class PlanQITRelease(BucketizedRelease):
    """A bucketized release whose QIT is on disk (parts written by the executors): its bucket
    sizes are the plan's (every record placed once), so the manifest's certificate and
    disclosure are computed from the plan and the ST alone, as ``release_from_plan`` does."""

    plan_sizes: np.ndarray = np.zeros(0, dtype=np.int64)

    def buckets(self) -> dict[str, Any]:
        st = self.tables["st"]
        ids = np.arange(len(self.plan_sizes), dtype=np.int64)
        sb = st.column("bid").to_numpy().astype(np.int64)
        return {"qb": np.zeros(0, dtype=np.int64), "sb": sb, "sc": self.codes("st", self.sa),
                "count": st.column("count").to_numpy().astype(np.int64), "fake_rows": None, "n_buckets": len(ids),
                "sizes": self.plan_sizes, "m": len(self.domains[self.sa]), "ids": ids, "key": None}


def _plan_release(plan: BucketizationPlan, sizes: np.ndarray, st: pa.Table, quasi, doms, numeric, custodian,
                  disclose: bool = True):
    sa = plan.sa
    published = (*quasi, sa)
    schema = {"quasi": list(quasi), "sensitive": [sa], "domains": {c: list(doms[c]) for c in published}}
    if any(numeric.get(c) is not None for c in published):
        schema["numeric"] = {c: (None if numeric.get(c) is None else np.asarray(numeric[c]).tolist()) for c in published}
    sizes = np.asarray(sizes, dtype=np.int64)  # of the published buckets, in published order
    manifest = {"schema": schema, "n_input": plan.n_records, "n_published": plan.n_records, "dropped": 0,
                "engine": "spark", "certificate": plan.certificate(sizes)}
    rel = PlanQITRelease(manifest, {"st": st}, custodian)
    rel.plan_sizes = sizes
    if disclose:
        rel.manifest["disclosure"] = disclosure_of(rel)
    return rel


def publish_bucketized(sdf, mechanism, out, schema: DatasetSchema, seed: int | None = None, *,
                       allow_full_disclosure: bool = False, overwrite: bool = False) -> dict:
    """F'-privacy or Anatomy on Spark: SA counts (one ``groupBy``) → the mechanism's public
    ``plan`` → :func:`apply_bucketized`. Returns the manifest."""
    if getattr(mechanism, "family", None) != "bucketized" or not callable(getattr(mechanism, "plan", None)):
        raise PpdpError(f"publish_bucketized needs a bucketization mechanism; got {type(mechanism).__name__}")
    if getattr(mechanism, "negative_associations", None) or getattr(mechanism, "learn_associations", False):
        raise PpdpError("negative associations for fake values (given or learned) are not supported on the Spark engine")
    rng = publication_rng(seed)
    clock = _Clock()
    plan = mechanism.plan(sa_counts(sdf, schema.sensitive[0], schema.domains[schema.sensitive[0]]))
    clock.lap("statistics and plan")
    m = apply_bucketized(plan, sdf, schema, out, seed, rng, overwrite=overwrite, mechanism=mechanism,
                         allow_full_disclosure=allow_full_disclosure)
    clock.lap("apply, shuffle and write")
    return m


# ----------------------------------------------------------------------- histogram family
class CountedTable(Table):
    """A Table holding one row per distinct label combination of the histogram's dimensions,
    with ``row_weights`` the number of input rows of each: the only thing a histogram
    mechanism reads (its dense cube, :func:`ppdp.kernels.grid.dense_counts` with weights).
    At most one row per cube cell, whatever N."""

    row_weights: np.ndarray | None = None


def combination_table(sdf, mechanism, schema: DatasetSchema) -> CountedTable:
    """The :class:`CountedTable` of a DataFrame over the mechanism's dimensions: one
    ``groupBy(dims).count()`` on the executors (the driver receives at most one count per
    label combination; labels outside a declared domain are refused by the mechanism)."""
    dims = list(mechanism.dims)
    missing = [d for d in dims if d not in sdf.columns]
    if missing:
        raise SchemaError(f"unknown dimension(s) {missing}; the DataFrame has {sdf.columns}")
    declared, undeclared = declared_domains(mechanism.dims, mechanism.bins, mechanism.domains)
    if undeclared:
        raise SchemaError(f"the domain of {undeclared} is not declared: a differentially private histogram must not "
                          "read its cells off the rows (pass domains= or bins=)")
    rows = sdf.groupBy(*dims).count().collect()
    if not rows:
        raise PpdpError("the input table is empty")
    codes, doms = {}, {}
    for i, d in enumerate(dims):
        labels = pa.array([None if r[i] is None else str(r[i]) for r in rows], pa.string())
        if labels.null_count:
            raise SchemaError(f"column {d!r} has missing values; recode them first")
        dom = list(schema.domains[d]) if d in schema.domains else table_order(labels.to_pylist(), False)[0]
        codes[d] = label_codes(labels, dom, d).astype(np.int32)
        doms[d] = dom
    numeric = {d: (None if schema.numeric.get(d) is None else np.asarray(schema.numeric[d])) for d in dims}
    t = CountedTable(codes, doms, numeric=numeric)
    t.row_weights = np.array([r[len(dims)] for r in rows], dtype=np.int64)
    return t


def cube_counts(sdf, mechanism, schema: DatasetSchema):
    """(CubeSpec, dense count cube) of a DataFrame over the mechanism's declared domains/bins."""
    table = combination_table(sdf, mechanism, schema)
    declared, _ = declared_domains(mechanism.dims, mechanism.bins, mechanism.domains)
    spec, cc = cube_codes(table, list(mechanism.dims), mechanism.bins, declared)
    return spec, dense_counts(cc, spec.shape, table.row_weights)


def publish_histogram(sdf, mechanism, out, schema: DatasetSchema, seed: int | None = None, *, overwrite: bool = False) -> dict:
    """Any histogram mechanism (cells, dpcube, kdtree, consistency, dp, kron, agrid, marginals,
    dpcube-paper) on Spark: the executors aggregate the label combinations' counts
    (:func:`combination_table`); the driver runs the mechanism itself on them — its ε plan,
    noise and inference, with the generator ``ppdp.publish`` uses — so a seeded Spark release
    equals the local engine's, and driver memory is the cube's, not N's. Returns the manifest."""
    _require_spark()
    if getattr(mechanism, "family", None) != "histogram":
        raise PpdpError(f"publish_histogram needs a histogram mechanism; got {getattr(mechanism, 'name', mechanism)!r}")
    clock = _Clock()
    table = combination_table(sdf, mechanism, schema)
    clock.lap("statistics")
    declared, _ = declared_domains(mechanism.dims, mechanism.bins, mechanism.domains)
    spec, _ = cube_codes(table, list(mechanism.dims), mechanism.bins, declared)
    if not spec.dense:
        raise PpdpError(f"the cube has {spec.n_cells:,} cells; the Spark engine publishes dense cubes only")
    rel = mechanism._publish(table, publication_rng(seed))  # the mechanism's own steps, as ppdp.publish runs them
    rel.manifest["engine"] = "spark"
    state_disclosure(rel)
    bins = recorded_bins(rel.domains)
    if bins:
        rel.manifest["schema"]["bins"] = bins
    stamp_manifest(rel, mechanism.name, mechanism.get_params(), seed, VERSION)
    rel.save(out, overwrite=overwrite)
    clock.lap("plan, noise and write")
    return rel.manifest


# ------------------------------------------------------------------------------- facade
def publish(sdf, mechanism, out, schema: DatasetSchema | None = None, seed: int | None = None, *,
            quasi: Sequence[str] = (), sensitive: Sequence[str] = (), domains: Mapping[str, Sequence[str]] | None = None,
            overwrite: bool = False, allow_full_disclosure: bool = False, persist: bool = True) -> dict:
    """Publish a Spark DataFrame under any supported mechanism into the release directory
    ``out`` (``ppdp.load_release(out)`` / ``ppdp.verify`` read it). Returns the manifest.

    ``persist=False`` skips persisting the input of the randomized family's two passes; only
    for a frame whose partitions are stable on recomputation (a plain file scan)."""
    _require_spark()
    fam = getattr(mechanism, "family", None)
    if schema is None:
        schema = frame_schema(sdf, quasi, sensitive, domains) if fam != "histogram" else _histogram_schema(sdf, mechanism)
    if fam == "bucketized":
        return publish_bucketized(sdf, mechanism, out, schema, seed, overwrite=overwrite,
                                  allow_full_disclosure=allow_full_disclosure)
    if fam == "randomized":
        return publish_randomized(sdf, mechanism, out, schema, seed, overwrite=overwrite, persist=persist)
    if fam == "histogram":
        return publish_histogram(sdf, mechanism, out, schema, seed, overwrite=overwrite)
    raise PpdpError(f"the Spark engine does not publish {getattr(mechanism, 'name', mechanism)!r}")


def _histogram_schema(sdf, mechanism) -> DatasetSchema:
    return DatasetSchema((), (), {}, {})


__all__ = ["PartitionStreams", "apply_bucketized", "cube_counts", "frame_schema", "local_session", "publish",
           "publish_bucketized", "publish_histogram", "publish_randomized", "read_dataset", "sa_counts"]
