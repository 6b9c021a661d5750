"""Certain bounds on the count queries of a bucketized release (F'-privacy, Anatomy).

A bucketized release publishes, per bucket g, the QI values of its |g| records (QIT) and the
multiset of its SA values (ST), but not which record holds which value. For a query P ∧ S
(P on the quasi-identifiers, S a set of SA values) let n_g(P) be the QIT rows of g meeting P
and c_g(S) the real records of g whose value lies in S. Whatever the hidden assignment, the
records of g meeting P and S number at least n_g(P) + c_g(S) − |g| (the records meeting P
that cannot all hold a value outside S) and at most min(n_g(P), c_g(S)) — the Fréchet bounds
of a 2 × 2 table with known margins. Summed over buckets, they bound the count with certainty.

Fake values. With σ > 0 each bucket lists fake values beside its real ones; the receiver does
not know which, but the release fixes: the number of fakes of g, σ_g = Σ_x c^obs_g(x) − |g|
(the ST lists |g| real records plus one per fake); a fake is listed with count 1 and never
beside a real value, so every value with count ≥ 2 is real; and the publication rule (public:
:func:`~ppdp.releases.bucketized.fake_candidates`, negative associations, values the claim
reveals absent) excludes some count-1 values as fakes. With K_g(S) the count-1 values of S
that may be fake (K_g the bucket's total), the fakes among S number at least
max(0, σ_g − (K_g − K_g(S))) and at most min(σ_g, K_g(S)), so
c_g(S) ∈ [c^obs_g(S) − min(σ_g, K_g(S)), c^obs_g(S) − max(0, σ_g − K_g + K_g(S))]; the bounds
above are monotone in c_g(S) and take its ends. (Should the rule leave a bucket fewer
candidates than σ_g — a release the rule did not make — every count-1 value is a candidate.)

Records the mechanism dropped (``manifest["dropped"]``) are in the input table but in no
bucket: each may meet the query, so they widen the upper bound (the bounds are of the input
table's count).

Evaluation (vectorised, no loop per bucket): the QIT rows are counted per (combination of the
constrained QI columns, bucket) by one :class:`~ppdp.queries.CountIndex` keyed by bucket, its
buckets numbered so that buckets of one *profile* (same size, observed counts and excluded
values: their bounds are the same function of n_g(P) and S) are consecutive. For each chunk of
queries the index hands over n_g(P) (queries × buckets); the per-profile quantities of S are a
(queries × profiles) matrix product, and each profile's buckets are a column slice. The
one-record buckets of a profile share one column (:class:`BucketOrder`: their terms are
linear in n_g(P)), which on census tables leaves a small share of the buckets as columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: a block of queries is handled a profile's column slice at a time when its (queries ×
#: buckets) cells exceed this many per profile (the slices' per-call overhead is then small);
#: else the per-profile numbers are spread over the buckets (one gather, a few array passes)
_SLICE_CELLS = 4096
#: queries per block of the (queries × buckets) arithmetic
_BLOCK_ROWS = 128


@dataclass(frozen=True)
class BoundProfiles:
    """Per-profile inputs of the bounds and of Anatomy's estimate (T profiles, m SA values):
    ``obs`` (T × m) observed ST counts, fakes included; ``cand`` (T × m) 1 where a count-1
    value may be a fake; ``sigma`` (T,) fakes per bucket; ``size`` (T,) |g|; ``p`` (T × m)
    Anatomy's weights ĉ_g(x)/|g|; ``profile`` (buckets,) each bucket's profile."""

    obs: np.ndarray
    cand: np.ndarray
    sigma: np.ndarray
    size: np.ndarray
    p: np.ndarray
    profile: np.ndarray

    @classmethod
    def build(cls, obs: np.ndarray, sizes: np.ndarray, excluded: np.ndarray | None, p: np.ndarray,
              profile: np.ndarray) -> BoundProfiles:
        obs = np.asarray(obs, dtype=np.float64)
        sizes = np.asarray(sizes, dtype=np.float64)
        sigma = np.maximum(obs.sum(axis=1) - sizes, 0.0)
        ones = obs == 1
        cand = ones if excluded is None else ones & ~np.asarray(excluded, dtype=bool)
        short = cand.sum(axis=1) < sigma  # not a release the rule made: any count-1 value
        cand[short] = ones[short]
        return cls(obs, cand.astype(np.float64), sigma, sizes, np.asarray(p, dtype=np.float64),
                   np.asarray(profile, dtype=np.int64))

    @property
    def n_profiles(self) -> int:
        return len(self.size)


def sa_count_bounds(selp: np.ndarray, prof: BoundProfiles) -> tuple[np.ndarray, np.ndarray]:
    """Bounds (lo, hi), each (queries × profiles), on c_g(S), the real records of a bucket of
    each profile whose value meets each query's SA predicate (``selp``: queries × m, 0/1)."""
    obs_s = selp @ prof.obs.T
    cand_s = selp @ prof.cand.T
    k_total = prof.cand.sum(axis=1)
    sig = prof.sigma[None, :]
    lo = obs_s - np.minimum(sig, cand_s)
    hi = obs_s - np.maximum(sig - (k_total[None, :] - cand_s), 0.0)
    return lo, hi


class BucketOrder:
    """The buckets renumbered as the columns of the bounds' count index.

    A bucket of one record has n_g(P) ∈ {0, 1}, so its three terms are linear in n_g(P) (n·p,
    n·max(0, c_lo) + (1 − n)·max(0, c_lo − 1), n·min(1, c_hi) + (1 − n)·min(0, c_hi)): the
    one-record buckets of a profile share one column, whose sum is how many of them meet the
    query (on census tables most buckets hold one record). The other buckets have a column
    each, those of one profile consecutive: ``starts`` (profile t's columns: starts[t] …
    starts[t + 1] − 1, empty for a profile of one-record buckets), ``column_profile`` (each
    of those columns' profile), ``n_dense`` of them; then one column per profile in
    ``single`` (profiles of one-record buckets, ``single_count`` buckets each). ``rank``:
    bucket → column; ``n_columns`` in all."""

    def __init__(self, profile: np.ndarray, n_profiles: int, size: np.ndarray | None = None):
        profile = np.asarray(profile, dtype=np.int64)
        one = np.zeros(n_profiles, dtype=bool) if size is None else np.asarray(size) == 1
        dense = ~one[profile]
        order = np.flatnonzero(dense)[np.argsort(profile[dense], kind="stable")]
        self.n_dense = len(order)
        self.rank = np.empty(len(profile), dtype=np.int64)
        self.rank[order] = np.arange(self.n_dense)
        self.column_profile = profile[order]
        self.starts = np.searchsorted(self.column_profile, np.arange(n_profiles + 1))
        self.single = np.flatnonzero(one)
        col_of = np.full(n_profiles, -1, dtype=np.int64)
        col_of[self.single] = self.n_dense + np.arange(len(self.single))
        self.rank[~dense] = col_of[profile[~dense]]
        self.single_count = np.bincount(profile[~dense], minlength=n_profiles)[self.single].astype(np.float64)
        self.n_columns = self.n_dense + len(self.single)


def bound_reducer(sel: np.ndarray, prof: BoundProfiles, order: BucketOrder):
    """``reduce(queries, N)`` for :meth:`~ppdp.queries.CountIndex.sums`: from n_g(P) (``N``:
    queries × columns of ``order``) the (len(queries) × 3) numbers Anatomy's estimate
    Σ_g n_g(P)·p_g(S), the lower and the upper bound Σ_g of the per-bucket bounds."""
    selp_all = np.asarray(sel, dtype=np.float64)
    T = prof.n_profiles
    counts = np.diff(order.starts)
    nd, single, cnt = order.n_dense, order.single, order.single_count

    def reduce(queries: np.ndarray, N: np.ndarray) -> np.ndarray:
        out = np.zeros((len(queries), 3))
        for a in range(0, len(queries), _BLOCK_ROWS):
            b = min(len(queries), a + _BLOCK_ROWS)
            n = N[a:b, :nd]
            selp = selp_all[queries[a:b]]
            c_lo, c_hi = sa_count_bounds(selp, prof)
            p_s = selp @ prof.p.T
            if len(single):  # one-record buckets, a column per profile: linear in their count
                k = N[a:b, nd:]
                lo1, hi1 = c_lo[:, single], c_hi[:, single]
                out[a:b, 0] += (k * p_s[:, single]).sum(axis=1)
                out[a:b, 1] += (k * np.maximum(lo1, 0.0) + (cnt - k) * np.maximum(lo1 - 1.0, 0.0)).sum(axis=1)
                out[a:b, 2] += (k * np.minimum(hi1, 1.0) + (cnt - k) * np.minimum(hi1, 0.0)).sum(axis=1)
            if not nd:
                continue
            shift = c_lo - prof.size[None, :]  # n_g(P) + shift = the lower bound before max(0, ·)
            if n.shape[0] * n.shape[1] > _SLICE_CELLS * T:
                for t in range(T):
                    s0, s1 = int(order.starts[t]), int(order.starts[t + 1])
                    if s0 == s1:
                        continue
                    blk = n[:, s0:s1]
                    tot = blk.sum(axis=1)
                    out[a:b, 0] += tot * p_s[:, t]
                    out[a:b, 1] += np.maximum(blk + shift[:, t:t + 1], 0.0).sum(axis=1)
                    out[a:b, 2] += np.minimum(blk, c_hi[:, t:t + 1]).sum(axis=1)
            else:
                out[a:b, 0] += (n * np.repeat(p_s, counts, axis=1)).sum(axis=1)
                out[a:b, 1] += np.maximum(n + np.repeat(shift, counts, axis=1), 0.0).sum(axis=1)
                out[a:b, 2] += np.minimum(n, np.repeat(c_hi, counts, axis=1)).sum(axis=1)
        return out

    return reduce


__all__ = ["BoundProfiles", "BucketOrder", "bound_reducer", "sa_count_bounds"]
