"""The Spark engine (SPEC §6): the same plan, applied by Apache Spark, for every family.

The driver sees counts only. The executors read the input once (``mapInArrow``), code the
labels over their domains and scatter every row, as narrow integer codes, to one of B blocks
chosen uniformly at random — Arrow IPC spill files beside the release, no Spark shuffle —
returning the SA counts per block (:func:`scatter_blocks`); the driver makes the mechanism's
public plan from them and ships it (small) to one task per block, which applies it in NumPy
and writes the release's large table as Parquet parts; the driver then writes the manifest
and README beside the parts (:func:`ppdp.releases.partitioned.finish_partitioned`). No row
is collected to the driver.

- **Domains** are ordered exactly as ``ppdp.Table`` orders them: read from the footer of a
  dataset written by ``Table.to_parquet`` / ``ppdp.datasets.write_synthetic`` (the
  dictionary order), or else the distinct values ordered as Table orders a column it encodes
  (numbers by value for numeric Spark types, text lexicographically) — :func:`frame_schema`.
  ``verify`` against the source Table therefore passes.
- **Randomized family** (uniform, global, SDR, A'): SDR's sub-table slots and A''s decoy-set
  slots are dealt to the blocks by multivariate hypergeometric draws on the driver
  (:func:`ppdp.engines.stream.split_counts`: counts only) and, inside a block, in random
  order (:class:`ppdp.engines.stream.Allotment`): a uniformly random assignment of each
  value's rows to the slots, as the local engine's random permutation, without a global
  sort. A''s N mod ℓ' dropped rows: the driver deals them to the blocks (hypergeometric),
  each block drops uniformly chosen positions. Each block is written in a uniformly random
  order: the blocks being a uniformly random split, the release is a uniformly random
  permutation of the published rows.
- **Bucketization** (F'-privacy, Anatomy): the rank of a row within its SA value is its
  position, in a uniformly random order, among the block's rows of that value, after the
  earlier blocks' rows of the value (the driver knows the counts per block) — a uniformly
  random rank; the typed plan maps (SA, rank) → bucket; the rows are scattered again to the
  output part of their bucket id's range, each part written ordered by bucket id (the QIT is
  then ordered by bucket id, as the in-memory engine writes it). Published bucket ids are a keyed
  permutation of the planner's (:class:`~ppdp.kernels.permutation.KeyedPermutation`, its key
  from the publication's streams), evaluated by every task: no list of buckets anywhere. The
  ST comes from the plan alone, written by the executors a range of buckets at a time (each
  range's bucket types from the permutation, its fakes and row order from its own stream),
  and the disclosure from the types and multiplicities (σ = 0) or streamed over the ranges one
  at a time (σ > 0: each range's types again, its fakes read back from a file the ST's writers
  left beside the release): the driver holds neither the ST nor an array of one entry per
  bucket (:mod:`ppdp.engines.blocks`: ``TypedLayout``, ``PlanQITRelease``; the stages are shared
  with the streaming engine, which runs them without Spark).
- **Histogram family**: statistics = one ``groupBy(dims).count()`` in the JVM: the counts of
  the distinct label combinations (at most the cube's cells); the cube, the ε plan and the
  noise are the local engine's functions, so a seeded Spark release equals the local one.
  The release (cells) is small and written by the driver.
- **Randomness**: every task draws from its own stream derived from the publication's
  generator: without a seed, AES-128-CTR keyed by 128 bits from the OS CSPRNG with a distinct
  counter range per (stage, partition or block); with a seed, PCG64 of ``SeedSequence([seed,
  stage, partition])``. A seeded run over the same input partitioning and Arrow batch size
  (``spark.sql.execution.arrow.maxRecordsPerBatch``) is reproducible. The draws differ from
  the local engine's (different consumption order); the plan — hence claim and certificate,
  except the fields that depend on the published draws (A''s swap advantage) — is the same.

PySpark is an optional dependency: ``pip install 'ppdp[spark]'``. See docs/spark.md for a
real cluster.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..claims.diverted import DivertedClaim
from ..errors import PpdpError, SchemaError
from ..kernels.grid import cube_codes, declared_domains, dense_counts
from ..kernels.rng import publication_rng
from ..mechanisms.bucketization.plan import BucketizationPlan, SACounts
from ..mechanisms.randomization.diverted import Diverted
from ..releases.storage import temp_path
from ..table import Table
from .blocks import (FileScan, PartitionStreams, PhaseClock, arrow_codes, bucketize, file_scan,
                     finish_release, frame_rows, label_codes, read_block, run_tasks, run_units, scatter_blocks,
                     write_part)
from .stream import (DENSE_COUNT_CELLS, Allotment, CountedTable, DatasetSchema, DivertedRows, counted_release, counted_table, dataset_schema, merge_counts, publish_counted, diverted_eligible,
                     row_plan, split_counts, table_order)


def _require_spark():
    try:
        import pyspark  # noqa: F401
    except ModuleNotFoundError:
        raise PpdpError("the Spark engine needs PySpark: pip install 'ppdp[spark]'") from None


#: driver JVM options for a local session whose publications read their input directly
#: (:func:`read_dataset` frames): the JVM then only moves small Arrow batches and task results
#: between the Python tasks, so its just-in-time compiler stops at the quick tier and its
#: collector is the serial one — about half of its CPU at 10^7 rows, mostly the optimising
#: compiler's at start-up. Not for frames read through Spark SQL, whose rows the JVM decodes,
#: groups and converts: there the quick tier's code costs more (docs/spark.md)
DIRECT_READ_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


#: the address a local session's driver and block manager bind to: a local session has no
#: reason to be reachable from the network
LOOPBACK = "127.0.0.1"

def local_session(cores: int = 2, app: str = "ppdp", memory: str = "1g", shuffle_partitions: int | None = None,
                  jvm_options: str | None = None, master: str | None = None, host: str | None = None):
    """A SparkSession (Java 17+) with Arrow enabled; ``memory`` caps the driver JVM (in local
    mode the executors run inside it); ``jvm_options``: the driver JVM's extra options (None:
    the JVM's defaults; :data:`DIRECT_READ_JVM_OPTIONS` when the publications read files
    directly).

    ``master``: None (or ``local[…]``) for a local-mode session of ``cores`` threads, or a
    cluster's master URL (``spark://host:7077``, ``yarn`` …). A local session binds its driver
    and block manager to the loopback address (``spark.driver.host`` and
    ``spark.driver.bindAddress`` = 127.0.0.1, and ``SPARK_LOCAL_IP`` when the environment does
    not set it), so nothing it opens listens on the network. ``host``: the address the driver
    advertises and binds instead — needed with a cluster master, whose executors must reach
    the driver (then nothing is set for you; docs/spark.md)."""
    _require_spark()
    import sys

    from pyspark.sql import SparkSession

    master = master or f"local[{cores}]"
    local = master.startswith("local")
    bind = host if host is not None else (LOOPBACK if local else None)
    if bind == LOOPBACK:
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)  # read by the JVM at launch: no interface lookup
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors use this interpreter (with NumPy, ppdp)
    builder = SparkSession.builder
    if jvm_options:
        builder = builder.config("spark.driver.extraJavaOptions", jvm_options)
    if bind is not None:
        builder = builder.config("spark.driver.host", bind).config("spark.driver.bindAddress", bind)
    return (builder.master(master).appName(app)
            .config("spark.pyspark.python", sys.executable)
            .config("spark.driver.memory", memory)
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.shuffle.partitions", str(shuffle_partitions or max(2, cores)))
            .config("spark.sql.parquet.compression.codec", "zstd")
            .config("spark.sql.execution.arrow.maxRecordsPerBatch", "200000")
            .config("spark.sql.files.maxPartitionBytes", "16m")
            .config("spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")  # ppdp shows its own (ppdp.kernels.progress)
            .config("spark.python.daemon.module", DAEMON_MODULE)
            .getOrCreate())


#: the executors' PySpark daemon: this module run as ``python -m ppdp.engines.spark`` imports
#: ppdp (with NumPy, PyArrow) once, then forks the Python workers, which would otherwise each
#: import it when they unpickle their first task (about 1 CPU-s per worker)
DAEMON_MODULE = "ppdp.engines.spark"


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
    when ``Table.to_parquet`` wrote it.

    The DataFrame returned (untransformed) is published by a **direct read**: the executors
    read the dataset's row groups with pyarrow (dictionary columns straight to codes) instead
    of through Spark SQL's row conversion — the same rows, far less work; the dataset must
    then be readable at the same path on the executors (as the release directory must be).
    Any transformation (``select``, ``filter``, ``repartition``…) gives a frame read through
    Spark SQL."""
    _require_spark()
    schema = dataset_schema(path, quasi, sensitive, domains)
    sdf = spark.read.parquet(str(path))
    try:
        sdf._ppdp_scan = FileScan.of(path)
    except (AttributeError, TypeError):  # a DataFrame implementation without instance attributes
        pass
    return sdf, schema


















# -------------------------------------------------------------------- randomized family
def publish_randomized(sdf, mechanism, out, schema: DatasetSchema, seed: int | None = None, *,
                       out_partitions: int | None = None, overwrite: bool = False, persist: bool = False,
                       part_rows: int = 4_000_000, direct: bool | None = None) -> dict:
    """Publish a DataFrame under uniform perturbation, global randomization, SDR or A' into the
    partitioned release ``out``. Returns the manifest.

    One pass over the input, no JVM shuffle, no row reaching the driver: (1) the executors
    read their input partitions (``mapInArrow``), code the labels and scatter every row to one
    of B blocks chosen uniformly at random, as narrow integer codes in spill files beside the
    release (:func:`scatter_blocks`); they return the rows of each SA value per block (the plan's
    statistics); (2) the driver makes the public plan and deals SDR's sub-table / A''s
    decoy-set slots to the blocks (multivariate hypergeometric: counts only); (3) one task
    per block applies the plan to the block's rows, puts them in a uniformly random order and
    writes the block as ``part-NNNNN.parquet``; it returns its published counts per
    (transition group, value), from which the driver states the disclosure. The release
    directory must therefore be on a file system the driver and the executors share (local
    mode: any directory). ``persist`` is accepted for compatibility and ignored: the input is
    read once."""
    _require_spark()
    sens = list(schema.sensitive)
    cols = [*schema.quasi, *sens]
    rng = publication_rng(seed)
    streams = PartitionStreams(seed, rng)
    scan = file_scan(sdf, direct)
    frame = scan if scan is not None else sdf.select(*cols)
    doms = {c: list(schema.domains[c]) for c in cols}
    target = Path(out)
    if os.path.lexists(target) and not overwrite:
        raise PpdpError(f"{str(target)!r} exists; choose a new directory or pass overwrite=True")
    tmp = temp_path(target)
    data_dir, spill = tmp / "data", tmp / "_spill"
    data_dir.mkdir(parents=True)
    clock = PhaseClock()
    try:
        B = out_partitions or max(2, -(-frame_rows(frame) // part_rows))
        counts_b = scatter_blocks(frame, cols, doms, sens, B, spill, streams, spark=sdf.sparkSession)  # statistics
        clock.lap("read, code and scatter (statistics)")
        sizes = counts_b[0].sum(axis=1)
        n = int(sizes.sum())
        if n == 0:
            raise PpdpError("the input table is empty")
        counts = [c.sum(axis=0) for c in counts_b]
        n_drop, drops = 0, None
        if isinstance(mechanism, Diverted):
            n_drop = diverted_eligible(mechanism, counts, n, schema)
            if n_drop:  # N mod ℓ' rows at random: how many in each block, then their values
                drops = rng.multivariate_hypergeometric(sizes, n_drop, method="marginals").astype(np.int64)
                gone = _dropped_counts(sdf.sparkSession, spill, sens, doms, drops, streams)
                counts_b = [c - g for c, g in zip(counts_b, gone)]
                counts = [c.sum(axis=0) for c in counts_b]
        rp = row_plan(mechanism, counts, schema)                                    # the public plan
        shares = [None if s is None else split_counts(s, c, rng) for s, c in zip(rp.slots, counts_b)]
        clock.lap("plan")
        n_pub = n - n_drop
        out_cols = [*schema.quasi, *(["subtable"] if rp.subtable else []), *sens]
        kernel = rp.kernel()
        J = len(rp.slots[0]) if rp.subtable and rp.slots[0] is not None else 1
        sub_m = J

        def apply_block(batches):                                                   # one task per block
            for b in batches:
                for blk in b.column("id").to_numpy().tolist():
                    codes, k = read_block(spill, blk, cols)
                    prng = streams.get(6, blk)
                    if drops is not None and drops[blk]:
                        keep = np.ones(k, dtype=bool)
                        keep[streams.get(7, blk).choice(k, size=int(drops[blk]), replace=False)] = False
                        codes = {c: v[keep] for c, v in codes.items()}
                        k = int(keep.sum())
                    xs = [codes[s].astype(np.int64) for s in sens]
                    types = [None if sh is None else Allotment(sh[blk]).take(x, prng) for sh, x in zip(shares, xs)]
                    res = kernel.apply(xs, types, prng)
                    order = prng.permutation(k)                                   # a uniformly random order
                    arrays = []
                    for c in out_cols:
                        v = (res[c] if c in res else codes[c])[order].astype(np.int32)
                        arrays.append(pa.array(v) if c == "subtable" else
                                      pa.DictionaryArray.from_arrays(pa.array(v), pa.array(doms[c], pa.string())))
                    if k:  # an empty block writes no part
                        write_part(data_dir, blk, pa.Table.from_arrays(arrays, names=out_cols))
                    stats = []
                    for i, s in enumerate(sens):
                        m_s = len(doms[s])
                        key = res[s] if "subtable" not in res else res["subtable"] * m_s + res[s]
                        c = np.bincount(key, minlength=sub_m * m_s)
                        nz = np.flatnonzero(c)
                        stats.append(np.stack([np.full(len(nz), i), nz // m_s, nz % m_s, c[nz]], axis=1))
                    arr = np.concatenate(stats).astype(np.int64) if stats else np.zeros((0, 4), dtype=np.int64)
                    yield pa.RecordBatch.from_arrays([pa.array(arr[:, j]) for j in range(4)], ["sa", "g", "v", "n"])

        stats = run_tasks(sdf.sparkSession, B, apply_block, ("sa", "g", "v", "n"))
        shutil.rmtree(spill, ignore_errors=True)
        clock.lap("apply, permute and write")
        # what the release discloses is a function of the published counts (per SDR sub-table)
        group_counts = {s: np.zeros((J, len(doms[s])), dtype=np.int64) for s in sens}
        for i, g, v, k in stats:
            group_counts[sens[i]][g, v] += k
        pub = [group_counts[s].sum(axis=0) for s in sens]
        if int(sum(p.sum() for p in pub)) != n_pub * len(sens):
            raise PpdpError(f"the executors wrote {int(pub[0].sum()):,} rows, the plan publishes {n_pub:,}")
        if isinstance(rp, DivertedRows):  # the claim's leak figures come from the SA counts after the dropped rows
            claim = DivertedClaim.derive(mechanism.l_prime, sens, n_pub, n_drop, rp.plan.counts, [doms[s] for s in sens])
        else:
            claim = rp.claim
        manifest: dict[str, Any] = {"schema": schema.manifest_schema(), "n_input": n, "n_published": n_pub,
                                    "dropped": n_drop, "engine": "spark", "certificate": claim.to_certificate()}
        m = finish_release(counted_release(manifest, {s: pub[i] for i, s in enumerate(sens)}, group_counts), mechanism,
                    seed, tmp, target, {"data": n_pub}, None, overwrite)
        clock.lap("published counts and manifest")
        return m
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise














def _dropped_counts(spark, spill: Path, sens: Sequence[str], doms, drops: np.ndarray,
                    streams: PartitionStreams) -> list[np.ndarray]:
    """A': the values of the rows dropped from each block (the positions are drawn from the
    block's own stream, as the apply task draws them again)."""
    B = len(drops)

    def count(batches):
        for b in batches:
            for blk in b.column("id").to_numpy().tolist():
                if not drops[blk]:
                    continue
                codes, k = read_block(spill, blk, sens)
                pos = streams.get(7, blk).choice(k, size=int(drops[blk]), replace=False)
                for i, s in enumerate(sens):
                    c = np.bincount(codes[s][pos].astype(np.int64), minlength=len(doms[s]))
                    nz = np.flatnonzero(c)
                    yield pa.RecordBatch.from_arrays([pa.array(np.full(len(nz), i, np.int64)), pa.array(np.full(len(nz), blk, np.int64)),
                                                      pa.array(nz.astype(np.int64)), pa.array(c[nz].astype(np.int64))],
                                                     ["c", "b", "v", "n"])

    out = [np.zeros((B, len(doms[s])), dtype=np.int64) for s in sens]
    for i, blk, v, k in run_tasks(spark, B, count, ("c", "b", "v", "n")):
        out[i][blk, v] += k
    return out












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
                     overwrite: bool = False, mechanism=None, allow_full_disclosure: bool = False,
                     direct: bool | None = None) -> dict:
    """Apply a :class:`BucketizationPlan` on Spark: the same plan object the local engine
    applies; QIT and ST parts written by the executors (the ST from the plan alone, a range of
    buckets at a time).
    The data's SA counts must be the plan's."""
    _require_spark()
    if not isinstance(plan, BucketizationPlan):
        raise PpdpError(f"the Spark engine applies a BucketizationPlan; got {type(plan).__name__}")

    def check(counts: SACounts) -> BucketizationPlan:
        placed = (np.asarray(plan.types, dtype=np.int64) * np.asarray(plan.multiplicity, dtype=np.int64)[:, None]).sum(axis=0)
        if not np.array_equal(np.asarray(counts.counts, dtype=np.int64), placed):
            raise PpdpError("the data's SA counts differ from the records the plan places (plan and data disagree)")
        return plan

    return bucketize(sdf, schema, out, seed, rng if rng is not None else publication_rng(seed), check,
                      out_partitions=out_partitions, overwrite=overwrite, mechanism=mechanism,
                      allow_full_disclosure=allow_full_disclosure, direct=direct)




















def publish_bucketized(sdf, mechanism, out, schema: DatasetSchema, seed: int | None = None, *,
                       allow_full_disclosure: bool = False, overwrite: bool = False, direct: bool | None = None) -> dict:
    """F'-privacy or Anatomy on Spark: SA counts (counted while the input is read and scattered
    once) → the mechanism's public ``plan`` → the plan applied as :func:`apply_bucketized`
    applies it. Returns the manifest."""
    _require_spark()
    if getattr(mechanism, "family", None) != "bucketized" or not callable(getattr(mechanism, "plan", None)):
        raise PpdpError(f"publish_bucketized needs a bucketization mechanism; got {type(mechanism).__name__}")
    if getattr(mechanism, "negative_associations", None) or getattr(mechanism, "learn_associations", False):
        raise PpdpError("negative associations for fake values (given or learned) are not supported on the Spark engine")
    return bucketize(sdf, schema, out, seed, publication_rng(seed), mechanism.plan, overwrite=overwrite,
                      mechanism=mechanism, allow_full_disclosure=allow_full_disclosure, direct=direct)


# ----------------------------------------------------------------------- histogram family
def combination_table(sdf, mechanism, schema: DatasetSchema, direct: bool | None = None) -> CountedTable:
    """The :class:`CountedTable` of a DataFrame over the mechanism's dimensions: one
    ``groupBy(dims).count()`` on the executors (the driver receives at most one count per
    label combination; labels outside a declared domain are refused by the mechanism). A
    frame straight from :func:`read_dataset` whose dimensions all have domains in ``schema``
    is counted by a direct read instead (:func:`_direct_combinations`)."""
    dims = list(mechanism.dims)
    missing = [d for d in dims if d not in sdf.columns]
    if missing:
        raise SchemaError(f"unknown dimension(s) {missing}; the DataFrame has {sdf.columns}")
    declared, undeclared = declared_domains(mechanism.dims, mechanism.bins, mechanism.domains)
    if undeclared:
        raise SchemaError(f"the domain of {undeclared} is not declared: a differentially private histogram must not "
                          "read its cells off the rows (pass domains= or bins=)")
    scan = file_scan(sdf, direct)
    if scan is not None and all(d in schema.domains for d in dims):
        return _direct_combinations(sdf.sparkSession, scan, dims, schema)
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


def _direct_combinations(spark, scan: FileScan, dims: Sequence[str], schema: DatasetSchema) -> CountedTable:
    """Counts of the label combinations, one task per read unit: codes over the schema's
    domains, then the distinct flat cell keys and their counts (``np.bincount`` over the dense cube up to
    :data:`DENSE_COUNT_CELLS` cells, else ``np.unique``)."""
    doms = {d: list(schema.domains[d]) for d in dims}
    shape = tuple(max(1, len(doms[d])) for d in dims)

    n_cells = int(np.prod(shape, dtype=np.int64))
    dense = n_cells <= DENSE_COUNT_CELLS

    def count(u, _batches):
        keys, cnts = [], []
        acc = np.zeros(n_cells if dense else 0, dtype=np.int64)
        for b in scan.batches(u, dims):
            if b.num_rows:
                k = np.ravel_multi_index([arrow_codes(b.column(d), doms[d], d) for d in dims], shape)
                if dense:  # one O(rows) pass; no sort
                    acc += np.bincount(k, minlength=n_cells)
                    continue
                uk, c = np.unique(k, return_counts=True)
                keys.append(uk)
                cnts.append(c)
        if dense:
            nz = np.flatnonzero(acc)
            if nz.size:
                yield pa.RecordBatch.from_arrays([pa.array(nz.astype(np.int64)), pa.array(acc[nz])], ["key", "n"])
        elif keys:
            uk, c = merge_counts(keys, cnts)
            yield pa.RecordBatch.from_arrays([pa.array(uk.astype(np.int64)), pa.array(c)], ["key", "n"])

    rows = run_units(scan, count, ("key", "n"), spark)
    if not rows:
        raise PpdpError("the input table is empty")
    k = np.array([r[0] for r in rows], dtype=np.int64)
    n = np.array([r[1] for r in rows], dtype=np.int64)
    return counted_table(*merge_counts([k], [n]), dims, doms, schema.numeric)


def cube_counts(sdf, mechanism, schema: DatasetSchema):
    """(CubeSpec, dense count cube) of a DataFrame over the mechanism's declared domains/bins."""
    table = combination_table(sdf, mechanism, schema)
    declared, _ = declared_domains(mechanism.dims, mechanism.bins, mechanism.domains)
    spec, cc = cube_codes(table, list(mechanism.dims), mechanism.bins, declared)
    return spec, dense_counts(cc, spec.shape, table.row_weights)


def publish_histogram(sdf, mechanism, out, schema: DatasetSchema, seed: int | None = None, *, overwrite: bool = False,
                      direct: bool | None = None, allow_low_utility: bool = False) -> dict:
    """Any histogram mechanism (cells, dpcube, kdtree, consistency, dp, kron, agrid, marginals,
    dpcube-paper) on Spark: the executors aggregate the label combinations' counts
    (:func:`combination_table`); the driver runs the mechanism itself on them — its ε plan,
    noise and inference, with the generator ``ppdp.publish`` uses — so a seeded Spark release
    equals the local engine's, and driver memory is the cube's, not N's. Returns the manifest."""
    _require_spark()
    if getattr(mechanism, "family", None) != "histogram":
        raise PpdpError(f"publish_histogram needs a histogram mechanism; got {getattr(mechanism, 'name', mechanism)!r}")
    clock = PhaseClock()
    table = combination_table(sdf, mechanism, schema, direct)
    clock.lap("statistics")
    manifest = publish_counted(table, mechanism, out, seed, "spark", overwrite=overwrite,
                               allow_low_utility=allow_low_utility)
    clock.lap("plan, noise and write")
    return manifest


# ------------------------------------------------------------------------------- facade
def publish(sdf, mechanism, out, schema: DatasetSchema | None = None, seed: int | None = None, *,
            quasi: Sequence[str] = (), sensitive: Sequence[str] = (), domains: Mapping[str, Sequence[str]] | None = None,
            overwrite: bool = False, allow_full_disclosure: bool = False, persist: bool = False,
            direct: bool | None = None, allow_low_utility: bool = False) -> dict:
    """Publish a Spark DataFrame under any supported mechanism into the release directory
    ``out`` (``ppdp.load_release(out)`` / ``ppdp.verify`` read it). Returns the manifest.

    The input is read once; ``persist`` is accepted for compatibility and ignored. A frame
    straight from :func:`read_dataset` is read directly by the executors (pyarrow, row groups
    as tasks) unless ``direct=False``; any other frame through Spark SQL."""
    _require_spark()
    fam = getattr(mechanism, "family", None)
    if schema is None:
        schema = frame_schema(sdf, quasi, sensitive, domains) if fam != "histogram" else _histogram_schema(sdf, mechanism)
    if fam == "bucketized":
        return publish_bucketized(sdf, mechanism, out, schema, seed, overwrite=overwrite,
                                  allow_full_disclosure=allow_full_disclosure, direct=direct)
    if fam == "randomized":
        return publish_randomized(sdf, mechanism, out, schema, seed, overwrite=overwrite, persist=persist, direct=direct)
    if fam == "histogram":
        return publish_histogram(sdf, mechanism, out, schema, seed, overwrite=overwrite, direct=direct,
                                 allow_low_utility=allow_low_utility)
    raise PpdpError(f"the Spark engine does not publish {getattr(mechanism, 'name', mechanism)!r}")


def _histogram_schema(sdf, mechanism) -> DatasetSchema:
    return DatasetSchema((), (), {}, {})


__all__ = ["FileScan", "PartitionStreams", "apply_bucketized", "cube_counts", "frame_schema", "local_session", "publish",
           "publish_bucketized", "publish_histogram", "publish_randomized", "read_dataset", "sa_counts"]


def _daemon() -> None:
    """PySpark's daemon (``spark.python.daemon.module``) with this engine imported before the
    workers are forked from it."""
    import importlib

    importlib.import_module(DAEMON_MODULE)  # the module the tasks' closures refer to
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    _daemon()
