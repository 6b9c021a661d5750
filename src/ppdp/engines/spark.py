"""The Spark engine (SPEC §6): the same plan, applied by Apache Spark.

A mechanism's plan is computed on the driver from small sufficient statistics (the SA counts,
collected with one ``groupBy``: :func:`sa_counts`) by the mechanism's public ``plan(stats)``;
:func:`apply_bucketized` applies that plan object on the executors as a per-row, vectorised
function of (SA code, rank within SA value):

- the rank of a row within its SA value comes from a window ``row_number()`` over
  ``partitionBy(SA).orderBy(rand(seed))`` — a uniformly random order, like the local engine's
  random sort key; ``seed`` is a full-width 64-bit value (a JVM ``long``, Spark's widest seed)
  drawn from the publication's generator (:mod:`ppdp.kernels.rng`: AES-CTR keyed from the OS
  when no seed is given), so the order cannot be found by trying 2^31 seeds;
- ``mapInArrow`` maps (SA code, rank) → bucket with the plan's cumulative counts, then the
  bucket id through a random relabelling, batch by batch in NumPy;
- the sensitive table (ST) needs no data at all: it is the plan's counts matrix plus the fake
  values drawn on the driver, built by the same function as in the local engine.

The QIT is collected to the driver as Arrow (``toArrow``) to write the single-file
``ppdp-release/1`` directory; the manifest comes from the family's one builder
(``release_from_plan``), so the release passes the very same ``ppdp.verify``.
Negative-association constraints for fake values need per-bucket QI presence and are not
supported here (a clear error). PySpark is an optional dependency: ``pip install 'ppdp[spark]'``.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..claims import state_disclosure
from ..errors import PpdpError, SchemaError
from ..kernels.rng import full_width_seed, publication_rng
from ..mechanisms.bucketization.apply import draw_plan_fakes, release_from_plan, st_table
from ..mechanisms.bucketization.plan import BucketizationPlan, SACounts
from ..provenance import VERSION
from ..releases.base import codes_to_labels, labels_to_codes, stamp_manifest
from ..table import Table


def _require_spark():
    try:
        import pyspark  # noqa: F401
    except ModuleNotFoundError:
        raise PpdpError("the Spark engine needs PySpark: pip install 'ppdp[spark]'") from None


def local_session(cores: int = 2, app: str = "ppdp"):
    """A local-mode SparkSession (Java 17+) with Arrow enabled."""
    _require_spark()
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors use this interpreter (with NumPy, ppdp)
    return (SparkSession.builder.master(f"local[{cores}]").appName(app)
            .config("spark.pyspark.python", sys.executable)
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.shuffle.partitions", str(max(2, cores)))
            .config("spark.ui.enabled", "false")
            .getOrCreate())


def _schema_table(domains: Mapping[str, Sequence[str]]) -> Table:
    """An empty Table over ``domains``: ppdp's ordering and numeric reading of labels."""
    return Table({c: np.zeros(0, dtype=np.int32) for c in domains}, domains)


def spark_domains(sdf, columns: Sequence[str]) -> dict[str, list[str]]:
    """Ordered domains of string columns, ordered as ``ppdp.Table`` orders them (numerically
    when every label is a number, else lexicographically)."""
    out = {}
    for c in columns:
        labels = sorted(str(r[0]) for r in sdf.select(c).distinct().collect())
        nv = _schema_table({c: labels}).numeric_values(c)
        if nv is not None:
            labels = [labels[i] for i in np.argsort(nv, kind="stable")]
        out[c] = labels
    return out


def _prepare(sdf, quasi: Sequence[str], sensitive: str, domains: Mapping[str, Sequence[str]] | None):
    from pyspark.sql import functions as F

    cols = [*quasi, sensitive]
    missing = [c for c in cols if c not in sdf.columns]
    if missing:
        raise SchemaError(f"unknown column(s) {missing}; the DataFrame has {sdf.columns}")
    sdf = sdf.select(*[F.col(c).cast("string").alias(c) for c in cols])
    doms = {c: list(v) for c, v in (domains or {}).items() if c in cols}
    doms.update(spark_domains(sdf, [c for c in cols if c not in doms]))
    return sdf, doms


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


def apply_bucketized(plan: BucketizationPlan, sdf, quasi: Sequence[str],
                     domains: Mapping[str, Sequence[str]] | None = None, rng: np.random.Generator | int | None = None):
    """Apply a :class:`BucketizationPlan` to a Spark DataFrame (string columns): the same plan
    object the local engine applies, the same files and manifest (``engine: "spark"``)."""
    _require_spark()
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    if not isinstance(plan, BucketizationPlan):
        raise PpdpError(f"the Spark engine applies a BucketizationPlan; got {type(plan).__name__}")
    if plan.negative_associations or ((plan.details or {}).get("negative_association_learning") or {}).get("enabled"):
        raise PpdpError("negative associations for fake values (given or learned) are not supported on the Spark engine")
    sensitive = plan.sa
    sdf, doms = _prepare(sdf, quasi, sensitive, {**(domains or {}), sensitive: plan.labels})
    rng = rng if isinstance(rng, np.random.Generator) else publication_rng(rng)
    counts = np.asarray(plan.counts, dtype=np.int64)
    n_buckets, m = counts.shape
    perm = rng.permutation(n_buckets).astype(np.int64)
    relabelled = np.empty_like(counts)
    relabelled[perm] = counts
    cum = np.cumsum(counts, axis=0)  # (n_buckets × m): row j = records of value i in buckets ≤ j
    sa_index = {lab: i for i, lab in enumerate(plan.labels)}

    # apply (executors): (SA code, rank within SA value) → bucket id
    ranked = sdf.withColumn("_rank", F.row_number().over(Window.partitionBy(sensitive).orderBy(F.rand(full_width_seed(rng)))) - 1)

    def to_bucket(batches):
        for b in batches:
            sa_lab = b.column(sensitive).to_numpy(zero_copy_only=False).astype(str)
            rank = b.column("_rank").to_numpy(zero_copy_only=False).astype(np.int64)
            bid = np.empty(len(rank), dtype=np.int64)
            uniq, inv = np.unique(sa_lab, return_inverse=True)
            for u, lab in enumerate(uniq):  # one vectorised lookup per SA value in the batch
                rows = inv == u
                col = cum[:, sa_index[lab]]
                pos = np.searchsorted(col, rank[rows], side="right")
                if len(pos) and pos.max() >= n_buckets:
                    raise PpdpError(f"the data hold more records of {lab!r} than the plan places (plan and data disagree)")
                bid[rows] = perm[pos]
            yield pa.RecordBatch.from_arrays([*(b.column(c) for c in quasi), pa.array(bid, pa.int64())], [*quasi, "bid"])

    schema = StructType([*(sdf.schema[c] for c in quasi), StructField("bid", LongType(), False)])
    qit_sdf = ranked.mapInArrow(to_bucket, schema).orderBy("bid", F.rand(full_width_seed(rng)))
    qit_raw = qit_sdf.toArrow()
    if qit_raw.num_rows != plan.n_records:
        raise PpdpError(f"the DataFrame has {qit_raw.num_rows} rows, the plan places {plan.n_records}")

    # release: QIT from the executors' output, ST from the plan (no data needed)
    qit = {c: codes_to_labels(labels_to_codes(qit_raw.column(c), doms[c], c), doms[c]) for c in quasi}
    qit["bid"] = qit_raw.column("bid").combine_chunks()
    fake = draw_plan_fakes(plan, relabelled, rng, None)
    st, custodian = st_table(relabelled, fake, rng, sensitive, plan.labels)
    published = {c: doms[c] for c in [*quasi, sensitive]}
    schema_t = _schema_table(published)
    numeric = {c: schema_t.numeric_values(c) for c in published}
    return release_from_plan(plan, relabelled, pa.table(qit), st, list(quasi), published, numeric, {"engine": "spark"},
                             custodian)


def publish_bucketized(sdf, mechanism, quasi: Sequence[str], sensitive: str, seed: int | None = None,
                       domains: Mapping[str, Sequence[str]] | None = None, allow_full_disclosure: bool = False):
    """Publish a Spark DataFrame under ``FPrivacy`` or ``Anatomy``: SA counts → the mechanism's
    public ``plan`` → :func:`apply_bucketized`. Returns a ``BucketizedRelease`` with the same
    manifest, certificate and files as ``ppdp.publish`` on a local table (a release disclosing
    every record's SA is refused unless ``allow_full_disclosure``)."""
    _require_spark()
    if getattr(mechanism, "family", None) != "bucketized" or not callable(getattr(mechanism, "plan", None)):
        raise PpdpError(f"the Spark engine publishes bucketization mechanisms; got {type(mechanism).__name__}")
    if getattr(mechanism, "negative_associations", None) or getattr(mechanism, "learn_associations", False):
        raise PpdpError("negative associations for fake values (given or learned) are not supported on the Spark engine")
    sdf, doms = _prepare(sdf, quasi, sensitive, domains)
    rng = publication_rng(seed)
    plan = mechanism.plan(sa_counts(sdf, sensitive, doms[sensitive]))
    release = apply_bucketized(plan, sdf, quasi, doms, rng)
    state_disclosure(release, allow_full_disclosure)
    return stamp_manifest(release, mechanism.name, mechanism.get_params(), seed, VERSION)


__all__ = ["local_session", "spark_domains", "sa_counts", "apply_bucketized", "publish_bucketized"]
