"""Fake SA values against corruption and negative-association attacks (Wang et al. 2011, §6).

Injection. Every bucket g receives σ fake SA values, distinct within the bucket, drawn
uniformly without replacement from its *eligible* set

    E_g = {x : x is not a real value of g}
          ∩ {x : 1/|g| ≤ f'_x}  (a real record of g could hold x under the published thresholds)
          minus {x : (z, x) is a learned negative association and some record of g has z}.

Why the threshold condition: the receiver sees |g| (QIT rows), the ST counts (|g| + σ in
all) and the thresholds f'. A value listed once in g would, if real, have share 1/|g|; a real
value's share never exceeds its threshold, so a count-1 value with 1/|g| > f'_x is certainly a
fake. Drawing fakes without that condition let a receiver identify 84% of them on EDU/OCC
(θ = 8, σ = 1 or 2); with it, every count-1 value is one a real record could hold and the
rule identifies none (tests/bucketization/test_fakes_hidden.py).

Which values are fake is never published: :func:`~ppdp.mechanisms.bucketization.apply.st_table`
returns them for the custodian-side file. The receiver's estimator subtracts the expected fake contribution using
the same eligibility rule read from the files (:func:`ppdp.estimators.bucketized.correct_counts`
with :meth:`~ppdp.releases.bucketized.BucketizedRelease.fake_excluded`); the rule itself is
:func:`ppdp.releases.bucketized.fake_candidates`.
"""

from __future__ import annotations

import numpy as np

from ...claims.fprivacy import privacy_cap
from ...errors import InfeasibleError
from ...releases.bucketized import fake_candidates


def planning_thresholds(o: np.ndarray, fprime: np.ndarray, sigma: int, allowed: np.ndarray | None = None,
                        min_size: int = 1) -> np.ndarray:
    """Thresholds to *plan* with when σ fakes must fit: min(f'_x, 1/S0).

    A bucket of size S holds at most S distinct real values and its fakes must come from the
    values with 1/S ≤ f'_x (K(S) of them), so a bucket has room for σ fakes whenever
    K(S) ≥ S + σ. The smallest buckets are the tight ones (OCC at θ = 8: only two values have
    f' ≥ 1/2, so a bucket of two has no room at all); S0 is the smallest size ≥ the planner's
    M with K(S0) ≥ S0 + σ, and planning with min(f', 1/S0) makes every bucket at least that
    large. The result is stricter than f' (the release still claims f'); unchanged when no
    such S0 keeps Lemma 1 (f_x ≤ 1/S0) or none is needed. ``allowed``: values fakes may take at
    all (default: every value)."""
    o = np.asarray(o, dtype=np.int64)
    fp = np.asarray(fprime, dtype=np.float64)
    if sigma <= 0:
        return fp
    ok = np.ones(len(fp), bool) if allowed is None else np.asarray(allowed, bool)
    n = int(o.sum())
    for S in range(max(1, int(min_size)), len(fp) + 2):
        K = int((ok & (privacy_cap(fp, S) >= 1)).sum())
        if K >= S + sigma:
            if S <= min_size:
                return fp
            cap = np.minimum(fp, 1.0 / S)
            if (o > privacy_cap(cap, n)).any():  # Lemma 1 would fail: keep f' (the draw then says what is short)
                return fp
            return cap
    return fp


def fake_ranks(n_eligible: np.ndarray, sigma: int, rng: np.random.Generator) -> np.ndarray:
    """(buckets × σ): a uniformly random σ-subset of ranks {0 … n−1} per bucket (n its number
    of eligible values, ≥ σ), by Floyd's sampling: one draw per bucket and fake, for k = 0 … σ−1
    a uniform j in [0, n − σ + k], replaced by n − σ + k when already drawn."""
    n = np.asarray(n_eligible, dtype=np.int64)
    ranks = np.empty((len(n), sigma), dtype=np.int64)
    for k in range(sigma):
        top = n - sigma + k
        t = rng.integers(0, top + 1)
        if k:
            t = np.where((ranks[:, :k] == t[:, None]).any(axis=1), top, t)
        ranks[:, k] = t
    return ranks


def eligible_fakes(counts: np.ndarray, forbidden: np.ndarray | None = None,
                   thresholds: np.ndarray | None = None) -> np.ndarray:
    """(buckets × m): the values a fake of each bucket (row of real ``counts``) may take — absent
    from the bucket, not ``forbidden`` and, when ``thresholds`` are given, holdable by a real
    record of the bucket (1/|g| ≤ f'_x)."""
    counts = np.asarray(counts)
    eligible = counts == 0
    if thresholds is not None:
        eligible &= fake_candidates(counts.sum(axis=1), thresholds, forbidden)
    elif forbidden is not None:
        eligible &= ~np.asarray(forbidden, dtype=bool)
    return eligible


def check_room(sizes: np.ndarray, n_eligible: np.ndarray, sigma: int, multiplicity: np.ndarray | None = None) -> None:
    """Raise :class:`InfeasibleError` when a bucket (of real size ``sizes``) has fewer than σ
    eligible values for its fakes; ``multiplicity``: how many buckets each entry stands for (a
    bucket type's)."""
    short = np.flatnonzero(np.asarray(n_eligible) < sigma)
    if len(short):
        n_short = len(short) if multiplicity is None else int(np.asarray(multiplicity)[short].sum())
        raise InfeasibleError(
            f"{n_short} bucket(s) cannot receive {sigma} distinct fake values (e.g. a bucket of size "
            f"{int(sizes[short[0]])} has only {int(n_eligible[short[0]])} absent SA values that a real record could "
            f"hold there under the thresholds and the negative associations); lower fake_values")


def draw_fakes(counts: np.ndarray, sigma: int, rng: np.random.Generator, forbidden: np.ndarray | None = None,
               thresholds: np.ndarray | None = None) -> np.ndarray:
    """σ distinct fake values per bucket: a boolean (n_buckets × m) matrix, True = injected.

    Each bucket's fakes are a uniformly random σ-subset of its eligible values (absent from
    the bucket, not forbidden, and — when ``thresholds`` are given — holdable by a real record
    of the bucket: 1/|g| ≤ f'_x). Raises :class:`InfeasibleError` when a bucket has fewer
    than σ eligible values.
    """
    counts = np.asarray(counts)
    nb, m = counts.shape
    fake = np.zeros((nb, m), dtype=bool)
    if sigma == 0 or nb == 0:
        return fake
    eligible = eligible_fakes(counts, forbidden, thresholds)
    n_el = eligible.sum(axis=1)
    check_room(counts.sum(axis=1), n_el, sigma)
    # each rank r is mapped to its value through the running count of eligible values (the
    # value at rank r is preceded by exactly the positions whose running count is ≤ r)
    ranks = fake_ranks(n_el, sigma, rng)
    running: np.ndarray = np.cumsum(eligible, axis=1, dtype=np.int16 if m < 1 << 15 else np.int64)
    for k in range(sigma):
        fake[np.arange(nb), (running <= ranks[:, k, None]).sum(axis=1)] = True
    return fake


__all__ = ["check_room", "draw_fakes", "eligible_fakes", "fake_ranks", "planning_thresholds"]
