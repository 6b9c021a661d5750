"""The Spark engine (SPEC §6): the same plan, applied by Apache Spark.

A mechanism's plan is computed on the driver from small sufficient statistics (SA counts
collected with one ``groupBy``); the apply step runs on the executors as a per-row,
vectorised function of (SA code, rank within SA value):

- the rank of a row within its SA value comes from a window ``row_number()`` over
  ``partitionBy(SA).orderBy(rand(seed))`` — a uniformly random order, like the local engine's
  random sort key;
- ``mapInArrow`` maps (SA code, rank) → bucket with the plan's cumulative counts, then the
  bucket id through the plan's random relabelling, batch by batch in NumPy;
- the sensitive table (ST) needs no data at all: it is the plan's counts matrix (plus the
  fake values drawn on the driver), exactly as in the local engine.

The QIT is collected to the driver as Arrow (``toArrow``) to write the single-file
``ppdp-release/1`` directory, so the release passes the very same ``ppdp.verify``.
Negative-association constraints for fake values need per-bucket QI presence and are not
supported here (a clear error). PySpark is an optional dependency: ``pip install 'ppdp[spark]'``.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..errors import PpdpError
from ..table import _numeric_values


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


def spark_domains(sdf, columns: Sequence[str]) -> dict[str, list[str]]:
    """Ordered domains of string columns, ordered as ``ppdp.Table`` orders them (numerically
    when every label is a number, else lexicographically)."""
    out = {}
    for c in columns:
        labels = sorted(str(r[0]) for r in sdf.select(c).distinct().collect())
        nv = _numeric_values(labels)
        if nv is not None:
            labels = [labels[i] for i in np.argsort(nv, kind="stable")]
        out[c] = labels
    return out


def publish_bucketized(sdf, mechanism, quasi: Sequence[str], sensitive: str, seed: int | None = None,
                       domains: Mapping[str, Sequence[str]] | None = None):
    """Publish a Spark DataFrame (string columns) under ``FPrivacy`` or ``Anatomy``.

    Returns a ``BucketizedRelease`` with the same manifest, certificate and files as
    ``ppdp.publish`` on a local table.
    """
    _require_spark()
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    from ..api import stamp_manifest
    from ..mechanisms.bucketization.fakes import draw_fakes
    from ..mechanisms.bucketization.mechanisms import _Bucketized, bucketized_certificate
    from ..releases.base import codes_to_labels, labels_to_codes
    from ..releases.bucketized import BucketizedRelease, st_table

    if not isinstance(mechanism, _Bucketized):
        raise PpdpError(f"the Spark engine publishes bucketization mechanisms; got {type(mechanism).__name__}")
    if getattr(mechanism, "negative_associations", None):
        raise PpdpError("negative associations for fake values are not supported on the Spark engine")
    cols = [*quasi, sensitive]
    missing = [c for c in cols if c not in sdf.columns]
    if missing:
        raise PpdpError(f"unknown column(s) {missing}; the DataFrame has {sdf.columns}")
    sdf = sdf.select(*[F.col(c).cast("string").alias(c) for c in cols])
    doms = {c: list(v) for c, v in (domains or {}).items()}
    doms.update(spark_domains(sdf, [c for c in cols if c not in doms]))
    labels = doms[sensitive]
    rng = np.random.default_rng(seed)

    # statistics → plan (driver)
    counts_by_label = dict(sdf.groupBy(sensitive).count().collect())
    unknown = set(counts_by_label) - set(labels)
    if unknown:
        raise PpdpError(f"SA labels {sorted(unknown)[:5]} are not in the given domain")
    n = int(sum(counts_by_label.values()))
    if n == 0:
        raise PpdpError("the input table is empty")
    o = np.array([counts_by_label.get(lab, 0) for lab in labels], dtype=np.int64)
    if (o > 0).sum() < 2:
        raise PpdpError(f"the sensitive attribute {sensitive!r} has a single value; bucketization cannot hide it")
    setting, fprime, cert_extra = mechanism._plan(o, labels)
    counts = np.asarray(setting.counts, dtype=np.int64)
    n_buckets, m = counts.shape
    perm = rng.permutation(n_buckets).astype(np.int64)
    relabelled = np.empty_like(counts)
    relabelled[perm] = counts
    cum = np.cumsum(counts, axis=0)  # (n_buckets × m): row j = records of value i in buckets ≤ j
    sa_index = {lab: i for i, lab in enumerate(labels)}

    # apply (executors): (SA code, rank within SA value) → bucket id
    ranked = sdf.withColumn("_rank", F.row_number().over(Window.partitionBy(sensitive).orderBy(F.rand(int(rng.integers(2**31))))) - 1)

    def to_bucket(batches):
        for b in batches:
            sa_lab = b.column(sensitive).to_numpy(zero_copy_only=False).astype(str)
            rank = b.column("_rank").to_numpy(zero_copy_only=False).astype(np.int64)
            bid = np.empty(len(rank), dtype=np.int64)
            uniq, inv = np.unique(sa_lab, return_inverse=True)
            for u, lab in enumerate(uniq):  # one vectorised lookup per SA value in the batch
                rows = inv == u
                bid[rows] = perm[np.searchsorted(cum[:, sa_index[lab]], rank[rows], side="right")]
            yield pa.RecordBatch.from_arrays([*(b.column(c) for c in quasi), pa.array(bid, pa.int64())], [*quasi, "bid"])

    schema = StructType([*(sdf.schema[c] for c in quasi), StructField("bid", LongType(), False)])
    qit_sdf = ranked.mapInArrow(to_bucket, schema).orderBy("bid", F.rand(int(rng.integers(2**31))))
    qit_raw = qit_sdf.toArrow()

    # release: QIT from the executors' output, ST from the plan (no data needed)
    qit = {c: codes_to_labels(labels_to_codes(qit_raw.column(c), doms[c], c), doms[c]) for c in quasi}
    qit["bid"] = qit_raw.column("bid").combine_chunks()
    fake = draw_fakes(relabelled, mechanism.fake_values, rng, None)
    st = st_table(relabelled, fake, rng, sensitive, labels, mechanism.publish_fake_flag)
    cert = bucketized_certificate(labels, fprime, relabelled.sum(axis=1), n, mechanism.fake_values, None, cert_extra)
    schema_m = {"quasi": list(quasi), "sensitive": [sensitive], "domains": {c: doms[c] for c in cols}}
    numeric = {c: _numeric_values(doms[c]) for c in quasi}
    if any(v is not None for v in numeric.values()):
        schema_m["numeric"] = {c: (None if v is None else v.tolist()) for c, v in numeric.items()}
    manifest = {"schema": schema_m, "n_input": n, "n_published": n, "dropped": 0, "engine": "spark", "certificate": cert}
    release = BucketizedRelease(manifest, {"qit": pa.table(qit), "st": st})
    stamp_manifest(release, mechanism, seed)
    return release
