"""Apply a bucket setting to the rows of a table (the per-row, vectorised step of SPEC §6).

A plan is a counts matrix ``counts[j, i]`` = number of records with SA code ``i`` that go
to bucket ``j`` (Wang et al. 2011, §4.3: RecordPartition + round-robin assignment produce
exactly such a matrix). Applying it needs no Python loop over rows:

1. every row gets a random key; rows are ordered by (SA code, key), so within an SA value
   the order is a uniformly random permutation (the row's *rank within its SA value*);
2. the k-th row of SA value ``i`` in that order goes to the bucket whose cumulative count
   range for ``i`` contains k (``np.repeat`` of bucket ids by ``counts[:, i]``);
3. bucket ids are relabelled by a random permutation so that ids reveal nothing about the
   order in which the planner produced the buckets.

The sensitive table needs no rows at all (:func:`st_table`: the relabelled counts plus the
fake values), and the manifest is built by one function (:func:`release_from_plan`) that
every engine calls; :func:`apply_plan` is the in-memory (NumPy) apply of a
:class:`~ppdp.mechanisms.bucketization.plan.BucketizationPlan` to a :class:`~ppdp.table.Table`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from ...claims import disclosure_of
from ...errors import PpdpError, SchemaError
from ...releases.base import codes_to_labels
from ...releases.bucketized import BucketizedRelease, negative_association_mask, revealed_absent
from .associations import with_learned_associations
from .fakes import draw_fakes
from .plan import BucketizationPlan


def assign_buckets(sa_codes: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Bucket id (int64) of every row, and the counts matrix in the relabelled id order.

    ``counts`` is (n_buckets × m); its column sums must equal the SA counts of ``sa_codes``.
    Returns ``(bid, counts_relabelled)`` with ``counts_relabelled[bid]`` describing bucket ``bid``.
    """
    sa_codes = np.asarray(sa_codes)
    counts = np.asarray(counts, dtype=np.int64)
    n_buckets, m = counts.shape
    observed = np.bincount(sa_codes, minlength=m)
    if len(observed) != m or not np.array_equal(counts.sum(axis=0), observed):
        raise PpdpError("the bucket setting does not match the table's SA counts (plan and data disagree)")
    if (counts < 0).any():
        raise PpdpError("the bucket setting has negative counts")
    # 1. random rank within SA value
    order = grouped_random_order(sa_codes, rng)
    # 2. deal the rows of SA value i to buckets by the cumulative counts of column i
    plan_bucket = np.repeat(np.tile(np.arange(n_buckets, dtype=np.int64), m), counts.T.ravel())
    bid_plan = np.empty(len(sa_codes), dtype=np.int64)
    bid_plan[order] = plan_bucket
    # 3. relabel bucket ids at random
    perm = rng.permutation(n_buckets).astype(np.int64)
    relabelled = np.empty_like(counts)
    relabelled[perm] = counts
    return perm[bid_plan], relabelled


def grouped_random_order(groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A row order sorted by ``groups`` (non-negative ints) with a uniformly random order
    inside each group: one argsort of the distinct keys group·N + π(row), π a random permutation."""
    n = len(groups)
    key = np.asarray(groups, dtype=np.int64) * max(n, 1) + rng.permutation(n)
    return np.argsort(key)


def st_table(counts: np.ndarray, fake: np.ndarray, rng: np.random.Generator, sa: str,
             labels) -> tuple[pa.Table, dict]:
    """st.parquet from the counts and fake matrices alone (no rows needed): one row per
    (bucket, value) with its count, each fake a count-1 row, random value order in a bucket.

    Returns ``(st, custodian)``: the ST (``bid``, SA, ``count`` — nothing says which values are
    fake) and the custodian-side entry ``{"fake": {"bid": [...], "value": [...]}}`` (empty when
    there are no fakes) that ``verify(..., custodian=path)`` reads."""
    rb, rc = np.nonzero(counts)
    fb, fc = np.nonzero(fake)
    st_bid = np.concatenate([rb, fb]).astype(np.int64)
    st_code = np.concatenate([rc, fc])
    st_count = np.concatenate([counts[rb, rc], np.ones(len(fb), dtype=np.int64)]).astype(np.int64)
    st_order = grouped_random_order(st_bid, rng)  # value order inside a bucket is random
    st = {"bid": pa.array(st_bid[st_order], pa.int64()),
          sa: codes_to_labels(st_code[st_order], labels),
          "count": pa.array(st_count[st_order], pa.int64())}
    labels = [str(x) for x in labels]
    custodian = {"fake": {"bid": fb.astype(np.int64).tolist(), "value": [labels[c] for c in fc.tolist()]}} if len(fb) else {}
    return pa.table(st), custodian


def release_from_plan(plan: BucketizationPlan, relabelled: np.ndarray, qit: pa.Table, st: pa.Table,
                      quasi: Sequence[str], domains: Mapping[str, Sequence[str]],
                      numeric: Mapping[str, np.ndarray | None], extra: Mapping | None = None,
                      custodian: Mapping | None = None) -> BucketizedRelease:
    """The release (manifest + files) of an applied plan; the one manifest builder of every engine.

    ``relabelled``: the counts matrix in published bucket order; ``numeric``: numeric value of
    each label (or None) per published column, for BETWEEN queries; ``custodian``: what only
    the custodian keeps (which values are fake), saved beside the release, never in it."""
    sa = plan.sa
    published = (*quasi, sa)
    schema = {"quasi": list(quasi), "sensitive": [sa], "domains": {c: list(domains[c]) for c in published}}
    if any(numeric.get(c) is not None for c in published):
        schema["numeric"] = {c: (None if numeric.get(c) is None else np.asarray(numeric[c]).tolist()) for c in published}
    manifest = {"schema": schema, "n_input": plan.n_records, "n_published": plan.n_records, "dropped": 0,
                **dict(extra or {}), "certificate": plan.certificate(np.asarray(relabelled).sum(axis=1))}
    release = BucketizedRelease(manifest, {"qit": qit, "st": st}, custodian)
    # what the files disclose (ppdp.publish re-states it and refuses a release disclosing every record)
    release.manifest["disclosure"] = disclosure_of(release)
    return release


def draw_plan_fakes(plan: BucketizationPlan, relabelled: np.ndarray, rng: np.random.Generator,
                    forbidden: np.ndarray | None = None) -> np.ndarray:
    """The plan's σ fake values per bucket, drawn only where a real record could hold them
    under the plan's thresholds (and not ``forbidden`` by a negative association); see
    :mod:`~ppdp.mechanisms.bucketization.fakes`."""
    absent = revealed_absent(plan.claim, plan.labels, plan.n_records)
    if absent.any():
        extra = np.zeros(np.shape(relabelled), dtype=bool)
        extra[:, absent] = True
        forbidden = extra if forbidden is None else (np.asarray(forbidden, bool) | extra)
    return draw_fakes(relabelled, plan.fake_values, rng, forbidden, plan.thresholds)


def apply_plan(plan: BucketizationPlan, table, rng: np.random.Generator) -> BucketizedRelease:
    """Apply ``plan`` to the rows of ``table`` in memory: rows → buckets, σ fake values per
    bucket, QIT (rows grouped by bucket, random order inside) and ST."""
    sa = plan.sa
    if table.sa != sa or tuple(table.domain(sa)) != plan.labels:
        raise SchemaError(f"the plan is for SA {sa!r} with {len(plan.labels)} labels; the table's SA is "
                          f"{table.sa!r} with {len(table.domain(table.sa))}")
    for c in table.quasi:
        table.codes(c)  # SchemaError on an unknown column
    bid, counts = assign_buckets(table.codes(sa), plan.counts, rng)
    forbidden = None
    # given + learned (associations.py, §6) negative associations; the learned ones go into the certificate
    plan, associations, learned = with_learned_associations(plan, bid, counts, {c: table.codes(c) for c in table.quasi},
                                                            table.domains)
    if associations:  # validated even when σ = 0
        forbidden = negative_association_mask(bid, counts.shape[0], {c: table.codes(c) for c in table.quasi},
                                              table.domains, sa, associations)
    fake = draw_plan_fakes(plan, counts, rng, forbidden)
    qit_order = grouped_random_order(bid, rng)  # grouped by (random) bucket id, random inside
    qit = {c: codes_to_labels(table.codes(c)[qit_order], table.domain(c)) for c in table.quasi}
    qit["bid"] = pa.array(bid[qit_order], pa.int64())
    st, custodian = st_table(counts, fake, rng, sa, table.domain(sa))
    custodian.update(learned)
    numeric = {c: table.numeric_values(c) for c in (*table.quasi, sa)}
    return release_from_plan(plan, counts, pa.table(qit), st, table.quasi, table.domains, numeric, custodian=custodian)


__all__ = ["assign_buckets", "grouped_random_order", "st_table", "release_from_plan", "draw_plan_fakes", "apply_plan"]
