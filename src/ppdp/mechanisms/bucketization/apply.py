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
"""

from __future__ import annotations

import numpy as np

from ...errors import PpdpError


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
