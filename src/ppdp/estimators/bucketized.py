"""Estimators of the bucketized family (F'-privacy, Anatomy).

Anatomy's estimator (Xiao & Tao 2006): est(P ∧ S) = Σ_g n_g(P)·ĉ_g(S)/|g|, with n_g(P) the
QIT rows of g meeting the QI predicate and ĉ_g(S) the ST count of g on the SA predicate,
corrected for fake values without using the fake flag (Wang et al. 2011, §6; see
:func:`correct_counts`). It is evaluated as per-row weights w[row, x] = ĉ_{g(row)}(x)/|g(row)|
summed over rows with the same QI values, on the shared :class:`~ppdp.queries.CountIndex`.

Fake-value correction. A receiver sees, per bucket, the observed counts c^obs_g(x) (real
counts plus one per fake) but not which values are fake. Let E_g be the values eligible as
fakes (not real in g, holdable by a real record of g under the published thresholds —
1/|g| ≤ f'_x — and not forbidden by a published negative association: the publication rule
of :func:`~ppdp.releases.bucketized.fake_candidates`) and D_g = E_g minus
the fakes: the eligible values that do *not* appear in g — computable from the release —
with |E_g| = |D_g| + σ. With p = σ/|E_g|, each x ∈ E_g is a fake with probability p, so for a
value set S, F̂_g(S) = σ·|S ∩ D_g|/|D_g| has E[F̂_g(S)] = p·|S ∩ E_g| = E[F_g(S)]. Hence
ĉ_g(x) = c^obs_g(x) − σ·[x ∈ D_g]/|D_g| is unbiased for the real count (over the draw of the
fakes), and Σ_x ĉ_g(x) = |g|. Unseen values get a small negative weight: the price of
unbiasedness without the fake flag. When D_g is empty (σ = |E_g|) the fakes cannot be told
apart from real count-1 values by any rule; the correction then spreads σ evenly over the
bucket's count-1 values (biased in that corner; :func:`correct_counts` counts such buckets).
"""

from __future__ import annotations

import weakref

import numpy as np
from scipy import sparse

from ..queries import CountIndex, split_masks
from .base import Estimator


def correct_counts(observed: np.ndarray, sigma: int, forbidden: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Unbiased real-count estimates ĉ_g(x) from the observed ST counts (module docstring).

    ``observed`` (n_buckets × m) = real counts + one per fake. Returns ``(ĉ, n_saturated)``.
    """
    obs = np.asarray(observed, dtype=np.float64)
    if sigma == 0:
        return obs.copy(), 0
    unseen = obs == 0
    if forbidden is not None:
        unseen &= ~forbidden
    n_unseen = unseen.sum(axis=1)
    est = obs.copy()
    ok = n_unseen > 0
    est[ok] -= sigma * unseen[ok] / n_unseen[ok, None]
    sat = ~ok
    if sat.any():  # every eligible value used: spread σ over the count-1 values
        ones = obs[sat] == 1
        est[sat] -= sigma * ones / np.maximum(ones.sum(axis=1), 1)[:, None]
    return est, int(sat.sum())


def anatomy_index(release) -> CountIndex:
    """Per-QI-combination weights Σ_rows ĉ_{g(row)}(x)/|g(row)| of a bucketized release."""
    b = release.buckets()
    nb = b["n_buckets"]
    sigma = release.fake_values
    excluded = release.fake_excluded() if sigma else None  # the publication rule, read from the files
    chat, _ = correct_counts(release.observed_counts(), sigma, excluded)
    cw = chat / np.maximum(b["sizes"], 1)[:, None]
    # rows with identical QI values are interchangeable for every query: sum their weights
    quasi, domains = release.quasi, release.domains
    n = len(b["qb"])
    if quasi:
        qi_codes = {c: release.codes("qit", c) for c in quasi}
        dims = [len(domains[c]) for c in quasi]
        key = np.ravel_multi_index([qi_codes[c].astype(np.int64) for c in quasi], dims)
        uniq, inv = np.unique(key, return_inverse=True)
        combo = dict(zip(quasi, np.unravel_index(uniq, dims)))
    else:
        uniq, inv, combo = np.zeros(1), np.zeros(n, dtype=np.int64), {}
    P = sparse.csr_matrix((np.ones(n), (inv.ravel(), b["qb"])), shape=(len(uniq), nb))
    W = np.asarray(P @ cw)
    return CountIndex(combo, {c: len(domains[c]) for c in quasi}, W)


# one index per release object (a release's files do not change once loaded)
_INDEX: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class AnatomyEstimator(Estimator):
    """Anatomy's estimator Σ_g n_g(P)·ĉ_g(S)/|g| with the fake-value correction (module doc)."""

    name = "anatomy"
    family = "bucketized"

    def answer(self, release, workload) -> np.ndarray:
        _, masks = release.resolve(workload)
        index = _INDEX.get(release)
        if index is None:
            index = _INDEX[release] = anatomy_index(release)
        rest, sel = split_masks(masks, release.sa, len(release.domains[release.sa]))
        return (index.sums(rest) * sel).sum(axis=1)


__all__ = ["AnatomyEstimator", "correct_counts", "anatomy_index"]
