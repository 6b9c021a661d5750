"""The estimators of uniform perturbation, SDR and global randomization A: inversion, MLE, EM,
Norm-Sub and empirical Bayes (the default), with their standard errors and intervals."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from scipy import stats

from ..errors import ParameterError
from ..validation import Integer, Options, Real
from .base import Estimates
from .channel import EM_TOL, MAX_ITER, RandomizedEstimator, UniformSetup, norm_sub, uniform_em, uniform_mle
from .empirical_bayes import EB_AUTO_STRENGTH, EB_COVARIANCES, EB_PARENTS, EB_STRENGTHS, eb_fit, eb_priors, eb_shrink
from .randomized_profile import AUTO_METHOD, METHOD as PROFILE_METHOD, setup_interval


def _fit_rows(method: str, rows: np.ndarray, p: np.ndarray, q: np.ndarray, member: np.ndarray,
              tol: float = EM_TOL, max_iter: int = MAX_ITER, prior: np.ndarray | None = None,
              eb: Mapping[str, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(x̂, iterations) per row of published counts for ``method`` ∈ {"mle", "em", "norm-sub", "eb"}
    (``prior``: per row, the parent distribution, for "eb"; ``eb``: :func:`eb_fit`'s options)."""
    if method == "em":
        return uniform_em(rows, p, q, member, tol, max_iter)
    zero = np.zeros(len(rows), dtype=np.int64)
    if method == "eb":
        assert prior is not None
        o = dict(eb or {})
        X = eb_shrink(rows, p, q, member, prior, strength=o.get("strength", "moments"),
                      covariance=o.get("covariance", "diagonal"))
        return (guarded(X, rows, p, q, member, tol, max_iter) if o.get("guard", "on") == "on" else X), zero
    if method == "mle":
        return uniform_mle(rows, p, q, member), zero
    n = rows.sum(axis=1)
    inv_x = np.where(member, (rows - (n * q)[:, None]) / p[:, None], 0.0)
    return norm_sub(inv_x, member, n), zero


def consistent_estimates(release, masks, model, method: str, tol: float = EM_TOL,
                         max_iter: int = MAX_ITER) -> tuple[np.ndarray, np.ndarray]:
    """(estimates, iterations) of ``"mle"``, ``"em"`` or ``"norm-sub"`` for a resolved workload on
    a uniform / SDR / global-randomization release: per distinct QI predicate and group
    (sub-table), the full vector of SA counts is estimated from the published counts of the
    rows meeting the predicate — non-negative, summing to their known number n_P,j — and each
    query adds up the values it selects."""
    if len(masks) == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    S = UniformSetup(release, masks, model)
    X, its = _fit(S, method, tol, max_iter)
    return S.per_query(X).sum(axis=1), its.reshape(S.Y.shape[:2]).max(axis=1)[S.inv]


#: :func:`guarded`: the share of the way from the empirical-Bayes count to Norm-Sub's where Norm-Sub's is lower
GUARD_PULL = 0.5
#: :func:`guarded`: the signal-to-noise ratio x̂/se above which the count is EM's (unshrunk)
GUARD_Z = 6.0


def guarded(X: np.ndarray, rows: np.ndarray, p: np.ndarray, q: np.ndarray, member: np.ndarray, tol: float = EM_TOL,
            max_iter: int = MAX_ITER) -> np.ndarray:
    """The empirical-Bayes counts ``X`` (R, m) of rows of published counts, guarded entry by entry
    where the other estimators do better, by public quantities only (the published counts, n and
    the channel): where Norm-Sub's count x_NS is below the empirical-Bayes count x_EB the count
    moves :data:`GUARD_PULL` of the way to it (the shrinkage towards the parent lifts counts that
    are zero or near it, Norm-Sub's projection does not); where the signal-to-noise ratio
    x_NS / se(x_EB) is at least :data:`GUARD_Z` (se: the inversion's channel standard error,
    √([x·a(1−a) + (n−x)·b(1−b)]/p²), a = p + q, b = q) the count is EM's — there the channel
    noise is small beside the count and the shrinkage's bias towards the parent costs more than
    it saves. Set on OCC point queries (benchmarks/bench_randomized_defaults.py, docs/sdr.md); the
    other rules tried against EDU's and Adult's bins: benchmarks/bench_eb_guard_rules.py."""
    n = rows.sum(axis=1)
    ns = _fit_rows("norm-sub", rows, p, q, member)[0]
    out = X - GUARD_PULL * np.maximum(X - ns, 0.0)
    a, b = (p + q)[:, None], q[:, None]
    x = np.clip(X, 0.0, n[:, None])
    se = np.sqrt(np.maximum(x * a * (1 - a) + (n[:, None] - x) * b * (1 - b), 0.0)) / p[:, None]
    strong = member & (ns >= GUARD_Z * se) & (se > 0)
    if strong.any():
        r = np.flatnonzero(strong.any(axis=1))
        em = uniform_em(rows[r], p[r], q[r], member[r], tol, max_iter)[0]
        out[r] = np.where(strong[r], em, out[r])
    return np.where(member, out, 0.0)


def _fit(S: UniformSetup, method: str, tol: float = EM_TOL, max_iter: int = MAX_ITER,
         eb: Mapping[str, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    rows, grp = S.rows
    if method == "eb":
        o = dict(eb or {})
        on = o.pop("guard", "on") == "on"
        X = eb_fit(S, **o)
        if on:
            U, J, m = S.Y.shape
            X = guarded(X.reshape(U * J, m), rows, S.p[grp], S.q[grp], S.member[grp], tol, max_iter).reshape(U, J, m)
        return X, np.zeros(len(rows), dtype=np.int64)
    X, its = _fit_rows(method, rows, S.p[grp], S.q[grp], S.member[grp], tol, max_iter)
    return X.reshape(S.Y.shape), its


def inversion_estimates(release, masks, model) -> np.ndarray:
    """x̂(query) = Σ_j Σ_{x ∈ sel ∩ D_j} (y_jx − n_j q_j)/p_j for a whole resolved workload."""
    if len(masks) == 0:
        return np.zeros(0)
    return UniformSetup(release, masks, model).inversion().sum(axis=1)


def _linear_interval(S: UniformSetup, X: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(inversion estimate, its standard error at the plug-in counts X, and the Wald interval
    intersected with [0, n_P]) per query."""
    inv = S.inversion().sum(axis=1)
    se = np.sqrt(np.maximum(S.linear_variance(S.per_query(X)), 0.0))
    z = float(stats.norm.ppf(0.5 + level / 2))
    nP = S.n_per_query().sum(axis=1)
    return inv, se, np.clip(inv - z * se, 0.0, nP), np.clip(inv + z * se, 0.0, nP)


def _auto_interval(S: UniformSetup, X: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(inversion estimate, its standard error at X, lower, upper): the Wald interval of
    :func:`_linear_interval`, except for queries in the small-sample regime of
    :data:`~ppdp.estimators.randomized_profile.AUTO_BELOW` (some sub-table with n_j·b_j < 5), which
    take the profile-likelihood interval (:func:`~ppdp.estimators.randomized_profile.setup_interval`)."""
    inv, se, wlo, whi = _linear_interval(S, X, level)
    _, plo, phi, small = setup_interval(S, level)
    return inv, se, np.where(small, plo, wlo), np.where(small, phi, whi)


def _simulate_uniform(X: np.ndarray, p: np.ndarray, q: np.ndarray, member: np.ndarray, B: int,
                      rng: np.random.Generator) -> np.ndarray:
    """B draws (R, B, m) of the published counts of rows whose true counts are X (R, m), through
    the uniform channel T = q·J + p·I on each row's domain: a record keeps its value with
    probability p and otherwise publishes a uniform draw from the domain (which is the same
    channel: keep p + q, any other value q). X is rounded to whole records per row (largest
    remainders, the row total kept)."""
    X = np.where(member, np.maximum(X, 0.0), 0.0)
    n = np.rint(X.sum(axis=1)).astype(np.int64)
    c = np.floor(X).astype(np.int64)
    short = n - c.sum(axis=1)
    order = np.argsort(-(X - c), axis=1)
    add = np.arange(X.shape[1])[None, :] < short[:, None]
    np.add.at(c, (np.repeat(np.arange(len(X)), X.shape[1]), order.ravel()), add.ravel().astype(np.int64))
    kept = rng.binomial(c[:, None, :], p[:, None, None], size=(len(X), B, X.shape[1]))
    left = n[:, None] - kept.sum(axis=2)
    dom = member / np.maximum(member.sum(axis=1, keepdims=True), 1)
    spread = rng.multinomial(left, dom[:, None, :])
    return kept + spread


class UniformChannelEstimator(RandomizedEstimator):
    """Base of the estimators of uniform perturbation, SDR and global randomization A."""

    mechanisms = ("uniform", "sdr", "global")

    def _opts(self, release) -> dict[str, Any]:
        p = self.get_params()
        out = {"tol": p.get("tol", EM_TOL), "max_iter": p.get("max_iter", MAX_ITER)}
        if self.method == "eb":
            out["eb"] = {k: p[k] for k in ("strength", "covariance", "parents", "guard")}
            if out["eb"]["strength"] == "auto":
                out["eb"]["strength"] = EB_AUTO_STRENGTH.get(release.manifest.get("mechanism"), "moments")
        return out

    def _setup(self, release, workload) -> UniformSetup | None:
        self.check(release)
        _, masks = release.resolve(workload)
        return UniformSetup(release, masks, release.transition_models()[0]) if len(masks) else None

    def answer_with_iterations(self, release, workload) -> tuple[np.ndarray, np.ndarray]:
        """(estimates, iterations per query: the most any of its sub-tables took; 0 for closed forms)."""
        S = self._setup(release, workload)
        if S is None:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        X, its = _fit(S, self.method, **self._opts(S.release))
        return S.per_query(X).sum(axis=1), its.reshape(S.Y.shape[:2]).max(axis=1)[S.inv]

    def _linear_estimate(self, S: UniformSetup | None, level: float, auto: bool = True) -> Estimates:
        """The estimate with the closed-form uncertainty of :class:`MLE`: ``se`` of the inversion at
        the fitted counts, the inversion's normal interval cut to [0, n_P] and widened to hold
        the estimate (``auto``: the profile-likelihood interval instead for the queries of the
        small-sample regime, :func:`_auto_interval`)."""
        method = (f"closed form: se of the linear inversion at the {self.method} counts; interval = "
                  + (AUTO_METHOD if auto else "the inversion's normal interval cut to [0, n_P]")
                  + "; widened to hold the estimate"
                  + ("; assumes records randomized independently given the table and a normal sum of "
                     "Bernoulli terms; the interval does not use the empirical-Bayes prior, so it holds "
                     "whatever the predicate's SA distribution" if self.method == "eb" else ""))
        if S is None:
            return Estimates.normal(np.zeros(0), np.zeros(0), method, level)
        X, _ = _fit(S, self.method, **self._opts(S.release))
        est = S.per_query(X).sum(axis=1)
        _, se, lo, hi = (_auto_interval if auto else _linear_interval)(S, X, level)
        return Estimates(est, se, np.minimum(lo, est), np.maximum(hi, est), method, level)


class Inversion(UniformChannelEstimator):
    """x̂ = (y − n·q)/p per group: uniform perturbation, SDR and global randomization A.

    Uncertainty, closed form: the estimate is linear in the published counts, and given the
    table each row publishes independently, so Var = Σ_j [x_j·a(1−a) + (n_j−x_j)·b(1−b)]/p_j²
    exactly (a = p_j + q_j·k_j, b = q_j·k_j; x_j the true selected count among the query's
    n_j rows of group j, k_j the selected values in D_j), estimated by plugging in the exact
    maximum-likelihood counts (in [0, n_j]). Interval: estimate ± z·se (normal approximation
    of a sum of n_j independent Bernoulli terms), except where it is poor — a query with a
    sub-table publishing few selected values from other rows (n_j·b_j < 5) — which takes the
    profile-likelihood interval under the known channel (:mod:`~ppdp.estimators.randomized_profile`),
    widened to hold the estimate. On the gauntlet's tables (not used to set the rule) the normal
    interval alone covered 0.934 for true counts 1–10 of SDR on Arrests (50 releases)."""

    name = method = "inversion"

    def __init__(self) -> None:
        self._set_params(locals())

    def answer_with_iterations(self, release, workload) -> tuple[np.ndarray, np.ndarray]:
        S = self._setup(release, workload)
        if S is None:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        est = S.inversion().sum(axis=1)
        return est, np.zeros(len(est), dtype=np.int64)

    def estimate(self, release, workload, level: float = 0.95) -> Estimates:
        S = self._setup(release, workload)
        if S is None:
            return Estimates.normal(np.zeros(0), np.zeros(0), self.describe(), level)
        X, _ = _fit(S, "mle")
        est, se, lo, hi = _auto_interval(S, X, level)
        return Estimates(est, se, np.minimum(lo, est), np.maximum(hi, est), self.describe(), level)

    @staticmethod
    def describe() -> str:
        return ("closed form: exact variance of the linear inversion given the table (independent "
                "randomization per row), maximum-likelihood counts plugged in; interval: " + AUTO_METHOD
                + "; widened to hold the estimate")


class MLE(UniformChannelEstimator):
    """The exact maximum-likelihood counts (:func:`uniform_mle`), per distinct QI predicate and sub-table,
    non-negative and summing to the known n_P,j — the limit of EM, without its iterations.

    Uncertainty, closed form: ``se`` is the inversion's standard error at the fitted counts (the
    MLE's asymptotic standard error when no count is at the boundary 0, where MLE and
    inversion coincide; conservative when some are). The interval is the inversion's Wald
    interval intersected with [0, n_P] (the counts a query can have) and widened to hold the
    estimate: its coverage is at least the Wald interval's, because the cut-off part holds
    no possible true count. The MLE is biased towards 0 for small counts, so a symmetric
    interval around it would under-cover; this one does not depend on that bias. Where the
    normal approximation itself fails (a sub-table with n_j·b_j < 5) the interval is the
    profile-likelihood one under the known channel instead, as for :class:`Inversion`."""

    name = method = "mle"

    def __init__(self) -> None:
        self._set_params(locals())

    def estimate(self, release, workload, level: float = 0.95) -> Estimates:
        return self._linear_estimate(self._setup(release, workload), level)


class BootstrapEstimator(UniformChannelEstimator):
    """Uncertainty by a parametric bootstrap over the mechanism's own randomness: fit the counts
    of every (predicate, sub-table) row, publish them again through the same uniform channel
    ``replicates`` times (:func:`_simulate_uniform`; every row and replicate at once), re-estimate
    each replicate with the same estimator, and take the standard deviation of each query's
    replicate estimates as its ``se``. Assumptions: the fitted counts stand in for the true
    ones; records are randomized independently.

    Interval (``interval``): ``"auto"`` (the default) — as for :class:`MLE`: the inversion's
    closed-form normal interval cut to [0, n_P], or the profile-likelihood interval where a
    sub-table has n_j·b_j < 5, widened to hold the estimate; ``"linear"`` — the normal interval
    everywhere (under-covers small counts: 0.934 for counts 1–10 of SDR on the gauntlet's Arrests
    table); ``"profile"`` — the profile-likelihood interval everywhere; ``"basic"`` — the basic bootstrap interval [2θ̂ − θ*_(1−α/2), 2θ̂ − θ*_(α/2)] cut
    to [0, n_P]. The basic interval corrects the bias only as it is at the fitted counts, which
    are shrunk towards 0, and under-covers badly (about 0.65 for uniform perturbation, 0.8 for
    SDR: benchmarks/bench_coverage_randomized.py); it is there to show that."""

    _boot_constraints: dict = {"replicates": Integer(0, 100_000), "seed": Integer(0, None),
                               "interval": Options("auto", "linear", "basic", "profile")}
    _boot_help = {"replicates": "Bootstrap replicates for the standard errors (0: the inversion's closed-form "
                                "standard error at the fitted counts instead, as for mle; no basic interval then).",
                  "seed": "Seed of the bootstrap replicates (the results are reproducible).",
                  "interval": "linear: the inversion's normal interval cut to [0, n_P]; basic: the bootstrap's; "
                              "profile: the profile-likelihood interval under the known channel; auto: profile "
                              "where the normal approximation fails (n_j·b_j < 5), else linear."}

    def estimate(self, release, workload, level: float = 0.95) -> Estimates:
        S = self._setup(release, workload)
        B = int(self.get_params().get("replicates", 200))
        kind = self.get_params().get("interval", "linear")
        if kind == "profile" or (kind == "auto" and B == 0):  # profile-likelihood interval (estimators/randomized_profile.py)
            how = f"se: closed form, the inversion's at the {self.method} counts; interval: " + (PROFILE_METHOD if kind == "profile" else AUTO_METHOD)
            if S is None:
                return Estimates.normal(np.zeros(0), np.zeros(0), how, level)
            X, _ = _fit(S, self.method, **self._opts(S.release))
            est, (_, se, wlo, whi), (_, lo, hi, small) = S.per_query(X).sum(axis=1), _linear_interval(S, X, level), setup_interval(S, level)
            if kind == "auto":
                lo, hi = np.where(small, lo, wlo), np.where(small, hi, whi)
            return Estimates(est, se, np.minimum(lo, est), np.maximum(hi, est), how + "; widened to hold the estimate", level)
        if B == 0:
            if kind != "linear":
                raise ParameterError("interval='basic' needs bootstrap replicates (replicates > 0)", param="replicates")
            return self._linear_estimate(S, level, auto=False)
        method = (f"se: parametric bootstrap over the channel's randomness ({B} replicates, re-estimated by "
                  f"{self.method}); interval: " + ("the inversion's normal interval cut to [0, n_P] and widened to "
                                                   "hold the estimate" if kind == "linear" else
                                                   AUTO_METHOD + "; widened to hold the estimate" if kind == "auto" else
                                                   "basic bootstrap interval cut to [0, n_P]"))
        if S is None:
            return Estimates.normal(np.zeros(0), np.zeros(0), method, level)
        if B < 10:
            raise ParameterError(f"replicates must be 0 or at least 10, got {B}", param="replicates")
        opts = self._opts(S.release)
        X, _ = _fit(S, self.method, **opts)
        est = S.per_query(X).sum(axis=1)
        rows, grp = S.rows
        Xr = X.reshape(rows.shape)
        live = np.flatnonzero(rows.sum(axis=1) > 0)
        rng = np.random.default_rng(int(self.get_params().get("seed", 0)))
        Ystar = _simulate_uniform(Xr[live], S.p[grp[live]], S.q[grp[live]], S.member[grp[live]], B, rng)
        g = np.repeat(grp[live], B)
        Xs, _ = _fit_rows(self.method, Ystar.reshape(-1, rows.shape[1]).astype(np.float64), S.p[g], S.q[g], S.member[g],
                          **opts, prior=np.repeat(eb_priors(S)[live], B, axis=0) if self.method == "eb" else None)
        full = np.zeros((len(rows), B, rows.shape[1]))
        full[live] = Xs.reshape(len(live), B, -1)
        U, J, m = S.Y.shape
        full = full.reshape(U, J, B, m).sum(axis=1)  # (U, B, m): summed over the groups
        reps = np.einsum("qbm,qm->qb", full[S.inv], S.sel.astype(np.float64), optimize=True)
        se = reps.std(axis=1, ddof=1)
        a = (1 - level) / 2
        qlo, qhi = np.quantile(reps, [a, 1 - a], axis=1)
        if kind in ("linear", "auto"):
            _, _, lo, hi = (_auto_interval if kind == "auto" else _linear_interval)(S, X, level)
            return Estimates(est, se, np.minimum(lo, est), np.maximum(hi, est), method, level)
        nP = S.n_per_query().sum(axis=1)
        return Estimates(est, se, np.clip(2 * est - qhi, 0.0, nP), np.clip(2 * est - qlo, 0.0, nP), method, level)


class EM(BootstrapEstimator):
    """Iterative Bayesian update per QI predicate and sub-table, with the known totals
    (non-negative, consistent; stops at ``tol``, so it sits short of :class:`MLE`)."""

    name = method = "em"
    _parameter_constraints = {"tol": Real(0, None, closed="neither"), "max_iter": Integer(1, None),
                              **BootstrapEstimator._boot_constraints}
    _parameter_help = {"tol": "Stop when no count moves by more than this (relative, floor one record).",
                       "max_iter": "Iteration cap.", **BootstrapEstimator._boot_help}

    def __init__(self, tol: float = EM_TOL, max_iter: int = MAX_ITER, replicates: int = 50, seed: int = 0,
                 interval: str = "auto"):
        self._set_params(locals())


class NormSub(BootstrapEstimator):
    """The inversion per QI predicate and sub-table, projected onto non-negative counts with the
    known total n_P,j (Norm-Sub, Wang et al. 2020). The best of the estimators that do not pool
    predicates on EDU and ADULT point queries (mean relative error over counts 1–10 and
    11–100, 10 cells: 3.00 vs MLE 3.06, EM 3.21, inversion 5.91; docs/sdr.md), OCC held out;
    the default of uniform perturbation, SDR and A is :class:`EmpiricalBayes` (2.36).

    Uncertainty: by default (``replicates=0``) closed form as for :class:`MLE` (fast; the
    inversion's standard error is conservative for Norm-Sub, whose own spread is smaller);
    ``replicates > 0`` gives the parametric bootstrap standard error."""

    name = method = "norm-sub"
    _parameter_constraints = dict(BootstrapEstimator._boot_constraints)
    _parameter_help = dict(BootstrapEstimator._boot_help)

    def __init__(self, replicates: int = 0, seed: int = 0, interval: str = "auto") -> None:
        self._set_params(locals())


class EmpiricalBayes(BootstrapEstimator):
    """Default for uniform perturbation, SDR and global randomization A: empirical-Bayes counts
    per QI predicate and sub-table (:func:`eb_fit`, :func:`eb_shrink`) — the unbiased inversion
    shrunk towards a parent SA distribution by the best linear predictor, with the strength of
    the shrinkage estimated from the predicate's own published counts (method of moments,
    Dirichlet-multinomial heterogeneity), then projected onto non-negative counts with the
    known total n_P,j. The parent is the sub-table's distribution over all its rows or, for a
    predicate on several attributes, the distribution of one of its single-attribute
    conditions or their conditional-independence combination, whichever has the largest
    marginal likelihood. Chosen on EDU and ADULT point queries, OCC held out (mean relative
    error over counts 1–10 and 11–100 of 10 cells: 2.36 vs Norm-Sub 3.00, MLE 3.06, EM 3.21,
    inversion 5.91; docs/sdr.md). Then guarded count by count (``guard="on"``, the default;
    :func:`guarded`): half way to Norm-Sub's count where that is lower, EM's count where the
    count is at least :data:`GUARD_Z` channel standard errors — so that no other estimator is
    lower in any count bin on OCC point queries, where the rule was set; on EDU and Adult, not
    tuned on, the counts alone are lower in a few bins by at most 0.01 (docs/sdr.md). ``guard="off"``: the
    empirical-Bayes counts alone (non-negative, summing to n_P,j).

    Options (all chosen against on EDU and ADULT; docs/sdr.md): ``strength`` — ρ by the method
    of moments (``"moments"``), by maximising the normal marginal likelihood (``"likelihood"``)
    or the adjusted likelihood of Li & Lahiri (2010) (``"adjusted"``); ``"auto"`` (the default)
    is the one chosen for the release's mechanism (:data:`EB_AUTO_STRENGTH`: ``adjusted`` for
    SDR, ``moments`` for uniform perturbation and global randomization A);
    ``covariance`` — the inversion's and the prior's covariances as diagonal (``"diagonal"``) or
    exactly, m × m with the known total (``"exact"``, :class:`EBRows`); ``parents`` — the best
    candidate parent (``"select"``) or Bayesian model averaging over them by marginal likelihood
    (``"average"``).

    Uncertainty: by default (``replicates=0``) closed form, as for :class:`MLE` — ``se`` is the
    unbiased inversion's standard error at the fitted counts, and the interval is the
    inversion's normal interval cut to [0, n_P] and widened to hold the estimate; with
    ``interval="auto"`` (the default) a query whose sub-tables publish few selected values from
    other rows (n_j·b_j < 5) takes the profile-likelihood interval under the known channel
    instead (:mod:`ppdp.estimators.randomized_profile`), where the normal one under-covers. It does not
    use the prior, so it holds given the table whatever the predicate's SA distribution is
    (coverage at least the inversion's; assumptions: records randomized independently given
    the table, the normal approximation of a sum of n_P,j Bernoulli terms). ``replicates > 0``:
    parametric bootstrap ``se`` (the channel re-run from the fitted counts, every row's chosen
    parent held fixed)."""

    name = method = "eb"
    _parameter_constraints = {**BootstrapEstimator._boot_constraints, "strength": Options("auto", *EB_STRENGTHS),
                              "covariance": Options(*EB_COVARIANCES), "parents": Options(*EB_PARENTS),
                              "guard": Options("on", "off")}
    _parameter_help = {**BootstrapEstimator._boot_help,
                       "strength": "Shrinkage strength ρ per row: auto (the default: adjusted for SDR, moments "
                                   "for uniform and global, each chosen on EDU and ADULT), moments (method of "
                                   "moments), likelihood (maximum of the normal marginal likelihood over [1, n]) or "
                                   "adjusted (that likelihood times ρ − 1, Li & Lahiri 2010).",
                       "covariance": "Covariance of the inversion and the prior: exact (full m × m, closed form) "
                                     "or diagonal (components treated as independent).",
                       "parents": "average (Bayesian model averaging over the candidate parents by marginal "
                                  "likelihood) or select (the single best parent).",
                       "guard": "on (the default): each count moved half way to Norm-Sub's where that is lower, and "
                                "EM's where the count is at least 6 standard errors of the channel noise (guarded); "
                                "off: the empirical-Bayes counts alone."}

    def __init__(self, replicates: int = 0, seed: int = 0, interval: str = "auto", strength: str = "auto",
                 covariance: str = "diagonal", parents: str = "select", guard: str = "on") -> None:
        self._set_params(locals())

