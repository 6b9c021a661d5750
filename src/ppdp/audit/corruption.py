"""The corruption attack and fake values (Wang et al. 2011, §6).

An adversary who learned the SA value of q records of a bucket g (corrupted records)
removes one occurrence of each known value and infers the rest: for a remaining record the
posterior of x is (remaining count of x) / (|g| − q). With σ fake SA values per bucket
(distinct, from values absent in g, so each fake has count 1), the adversary knows σ of the
listed values are fake but not which: a value is certainly real if its listed count is ≥ 2
or a corrupted record had it; among the other count-1 values U, σ are fake, so each is real
with probability (|U| − σ)/|U| and its posterior is that times 1/(|g| − q). When all but one
record are known (q = |g| − 1) the certainty drops from 1 to 1/(1 + σ).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ..errors import PpdpError


def corruption_posterior(real_counts: np.ndarray, known_counts: np.ndarray, fake: np.ndarray | None = None) -> np.ndarray:
    """Posterior of each listed SA value for a remaining (uncorrupted) record, per bucket.

    ``real_counts`` / ``known_counts``: (n_buckets × m) real counts and counts among the
    corrupted records; ``fake``: (n_buckets × m) 0/1 matrix of the fake values listed in each
    bucket (None: no fakes). Rows of buckets with no remaining record are zero."""
    real = np.atleast_2d(np.asarray(real_counts, dtype=np.int64))
    known = np.atleast_2d(np.asarray(known_counts, dtype=np.int64))
    fk = np.zeros_like(real) if fake is None else np.atleast_2d(np.asarray(fake, dtype=np.int64))
    if real.shape != known.shape or real.shape != fk.shape or (known > real).any() or (known < 0).any():
        raise PpdpError("known counts must lie between 0 and the real counts, shape for shape")
    if ((fk > 0) & (real > 0)).any() or (fk > 1).any():
        raise PpdpError("fake values must be distinct and absent from the bucket's real values")
    listed = real + fk
    sig = fk.sum(axis=1).astype(float)
    left = (real - known).sum(axis=1).astype(float)
    uncertain = (listed == 1) & (known == 0)
    u = uncertain.sum(axis=1).astype(float)
    p_real = np.divide(u - sig, u, out=np.ones_like(u), where=u > 0)
    share = np.divide(listed - known, left[:, None], out=np.zeros(real.shape, float), where=left[:, None] > 0)
    return np.where(uncertain, p_real[:, None] / np.maximum(left, 1)[:, None] * (left[:, None] > 0), share)


def hypothetical_fakes(real: np.ndarray, sigma: int, rng: np.random.Generator) -> np.ndarray:
    """σ fake values per bucket drawn uniformly from the values absent in the bucket."""
    absent = real == 0
    if sigma > absent.sum(axis=1).min(initial=sigma):
        raise PpdpError(f"σ = {sigma} fake values do not fit: some bucket has fewer absent SA values")
    key = np.where(absent, rng.random(real.shape), np.inf)
    rank = np.argsort(np.argsort(key, axis=1), axis=1)
    return (absent & (rank < sigma)).astype(np.int64)


def _records(real: np.ndarray):
    """Each real record as (bucket, SA code), bucket-major."""
    n_b, m = real.shape
    flat = real.ravel()
    idx = np.repeat(np.arange(n_b * m), flat)
    return idx // m, idx % m


def corruption_table(release, qs: Sequence[int] | None = None, sigma: int | None = None, seed: int = 0) -> pd.DataFrame:
    """For q = 0, 1, … corrupted records per bucket (chosen at random; buckets with |g| > q),
    the adversary's best posterior on a remaining record without fakes and with σ fakes
    (``sigma``=None: the release's own fake values), plus the row ``all but one`` (q = |g| − 1)."""
    from .posterior import bucket_shares

    sizes, real, fakes, _ = bucket_shares(release)
    keep = sizes > 0
    sizes, real, fakes = sizes[keep], real[keep], fakes[keep]
    n_b, m = real.shape
    rng = np.random.default_rng(seed)
    fk = (fakes > 0).astype(np.int64) if sigma is None else hypothetical_fakes(real, int(sigma), rng)
    sig = fk.sum(axis=1)
    rb, rx = _records(real)
    key = rng.random(len(rb))
    order = np.lexsort((key, rb))
    rb, rx = rb[order], rx[order]
    starts = np.concatenate([[0], np.cumsum(real.sum(axis=1))[:-1]])
    rank = np.arange(len(rb)) - starts[rb]
    if qs is None:
        qs = list(range(int(sizes.max())))
    rows = []
    cases = [(f"{q}", np.full(n_b, q)) for q in qs] + [("all but one", sizes - 1)]
    for name, qv in cases:
        live = sizes > qv
        if not live.any():
            continue
        known_rec = rank < qv[rb]
        known = np.bincount(rb[known_rec] * m + rx[known_rec], minlength=n_b * m).reshape(n_b, m)
        without = corruption_posterior(real[live], known[live]).max(axis=1)
        with_f = corruption_posterior(real[live], known[live], fk[live]).max(axis=1)
        rows.append({"q": name, "buckets": int(live.sum()), "sigma": float(sig[live].mean()),
                     "mean_max_posterior_no_fakes": float(without.mean()), "max_posterior_no_fakes": float(without.max()),
                     "mean_max_posterior_with_fakes": float(with_f.mean()), "max_posterior_with_fakes": float(with_f.max()),
                     "bound_all_but_one": float(np.max(1.0 / (1.0 + sig[live]))) if name == "all but one" else np.nan})
    return pd.DataFrame(rows)
