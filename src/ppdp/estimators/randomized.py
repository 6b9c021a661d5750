"""Estimators of the randomized family (uniform perturbation, SDR, global randomization A, A').

Every estimator reads the release's public transition model
(:meth:`~ppdp.releases.randomized.RandomizedRelease.transition_models`) and answers with one
signature, ``release.answer(workload, estimator=…)``.

**Inversion** (``"inversion"``; uniform, SDR, global): in group (sub-table) j, for the n rows
meeting a QI predicate of which y show x, x̂ = (y − n·q_j)/p_j (SPEC §2.3), summed over the
groups and the selected values — unbiased.

**EM** (``"em"``) and **Norm-Sub** (``"norm-sub"``) (uniform, SDR, global): per distinct QI
predicate and sub-table, the whole vector of SA counts of the rows meeting the predicate is
estimated non-negative with the known total n_P,j — by the iterative Bayesian update
(Agrawal & Aggarwal 2001) or by projecting the inversion onto {x ≥ 0, Σx = n_P,j} (Wang et
al. 2020) — and each query adds up the values it selects. Consistent, biased near zero.
``EM.answer_with_iterations`` reports the iteration counts. docs/sdr.md gives the numbers.

**Empirical Bayes** (``"eb"``, the default of uniform perturbation, SDR and A): per distinct QI
predicate and sub-table, the inversion shrunk towards a parent SA distribution by the best
linear predictor under a Dirichlet-multinomial model, its strength estimated from the
predicate's own counts, then projected like Norm-Sub (:func:`eb_shrink`, :func:`eb_fit`).

**A'** (Fu, Wang, Wang & Wong 2014, §5, §7.2; SPEC §2.4):

- SA-only counts: f'_s, the count of s in D' (the MLE, Theorem 3);
- the 4-state model of Definitions 6–7 / Figure 3 with the exact transition
  r = P(s̄ → s) = f_s(ℓ'−1)/(ℓ'(N−f_s)): a tuple whose value is not s lies in one of the f_s
  groups that contain s with probability f_s(ℓ'−1)/(N−f_s) and then publishes s with
  probability 1/ℓ'. The paper writes a_01 = a_23 = (x1+x3)/N = f_s/N, which counts the
  s-tuples themselves as possible decoy holders and over-states r by ℓ'/(ℓ'−1)·(N−f_s)/N
  (25 % for ℓ' = 5); ``r="paper"`` selects that approximation for comparison. With the exact
  r the model reproduces Theorem 3 (its fixed point keeps f̂_s = f'_s), the paper's does not.
  ``"iterative"``: the iterative Bayesian update of eq 12–13, x⁰ = y, stopped when no
  component moves by more than ``tol`` (relative, floor one row; the paper uses 1 %);
  ``"closed"``: x̂ = (y3 − n_P·r)/(1/ℓ' − r) (exact inversion, unbiased, can be negative).
- the full m × m transition (default): the 4-state model assumes a tuple of any other value
  is equally likely to share a group with s, but Anatomy's group creation puts large values
  with large values, so predicates correlated with the SA are biased. The receiver re-runs the
  deterministic group schedule on the published counts (the release's transition model) and
  solves E[y_P] = x_P T for the counts of every SA value among P's rows: ``"full-closed"``
  x̂_P = y_P T⁻¹ (unbiased with the true T, can be negative), ``"full-iterative"`` the
  iterative Bayesian update with the full T (non-negative). Several SAs: T1 ⊗ T2 ⊗ ….
  ``transition_counts`` replaces the published counts (analysis only: a receiver does not
  have the true counts).
- intervals (:meth:`DivertedEstimator.estimate`): the linear estimator's normal interval cut to
  [0, n_P] and widened to hold the estimate; the full-transition estimators' variance by
  default ``"rebuilt"`` (:mod:`ppdp.estimators.diverted_variance`: T̂ rebuilt from the same
  published counts, which carry part of y_P's noise); the 4-state estimators take ``full-closed``'s.

Value sets (IN) are answered by summing the per-value estimates. docs/diverted.md gives the
numbers behind the default. ``answer_with_iterations`` returns the A' estimators' iteration
counts next to the estimates.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats
from threadpoolctl import threadpool_limits

from ..errors import ParameterError, QueryError
from ..kernels.transition import decoy_group_values, diverted_matrix, receiver_counts
from ..queries import split_masks
from ..validation import Constraint, Integer, Optional, Options, Real
from .base import Estimates, Estimator
from .diverted_variance import DRAWS, linear_noise_variance, receiver_parts
from .randomized_profile import AUTO_METHOD, METHOD as PROFILE_METHOD, setup_interval

METHODS = ("full-iterative", "full-closed", "iterative", "closed")
DEFAULT_TOL = 0.01
MAX_ITER = 10_000
#: EM's default tolerance on uniform / SDR / A releases, chosen on EDU and ADULT (docs/sdr.md):
#: 0.01 stops far from the fixed point on a near-uniform channel (uniform perturbation, A)
EM_TOL = 1e-3


# ----------------------------------------------------------------------------- uniform channels
def distinct_predicates(masks: Sequence[Mapping[str, np.ndarray]]) -> tuple[list, np.ndarray]:
    """The distinct QI predicates among ``masks`` (column → value mask) and, per query, the index
    of its predicate: queries that share a predicate (the point workload pairs each with every
    SA value) are counted once."""
    uniq: dict[bytes, int] = {}
    inv = np.empty(len(masks), dtype=np.int64)
    reps: list = []
    for q, mk in enumerate(masks):
        h = b"|".join(c.encode() + b"=" + np.packbits(mk[c]).tobytes() for c in sorted(mk))
        if h not in uniq:
            uniq[h] = len(reps)
            reps.append(mk)
        inv[q] = uniq[h]
    return reps, inv


class UniformSetup:
    """Everything the uniform-channel estimators need for one resolved workload.

    ``Y`` (U, J, m): per distinct QI predicate u and group (sub-table) j, the published SA counts
    of the rows meeting the predicate; ``inv``: query → predicate; ``sel`` (n_q, m): the SA values
    each query selects; ``member`` (J, m): group domains; ``p``, ``q`` per group (T = q·J + p·I on
    the group's domain). From the release's cached (group, value) count index."""

    def __init__(self, release, masks, model):
        m = model.n_values
        J = len(model.groups)
        self.model = model
        self.member = model.membership()
        rest, self.sel = split_masks(masks, model.attribute, m)
        reps, self.inv = distinct_predicates(rest)
        qi_cols = sorted({c for mk in reps for c in mk})
        index = release.value_index(model, qi_cols)
        Y = np.zeros((len(reps), J * m))
        if reps:
            Y[:, self.member.ravel()] = index.sums(reps)
        self.Y = Y.reshape(len(reps), J, m)
        self.p, self.q = model.uniform_pq()
        self.release = release
        self.reps, self.index = reps, index
        self._parent: np.ndarray | None = None
        self._eb_prior: np.ndarray | None = None

    @property
    def parent(self) -> np.ndarray:
        """(J, m): each group's (sub-table's) SA distribution over all its rows — the
        maximum-likelihood counts of the group's published SA counts (:func:`uniform_mle`),
        normalised; the prior mean of :func:`eb_shrink`."""
        if self._parent is None:  # the counts over all rows: the index's sum without predicates (no pass over the rows)
            self._parent = parent_distribution(self.release, self.model, counts=self.predicate_counts([{}])[0])
        return self._parent

    def predicate_counts(self, preds: Sequence[Mapping[str, np.ndarray]]) -> np.ndarray:
        """(len(preds), J, m): the published SA counts per group of the rows meeting each predicate
        (over columns of this workload's index)."""
        U, (J, m) = len(preds), self.member.shape
        Y = np.zeros((U, J * m))
        if U:
            Y[:, self.member.ravel()] = self.index.sums(list(preds))
        return Y.reshape(U, J, m)

    def eb_priors(self) -> np.ndarray:
        """(U·J, m): the parent distribution :func:`eb_fit` chose for every (predicate, group) row."""
        if self._eb_prior is None:
            eb_fit(self)
        assert self._eb_prior is not None
        return self._eb_prior

    @property
    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(Y as (U·J, m) rows, the group of each row)."""
        U, J, m = self.Y.shape
        return self.Y.reshape(U * J, m), np.tile(np.arange(J), U)

    def per_query(self, X: np.ndarray) -> np.ndarray:
        """(n_q, J): Σ over each query's selected values of X (U, J, m) of its predicate."""
        return np.einsum("qjm,qm->qj", X[self.inv], self.sel.astype(np.float64), optimize=True)

    def n_per_query(self) -> np.ndarray:
        """(n_q, J): n_P,j, the known number of rows of the query's predicate in each group."""
        return self.Y.sum(axis=2)[self.inv]

    def k_per_query(self) -> np.ndarray:
        """(n_q, J): how many of the query's values lie in each group's domain."""
        return self.sel.astype(np.float64) @ self.member.T.astype(np.float64)

    def inversion(self) -> np.ndarray:
        """(n_q, J): the unbiased per-group inversion (y_sel − n·k·q)/p."""
        return (self.per_query(self.Y) - self.n_per_query() * self.k_per_query() * self.q) / self.p

    def linear_variance(self, x_sel: np.ndarray) -> np.ndarray:
        """Variance of the inversion per query (summed over the groups), at true selected counts
        ``x_sel`` (n_q, J). Given the table, each of the n rows of group j publishes a selected
        value independently, with probability a = p + q·k if its true value is selected and
        b = q·k otherwise: Var(y_sel) = x·a(1−a) + (n−x)·b(1−b) (a Poisson-binomial), divided by
        p²."""
        n, k = self.n_per_query(), self.k_per_query()
        x = np.clip(x_sel, 0.0, n)
        a, b = self.p + self.q * k, self.q * k
        return ((x * a * (1 - a) + (n - x) * b * (1 - b)) / self.p**2).sum(axis=1)


def uniform_mle(Y: np.ndarray, p: np.ndarray, q: np.ndarray, member: np.ndarray) -> np.ndarray:
    """The maximum-likelihood counts under a uniform channel, exactly, for many rows at once.

    Row r holds the published counts y (on its domain ``member[r]``, m_r values) of n = Σ y
    records, each published as value k with probability π_k = q + p·x_k/n (T = q·J + p·I).
    Maximising Σ y_k log π_k over {x ≥ 0, Σ x = n} = {π_k ≥ q, Σ π = 1} is a concave problem
    whose KKT conditions give π_k = max(q, y_k/λ), with λ set by Σ π = 1: the values kept above
    the floor are the largest y_k (a sort per row), λ = Σ_kept y / (1 − q·#floored). This is the
    fixed point the iterative Bayesian update converges to (it maximises the same likelihood),
    reached without iterating. Returns x̂ = n(π − q)/p (non-negative, Σ x̂ = n)."""
    Y = np.where(member, np.asarray(Y, dtype=np.float64), 0.0)
    R, m = Y.shape
    n = Y.sum(axis=1)
    mr = member.sum(axis=1)
    srt = -np.sort(-np.where(member, Y, -1.0), axis=1)  # descending; non-members (−1) last
    css = np.cumsum(np.maximum(srt, 0.0), axis=1)
    k = np.arange(1, m + 1)
    rest = 1.0 - q[:, None] * (mr[:, None] - k)  # probability left for the kept values
    ok_den = rest > 0
    lam = np.divide(css, rest, out=np.full_like(css, np.inf), where=ok_den)
    ok = ok_den & (k <= mr[:, None]) & (srt > q[:, None] * lam)
    kk = np.where(ok.any(axis=1), m - 1 - np.argmax(ok[:, ::-1], axis=1), 0)
    L = lam[np.arange(R), kk]
    good = np.isfinite(L) & (L > 0) & (n > 0)
    L = np.where(good, L, 1.0)
    pi = np.maximum(q[:, None], Y / L[:, None])
    X = np.where(member & good[:, None], n[:, None] * (pi - q[:, None]) / p[:, None], 0.0)
    return np.maximum(X, 0.0)


def uniform_em(Y: np.ndarray, p: np.ndarray, q: np.ndarray, member: np.ndarray, tol: float = EM_TOL,
               max_iter: int = MAX_ITER) -> tuple[np.ndarray, np.ndarray]:
    """Iterative Bayesian update (Agrawal & Aggarwal 2001) for many rows of uniform channels.

    Row r holds the published counts y (on its group's domain, ``member[r]``) of n = Σ y records
    randomized by T = q·J + p·I on that domain: E[y] = x T, (x T)_k = q·n + p·x_k. The update
    x ← x ∘ ((y / (x T)) Tᵀ), i.e. x_i ← x_i (q Σ_k y_k/d_k + p·y_i/d_i), starts at x⁰ = y,
    keeps x ≥ 0 and Σ x = n (the known number of records of the row), and increases the
    likelihood; a row stops when no component moves by more than ``tol`` (relative, floor one
    record). Its limit is :func:`uniform_mle`. Returns (x̂, iterations per row)."""
    Y = np.where(member, np.asarray(Y, dtype=np.float64), 0.0)
    X = Y.copy()
    n = Y.sum(axis=1)
    iters = np.zeros(len(X), dtype=np.int64)
    active = np.flatnonzero(n > 0)
    for it in range(1, max_iter + 1):
        if not len(active):
            break
        xa, ya, pa, qa, ma = X[active], Y[active], p[active, None], q[active, None], member[active]
        d = qa * n[active, None] + pa * xa
        ratio = np.divide(ya, d, out=np.zeros_like(ya), where=ma & (d > 0))
        new = xa * (qa * ratio.sum(axis=1, keepdims=True) + pa * ratio)
        moved = (np.abs(new - xa) > tol * np.maximum(xa, 1.0)).any(axis=1)
        X[active] = new
        iters[active] = it
        active = active[moved]
    return X, iters


def parent_distribution(release, model, counts: np.ndarray | None = None) -> np.ndarray:
    """(J, m): per group (sub-table) of ``model``, the SA distribution of all its published rows,
    estimated by the exact maximum-likelihood counts (:func:`uniform_mle`) and normalised; 0
    outside the group's domain. The groups hold thousands of rows, so this is precise.
    ``counts`` (J, m): the published counts per group and value when already known (e.g. from
    a count index), else counted from the rows."""
    m = model.n_values
    J = len(model.groups)
    if counts is not None:
        Y = np.asarray(counts, dtype=np.float64).reshape(J, m)
    else:
        y = release.column_codes(model.attribute).astype(np.int64)
        key = release.group_ids(model) * m + y
        Y = np.bincount(key, minlength=J * m)[: J * m].reshape(J, m).astype(np.float64)
    p, q = model.uniform_pq()
    X = uniform_mle(Y, p, q, model.membership())
    return X / np.maximum(X.sum(axis=1, keepdims=True), 1e-300)


#: the empirical-Bayes estimator at the diagonal covariance on each row's domain entries only
#: (:class:`_EBEntries`) and Norm-Sub on packed rows (:class:`_Packed`) — the numbers of the
#: whole-row computation up to the order of floating-point sums (False: that one, the
#: reference of the tests)
_PACKED_EB = True
#: ρ grid of the likelihood fit of the shrinkage strength (points over log ρ ∈ [0, log n])
EB_GRID = 24
#: domain entries of the empirical-Bayes fit taken at once (:class:`_EBEntries`)
EB_BLOCK_ENTRIES = 1 << 15
#: rows of :func:`eb_shrink` (and of the candidate parents of :func:`eb_fit`) taken at once: the
#: whole-row temporaries (rows × m) stay small, and their memory is reused rather than fresh
EB_SHRINK_ROWS = 1 << 15
EB_STRENGTHS = ("likelihood", "adjusted", "moments")
#: :class:`EmpiricalBayes`'s ``strength="auto"`` (its default) per mechanism, each chosen on
#: EDU and ADULT point queries with OCC held out (the variant with the lowest mean relative
#: error over the 1–10 and 11–100 bins of that mechanism's cells; kept at ``moments`` where no
#: variant gained more than 1%): SDR 1.141 adjusted against 1.208 moments; uniform and global
#: within 0.5% of moments (docs/sdr.md)
EB_AUTO_STRENGTH = {"sdr": "adjusted"}
EB_COVARIANCES = ("exact", "diagonal")
EB_PARENTS = ("average", "select")


def _eb_terms(y, n, P0, p, q) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(μ, d, σ², τ²/ρ) of :func:`eb_shrink` for published counts ``y`` of n records with prior
    ``P0`` through T = q·J + p·I (arrays that broadcast: whole rows or domain entries): the
    prior mean μ = nπ⁰, the inversion minus it d = (y − nq)/p − μ, the channel variance of the
    inversion averaged over the prior σ² = n(π⁰a(1 − a) + (1 − π⁰)b(1 − b))/p² (a = p + q,
    b = q) and nπ⁰(1 − π⁰); in place where it can."""
    a, b = p + q, q
    mu = n * P0
    d = y - n * q
    d /= p
    d -= mu
    sig2 = P0 * a
    sig2 *= 1 - a
    rest = 1.0 - P0
    rest *= b
    rest *= 1 - b
    sig2 += rest
    sig2 *= n
    sig2 /= p**2
    t = 1.0 - P0
    t *= mu
    return mu, d, sig2, t


class _EBStrength:
    """The likelihood fit of the shrinkage strength ρ, shared by the row layouts of
    :func:`eb_shrink` (:class:`_EBRows`, whole rows; :class:`_EBEntries`, domain entries)."""

    n: np.ndarray

    def _loglik_grid(self, rhos: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def rho(self, strength: str) -> np.ndarray:
        """The strength ρ per row by ``strength`` (:data:`EB_STRENGTHS`)."""
        return self.moments_rho() if strength == "moments" else self.likelihood_rho(adjusted=strength == "adjusted")

    def moments_rho(self) -> np.ndarray:
        raise NotImplementedError

    def likelihood_rho(self, adjusted: bool = False) -> np.ndarray:
        """ρ maximising :meth:`loglik` over [1, n]: a grid of ``EB_GRID`` points in log ρ, then one
        parabola through the best point and its neighbours (in log ρ). ``adjusted``: maximise
        loglik + log(ρ − 1) instead — the adjusted likelihood of Morris (1988) and Li & Lahiri
        (2010) with the between-predicate variance component A = ρ − 1 (Var x_k = nπ⁰_k(1−π⁰_k)
        (1 + A)), which keeps Â off 0, where the plain likelihood often puts it and shrinks
        fully."""
        return _grid_rho(self.n, self._loglik_grid, adjusted)

    def loglik(self, rho: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def predict(self, rho: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def fit(self, strength: str, loglik: bool = False, predict: bool = False) -> tuple[Any, Any, Any]:
        """(ρ by ``strength``, the prediction at ρ or None, the log likelihood at ρ or None)."""
        rho = self.rho(strength)
        return rho, (self.predict(rho) if predict else None), (self.loglik(rho) if loglik else None)


def _rho_grid(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The strength grid of rows with ``n`` records: (ρ at each point, G × rows; log(ρ − 1), the
    adjusted likelihood's term) — ``EB_GRID`` points over log ρ ∈ [0, log n]."""
    top = np.log(np.maximum(n, 1.0))
    grid = np.linspace(0.0, 1.0, EB_GRID)
    rhos = np.exp(grid[:, None] * top[None, :])  # (G, R): a grid point's row is contiguous
    return rhos, np.log(np.maximum(rhos - 1.0, 1e-300))


def _grid_rho(n: np.ndarray, loglik_grid, adjusted: bool, grid: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """:meth:`_EBStrength.likelihood_rho` of rows with ``n`` records, their log likelihood at a
    (G × rows) grid of ρ given by ``loglik_grid`` (``grid``: :func:`_rho_grid` of ``n`` when known)."""
    top = np.log(np.maximum(n, 1.0))
    rhos, adj = _rho_grid(n) if grid is None else grid
    L = loglik_grid(rhos)
    if adjusted:
        L += adj
    best = np.argmax(L, axis=0)  # the first maximum over the grid
    i = np.clip(best, 1, EB_GRID - 2)
    r = np.arange(L.shape[1])
    l0, l1, l2 = L[i - 1, r], L[i, r], L[i + 1, r]
    curv = l0 - 2 * l1 + l2
    off = np.divide(0.5 * (l0 - l2), curv, out=np.zeros_like(l1), where=curv < -1e-12)
    off = np.clip(off, -1.0, 1.0)
    interior = (best > 0) & (best < EB_GRID - 1)
    g = np.where(interior, (i + off) / (EB_GRID - 1), best / (EB_GRID - 1))
    return np.exp(g * top)


class _EBRows(_EBStrength):
    """The quantities of :func:`eb_shrink` that do not depend on the strength ρ, for many rows
    (whole rows of m entries, 0 off each row's domain; the reference layout, and the one of
    the exact covariance)."""

    def __init__(self, Y, p, q, member, prior, covariance):
        self.member = member
        # the operations of the masked forms (0 off the row's domain), in place: the same numbers
        off = ~member
        Y = np.asarray(Y, dtype=np.float64).copy()
        np.copyto(Y, 0.0, where=off)
        self.n = n = Y.sum(axis=1)
        P0 = np.asarray(prior, dtype=np.float64).copy()
        np.copyto(P0, 0.0, where=off)
        self.P0 = P0
        pp, qq = p[:, None], q[:, None]
        self.mu, d, sig2, self.t = _eb_terms(Y, n[:, None], P0, pp, qq)
        np.copyto(d, 0.0, where=off)
        np.copyto(sig2, 0.0, where=off)
        self.d, self.sig2 = d, sig2
        self.covariance = covariance
        if covariance == "exact":
            # Σ = [nq·I + p(1−p)n·diag(π⁰) − nq²·11ᵀ − pqn(π⁰1ᵀ + 1π⁰ᵀ)]/p², T = nρ(diag(π⁰) − π⁰π⁰ᵀ):
            # on the subspace Σ_k d_k = 0 where d lives, V = Σ + T acts as M = D − nρ·π⁰π⁰ᵀ with
            # D = diag(nq/p² + n(1−p)π⁰/p + nρπ⁰) (the 11ᵀ, π⁰1ᵀ, 1π⁰ᵀ terms vanish there)
            self.live = member & (n > 0)[:, None]  # rows without records have nothing to estimate
            self.D0 = np.where(self.live, n[:, None] * qq / pp**2 + n[:, None] * (1 - pp) * P0 / pp, 1.0)
        self.m_r = member.sum(axis=1)

    def moments_rho(self) -> np.ndarray:
        """ρ by the method of moments: E Σ_k d_k² = Σ_k σ²_k + n(1 − Σπ⁰²)·ρ, cut to [1, n]."""
        n = self.n
        het = n * (1.0 - (self.P0**2).sum(axis=1))
        rho = np.divide((self.d**2).sum(axis=1) - self.sig2.sum(axis=1), het, out=np.ones_like(n), where=het > 1e-12)
        return np.clip(rho, 1.0, np.maximum(n, 1.0))

    def _exact(self, rho):
        """(z = V⁺d, log pdet V) per row for the exact covariance (Sherman–Morrison on M, then
        the constraint Σ z = 0 by a Lagrange multiplier; pdet(PMP) = det M · 1ᵀM⁻¹1/m_r)."""
        mem, n, u = self.live, self.n, self.P0
        c = n * rho
        D = np.where(mem, self.D0 + c[:, None] * u, 1.0)
        Di = np.where(mem, 1.0 / D, 0.0)
        uDu = (u * u * Di).sum(axis=1)
        den = np.maximum(1.0 - c * uDu, 1e-300)  # > 0: c·uᵀD⁻¹u < Σπ⁰ = 1

        def minv(v):
            return Di * v + (c / den)[:, None] * (Di * u) * ((u * Di * v).sum(axis=1))[:, None]

        g = minv(mem.astype(np.float64))
        s = np.maximum(g.sum(axis=1), 1e-300)
        z = minv(self.d)
        z = z - g * ((z.sum(axis=1)) / s)[:, None]
        logdet = np.where(mem, np.log(D), 0.0).sum(axis=1) + np.log(den) + np.log(s) - np.log(np.maximum(self.m_r, 1))
        return z, logdet

    def loglik(self, rho: np.ndarray) -> np.ndarray:
        """Normal log marginal likelihood of x̃ per row at strength ρ (up to a constant)."""
        if self.covariance == "exact":
            z, logdet = self._exact(rho)
            return -0.5 * (logdet + (z * self.d).sum(axis=1))
        return self._diagonal_loglik_grid(np.asarray(rho, dtype=np.float64)[None, :])[0]

    def _loglik_grid(self, rhos: np.ndarray) -> np.ndarray:
        if self.covariance == "diagonal":
            return self._diagonal_loglik_grid(rhos)
        return np.stack([self.loglik(rho) for rho in rhos])

    def _diagonal_loglik_grid(self, rhos: np.ndarray) -> np.ndarray:
        """:meth:`loglik` (diagonal covariance) at every row of ``rhos`` (G × R; G × R out), over each
        row's live domain entries only (a row of an SDR sub-table has a few of the m values):
        a grid point at a time, the entries' terms in reused buffers, summed per row by one
        bincount (EDU SDR, 5,000 queries: 0.31 CPU-s against 1.35 for :meth:`loglik` per point)."""
        # V = σ² + τ²ρ with σ², τ² ≥ 0 and ρ ≥ 1: an entry is live at every ρ or at none
        rr, kk = np.nonzero(self.member & ((self.sig2 > 0) | (self.t > 0)))
        sig2, t, d2 = self.sig2[rr, kk], self.t[rr, kk], self.d[rr, kk] ** 2
        G, R = rhos.shape
        V, terms = np.empty(len(rr)), np.empty(len(rr))
        L = np.empty((G, R))
        for j in range(G):
            np.take(rhos[j], rr, out=V, mode="clip")  # in range; the default mode buffers a copy with out=
            V *= t
            V += sig2
            np.log(V, out=terms)
            np.divide(d2, V, out=V)
            terms += V
            L[j] = np.bincount(rr, weights=terms, minlength=R)
        L *= -0.5
        return L

    def predict(self, rho: np.ndarray) -> np.ndarray:
        """The best linear predictor at strength ρ, projected onto {x ≥ 0, Σx = n}."""
        if self.covariance == "exact":
            z, _ = self._exact(rho)
            u = self.P0
            X = self.mu + (self.n * rho)[:, None] * (u * z - u * (u * z).sum(axis=1, keepdims=True))
        else:
            tau2 = self.t * rho[:, None]
            V = tau2 + self.sig2
            w = np.divide(tau2, V, out=np.zeros_like(tau2), where=V > 0)
            X = self.mu + w * self.d
        return norm_sub(X, self.member, self.n)


def _segment_sums(x: np.ndarray, cnt: np.ndarray) -> np.ndarray:
    """Σ of each segment of ``x`` (segments in order, ``cnt`` entries each; 0 for none)."""
    out = np.zeros(len(cnt))
    has = cnt > 0
    if has.any():
        out[has] = np.add.reduceat(x, (np.cumsum(cnt) - cnt)[has])
    return out


class _EBCounts:
    """The published counts of rows (one row: a predicate in a sub-table) at each row's domain
    entries, flat and in row order, with what does not depend on the prior (n, p, q per entry):
    computed once for every candidate parent of :func:`eb_fit`."""

    def __init__(self, Y, p, q, member):
        member = np.asarray(member, dtype=bool)
        self.shape = member.shape
        self._member: np.ndarray | None = member
        self._parent: tuple[_EBCounts, np.ndarray] | None = None
        pk = _Packed(member)
        self.cnt = pk.cnt
        self.flat = pk.idx  # each entry's index in the (rows × m) arrays
        self.y = np.asarray(Y, dtype=np.float64).ravel()[pk.idx]
        self.n = _segment_sums(self.y, self.cnt)
        self.p_row, self.q_row = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
        self._grid: tuple[np.ndarray, np.ndarray] | None = None

    def subset(self, r: np.ndarray) -> "_EBCounts":
        """The rows ``r`` (their entries gathered, no pass over whole rows)."""
        out = object.__new__(_EBCounts)
        m = self.shape[1]
        cnt = self.cnt[r]
        start = np.cumsum(self.cnt) - self.cnt
        ei = np.repeat(start[r] - (np.cumsum(cnt) - cnt), cnt) + np.arange(int(cnt.sum()))
        out.shape = (len(r), m)
        out._member = None
        out._parent = (self, r)
        out.cnt = cnt
        out.flat = np.repeat(np.arange(len(r)) * m, cnt) + self.flat[ei] % m
        out.y = self.y[ei]
        out.n = self.n[r]
        out.p_row, out.q_row = self.p_row[r], self.q_row[r]
        out._grid = None if self._grid is None else (self._grid[0][:, r], self._grid[1][:, r])
        return out

    def grid(self) -> tuple[np.ndarray, np.ndarray]:
        """:func:`_rho_grid` of the rows (they depend on n only: computed once for every candidate
        parent, and gathered for a subset of the rows)."""
        if self._grid is None:
            self._grid = _rho_grid(self.n)
        return self._grid

    @property
    def member(self) -> np.ndarray:
        if self._member is None:
            assert self._parent is not None
            base, r = self._parent
            self._member = base.member[r]
        return self._member


class _EBEntries(_EBStrength):
    """:class:`_EBRows` at the diagonal covariance over each row's domain entries only, flat and
    in row order (a row of an SDR sub-table holds a few of the m values: on OCC's SDR sub-tables
    11 or 21 of 46): the same quantities entry by entry, each row's sums over its own entries.
    The numbers equal the whole-row layout's up to the order of floating-point sums.

    Everything is computed a block of rows at a time (about :data:`EB_BLOCK_ENTRIES` entries,
    a row never split): a block's terms, its likelihood grid and its prediction are temporaries
    that stay in cache and in reused memory, and nothing of the entries' size is kept but the
    prior's entries. The numbers do not depend on the blocks (each row's sums are its own)."""

    covariance = "diagonal"

    def __init__(self, counts: _EBCounts, prior):
        self.counts = c = counts
        self.cnt = c.cnt
        self.n = c.n
        self.P0 = np.asarray(prior, dtype=np.float64).ravel()[c.flat]
        ends = np.cumsum(c.cnt)
        self._ends = ends
        cuts = np.searchsorted(ends, np.arange(EB_BLOCK_ENTRIES, int(ends[-1]) if len(ends) else 0,
                                               EB_BLOCK_ENTRIES), side="left") + 1
        self._rows = [0, *sorted({int(x) for x in cuts if 0 < x < len(ends)}), len(ends)]

    def _span(self, r0: int, r1: int) -> tuple[int, int]:
        """The entries of rows r0 … r1 − 1."""
        ends = self._ends
        return int(ends[r0 - 1]) if r0 else 0, int(ends[r1 - 1]) if r1 else 0

    def _blocks(self):
        """(row range, entry range) of each block."""
        for r0, r1 in zip(self._rows[:-1], self._rows[1:]):
            if r1 > r0:
                yield (r0, r1, *self._span(r0, r1))

    def _terms(self, r0: int, r1: int, e0: int, e1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:func:`_eb_terms` (μ, d, σ², τ²/ρ) of the entries of rows r0 … r1 − 1."""
        c = self.counts
        cnt = c.cnt[r0:r1]
        pp, qq, nn = (np.repeat(v[r0:r1], cnt) for v in (c.p_row, c.q_row, c.n))
        return _eb_terms(c.y[e0:e1], nn, self.P0[e0:e1], pp, qq)

    def _each(self, fn) -> np.ndarray:
        """Per-row results of ``fn(r0, r1, e0, e1)`` over the blocks, in order."""
        out = np.empty(len(self.n))
        for r0, r1, e0, e1 in self._blocks():
            out[r0:r1] = fn(r0, r1, e0, e1)
        return out

    @property
    def d(self) -> np.ndarray:
        return np.concatenate([self._terms(*b)[1] for b in self._blocks()] or [np.zeros(0)])

    @property
    def sig2(self) -> np.ndarray:
        return np.concatenate([self._terms(*b)[2] for b in self._blocks()] or [np.zeros(0)])

    @property
    def t(self) -> np.ndarray:
        return np.concatenate([self._terms(*b)[3] for b in self._blocks()] or [np.zeros(0)])

    def _moments_rho(self, r0, r1, terms) -> np.ndarray:
        _, d, sig2, _ = terms
        cnt, n = self.cnt[r0:r1], self.n[r0:r1]
        e0, e1 = self._span(r0, r1)
        P0 = self.P0[e0:e1]
        het = n * (1.0 - _segment_sums(P0**2, cnt))
        rho = np.divide(_segment_sums(d**2, cnt) - _segment_sums(sig2, cnt), het, out=np.ones_like(n),
                        where=het > 1e-12)
        return np.clip(rho, 1.0, np.maximum(n, 1.0))

    def moments_rho(self) -> np.ndarray:
        """As :meth:`_EBRows.moments_rho`."""
        return self._each(lambda r0, r1, e0, e1: self._moments_rho(r0, r1, self._terms(r0, r1, e0, e1)))

    def _grid_terms(self, r0: int = 0, r1: int | None = None, terms=None):
        """(a, c, entries per row, the constant per row) of the likelihood's terms of rows r0 …
        r1 − 1 (default all): an entry with τ² > 0 contributes log V + d²/V = log τ² + log(a + ρ)
        + c/(a + ρ) with a = σ²/τ², c = d²/τ²; one with τ² = 0 < σ² the constant log σ² + d²/σ²."""
        r1 = len(self.n) if r1 is None else r1
        if terms is None:
            terms = self._terms(r0, r1, *self._span(r0, r1))
        _, d, sig2, t = terms
        cnt = self.cnt[r0:r1]
        d2 = d**2
        var = t > 0
        fixed = ~var & (sig2 > 0)
        const = np.zeros(len(t))
        const[var] = np.log(t[var])
        sf = sig2[fixed]
        const[fixed] = np.log(sf) + d2[fixed] / sf
        tv = t[var]
        return (sig2[var] / tv, d2[var] / tv, _segment_sums(var.astype(np.float64), cnt).astype(np.int64),
                _segment_sums(const, cnt))

    @staticmethod
    def _grid(gt, rhos: np.ndarray) -> np.ndarray:
        """The diagonal likelihood at every row of ``rhos`` (G × rows of the block; G × rows
        out) from the block's :meth:`_grid_terms`: every grid point's entry terms at once
        (G × the block's entries: a block is small), each row's ρ repeated over its entries,
        summed per row and point by one reduceat."""
        a, c, cnt, const = gt
        G, R = rhos.shape
        has = cnt > 0
        starts = (np.cumsum(cnt) - cnt)[has]
        u = np.repeat(rhos, cnt, axis=1)  # each row's ρ over its entries
        u += a
        terms = np.log(u)
        np.divide(c, u, out=u)
        terms += u
        L = np.empty((G, R))
        L[:] = const
        if len(starts):
            L[:, has] += np.add.reduceat(terms, starts, axis=1)
        L *= -0.5
        return L

    def fit(self, strength: str, loglik: bool = False, predict: bool = False) -> tuple[Any, Any, Any]:
        """As :meth:`_EBStrength.fit`, a block at a time: each block's terms once for the
        strength, the likelihood and the prediction."""
        rho = np.empty(len(self.n))
        ll = np.empty(len(self.n)) if loglik else None
        X = np.empty(len(self.P0)) if predict else None
        for r0, r1, e0, e1 in self._blocks():
            terms = self._terms(r0, r1, e0, e1)
            gt = self._grid_terms(r0, r1, terms) if strength != "moments" or ll is not None else None
            if gt is None or strength == "moments":
                rb = self._moments_rho(r0, r1, terms)
            else:
                g = self.counts.grid()
                rb = _grid_rho(self.n[r0:r1], lambda rhos, gt=gt: self._grid(gt, rhos), strength == "adjusted",
                               (g[0][:, r0:r1], g[1][:, r0:r1]))
            rho[r0:r1] = rb
            if ll is not None and gt is not None:
                ll[r0:r1] = self._grid(gt, rb[None, :])[0]
            if X is not None:
                X[e0:e1] = self._predict_entries(r0, r1, terms, rb)
        return rho, (self._unpack(X) if X is not None else None), ll

    def rho(self, strength: str) -> np.ndarray:
        """As :meth:`_EBStrength.rho`."""
        return self.fit(strength)[0]

    def likelihood_rho(self, adjusted: bool = False) -> np.ndarray:
        """As :meth:`_EBStrength.likelihood_rho`."""
        return self.fit("adjusted" if adjusted else "likelihood")[0]

    def loglik(self, rho: np.ndarray) -> np.ndarray:
        """As :meth:`_EBRows.loglik`."""
        rho = np.asarray(rho, dtype=np.float64)
        return self._each(lambda r0, r1, e0, e1: self._grid(self._grid_terms(r0, r1), rho[None, r0:r1])[0])

    def _predict_entries(self, r0, r1, terms, rho) -> np.ndarray:
        mu, d, sig2, t = terms
        tau2 = t * np.repeat(rho, self.cnt[r0:r1])
        V = tau2 + sig2
        w = np.divide(tau2, V, out=np.zeros_like(tau2), where=V > 0)
        return mu + w * d

    def _unpack(self, X: np.ndarray) -> np.ndarray:
        """Norm-Sub of the entries' predictions on the rows packed: (R, m), 0 off each row's domain."""
        pk = _Packed(self.counts.member)  # −∞ in the padding
        v = np.full(pk.valid.shape, -np.inf)
        v.ravel()[pk.pos] = X
        return pk.unpack(_norm_sub_packed(v, pk.valid, self.n))

    def predict(self, rho: np.ndarray) -> np.ndarray:
        """As :meth:`_EBRows.predict`: (R, m), 0 off each row's domain."""
        rho = np.asarray(rho, dtype=np.float64)
        X = np.empty(len(self.P0))
        for r0, r1, e0, e1 in self._blocks():
            X[e0:e1] = self._predict_entries(r0, r1, self._terms(r0, r1, e0, e1), rho[r0:r1])
        return self._unpack(X)


def _eb_rows(Y, p, q, member, prior, covariance, entries: bool | None = None) -> _EBRows | _EBEntries:
    """The layout of :func:`eb_shrink`'s quantities: the domain entries (:class:`_EBEntries`) at
    the diagonal covariance when the domains are a small part of the rows, else whole rows
    (``entries``: the layout when already decided)."""
    member = np.asarray(member, dtype=bool)
    if _entries_layout(member, covariance) if entries is None else entries:
        return _EBEntries(_EBCounts(Y, p, q, member), prior)
    return _EBRows(Y, p, q, member, prior, covariance)


def _entries_layout(member: np.ndarray, covariance: str) -> bool:
    """Whether :func:`_eb_rows` takes the domain entries: the diagonal covariance, and domains of at
    most half the m values (else whole rows cost no more)."""
    return (_PACKED_EB and covariance == "diagonal"
            and (not member.shape[1] or np.count_nonzero(member, axis=1).max(initial=0) * 2 <= member.shape[1]))


class _MomentsLikelihood:
    """:func:`eb_loglik` at the default options (method-of-moments strength, diagonal
    covariance) for many candidate priors of the same rows: what depends on the published
    counts only (n, x̃, the channel terms) is computed once."""

    def __init__(self, Y, p, q, member):
        self.member = member
        self.memf = member.astype(np.float64)
        Y = np.asarray(Y, dtype=np.float64) * self.memf
        self.n = n = Y.sum(axis=1)
        a, b = p + q, q
        self.xt = (Y - n[:, None] * q[:, None]) / p[:, None] * self.memf
        self.ca = (n * a * (1 - a) / p**2)[:, None]  # n·a(1−a)/p²
        self.cb = (n * b * (1 - b) / p**2)[:, None]  # n·b(1−b)/p²

    def __call__(self, prior: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Each row's log likelihood under ``prior`` (of those ``rows``, when given: row by row,
        the same numbers as over every row)."""
        if rows is None:
            n, memf, xt, ca, cb, member = self.n, self.memf, self.xt, self.ca, self.cb, self.member
        else:
            n, memf, xt, ca, cb, member = (self.n[rows], self.memf[rows], self.xt[rows], self.ca[rows], self.cb[rows],
                                           self.member[rows])
        P0 = prior * memf
        d = xt - n[:, None] * P0
        sig2 = (P0 * (ca - cb) + cb) * memf
        het = n * (1.0 - np.einsum("ij,ij->i", P0, P0))
        dd = np.einsum("ij,ij->i", d, d)
        rho = np.divide(dd - sig2.sum(axis=1), het, out=np.ones_like(n), where=het > 1e-12)
        rho = np.clip(rho, 1.0, np.maximum(n, 1.0))
        V = sig2 + (n * rho)[:, None] * P0 * (1 - P0)
        live = member & (V > 0)
        Vs = np.where(live, V, 1.0)
        return -0.5 * np.where(live, np.log(Vs) + d * d / Vs, 0.0).sum(axis=1)


def eb_loglik(Y: np.ndarray, p: np.ndarray, q: np.ndarray, member: np.ndarray, prior: np.ndarray,
              strength: str = "moments", covariance: str = "diagonal") -> np.ndarray:
    """Each row's log marginal likelihood under ``prior`` at its fitted strength, as
    ``eb_shrink(..., return_ll=True)`` returns it, without the prediction and its projection."""
    R = _eb_rows(Y, p, q, member, prior, covariance)
    return R.fit(strength, loglik=True)[2]


def eb_shrink(Y: np.ndarray, p: np.ndarray, q: np.ndarray, member: np.ndarray, prior: np.ndarray,
              return_ll: bool = False, strength: str = "moments", covariance: str = "diagonal") -> Any:
    """Empirical-Bayes counts per row of published counts (many rows at once).

    Model (Fay & Herriot 1979; the Dirichlet-multinomial of small-area estimation): a row holds
    the published counts y of the n = Σy records meeting a QI predicate in one group, randomized
    by T = q·J + p·I on the group's domain (m_r values). Their true counts x are a draw of
    n records from a distribution θ that varies around the group's distribution π⁰ (``prior``,
    estimated from all the group's rows): θ ~ Dirichlet(α·π⁰), so E[x] = n·π⁰ and
    Var(x_k) = n·π⁰_k(1−π⁰_k)·ρ with ρ = (n+α)/(1+α) ∈ [1, n] (ρ = n: no pooling).

    - the inversion x̃ = (y − n·q)/p is unbiased for x given the table, with channel variance
      Var(x̃_k | x) = [x_k·a(1−a) + (n−x_k)·b(1−b)]/p² (a = p + q, b = q), whose average over
      the prior is σ²_k = n[π⁰_k·a(1−a) + (1−π⁰_k)·b(1−b)]/p², and whose sum over k is exactly
      n[a(1−a) + (m_r−1)·b(1−b)]/p² whatever x;
    - ρ of the row, by the method of moments: E Σ_k (x̃_k − nπ⁰_k)² = Σ_k σ²_k + n(1 − Σπ⁰²)·ρ,
      solved and cut to [1, n] — each row's own heterogeneity, from its own m_r components
      (the estimate of one predicate does not depend on the other queries of a workload);
    - the best linear predictor x̂_k = nπ⁰_k + w_k(x̃_k − nπ⁰_k), w_k = τ²_k/(τ²_k + σ²_k),
      τ²_k = n·π⁰_k(1−π⁰_k)·ρ̂: heavy shrinkage where the channel noise swamps the signal
      (small p, large n with rare values), none where it does not;
    - projected onto {x ≥ 0, Σx = n} (:func:`norm_sub`).

    ``return_ll``: also return each row's log marginal likelihood of x̃ under the fitted prior in
    the normal approximation, −½ Σ_k [log(σ²_k + τ²_k) + (x̃_k − nπ⁰_k)²/(σ²_k + τ²_k)] (used to
    choose between parents, :func:`eb_fit`).

    ``strength``: ``"moments"`` (above, the default); ``"likelihood"`` — ρ maximising that
    marginal likelihood over [1, n] (Fay & Herriot's maximum likelihood); ``"adjusted"`` — the
    likelihood times ρ − 1, the between-predicate variance component (Li & Lahiri 2010), which
    keeps ρ̂ off full shrinkage. ``covariance``: ``"diagonal"`` (above, the default) or
    ``"exact"`` — the components are not independent: Cov(x̃ | x) = [nq·I + p(1−p)·diag(x) −
    nq²·11ᵀ − pq(x1ᵀ + 1xᵀ)]/p² and Cov(x) = nρ(diag π⁰ − π⁰π⁰ᵀ), so the marginal covariance V
    of d = x̃ − nπ⁰ (Σd = 0) acts on d's subspace as D − nρ·π⁰π⁰ᵀ with
    D = diag(nq/p² + n(1−p)π⁰/p + nρπ⁰); the predictor is nπ⁰ + Cov(x)·V⁺d and the likelihood
    −½(log pdet V + dᵀV⁺d), both in O(m) per row (Sherman–Morrison, then the constraint by a
    Lagrange multiplier).

    Consistent (as n grows with the group fixed, w → 1 unless the row follows π⁰, where the
    shrinkage is right); biased towards n·π⁰ for a predicate whose SA distribution departs
    from its group's."""
    if strength not in EB_STRENGTHS:
        raise ParameterError(f"strength must be one of {EB_STRENGTHS}, got {strength!r}", param="strength")
    if covariance not in EB_COVARIANCES:
        raise ParameterError(f"covariance must be one of {EB_COVARIANCES}, got {covariance!r}", param="covariance")
    member = np.asarray(member, dtype=bool)
    entries = _entries_layout(member, covariance)  # one layout for every block of rows
    Xs, lls = [], []
    for a in range(0, max(len(member), 1), EB_SHRINK_ROWS):  # rows are independent: bounded temporaries
        b = a + EB_SHRINK_ROWS
        R = _eb_rows(Y[a:b], p[a:b], q[a:b], member[a:b], prior[a:b], covariance, entries)
        _, X, ll = R.fit(strength, loglik=return_ll, predict=True)
        Xs.append(X)
        lls.append(ll)
    X = Xs[0] if len(Xs) == 1 else np.concatenate(Xs)
    return (X, lls[0] if len(lls) == 1 else np.concatenate(lls)) if return_ll else X


def eb_fit(S: "UniformSetup", strength: str = "moments", covariance: str = "diagonal",
           parents: str = "select") -> np.ndarray:
    """The empirical-Bayes counts (U, J, m) of every distinct predicate and group of ``S``, each
    row shrunk (:func:`eb_shrink`) towards the parent that explains its published counts best.

    Candidate parents of a row whose predicate constrains k ≥ 2 QI attributes: the group's
    distribution π⁰ over all its rows; the SA distribution π_c of the rows meeting each of the
    predicate's single-attribute conditions c (each itself estimated by :func:`eb_shrink`
    towards π⁰ — thousands of rows, so precise); and their combination under conditional
    independence of the attributes given the SA, ∝ Π_c π_c / (π⁰)^(k−1). A predicate on one
    attribute has π⁰ only. The row takes the candidate with the largest normal marginal
    likelihood of its inversion (``eb_shrink(..., return_ll=True)``): each candidate's
    heterogeneity ρ is fitted first, so a parent that does not fit is not chosen (model choice
    by marginal likelihood, empirical Bayes). With the best parent selected at the diagonal
    covariance the candidates are compared at the method-of-moments ρ (a closed form per
    candidate), and the chosen parent's counts are then fitted at ``strength``: on SDR's OCC,
    EDU and ADULT point queries the errors are those of comparing them at ``strength`` to within
    0.5% in every bin (docs/sdr.md), and the 24-point likelihood grid runs once per row instead
    of once per candidate. Everything depends on the predicate's own
    counts and its sub-predicates', never on the other queries of the workload. The chosen
    parents are kept in ``S`` for the bootstrap."""
    if parents not in EB_PARENTS:
        raise ParameterError(f"parents must be one of {EB_PARENTS}, got {parents!r}", param="parents")
    U, J, m = S.Y.shape
    pi0 = S.parent
    rows, grp = S.rows
    p, q, member = S.p[grp], S.q[grp], S.member[grp]
    # single-attribute conditions of the multi-attribute predicates
    keys: dict[tuple[str, bytes], int] = {}
    singles: list[dict] = []
    cond: list[list[int]] = []
    for mk in S.reps:
        ids: list[int] = []
        if len(mk) >= 2:
            for c in sorted(mk):
                k = (c, np.packbits(mk[c]).tobytes())
                if k not in keys:
                    keys[k] = len(singles)
                    singles.append({c: mk[c]})
                ids.append(keys[k])
        cond.append(ids)
    if parents == "select":
        return _eb_select(S, pi0, singles, cond, strength, covariance)
    # Bayesian model averaging over the candidate parents (equal prior weights)
    cands = [np.broadcast_to(pi0, (U, J, m))]
    if singles:
        Ys = S.predicate_counts(singles)
        gs = np.tile(np.arange(J), len(singles))
        Xs = eb_shrink(Ys.reshape(-1, m), S.p[gs], S.q[gs], S.member[gs], np.tile(pi0, (len(singles), 1)),
                       strength=strength, covariance=covariance)
        Xs = Xs.reshape(len(singles), J, m)
        pis = Xs / np.maximum(Xs.sum(axis=2, keepdims=True), 1e-300)
        kmax = max(len(c) for c in cond)
        idx = np.full((U, kmax), -1, dtype=np.int64)  # each predicate's single-attribute conditions
        for u, ids in enumerate(cond):
            idx[u, : len(ids)] = ids
        has = idx >= 0
        nk = has.sum(axis=1)
        logs = np.log(np.maximum(pis, 1e-300))  # (S, J, m)
        lg = np.where(has[:, :, None, None], logs[np.maximum(idx, 0)], 0.0).sum(axis=1)
        lg = lg - np.maximum(nk - 1, 0)[:, None, None] * np.log(np.maximum(pi0, 1e-300))[None]
        lg = np.where(S.member[None], lg, -np.inf)
        e = np.where(S.member[None], np.exp(lg - lg.max(axis=2, keepdims=True)), 0.0)
        prod = e / np.maximum(e.sum(axis=2, keepdims=True), 1e-300)
        cands.append(np.where((nk >= 2)[:, None, None], prod, pi0[None]))
        for i in range(kmax):
            cands.append(np.where(has[:, i, None, None], pis[np.maximum(idx[:, i], 0)], pi0[None]))
    prior = np.ascontiguousarray(cands[0]).reshape(U * J, m).copy()
    acc, bll = eb_shrink(rows, p, q, member, prior, return_ll=True, strength=strength, covariance=covariance)
    lse = bll.copy()  # a running log-sum-exp: the weight of candidate c ∝ exp(ll_c)
    for cand in cands[1:]:
        cr = np.ascontiguousarray(cand).reshape(U * J, m)
        X, ll = eb_shrink(rows, p, q, member, cr, return_ll=True, strength=strength, covariance=covariance)
        new = np.logaddexp(lse, ll)
        acc = acc * np.exp(lse - new)[:, None] + X * np.exp(ll - new)[:, None]
        lse = new
        better = ll > bll  # the most likely parent: the one the bootstrap re-fits with
        prior = np.where(better[:, None], cr, prior)
        bll = np.where(better, ll, bll)
    S._eb_prior = prior
    return acc.reshape(U, J, m)


def _eb_select(S: "UniformSetup", pi0: np.ndarray, singles: list[dict], cond: list[list[int]],
               strength: str, covariance: str) -> np.ndarray:
    """:func:`eb_fit` with the best parent selected: each candidate parent other than the
    sub-table's distribution π⁰ differs from π⁰ only for the predicates it applies to (the
    combination: two conditions or more; a condition's distribution: the predicates with that
    many conditions), and a row whose candidate is π⁰ keeps its choice (its likelihood there is
    the first one's, which the best so far is never below), so each candidate is built and its
    likelihood computed for those predicates' rows only; one prediction, at the chosen parents."""
    U, J, m = S.Y.shape
    rows, grp = S.rows
    p, q, member = S.p[grp], S.q[grp], S.member[grp]
    entries = _entries_layout(member, covariance)
    # at the diagonal covariance the candidates are compared at the method-of-moments strength
    # (one closed form per candidate, not a likelihood grid); the chosen parent's counts are
    # then fitted at the requested strength
    sel = "moments" if covariance == "diagonal" else strength
    if sel == "moments" and covariance == "diagonal" and (strength == "moments" or not entries):
        fast = _MomentsLikelihood(rows, p, q, member)  # the counts' terms once for every candidate

        def loglik(pr: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
            return fast(pr, r)
    elif entries:
        base = _EBCounts(rows, p, q, member)  # the counts' entries once for every candidate

        def loglik(pr: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
            return _EBEntries(base if r is None else base.subset(r), pr).fit(sel, loglik=True)[2]
    else:
        def loglik(pr: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
            if r is None:
                return eb_loglik(rows, p, q, member, pr, sel, covariance)
            return eb_loglik(rows[r], p[r], q[r], member[r], pr, sel, covariance)

    prior = np.repeat(pi0[None], U, axis=0).reshape(U * J, m)  # a new, writable array
    bll = loglik(prior)

    def consider(us: np.ndarray, cand: np.ndarray) -> None:
        r = (us[:, None] * J + np.arange(J)[None, :]).ravel()
        cr = np.ascontiguousarray(cand).reshape(len(r), m)
        ll = loglik(cr, r)
        better = ll > bll[r]
        prior[r[better]] = cr[better]
        bll[r[better]] = ll[better]

    if singles:
        pis = _single_parents(S, pi0, singles, strength, covariance)
        kmax = max(len(c) for c in cond)
        idx = np.full((U, kmax), -1, dtype=np.int64)  # each predicate's single-attribute conditions
        for u, ids in enumerate(cond):
            idx[u, : len(ids)] = ids
        has = idx >= 0
        nk = has.sum(axis=1)
        log_pi0 = np.log(np.maximum(pi0, 1e-300))
        step = max(1, EB_SHRINK_ROWS // max(J, 1))  # predicates per block: rows are independent

        def logs(i: np.ndarray) -> np.ndarray:  # the log-distributions of single conditions i
            return np.log(np.maximum(pis[i], 1e-300))
        # their combination under conditional independence, ∝ Π_c π_c / (π⁰)^(k−1), for k ≥ 2
        u2_all = np.flatnonzero(nk >= 2)
        for s0 in range(0, len(u2_all), step):
            u2 = u2_all[s0:s0 + step]
            lg = logs(idx[u2, 0])  # the conditions' log-distributions summed in order (as a sum over them)
            for i in range(1, kmax):
                lg = lg + np.where(has[u2, i, None, None], logs(np.maximum(idx[u2, i], 0)), 0.0)
            lg = lg - np.maximum(nk[u2] - 1, 0)[:, None, None] * log_pi0[None]
            lg = np.where(S.member[None], lg, -np.inf)
            e = np.where(S.member[None], np.exp(lg - lg.max(axis=2, keepdims=True)), 0.0)
            del lg
            consider(u2, e / np.maximum(e.sum(axis=2, keepdims=True), 1e-300))
            del e
        for i in range(kmax):
            ui_all = np.flatnonzero(has[:, i])
            for s0 in range(0, len(ui_all), step):
                ui = ui_all[s0:s0 + step]
                consider(ui, pis[idx[ui, i]])
    S._eb_prior = prior
    return eb_shrink(rows, p, q, member, prior, strength=strength, covariance=covariance).reshape(U, J, m)


def _single_parents(S: "UniformSetup", pi0: np.ndarray, singles: list[dict], strength: str,
                    covariance: str) -> np.ndarray:
    """(len(singles), J, m): the SA distribution of the rows meeting each single-attribute
    condition in each sub-table, each estimated by :func:`eb_shrink` towards the sub-table's π⁰,
    a block of conditions at a time (their counts and temporaries stay small)."""
    J, m = pi0.shape
    out = np.empty((len(singles), J, m))
    step = max(1, EB_SHRINK_ROWS // max(J, 1))
    for a in range(0, len(singles), step):
        part = singles[a:a + step]
        Ys = S.predicate_counts(part)
        gs = np.tile(np.arange(J), len(part))
        Xs = eb_shrink(Ys.reshape(-1, m), S.p[gs], S.q[gs], S.member[gs], np.tile(pi0, (len(part), 1)),
                       strength=strength, covariance=covariance).reshape(len(part), J, m)
        np.divide(Xs, np.maximum(Xs.sum(axis=2, keepdims=True), 1e-300), out=out[a:a + len(part)])
    return out


class _Packed:
    """Each row's domain entries (``member``) gathered into a (rows × the largest domain) array,
    in order: an SDR sub-table's domain is a small part of the SA's, and the entrywise work of
    the estimators needs only those entries. ``pack``/``unpack`` move whole-row arrays in and
    out (entries outside the domains: ``fill`` / 0)."""

    def __init__(self, member: np.ndarray):
        member = np.asarray(member, dtype=bool)
        self.shape = member.shape
        R, m = member.shape
        self.idx = np.flatnonzero(member)
        self.cnt = d = np.count_nonzero(member, axis=1)
        self.D = max(int(d.max()) if R else 0, 1)
        self.row = self.idx // m
        slot = np.arange(len(self.idx), dtype=np.int64) - np.repeat(np.cumsum(d) - d, d)
        self.pos = self.row * self.D + slot
        self.valid = np.zeros((R, self.D), dtype=bool)
        self.valid.ravel()[self.pos] = True

    def pack(self, A: np.ndarray, fill: float = 0.0) -> np.ndarray:
        out = np.full((self.shape[0], self.D), fill)
        out.ravel()[self.pos] = np.asarray(A, dtype=np.float64).ravel()[self.idx]
        return out

    def unpack(self, Ac: np.ndarray) -> np.ndarray:
        out = np.zeros(self.shape)
        out.ravel()[self.idx] = Ac.ravel()[self.pos]
        return out


def norm_sub(X: np.ndarray, member: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Norm-Sub (Wang, Lopuhaä-Zwakenberg, Li, Škorić & Li 2020): x̂_i = max(x_i + δ, 0) on each
    row's domain with the one δ that makes Σ x̂ = total — the Euclidean projection onto
    {x ≥ 0, Σ x = total}. Rows with total ≤ 0 become 0.

    Each row's domain values are gathered first (:class:`_Packed`: rows × the largest domain,
    not × m); the sort, the running sums and δ only read them, so the result is
    :func:`norm_sub_full`'s exactly."""
    X = np.asarray(X, dtype=np.float64)
    member = np.asarray(member, dtype=bool)
    if not _PACKED_EB or (X.shape[1] and np.count_nonzero(member, axis=1).max(initial=0) * 2 > X.shape[1]):
        return norm_sub_full(X, member, total)  # most of each row is its domain: nothing to gain
    pk = _Packed(member)
    return pk.unpack(_norm_sub_packed(pk.pack(X, -np.inf), pk.valid, np.asarray(total, dtype=np.float64)))


def _norm_sub_packed(v: np.ndarray, valid: np.ndarray, total: np.ndarray) -> np.ndarray:
    """:func:`norm_sub` of packed rows (``v``: the domain entries, −∞ in the padding)."""
    srt = -np.sort(-v, axis=1)  # descending, padding (−∞) last
    finite = np.isfinite(srt)
    css = np.cumsum(np.where(finite, srt, 0.0), axis=1)
    k = np.arange(1, srt.shape[1] + 1)
    delta_k = (total[:, None] - css) / k
    ok = finite & (srt + delta_k > 0)
    kk = np.where(ok.any(axis=1), srt.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1), 0)
    delta = delta_k[np.arange(len(v)), kk]
    out = np.where(valid, np.maximum(v + delta[:, None], 0.0), 0.0)
    out[total <= 0] = 0.0
    return out


def norm_sub_full(X: np.ndarray, member: np.ndarray, total: np.ndarray) -> np.ndarray:
    """:func:`norm_sub` over whole rows (the reference): the packed computation with every
    entry a slot and the non-members as padding."""
    X = np.asarray(X, dtype=np.float64)
    member = np.asarray(member, dtype=bool)
    return _norm_sub_packed(np.where(member, X, -np.inf), member, np.asarray(total, dtype=np.float64))


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
        return eb_shrink(rows, p, q, member, prior, strength=o.get("strength", "moments"),
                         covariance=o.get("covariance", "diagonal")), zero
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


def _fit(S: UniformSetup, method: str, tol: float = EM_TOL, max_iter: int = MAX_ITER,
         eb: Mapping[str, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    rows, grp = S.rows
    if method == "eb":
        return eb_fit(S, **(eb or {})), np.zeros(len(rows), dtype=np.int64)
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


class _UniformChannelEstimator(Estimator):
    """Base of the estimators of uniform perturbation, SDR and global randomization A."""

    family = "randomized"
    mechanisms = ("uniform", "sdr", "global")
    method = ""

    def _opts(self, release) -> dict[str, Any]:
        p = self.get_params()
        out = {"tol": p.get("tol", EM_TOL), "max_iter": p.get("max_iter", MAX_ITER)}
        if self.method == "eb":
            out["eb"] = {k: p[k] for k in ("strength", "covariance", "parents")}
            if out["eb"]["strength"] == "auto":
                out["eb"]["strength"] = EB_AUTO_STRENGTH.get(release.manifest.get("mechanism"), "moments")
        return out

    def _setup(self, release, workload) -> UniformSetup | None:
        if not self.supports(release):
            raise ParameterError(f"estimator {self.name!r} does not apply to a {release.manifest.get('mechanism')} release",
                                 param="estimator")
        _, masks = release.resolve(workload)
        return UniformSetup(release, masks, release.transition_models()[0]) if len(masks) else None

    def answer_with_iterations(self, release, workload) -> tuple[np.ndarray, np.ndarray]:
        """(estimates, iterations per query: the most any of its sub-tables took; 0 for closed forms)."""
        S = self._setup(release, workload)
        if S is None:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        X, its = _fit(S, self.method, **self._opts(S.release))
        return S.per_query(X).sum(axis=1), its.reshape(S.Y.shape[:2]).max(axis=1)[S.inv]

    def answer(self, release, workload) -> np.ndarray:
        return self.answer_with_iterations(release, workload)[0]

    def _linear_estimate(self, S: UniformSetup | None, level: float) -> Estimates:
        """The estimate with the closed-form uncertainty of :class:`MLE`: ``se`` of the inversion at
        the fitted counts, the inversion's normal interval cut to [0, n_P] and widened to hold
        the estimate."""
        method = (f"closed form: se of the linear inversion at the {self.method} counts; interval = the "
                  "inversion's normal interval cut to [0, n_P] and widened to hold the estimate"
                  + ("; assumes records randomized independently given the table and a normal sum of "
                     "Bernoulli terms; the interval does not use the empirical-Bayes prior, so it holds "
                     "whatever the predicate's SA distribution" if self.method == "eb" else ""))
        if S is None:
            return Estimates.normal(np.zeros(0), np.zeros(0), method, level)
        X, _ = _fit(S, self.method, **self._opts(S.release))
        est = S.per_query(X).sum(axis=1)
        _, se, lo, hi = _linear_interval(S, X, level)
        return Estimates(est, se, np.minimum(lo, est), np.maximum(hi, est), method, level)


class Inversion(_UniformChannelEstimator):
    """x̂ = (y − n·q)/p per group: uniform perturbation, SDR and global randomization A.

    Uncertainty, closed form: the estimate is linear in the published counts, and given the
    table each row publishes independently, so Var = Σ_j [x_j·a(1−a) + (n_j−x_j)·b(1−b)]/p_j²
    exactly (a = p_j + q_j·k_j, b = q_j·k_j; x_j the true selected count among the query's
    n_j rows of group j, k_j the selected values in D_j), estimated by plugging in the exact
    maximum-likelihood counts (in [0, n_j]). Interval: estimate ± z·se (normal approximation
    of a sum of n_j independent Bernoulli terms; poor only when n_j·b is a handful)."""

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
        est = S.inversion().sum(axis=1)
        se = np.sqrt(np.maximum(S.linear_variance(S.per_query(X)), 0.0))
        return Estimates.normal(est, se, self.describe(), level)

    @staticmethod
    def describe() -> str:
        return ("closed form: exact variance of the linear inversion given the table (independent "
                "randomization per row), maximum-likelihood counts plugged in; normal interval")


class MLE(_UniformChannelEstimator):
    """The exact maximum-likelihood counts (:func:`uniform_mle`), per distinct QI predicate and sub-table,
    non-negative and summing to the known n_P,j — the limit of EM, without its iterations.

    Uncertainty, closed form: ``se`` is the inversion's standard error at the fitted counts (the
    MLE's asymptotic standard error when no count is at the boundary 0, where MLE and
    inversion coincide; conservative when some are). The interval is the inversion's Wald
    interval intersected with [0, n_P] (the counts a query can have) and widened to hold the
    estimate: its coverage is at least the Wald interval's, because the cut-off part holds
    no possible true count. The MLE is biased towards 0 for small counts, so a symmetric
    interval around it would under-cover; this one does not depend on that bias."""

    name = method = "mle"

    def __init__(self) -> None:
        self._set_params(locals())

    def estimate(self, release, workload, level: float = 0.95) -> Estimates:
        return self._linear_estimate(self._setup(release, workload), level)


class _BootstrapEstimator(_UniformChannelEstimator):
    """Uncertainty by a parametric bootstrap over the mechanism's own randomness: fit the counts
    of every (predicate, sub-table) row, publish them again through the same uniform channel
    ``replicates`` times (:func:`_simulate_uniform`; every row and replicate at once), re-estimate
    each replicate with the same estimator, and take the standard deviation of each query's
    replicate estimates as its ``se``. Assumptions: the fitted counts stand in for the true
    ones; records are randomized independently.

    Interval (``interval``): ``"linear"`` (default) — the inversion's closed-form normal interval
    cut to [0, n_P] and widened to hold the estimate, as for :class:`MLE` (coverage at least the
    inversion's); ``"basic"`` — the basic bootstrap interval [2θ̂ − θ*_(1−α/2), 2θ̂ − θ*_(α/2)] cut
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
            return self._linear_estimate(S, level)
        method = (f"se: parametric bootstrap over the channel's randomness ({B} replicates, re-estimated by "
                  f"{self.method}); interval: " + ("the inversion's normal interval cut to [0, n_P] and widened to "
                                                   "hold the estimate" if kind in ("linear", "auto") else
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
                          **opts, prior=np.repeat(S.eb_priors()[live], B, axis=0) if self.method == "eb" else None)
        full = np.zeros((len(rows), B, rows.shape[1]))
        full[live] = Xs.reshape(len(live), B, -1)
        U, J, m = S.Y.shape
        full = full.reshape(U, J, B, m).sum(axis=1)  # (U, B, m): summed over the groups
        reps = np.einsum("qbm,qm->qb", full[S.inv], S.sel.astype(np.float64), optimize=True)
        se = reps.std(axis=1, ddof=1)
        a = (1 - level) / 2
        qlo, qhi = np.quantile(reps, [a, 1 - a], axis=1)
        if kind in ("linear", "auto"):
            _, _, lo, hi = _linear_interval(S, X, level)
            return Estimates(est, se, np.minimum(lo, est), np.maximum(hi, est), method, level)
        nP = S.n_per_query().sum(axis=1)
        return Estimates(est, se, np.clip(2 * est - qhi, 0.0, nP), np.clip(2 * est - qlo, 0.0, nP), method, level)


class EM(_BootstrapEstimator):
    """Iterative Bayesian update per QI predicate and sub-table, with the known totals
    (non-negative, consistent; stops at ``tol``, so it sits short of :class:`MLE`)."""

    name = method = "em"
    _parameter_constraints = {"tol": Real(0, None, closed="neither"), "max_iter": Integer(1, None),
                              **_BootstrapEstimator._boot_constraints}
    _parameter_help = {"tol": "Stop when no count moves by more than this (relative, floor one record).",
                       "max_iter": "Iteration cap.", **_BootstrapEstimator._boot_help}

    def __init__(self, tol: float = EM_TOL, max_iter: int = MAX_ITER, replicates: int = 50, seed: int = 0,
                 interval: str = "linear"):
        self._set_params(locals())


class NormSub(_BootstrapEstimator):
    """The inversion per QI predicate and sub-table, projected onto non-negative counts with the
    known total n_P,j (Norm-Sub, Wang et al. 2020). The best of the estimators that do not pool
    predicates on EDU and ADULT point queries (mean relative error over counts 1–10 and
    11–100, 10 cells: 3.00 vs MLE 3.06, EM 3.21, inversion 5.91; docs/sdr.md), OCC held out;
    the default of uniform perturbation, SDR and A is :class:`EmpiricalBayes` (2.36).

    Uncertainty: by default (``replicates=0``) closed form as for :class:`MLE` (fast; the
    inversion's standard error is conservative for Norm-Sub, whose own spread is smaller);
    ``replicates > 0`` gives the parametric bootstrap standard error."""

    name = method = "norm-sub"
    _parameter_constraints = dict(_BootstrapEstimator._boot_constraints)
    _parameter_help = dict(_BootstrapEstimator._boot_help)

    def __init__(self, replicates: int = 0, seed: int = 0, interval: str = "auto") -> None:
        self._set_params(locals())


class EmpiricalBayes(_BootstrapEstimator):
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
    inversion 5.91; docs/sdr.md).

    Options (all chosen against on EDU and ADULT; docs/sdr.md): ``strength`` — ρ by the method
    of moments (``"moments"``), by maximising the normal marginal likelihood (``"likelihood"``)
    or the adjusted likelihood of Li & Lahiri (2010) (``"adjusted"``); ``"auto"`` (the default)
    is the one chosen for the release's mechanism (:data:`EB_AUTO_STRENGTH`: ``adjusted`` for
    SDR, ``moments`` for uniform perturbation and global randomization A);
    ``covariance`` — the inversion's and the prior's covariances as diagonal (``"diagonal"``) or
    exactly, m × m with the known total (``"exact"``, :class:`_EBRows`); ``parents`` — the best
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
    _parameter_constraints = {**_BootstrapEstimator._boot_constraints, "strength": Options("auto", *EB_STRENGTHS),
                              "covariance": Options(*EB_COVARIANCES), "parents": Options(*EB_PARENTS)}
    _parameter_help = {**_BootstrapEstimator._boot_help,
                       "strength": "Shrinkage strength ρ per row: auto (the default: adjusted for SDR, moments "
                                   "for uniform and global, each chosen on EDU and ADULT), moments (method of "
                                   "moments), likelihood (maximum of the normal marginal likelihood over [1, n]) or "
                                   "adjusted (that likelihood times ρ − 1, Li & Lahiri 2010).",
                       "covariance": "Covariance of the inversion and the prior: exact (full m × m, closed form) "
                                     "or diagonal (components treated as independent).",
                       "parents": "average (Bayesian model averaging over the candidate parents by marginal "
                                  "likelihood) or select (the single best parent)."}

    def __init__(self, replicates: int = 0, seed: int = 0, interval: str = "auto", strength: str = "auto",
                 covariance: str = "diagonal", parents: str = "select") -> None:
        self._set_params(locals())


# ----------------------------------------------------------------------------- A': 4-state model
def _r(f, N, lp, mode):
    f = np.asarray(f, dtype=np.float64)
    if mode == "paper":
        return f / N
    return f * (lp - 1) / (lp * np.maximum(N - f, 1e-300))


def _kron_batch(factors: list[np.ndarray]) -> np.ndarray:
    """M0 ⊗ M1 ⊗ … per pair; M0 = I (the NSA part is published unchanged)."""
    n = factors[0].shape[0] if factors else 1
    M = np.broadcast_to(np.eye(2), (n, 2, 2))
    for Fm in factors:
        k = M.shape[1]
        M = (M[:, :, None, :, None] * Fm[:, None, :, None, :]).reshape(n, 2 * k, 2 * k)
    return M


def _transition(x: np.ndarray, N: float, lp: int, w: int, mode: str) -> np.ndarray:
    """Per-pair transition matrices (n, K, K), K = 2^(w+1); state bits (P, s1, …, sw)."""
    n, K = x.shape
    bits = (np.arange(K)[:, None] >> np.arange(w - 1, -1, -1)[None, :]) & 1  # (K, w): s1 … sw
    factors = []
    for i in range(w):
        f = x[:, bits[:, i] == 1].sum(axis=1)
        r = _r(f, N, lp, mode)
        Fm = np.empty((n, 2, 2))
        Fm[:, 0, 0], Fm[:, 0, 1] = 1 - r, r
        Fm[:, 1, 0], Fm[:, 1, 1] = (lp - 1) / lp, 1 / lp
        factors.append(Fm)
    return _kron_batch(factors)


def iterative_bayes(y: np.ndarray, N: float, lp: int, w: int, tol: float = DEFAULT_TOL, r: str = "exact",
                    max_iter: int = MAX_ITER) -> tuple[np.ndarray, np.ndarray]:
    """Eq 12–13 for many pairs at once: y (n, 2^(w+1)) observed state counts → x̂ and iterations."""
    x = np.array(y, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    active = np.arange(len(x))
    iters = np.zeros(len(x), dtype=np.int64)
    for it in range(1, max_iter + 1):
        if not len(active):
            break
        xa, ya = x[active], y[active]
        M = _transition(xa, N, lp, w, r)
        denom = np.einsum("pr,prj->pj", xa, M)
        ratio = np.divide(ya, denom, out=np.zeros_like(ya), where=denom > 0)
        new = xa * np.einsum("pij,pj->pi", M, ratio)
        moved = np.abs(new - xa) > tol * np.maximum(np.abs(xa), 1.0)
        x[active] = new
        iters[active] = it
        active = active[moved.any(axis=1)]
    return x, iters


def closed_form(y: np.ndarray, f: np.ndarray, N: float, lp: int, w: int, r: str = "exact") -> np.ndarray:
    """Exact inversion x = (Mᵀ)⁻¹ y with r from the published counts f'_{s_i} (n, w).

    For one SA this is x̂3 = (y3 − n_P·r)/(1/ℓ' − r)."""
    n, K = y.shape
    factors = []
    for i in range(w):
        rr = _r(f[:, i], N, lp, r)
        Fm = np.empty((n, 2, 2))
        Fm[:, 0, 0], Fm[:, 0, 1] = 1 - rr, rr
        Fm[:, 1, 0], Fm[:, 1, 1] = (lp - 1) / lp, 1 / lp
        factors.append(Fm)
    M = _kron_batch(factors)
    return np.linalg.solve(np.transpose(M, (0, 2, 1)), y[:, :, None])[:, :, 0]


def _subset_counts(Yt: np.ndarray, sel: list[int], combos: np.ndarray, qidx: np.ndarray) -> dict[tuple[int, ...], np.ndarray]:
    """Z_T for every T ⊆ sel: rows of query q with published code_i = s_i for i ∈ T (per pair)."""
    w_all = Yt.ndim - 1
    out = {}
    for k in range(len(sel) + 1):
        for T in itertools.combinations(range(len(sel)), k):
            axes = [sel[i] for i in T]
            drop = tuple(1 + a for a in range(w_all) if a not in axes)
            marg = Yt.sum(axis=drop) if drop else Yt
            index = (qidx,) + tuple(combos[:, i] for i in T)
            out[T] = marg[index]
    return out


def _states_from_subsets(Z: dict, k: int) -> np.ndarray:
    """Inclusion–exclusion: counts per state of the k SA bits from the Z_T (n, 2^k)."""
    n = len(Z[()])
    y = np.zeros((n, 2 ** k))
    for state in range(2 ** k):
        ones = {i for i in range(k) if (state >> (k - 1 - i)) & 1}
        for T, z in Z.items():
            if ones <= set(T):
                y[:, state] += (-1) ** (len(T) - len(ones)) * z
    return y


# ------------------------------------------------------------- full m × m transition

# ----------------------------------------------------------------------------- A': full transition
def _mode_products(X: np.ndarray, mats: Sequence[np.ndarray]) -> np.ndarray:
    """Z[n, c1, …, ck] = Σ X[n, a1, …, ak] Π_i M_i[a_i, c_i] (X multiplied by M1 ⊗ … ⊗ Mk)."""
    if X.ndim == 2 and len(mats) == 1:
        return X @ mats[0]
    for i, M in enumerate(mats):
        X = np.moveaxis(np.tensordot(X, M, axes=([i + 1], [0])), -1, i + 1)
    return X


def full_closed(Y: np.ndarray, Ts: Sequence[np.ndarray]) -> np.ndarray:
    """x̂ = y (T1 ⊗ … ⊗ Tk)⁻¹ for every row of Y (n, m1, …, mk): exactly unbiased when the
    T_i are the true transitions; can be negative."""
    return _mode_products(Y, [np.linalg.pinv(T) for T in Ts])


def full_iterative(Y: np.ndarray, Ts: Sequence[np.ndarray], tol: float = DEFAULT_TOL,
                   max_iter: int = MAX_ITER) -> tuple[np.ndarray, np.ndarray]:
    """Iterative Bayesian update (eq 12–13) with the full transition T1 ⊗ … ⊗ Tk:
    x ← x ∘ ((y / (x T)) Tᵀ), x⁰ = y, stopped per row when no component moves by more than
    ``tol`` (relative, floor one row). Keeps x ≥ 0 and Σx = Σy. Returns (x̂, iterations)."""
    # many small products: BLAS threads only add contention (as in the count index)
    with threadpool_limits(limits=1, user_api="blas"):
        return _full_iterative(np.asarray(Y, dtype=np.float64), [np.ascontiguousarray(T) for T in Ts], tol, max_iter)


def _full_iterative(Y: np.ndarray, Ts: Sequence[np.ndarray], tol: float, max_iter: int) -> tuple[np.ndarray, np.ndarray]:
    X = Y.copy()
    Tt = [np.ascontiguousarray(T.T) for T in Ts]
    iters = np.zeros(len(X), dtype=np.int64)
    active = np.arange(len(X))
    axes = tuple(range(1, X.ndim))
    for it in range(1, max_iter + 1):
        if not len(active):
            break
        xa, ya = X[active], Y[active]
        D = _mode_products(xa, Ts)
        ratio = np.divide(ya, D, out=np.zeros_like(ya), where=D > 0)
        new = xa * _mode_products(ratio, Tt)
        moved = (np.abs(new - xa) > tol * np.maximum(np.abs(xa), 1.0)).any(axis=axes)
        X[active] = new
        iters[active] = it
        active = active[moved]
    return X, iters


def _full_estimates(Yu, inv, qs, sel_sa, sa_sel, sizes, Ts, method, tol, max_iter=MAX_ITER, uncertainty=None):
    """Estimates for queries ``qs`` that constrain the SAs ``sel_sa``: solve for the vector of
    true counts of every SA value combination among the rows of each distinct NSA predicate,
    then add up the combinations the query's SA predicates select."""
    u, pos = np.unique(inv[qs], return_inverse=True)
    other = tuple(1 + i for i in range(len(sizes)) if i not in sel_sa)
    Ym = Yu[u].reshape((len(u), *sizes))
    if other:
        Ym = Ym.sum(axis=other)
    mats = [Ts[i] for i in sel_sa]
    if method == "full-closed":
        X, its = full_closed(Ym, mats), np.zeros(len(u), dtype=np.int64)
    else:
        X, its = full_iterative(Ym, mats, tol, max_iter)
    Z = _select(X[pos], [sa_sel[i][qs].astype(np.float64) for i in sel_sa])
    if uncertainty is not None:
        # closed form for the linear x̂ = y T⁻¹ (module docstring of the uncertainty): per SA,
        # w_i = T_i⁻¹ sel_i, a_i = T_i w_i², b_i = T_i w_i; Var = Σ_x x_x (Π a_i[x_i] − Π b_i[x_i]²)
        pinvs = [np.linalg.pinv(T) for T in mats]
        ws = [sa_sel[i][qs].astype(np.float64) @ P.T for i, P in zip(sel_sa, pinvs)]
        a_s = [(w**2) @ T.T for w, T in zip(ws, mats)]
        b_s = [w @ T.T for w, T in zip(ws, mats)]
        # plug-in counts: non-negative and summing to n_P (the noisy inversion clipped at 0 would
        # inflate the variance, which is linear in the counts)
        Xp = (X if method == "full-iterative" else full_iterative(Ym, mats, tol, max_iter)[0])[pos]
        var = _select(Xp, a_s) - _select(Xp, [b**2 for b in b_s])
        deltas = uncertainty.get("delta")
        if deltas is not None and len(sel_sa) == 1 and deltas[sel_sa[0]] is not None:
            i = sel_sa[0]
            ds, f = deltas[i]
            s_q = sa_sel[i][qs].astype(np.float64)
            # the estimator's own error law: re-run on simulated releases with T rebuilt each time
            Xfit = X if method == "full-iterative" else full_iterative(Ym, mats, tol, max_iter)[0]
            Xs = ds.bootstrap(Xfit, f, method, tol, max_iter)  # (U, B, m)
            dev = np.einsum("qbm,qm->qb", Xs[pos], s_q) - (Xfit[pos] * s_q).sum(axis=1)[:, None]
            if "boot" not in uncertainty:
                uncertainty["boot"] = np.full((len(uncertainty["var"]), dev.shape[1]), np.nan)
            uncertainty["boot"][qs] = dev
            var = dev.var(axis=1, ddof=1)
            uncertainty["centre_estimate"][qs] = True
        rebuilt = uncertainty.get("rebuilt")
        if rebuilt is not None and len(sel_sa) == 1 and deltas is None:
            # the receiver's T̂ rebuilt from the published counts (diverted_variance)
            i = sel_sa[0]
            types, draws = rebuilt[i]
            s_q = sa_sel[i][qs].astype(np.float64)
            nP = Ym.sum(axis=1)
            var = linear_noise_variance(Xp, ws[0], s_q, nP[pos], types, mats[0])
            if draws is not None:
                Xfit = X if method == "full-iterative" else full_iterative(Ym, mats, tol, max_iter)[0]
                f = types.f.astype(np.float64)
                D = Xfit - (nP / max(f.sum(), 1.0))[:, None] * f
                var = var + draws.mean_square(D, s_q, pos)
        lin = Z if method == "full-closed" else _select(full_closed(Ym, mats)[pos], [sa_sel[i][qs].astype(np.float64) for i in sel_sa])
        uncertainty["var"][qs] = np.maximum(var, 0.0)
        uncertainty["linear"][qs] = lin
    return Z, its[pos]


def _select(X: np.ndarray, vecs: Sequence[np.ndarray]) -> np.ndarray:
    """Σ_x X[q, x1, …, xk] Π_i v_i[q, x_i] per query (the last axes first)."""
    Z = X
    for v in reversed(vecs):
        Z = (Z * v.reshape((len(v),) + (1,) * (Z.ndim - 2) + (v.shape[1],))).sum(axis=-1)
    return Z



def diverted_estimates(release, masks, method: str, tol: float = DEFAULT_TOL, r: str = "exact",
                       transition_counts: Sequence[np.ndarray] | None = None,
                       max_iter: int = MAX_ITER, uncertainty: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(estimates, iterations) for a resolved workload on an A' release (module docstring).

    ``uncertainty``: a dict that receives, per query, ``var`` (the closed-form variance of the
    method's linear counterpart), ``linear`` (that linear estimate) and ``n`` (n_P, the rows
    meeting the query's NSA predicate): see :class:`DivertedEstimator`.

    ``transition_counts`` (one count vector per SA, after the dropped rows) replaces the
    published counts in the full-transition methods — only for analysis: it measures what
    knowing the true counts would change; a receiver does not have them."""
    if method not in METHODS:
        raise QueryError(f"unknown estimator {method!r}; use one of {', '.join(map(repr, METHODS))}")
    lp = int(release.claim.l_prime)
    sas = list(release.schema["sensitive"])
    N = float(release.manifest["n_published"])
    sizes = [len(release.domains[s]) for s in sas]
    # SA masks (all-True masks mean the SA is not constrained)
    rest = list(masks)
    sa_sel = []
    for s, m_s in zip(sas, sizes):
        rest, sel = split_masks(rest, s, m_s)
        sa_sel.append(sel)
    nq = len(masks)
    out = np.zeros(nq)
    iters_out = np.zeros(nq, dtype=np.int64)
    if uncertainty is not None:
        for key in ("var", "linear", "n"):
            uncertainty[key] = np.full(nq, np.nan)
        uncertainty["centre_estimate"] = np.zeros(nq, dtype=bool)
    if nq == 0:
        return out, iters_out
    nsa_cols = sorted({c for m in rest for c in m})
    pub = [release.column_codes(s).astype(np.int64) for s in sas]
    key = np.ravel_multi_index(pub, sizes) if len(sas) > 1 else pub[0]
    K = int(np.prod(sizes))
    if K > 2_000_000:
        raise QueryError(f"the sensitive attributes {sas} have {K} value combinations; too many to estimate jointly")
    index = release.joint_index(nsa_cols)
    # many queries share their NSA predicate (the point workload pairs each with every SA value)
    reps, inv = distinct_predicates(rest)
    Yu = index.sums(reps)
    Y = Yu[inv].reshape((nq, *sizes))
    glob = np.bincount(key, minlength=K).astype(np.float64).reshape((1, *sizes))
    constrained = np.stack([~sel.all(axis=1) for sel in sa_sel], axis=1)  # (nq, w)
    has_nsa = np.array([bool(m) for m in rest])
    # queries without any SA constraint: n_P is exact (NSA columns are published unchanged)
    none = ~constrained.any(axis=1)
    out[none] = Y.reshape(nq, K)[none].sum(axis=1)
    if uncertainty is not None:
        uncertainty["n"] = Y.reshape(nq, K).sum(axis=1)
        uncertainty["var"][none] = 0.0
        uncertainty["linear"][none] = out[none]
    # group the rest by which SAs they constrain; expand into (query, value combination) pairs
    patterns: dict[tuple[int, ...], list[int]] = {}
    for q in np.flatnonzero(~none).tolist():
        patterns.setdefault(tuple(np.flatnonzero(constrained[q])), []).append(int(q))
    qs: Any; pair_q: Any; combos: Any  # lists turned into arrays below
    if method.startswith("full"):
        # transitions from the published SA counts: the receiver re-runs the group schedule
        Ts = [model.single.matrix for model in release.transition_models(transition_counts)]
        if uncertainty is not None and uncertainty.get("delta") is None and uncertainty.get("variance") == "bootstrap":
            fs = ([np.asarray(c, dtype=np.int64) for c in transition_counts] if transition_counts is not None
                  else [receiver_counts(release.published_counts(s), lp) for s in sas])
            uncertainty["delta"] = [(TransitionNoise.of(release, i, f, lp), f.astype(np.float64))
                                    if transition_counts is None and len(f) <= DELTA_MAX_VALUES else None
                                    for i, f in enumerate(fs)]
        if uncertainty is not None and uncertainty.get("rebuilt") is None and uncertainty.get("variance") == "rebuilt":
            fs = ([np.asarray(c, dtype=np.int64) for c in transition_counts] if transition_counts is not None
                  else [receiver_counts(release.published_counts(s), lp) for s in sas])
            uncertainty["rebuilt"] = [receiver_parts(release, i, f, lp, T) for i, (f, T) in enumerate(zip(fs, Ts))]
        for sel_sa, qs in patterns.items():
            qs = np.asarray(qs)
            out[qs], iters_out[qs] = _full_estimates(Yu, inv, qs, sel_sa, sa_sel, sizes, Ts, method, tol, max_iter,
                                                     uncertainty)
        return out, iters_out
    for sel_sa, qs in patterns.items():
        qs = np.asarray(qs)
        if len(sel_sa) == 1:
            rows, vals = np.nonzero(sa_sel[sel_sa[0]][qs])
            pair_q, combos = qs[rows].astype(np.int64), vals[:, None].astype(np.int64)
        else:
            pair_q, combos = [], []
            for q in qs:
                ls = [np.flatnonzero(sa_sel[i][q]) for i in sel_sa]
                grid = np.stack(np.meshgrid(*ls, indexing="ij"), axis=-1).reshape(-1, len(sel_sa))
                pair_q.append(np.full(len(grid), q))
                combos.append(grid)
            pair_q = np.concatenate(pair_q).astype(np.int64)
            combos = np.concatenate(combos).astype(np.int64).reshape(-1, len(sel_sa))
        if not len(pair_q):
            continue
        k = len(sel_sa)
        sel_axes = list(sel_sa)
        Zp = _subset_counts(Y, sel_axes, combos, pair_q)
        Zg = _subset_counts(glob, sel_axes, combos, np.zeros(len(pair_q), dtype=np.int64))
        f_pub = np.stack([Zg[(i,)] for i in range(k)], axis=1)  # f'_{s_i}
        sa_only = ~has_nsa[pair_q]
        est = np.zeros(len(pair_q))
        its = np.zeros(len(pair_q), dtype=np.int64)
        var = np.full(len(pair_q), np.nan)
        lin = np.full(len(pair_q), np.nan)
        if k == 1:  # Theorem 3: the MLE of an SA-only count is its published count
            est[sa_only] = f_pub[sa_only, 0]
            # f'_s ~ Binomial(ℓ'·f_s, 1/ℓ') (§6): Var = f_s(1 − 1/ℓ'), f_s estimated by f'_s
            var[sa_only] = f_pub[sa_only, 0] * (1 - 1 / lp)
            lin[sa_only] = est[sa_only]
            todo = ~sa_only
        else:
            todo = np.ones(len(pair_q), dtype=bool)
        if todo.any():
            yP = _states_from_subsets({T: z[todo] for T, z in Zp.items()}, k)
            yA = _states_from_subsets({T: z[todo] for T, z in Zg.items()}, k)
            y = np.concatenate([yA - yP, yP], axis=1)  # P bit first: (P̄ …, P …)
            x_closed = closed_form(y, f_pub[todo], N, lp, k, r)
            if method == "closed":
                x = x_closed
            else:
                x, it = iterative_bayes(y, N, lp, k, tol, r, max_iter)
                its[todo] = it
            est[todo] = x[:, -1]
            if k == 1:
                # x̂ = (y3 − n_P·r)/(1/ℓ' − r): y3 is a sum of independent Bernoulli terms, 1/ℓ' for
                # the x rows holding s and r for the n_P − x others
                rr = _r(f_pub[todo, 0], N, lp, r)
                nP = yP.sum(axis=1)
                xx = np.clip(x[:, -1], 0.0, nP)
                var[todo] = (xx * (1 / lp) * (1 - 1 / lp) + (nP - xx) * rr * (1 - rr)) / (1 / lp - rr) ** 2
                lin[todo] = x_closed[:, -1]
        np.add.at(out, pair_q, est)
        np.maximum.at(iters_out, pair_q, its)
        if uncertainty is not None:
            v = np.zeros(nq)
            np.add.at(v, pair_q, var)
            li = np.zeros(nq)
            np.add.at(li, pair_q, lin)
            uncertainty["var"][qs] = v[qs]
            uncertainty["linear"][qs] = li[qs]
    return out, iters_out


# ----------------------------------------------------------------------------- A': variance with T̂ estimated
#: the decoy schedules behind the A' variance run on the counts scaled down to at most this many
#: tuples (the schedule is homogeneous of degree 0 in the counts, up to rounding)
DELTA_ROWS = 50_000
#: above this many SA values the simulation is not run: the fixed-T variance is reported
DELTA_MAX_VALUES = 200
#: simulated draws of the published counts per release and sensitive attribute
DELTA_REPLICATES = 200
#: the A' full-transition estimators' variance: the receiver's T̂ rebuilt from the published counts
#: (diverted_variance, the default), held fixed (the per-row closed form), or a bootstrap of the estimator
A_VARIANCES = ("rebuilt", "fixed", "bootstrap")
#: bootstrap releases of the A' full-transition estimators' intervals
BOOT_REPLICATES = 100
_DELTA_CACHE: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def _onehot(codes: np.ndarray, m: int) -> np.ndarray:
    """(len(codes), m): row i is the indicator of value codes[i]."""
    out = np.zeros((len(codes), m))
    out[np.arange(len(codes)), codes] = 1.0
    return out


def _scaled(f: np.ndarray, lp: int, rows: int) -> tuple[np.ndarray, float]:
    """(g, λ): the counts ``f`` scaled by λ ≈ rows/N to a feasible vector (a multiple of ℓ' tuples,
    every value of f present, none above the cap), or (f, 1) when N ≤ rows."""
    N = float(f.sum())
    if N <= rows:
        return f.astype(np.int64), 1.0
    tot = (rows // lp) * lp
    share = f * (tot / N)
    g = np.where(f > 0, np.maximum(np.floor(share), 1), 0).astype(np.int64)
    rest = tot - int(g.sum())
    if rest > 0:
        g[np.argsort(-(share - g), kind="stable")[:rest]] += 1
    elif rest < 0:
        g[np.argsort(-g, kind="stable")[:-rest]] -= 1
    return receiver_counts(g, lp), tot / N


class TransitionNoise:
    """The published counts' own randomness, for the variance of the full-transition A'
    estimators with the receiver's matrix T̂ = T(f') rebuilt from the published counts f'.

    From the receiver's counts f̂ (``receiver_counts`` of f') alone: the decoy schedule on f̂
    gives the group value sets V_τ (``vals`` (K, ℓ')) and how many groups have each (c_τ,
    ``mult``); each group publishes ℓ' independent uniform draws from its values, so the picks
    of the groups of set τ are Z_τ ~ Multinomial(ℓ'c_τ, uniform on V_τ) and f' = Σ_τ Z_τ (the
    mechanism's exact law of the published counts given the table's counts). ``Z`` (B, K, ℓ')
    holds B draws, ``W`` (B, m, m) the receiver's T(f'*)⁻¹ rebuilt from each (``receiver_counts``,
    decoy schedule, as the receiver does). Seeded from the counts: the same release always gives
    the same variance. On more than ``DELTA_ROWS`` tuples the schedules run on the counts scaled
    to that size, with the draws' deviations rescaled to the release's size."""

    def __init__(self, f: np.ndarray, lp: int):
        f = np.asarray(f, dtype=np.int64)
        m = len(f)
        g, lam = _scaled(f, lp, DELTA_ROWS)
        gv = decoy_group_values(g, lp)
        vals, cnt = np.unique(np.asarray(gv, dtype=np.int64), axis=0, return_counts=True)
        self.lp, self.vals = lp, vals
        self.n_type = lp * cnt / lam  # rows in the groups of each set, at the release's size
        B = DELTA_REPLICATES
        seed = int.from_bytes(np.asarray([lp, *f.tolist()], dtype=np.int64).tobytes(), "little") % (1 << 63)
        rng = np.random.default_rng(seed)
        Zs = rng.multinomial(np.repeat((lp * cnt)[None, :], B, axis=0), np.full(lp, 1.0 / lp))  # (B, K, ℓ')
        self.Z = cnt[None, :, None] / lam + (Zs - cnt[None, :, None]) / np.sqrt(lam)
        F = self.Z.reshape(B, -1) @ _onehot(vals.ravel(), m)  # (B, m): Σ_τ Z_τ
        F = np.rint(F).astype(np.int64)
        F[np.arange(B), np.argmax(f)] += f.sum() - F.sum(axis=1)  # keep N
        self.W = np.empty((B, m, m))
        self.T = np.empty((B, m, m))
        for b in range(B):
            gb, _ = _scaled(receiver_counts(np.maximum(F[b], 0), lp), lp, DELTA_ROWS)
            self.T[b] = diverted_matrix(gb, lp)
            self.W[b] = np.linalg.pinv(self.T[b])
        self.rng_seed = seed

    def bootstrap(self, X: np.ndarray, f: np.ndarray, method: str, tol: float, max_iter: int,
                  replicates: int = BOOT_REPLICATES) -> np.ndarray:
        """(U, B, m): the estimator ``method`` re-run on ``replicates`` simulated releases of the rows
        of U predicates whose fitted SA counts are ``X`` (U, m), each with the receiver's matrix
        rebuilt from that release's simulated published counts: in draw b every group set τ
        publishes the picks Z_τ,b (:class:`TransitionNoise`), P's K_τ = ℓ'c_τ·π_τ rows in those groups
        publish a uniform subset of them (multivariate hypergeometric, drawn value by value), and
        the receiver's T_b = T(f'_b) is the one rebuilt from f'_b = Σ_τ Z_τ,b."""
        lp, vals = self.lp, self.vals
        B = min(replicates, len(self.T))
        U, m = X.shape
        share = np.divide(np.clip(X, 0.0, f), f, out=np.zeros_like(X, dtype=np.float64), where=f > 0)
        pi = np.clip(share[:, vals].mean(axis=2), 0.0, 1.0)  # (U, K)
        nt = np.rint(self.n_type).astype(np.int64)
        Z = np.maximum(np.rint(self.Z[:B]).astype(np.int64), 0)  # (B, K, ℓ')
        Z[:, :, -1] += nt[None, :] - Z.sum(axis=2)
        Z = np.maximum(Z, 0)
        K = np.minimum(np.rint(pi * nt).astype(np.int64), nt)  # (U, K)
        rng = np.random.default_rng(self.rng_seed + 1)
        left = np.broadcast_to(Z.sum(axis=2)[None], (U, B, len(nt))).copy()
        need = np.broadcast_to(K[:, None, :], (U, B, len(nt))).copy()
        Y = np.zeros((U, B, m))
        for j in range(lp):
            good = np.broadcast_to(Z[None, :, :, j], left.shape)
            h = rng.hypergeometric(good, np.maximum(left - good, 0), np.minimum(need, left)) if j < lp - 1 else need
            Y += h @ _onehot(vals[:, j], m)
            left = left - good
            need = need - h
        Tb = self.T[:B]
        if method == "full-closed":
            return np.einsum("ubm,bmk->ubk", Y, self.W[:B])
        # the iterative Bayesian update with each draw's own T_b, stopped per row as full_iterative
        Xs = Y.copy()
        Yt = np.ascontiguousarray(np.transpose(Y, (1, 0, 2)))  # (B, U, m)
        Xt = Yt.copy()
        Tt = np.transpose(Tb, (0, 2, 1))
        active = np.ones((B, U), dtype=bool)
        with threadpool_limits(limits=1, user_api="blas"):
            for _ in range(max_iter):
                if not active.any():
                    break
                D = Xt @ Tb
                ratio = np.divide(Yt, D, out=np.zeros_like(Yt), where=D > 0)
                new = Xt * (ratio @ Tt)
                moved = (np.abs(new - Xt) > tol * np.maximum(np.abs(Xt), 1.0)).any(axis=2)
                Xt = np.where(active[:, :, None], new, Xt)
                active &= moved
        Xs = np.transpose(Xt, (1, 0, 2))
        return Xs

    @classmethod
    def of(cls, release, i: int, f: np.ndarray, lp: int) -> "TransitionNoise":
        """Cached per release, sensitive attribute and counts."""
        key = (i, bytes(np.asarray(f, dtype=np.int64)))
        try:
            cache = _DELTA_CACHE.setdefault(release, {})
        except TypeError:  # not weakly referenceable: no cache
            return cls(f, lp)
        if key not in cache:
            cache[key] = cls(f, lp)
        return cache[key]


# ----------------------------------------------------------------------------- A' estimator objects
class CountVectors(Constraint):
    """A list of count vectors (non-negative integers), one per sensitive attribute."""

    def describe(self) -> str:
        return "a list of count vectors (non-negative integers), one per sensitive attribute"

    def check(self, name: str, value: Any) -> Any:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value:
            raise self._fail(name, value)
        out = []
        for v in value:
            a = np.asarray(v)
            if a.ndim != 1 or not len(a) or a.dtype.kind not in "iuf" or not np.all(np.isfinite(a)) \
                    or (a < 0).any() or (a != np.round(a)).any():
                raise self._fail(name, value)
            out.append(tuple(int(x) for x in a))
        return tuple(out)


class DivertedEstimator(Estimator):
    """Base of the A' estimators: ``answer`` and ``answer_with_iterations``."""

    family = "randomized"
    mechanisms = ("diverted",)
    method = ""

    def _options(self) -> dict[str, Any]:
        p = self.get_params()
        counts = p.get("transition_counts")
        return {"tol": p.get("tol", DEFAULT_TOL), "r": p.get("r", "exact"), "max_iter": p.get("max_iter", MAX_ITER),
                "transition_counts": None if counts is None else [np.asarray(c, dtype=np.int64) for c in counts]}

    def answer_with_iterations(self, release, workload) -> tuple[np.ndarray, np.ndarray]:
        """(estimates, iterations): the iterations each query's estimate took (0 for closed forms)."""
        if not self.supports(release):
            raise ParameterError(f"estimator {self.name!r} does not apply to a {release.manifest.get('mechanism')} release",
                                 param="estimator")
        _, masks = release.resolve(workload)
        return diverted_estimates(release, masks, self.method, **self._options())

    def answer(self, release, workload) -> np.ndarray:
        return self.answer_with_iterations(release, workload)[0]

    def estimate(self, release, workload, level: float = 0.95) -> Estimates:
        """Standard errors and intervals. Every A' estimator's interval is its linear
        counterpart's normal interval (``full-closed`` x̂ = y_P T̂⁻¹ for the full-transition
        estimators, the 4-state ``closed`` for the 4-state ones) cut to [0, n_P] and widened to
        hold the estimate; the non-negative estimators (``full-iterative``, ``iterative``)
        report the linear estimator's standard error.

        ``variance="rebuilt"`` (the default of the full-transition estimators, queries
        constraining one SA): the variance of x̂ = y_P T̂⁻¹ with T̂ rebuilt from the same
        published counts as the receiver does (:mod:`ppdp.estimators.diverted_variance`): the
        mechanism's exact second moments (the decoy slots filled without replacement, the
        groups' independent uniform draws), the share of y_P's noise that the published counts
        carry removed (f̂ T̂⁻¹ = f̂, a finite-population correction relative to the published
        counts), plus the simulated mean square of T̂'s own error acting on the predicate's
        deviation from the table's SA distribution; the full-iterative fit plugged in.

        ``variance="fixed"`` (and queries constraining two or more SAs): given the table and the
        (secret) decoy groups each row publishes independently with the receiver's transition T̂
        (every row of value x publishes y with probability T̂[x, y]): Var = Σ_x x_x (Σ_y T̂[x, y]
        w_y² − (Σ_y T̂[x, y] w_y)²) for x̂_sel = Σ_y w_y y_y, the fitted (non-negative) counts
        plugged in; with several SAs T̂ and w are Kronecker products. It treats T̂ as fixed and so
        over-states the variance (coverage 0.98 on the 20,000-row EDU sample). Measured coverage:
        benchmarks/bench_coverage_randomized.py, tests/contract/test_coverage_randomized.py.

        ``variance="bootstrap"`` (full-transition estimators, one SA): the estimator re-run on
        releases simulated from the fitted counts, the receiver's transition rebuilt per replicate
        (:meth:`TransitionNoise.bootstrap`); se = the replicates' sd, interval = estimate ± z·se
        cut to [0, n_P]; its bias does not show (docs/sdr.md). The 4-state estimators (any number
        of SAs) report ``full-closed``'s se and interval, widened to hold their estimate: their
        model's own closed-form interval covered 0.57 on OCC (docs/diverted.md)."""
        if not self.supports(release):
            raise ParameterError(f"estimator {self.name!r} does not apply to a {release.manifest.get('mechanism')} release",
                                 param="estimator")
        _, masks = release.resolve(workload)
        if self.method in ("iterative", "closed"):  # the 4-state model's own interval under-covers (0.57 on OCC)
            est, full = diverted_estimates(release, masks, self.method, **self._options())[0], FullClosed().estimate(release, workload, level)
            return Estimates(est, full.se, np.minimum(np.maximum(full.lower, 0.0), est), np.maximum(full.upper, est),
                             f"full-closed's interval widened to hold this estimate: {full.method}", level)
        unc: dict = {"variance": self.get_params().get("variance", "fixed"), "level": level}
        est, _ = diverted_estimates(release, masks, self.method, uncertainty=unc, **self._options())
        se = np.sqrt(unc["var"])
        z = float(stats.norm.ppf(0.5 + level / 2))
        centre = np.where(unc["centre_estimate"], est, unc["linear"])
        lo = np.clip(centre - z * se, 0.0, unc["n"])
        hi = np.clip(centre + z * se, 0.0, unc["n"])
        if unc.get("delta") is not None and unc["centre_estimate"].any():
            method = (f"se: parametric bootstrap over the mechanism's randomness ({BOOT_REPLICATES} simulated releases "
                      "from the fitted counts: the groups' uniform draws, the receiver's transition rebuilt from each "
                      f"release's simulated published counts, {self.method} re-run); interval: estimate ± z·se cut to "
                      "[0, n_P]. It measures the estimator's spread, not its bias (the iterative update stops early "
                      "and is biased towards the published distribution): it under-covers (docs/sdr.md); queries "
                      "constraining several SAs: closed form as variance='fixed'")
        elif unc.get("rebuilt") is not None:
            method = ("closed form: variance of the linear transition inversion y_P T̂⁻¹ with T̂ rebuilt from the "
                      "published counts (the mechanism's exact second moments, the share of the noise the published "
                      "counts carry removed, T̂'s own error simulated over "
                      f"{DRAWS} redrawn published counts), fitted counts plugged in; its normal interval cut to "
                      "[0, n_P] and widened to hold the estimate (docs/diverted.md); queries constraining several "
                      "SAs: rows randomized independently with T̂ held fixed")
        else:
            method = ("closed form: variance of the linear transition inversion given the table, rows randomized "
                      "independently with the receiver's transition, fitted counts plugged in; its normal "
                      "interval cut to [0, n_P] and widened to hold the estimate; conservative (the receiver's "
                      "transition is estimated, docs/diverted.md)")
        return Estimates(est, se, np.minimum(lo, est), np.maximum(hi, est), method, level)


class FullIterative(DivertedEstimator):
    """A' default: iterative Bayesian update with the full m × m transition of the decoy schedule."""

    name = method = "full-iterative"
    _parameter_constraints = {"tol": Real(0, None, closed="neither"), "max_iter": Integer(1, None),
                              "transition_counts": Optional(CountVectors()), "variance": Options(*A_VARIANCES)}
    _parameter_help = {"tol": "Stop when no component moves by more than this (relative; the paper uses 1 %).",
                       "max_iter": "Iteration cap.",
                       "transition_counts": "Counts per SA for the group schedule instead of the published ones (analysis only).",
                       "variance": "rebuilt (the default): closed form with the receiver's transition rebuilt from "
                                   "the published counts; fixed: closed form with the transition held fixed "
                                   "(conservative); bootstrap: the estimator re-run on simulated releases, transition "
                                   "rebuilt each time (under-covers: it cannot see the estimator's bias)."}

    def __init__(self, tol: float = DEFAULT_TOL, max_iter: int = MAX_ITER, transition_counts=None,
                 variance: str = "rebuilt"):
        self._set_params(locals())


class FullClosed(DivertedEstimator):
    """A': x̂ = y T⁻¹ with the full transition (unbiased with the true T; can be negative)."""

    name = method = "full-closed"
    _parameter_constraints = {"transition_counts": Optional(CountVectors()), "variance": Options(*A_VARIANCES)}
    _parameter_help = {"transition_counts": FullIterative._parameter_help["transition_counts"],
                       "variance": FullIterative._parameter_help["variance"]}

    def __init__(self, transition_counts=None, variance: str = "rebuilt"):
        self._set_params(locals())


class FourStateIterative(DivertedEstimator):
    """A': the paper's 4-state iterative Bayesian update (eq 12–13)."""

    name = method = "iterative"
    _parameter_constraints = {"tol": Real(0, None, closed="neither"), "r": Options("exact", "paper"),
                              "max_iter": Integer(1, None)}
    _parameter_help = {"tol": FullIterative._parameter_help["tol"],
                       "r": "P(s̄ → s): exact f_s(ℓ'−1)/(ℓ'(N−f_s)) or the paper's f_s/N.",
                       "max_iter": "Iteration cap."}

    def __init__(self, tol: float = DEFAULT_TOL, r: str = "exact", max_iter: int = MAX_ITER):
        self._set_params(locals())


class FourStateClosed(DivertedEstimator):
    """A': the 4-state closed form x̂ = (y3 − n_P·r)/(1/ℓ' − r)."""

    name = method = "closed"
    _parameter_constraints = {"r": Options("exact", "paper")}
    _parameter_help = {"r": FourStateIterative._parameter_help["r"]}

    def __init__(self, r: str = "exact"):
        self._set_params(locals())


__all__ = ["EM", "EmpiricalBayes", "MLE", "NormSub", "eb_fit", "eb_shrink", "parent_distribution", "UniformSetup", "consistent_estimates", "distinct_predicates", "norm_sub", "uniform_em", "uniform_mle",
           "CountVectors", "DivertedEstimator", "FourStateClosed", "FourStateIterative", "FullClosed", "FullIterative",
           "Inversion", "closed_form", "diverted_estimates", "full_closed", "full_iterative", "inversion_estimates",
           "iterative_bayes"]
