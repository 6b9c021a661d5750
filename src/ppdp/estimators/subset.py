"""Estimators of the "ldp" family (k-subset selection, :mod:`ppdp.kernels.subset`).

Per distinct QI predicate P, the release gives the support count c_v of every value (the
reports of P's records that hold v) and n_P (their records): E[c_v] = q·n_P + (p − q)·x_v.

**Inversion** (``"inversion"``): x̂_v = (c_v − n_P·q)/(p − q), summed over the values a query
selects — unbiased (Wang, Wu & Hu 2016), can be negative.

**Norm-Sub** (``"norm-sub"``): the inverted vector of P projected onto {x ≥ 0, Σx = n_P}
(Wang, Lopuhaä-Zwakenberg, Li, Skoric & Li 2020).

**MLE** (``"mle"``): the fixed point of the iterative Bayesian update (Agrawal & Aggarwal 2001)
on the support counts: c/k is a histogram of k·n_P draws through the channel
(q·J + (p − q)·I)/k, a uniform channel whose maximum-likelihood counts have a closed form.

**Empirical Bayes** (``"eb"``, the default): the inversion shrunk towards n_P·π⁰, π⁰ the
whole table's distribution (Norm-Sub of its inversion over all records), by the best linear
predictor under a Dirichlet-multinomial model whose dispersion is estimated from P's own
counts by moments, then projected like Norm-Sub; a count Norm-Sub puts above 1,000 keeps
Norm-Sub's value (the shrinkage gains nothing there). On OCC it is the most accurate in the
1–10, 11–100 and 101–1,000 bins and level with Norm-Sub above 1,000; on zero counts Norm-Sub
is closer (docs/subset.md).

Uncertainty, every estimator: the inversion's variance is exact given the table (the records
report independently): for a query selecting s values, a record whose value lies in the set
contributes Var|Y ∩ S| = ``var_in`` and one whose value does not ``var_out``
(:func:`~ppdp.kernels.subset.set_count_moments`), so Var = (x_S·var_in + (n_P − x_S)·var_out)/(p − q)²,
estimated at the estimator's own counts (clipped to [0, n_P]); the interval is the
inversion's normal interval cut to [0, n_P] and widened to hold the estimate (a confidence
interval whatever the shrinkage; its coverage of true counts is measured in
tests/contract/test_coverage_ldp.py).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from scipy import stats

from ..kernels.subset import inclusion_probabilities, set_count_moments
from ..queries import split_masks
from .base import Estimates, Estimator


def _predicates(masks: Sequence[Mapping[str, np.ndarray]]) -> tuple[list, np.ndarray]:
    """The distinct QI predicates among ``masks`` and, per query, the index of its predicate."""
    uniq: dict[bytes, int] = {}
    inv = np.empty(len(masks), dtype=np.int64)
    reps: list = []
    for i, mk in enumerate(masks):
        h = b"|".join(c.encode() + b"=" + np.packbits(mk[c]).tobytes() for c in sorted(mk))
        if h not in uniq:
            uniq[h] = len(reps)
            reps.append(mk)
        inv[i] = uniq[h]
    return reps, inv


def norm_sub(X: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Each row of X projected onto {x ≥ 0, Σx = total}: x − δ clipped at 0, δ set per row so that
    the kept entries sum to the total (one sort per row)."""
    X = np.asarray(X, dtype=np.float64)
    total = np.asarray(total, dtype=np.float64)
    R, m = X.shape
    if R == 0:
        return X.copy()
    srt = -np.sort(-X, axis=1)
    cs = np.cumsum(srt, axis=1)
    j = np.arange(1, m + 1)
    delta = (cs - total[:, None]) / j
    ok = srt - delta > 0
    last = m - 1 - np.argmax(ok[:, ::-1], axis=1)  # the largest j whose entry stays positive
    d = delta[np.arange(R), last]
    out = np.maximum(X - d[:, None], 0.0)
    out[total <= 0] = 0.0
    return out


def uniform_channel_mle(Y: np.ndarray, p: float, q: float) -> np.ndarray:
    """The maximum-likelihood counts (rows) of published counts Y of n = ΣY draws through the
    uniform channel T = q·J + p·I: π_v = max(q, y_v/λ) with λ set by Σπ = 1 (the KKT conditions
    of the concave likelihood; the fixed point of the iterative Bayesian update), x̂ = n(π − q)/p."""
    Y = np.asarray(Y, dtype=np.float64)
    R, m = Y.shape
    n = Y.sum(axis=1)
    srt = -np.sort(-Y, axis=1)
    css = np.cumsum(srt, axis=1)
    j = np.arange(1, m + 1)
    rest = 1.0 - q * (m - j)
    lam = np.divide(css, rest, out=np.full_like(css, np.inf), where=rest > 0)
    ok = (rest > 0) & (srt > q * lam)
    jj = np.where(ok.any(axis=1), m - 1 - np.argmax(ok[:, ::-1], axis=1), 0)
    L = lam[np.arange(R), jj]
    good = np.isfinite(L) & (L > 0) & (n > 0)
    L = np.where(good, L, 1.0)
    pi = np.maximum(q, Y / L[:, None])
    return np.where(good[:, None], np.maximum(n[:, None] * (pi - q) / p, 0.0), 0.0)


class SubsetSetup:
    """What the estimators need for one resolved workload: ``C`` (U, m) support counts and ``n``
    (U,) records per distinct predicate, ``inv`` query → predicate, ``sel`` (n_q, m) the values
    each query selects, and the channel's (m, k, ε, p, q)."""

    def __init__(self, release, workload):
        _, masks = release.resolve(workload)
        claim = release.claim
        sa = release.sensitive[0]
        self.m, self.k, self.epsilon = claim.m, claim.k, claim.epsilon
        self.p, self.q = inclusion_probabilities(self.m, self.k, self.epsilon)
        rest, self.sel = split_masks(masks, sa, self.m)
        reps, self.inv = _predicates(rest)
        cols = sorted({c for mk in reps for c in mk})
        index = release.support_index(cols)
        self.C = np.asarray(index.sums(reps), dtype=np.float64) if reps else np.zeros((0, self.m))
        self.n = self.C.sum(axis=1) / self.k
        self.release = release

    def inversion(self) -> np.ndarray:
        return (self.C - self.n[:, None] * self.q) / (self.p - self.q)

    def whole_table(self) -> np.ndarray:
        """π⁰: the whole table's distribution, Norm-Sub of the inversion over every record."""
        c = self.release.support_counts().astype(np.float64)[None, :]
        n = np.array([c.sum() / self.k])
        x = norm_sub((c - n[:, None] * self.q) / (self.p - self.q), n)[0]
        return x / x.sum() if x.sum() > 0 else np.full(self.m, 1.0 / self.m)

    def per_query(self, X: np.ndarray) -> np.ndarray:
        return (X[self.inv] * self.sel).sum(axis=1)

    def interval(self, X: np.ndarray, level: float) -> Estimates:
        """The estimate Σ_S X with the inversion's exact-variance normal interval (module doc)."""
        est = self.per_query(X)
        nq = self.n[self.inv]
        s = self.sel.sum(axis=1)
        inv = self.per_query(self.inversion())
        x = np.clip(est, 0.0, nq)
        _, var_in, _, var_out = set_count_moments(self.m, self.k, self.epsilon, s)
        se = np.sqrt(np.maximum(x * var_in + (nq - x) * var_out, 0.0)) / (self.p - self.q)
        z = float(stats.norm.ppf(0.5 + level / 2))
        lo = np.clip(inv - z * se, 0.0, nq)
        hi = np.clip(inv + z * se, 0.0, nq)
        return Estimates(est, se, np.minimum(lo, est), np.maximum(hi, est), METHOD, level)


METHOD = ("closed form: exact variance of the linear inversion given the table (records report independently), "
          "the estimate's counts plugged in; interval = the inversion's normal interval cut to [0, n_P] and widened "
          "to hold the estimate")


class _SubsetEstimator(Estimator):
    family = "ldp"

    def fit(self, S: SubsetSetup) -> np.ndarray:
        """(U, m): the estimated counts of every value among each predicate's records."""
        raise NotImplementedError

    def answer(self, release, workload) -> np.ndarray:
        S = SubsetSetup(release, workload)
        return S.per_query(self.fit(S))

    def estimate(self, release, workload, level: float = 0.95) -> Estimates:
        S = SubsetSetup(release, workload)
        return S.interval(self.fit(S), level)


class SubsetInversion(_SubsetEstimator):
    """x̂_v = (c_v − n·q)/(p − q): unbiased, can be negative."""

    name = "inversion"

    def fit(self, S: SubsetSetup) -> np.ndarray:
        return S.inversion()


class SubsetNormSub(_SubsetEstimator):
    """The inversion projected onto {x ≥ 0, Σx = n_P} per predicate."""

    name = "norm-sub"

    def fit(self, S: SubsetSetup) -> np.ndarray:
        return norm_sub(S.inversion(), S.n)


class SubsetMLE(_SubsetEstimator):
    """The iterative Bayesian update's fixed point on the support counts (closed form)."""

    name = "mle"

    def fit(self, S: SubsetSetup) -> np.ndarray:
        k, p, q = S.k, S.p, S.q
        return uniform_channel_mle(S.C, (p - q) / k, q / k) / k


#: Norm-Sub counts above this are kept as they are by :class:`SubsetEB`
LARGE = 1000.0


class SubsetEB(_SubsetEstimator):
    """Empirical Bayes: the inversion shrunk towards the whole table's distribution, then Norm-Sub."""

    name = "eb"

    def fit(self, S: SubsetSetup) -> np.ndarray:
        p, q, n = S.p, S.q, S.n[:, None]
        pi0 = S.whole_table()[None, :]
        mu = n * pi0
        d = S.inversion() - mu
        sig2 = n * (pi0 * p * (1 - p) + (1 - pi0) * q * (1 - q)) / (p - q) ** 2  # channel variance at the prior
        base = n * pi0 * (1 - pi0)  # multinomial variance of the true counts at the prior
        # E[d²] = base·(1 + s) + σ²: the dispersion s ≥ 0 of the predicate's true distribution around π⁰, by moments
        s = np.maximum((d**2 - sig2).sum(axis=1) / np.maximum(base.sum(axis=1), 1e-300) - 1.0, 0.0)[:, None]
        tau2 = base * (1.0 + s)
        w = np.divide(tau2, tau2 + sig2, out=np.zeros_like(tau2), where=(tau2 + sig2) > 0)
        shrunk = norm_sub(mu + w * d, S.n)
        # a count Norm-Sub puts above LARGE gains nothing from the shrinkage and loses to the projection's
        # redistribution (OCC > 1,000: 0.144 against 0.139, docs/subset.md): Norm-Sub's own there
        plain = norm_sub(S.inversion(), S.n)
        return np.where(plain > LARGE, plain, shrunk)


__all__ = ["SubsetEB", "SubsetInversion", "SubsetMLE", "SubsetNormSub", "SubsetSetup", "norm_sub", "uniform_channel_mle"]
