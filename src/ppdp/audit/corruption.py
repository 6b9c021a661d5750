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


def corruption_posterior(real_counts: np.ndarray, known_counts: np.ndarray, sigma: int | np.ndarray = 0) -> np.ndarray:
    """Posterior of each SA value for a remaining (uncorrupted) record, per bucket.

    ``real_counts``/``known_counts``: (n_buckets × m) real counts and counts among the corrupted
    records; ``sigma``: fake values per bucket (scalar or per bucket). Rows of buckets with no
    remaining record are zero."""
    real = np.atleast_2d(np.asarray(real_counts, dtype=np.int64))
    known = np.atleast_2d(np.asarray(known_counts, dtype=np.int64))
    if real.shape != known.shape or (known > real).any() or (known < 0).any():
        raise PpdpError("known counts must lie between 0 and the real counts, shape for shape")
    sig = np.broadcast_to(np.asarray(sigma, dtype=np.int64), (real.shape[0],)).astype(float)
    rem = real - known
    left = rem.sum(axis=1).astype(float)
    uncertain = (real == 1) & (known == 0)
    u = uncertain.sum(axis=1).astype(float)
    p_real = np.divide(u, u + sig, out=np.ones_like(u), where=(u + sig) > 0)
    share = np.divide(rem, left[:, None], out=np.zeros(rem.shape, float), where=left[:, None] > 0)
    return np.where(uncertain, share * p_real[:, None], share)


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
    sig = fakes.sum(axis=1) if sigma is None else np.full(n_b, int(sigma))
    rng = np.random.default_rng(seed)
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
        without = corruption_posterior(real[live], known[live], 0).max(axis=1)
        with_f = corruption_posterior(real[live], known[live], sig[live]).max(axis=1)
        rows.append({"q": name, "buckets": int(live.sum()), "sigma": float(sig[live].mean()),
                     "mean_max_posterior_no_fakes": float(without.mean()), "max_posterior_no_fakes": float(without.max()),
                     "mean_max_posterior_with_fakes": float(with_f.mean()), "max_posterior_with_fakes": float(with_f.max()),
                     "bound_all_but_one": float(np.max(1.0 / (1.0 + sig[live]))) if name == "all but one" else np.nan})
    return pd.DataFrame(rows)
