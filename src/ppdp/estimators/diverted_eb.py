"""Empirical-Bayes counts of A' (``full-eb``): the full-transition inversion shrunk towards the
table's SA distribution, each predicate with its own strength, estimated from its own counts.

Model (Fay & Herriot 1979; the Dirichlet-multinomial of small-area estimation, as the uniform
channels' ``eb``): the n rows meeting an NSA predicate P hold true SA counts x drawn around the
table's distribution π (the published counts f̂/N, which the receiver's transition reproduces:
f̂ T̂ = f̂), E[x] = nπ, Cov(x) = n·ρ·(diag π − ππᵀ) with ρ = (n + α)/(1 + α) ∈ [1, n] (ρ = n: no
pooling). The inversion x̃ = y_P T̂⁻¹ (``full-closed``) is unbiased for x given the table and
the transition, with channel covariance n·S averaged over the prior, S = Wᵀ (diag(πT) −
Tᵀ diag(π) T) W, W = T⁻¹ (rows publishing independently through T, the ``variance="fixed"``
law). Both covariances annihilate the all-ones vector (Σx̃ = Σx = n exactly), so on the
sum-zero subspace one generalised eigen-decomposition S v = λ (diag π − ππᵀ) v makes them
diagonal at once: the coordinates c_j = vⱼᵀ(x̃ − nπ) have variance n(ρ + λ_j) (large λ_j: a
direction the transition hardly shows, near-singular T). Two corrections from the receiver's
T̂ = T(f̂) being rebuilt from the same published counts (:mod:`ppdp.estimators.diverted_variance`):
f̂ Ŵ = f̂ removes the share n/N of the channel noise that the published counts carry
(λ_j → (1 − n/N) λ_j), and T̂'s own error D (T Ŵ* − I), D = x − nπ, adds ρn·q_j with
q_j = E*[(E v_j)ᵀ C (E v_j)] over the simulated T̂* (E = T Ŵ* − I; the coordinates' diagonal
kept): Var c_j = n(ρ(1 + q_j) + (1 − n/N) λ_j).

- ρ of each predicate by maximum marginal likelihood over a log grid on [1, n]:
  min Σ_j [log v_j + c_j²/v_j], v_j = Var c_j above — each predicate's heterogeneity from its own m − 1
  coordinates, so a predicate's estimate does not depend on the other queries of a workload;
- the posterior mean (best linear predictor) x̂ = nπ + Σ_j ρ/(ρ(1 + q_j) + (1 − n/N)λ_j) c_j u_j
  (u_j the dual basis): no shrinkage where the transition shows the direction well, full shrinkage to the table's
  distribution where it does not;
- the prior mean nπ may instead be n times a parent predicate's fitted SA distribution (the
  predicate with one column's condition dropped, itself fitted towards π): the prior with the
  highest marginal likelihood is used (:func:`full_eb`);
- projected onto {x ≥ 0, Σx = n} (Norm-Sub, Wang et al. 2020).

Unlike the iterative update stopped early (which shrinks towards the published counts y_P, i.e.
towards T's smoothing of x), the shrinkage target is a distribution and its strength is
estimated, not set by a stopping rule."""

from __future__ import annotations

import numpy as np
from scipy import linalg

from .channel import norm_sub

#: candidate heterogeneities ρ per predicate: 1 … n on a log grid of this many points
RHO_GRID = 64

__all__ = ["RHO_GRID", "EBTransition", "full_eb"]


class EBTransition:
    """The prior/channel decomposition of one transition ``T`` (m × m) and table distribution
    ``pi`` (m,): values with π = 0 are left out (no row holds them). ``errors`` (B, m, m): draws
    of T Ŵ* − I (:class:`~ppdp.estimators.diverted_variance.TransitionDraws`), the receiver's
    transition error; ``N`` the published rows (the finite-population correction)."""

    def __init__(self, T: np.ndarray, pi: np.ndarray, errors: np.ndarray | None = None, N: float = 0.0):
        pi = np.asarray(pi, dtype=np.float64)
        self.m = len(pi)
        self.support = np.flatnonzero(pi > 0)
        s = self.support
        k = len(s)
        self.pi = pi[s] / pi[s].sum()
        self.k = k
        if k < 2:
            return
        Ts = np.asarray(T, dtype=np.float64)[np.ix_(s, s)]
        Ts = Ts / Ts.sum(axis=1, keepdims=True)
        self.W = np.linalg.pinv(Ts)
        p = self.pi
        S0 = np.diag(p @ Ts) - Ts.T @ (p[:, None] * Ts)
        S = self.W.T @ S0 @ self.W
        C = np.diag(p) - np.outer(p, p)
        # orthonormal basis of the sum-zero subspace
        B = np.linalg.svd(np.eye(k) - 1.0 / k)[0][:, :k - 1]
        Cb, Sb = B.T @ C @ B, B.T @ S @ B
        Cb, Sb = (Cb + Cb.T) / 2, (Sb + Sb.T) / 2
        lam, V = linalg.eigh(Sb, Cb)  # Vᵀ Cb V = I, Vᵀ Sb V = diag(λ)
        self.lam = np.maximum(lam, 0.0)
        self.P = B @ V  # coordinates: c = (x̃ − nπ) P
        self.U = B @ Cb @ V  # back: x − nπ = c Uᵀ
        self.N = float(N)
        # the receiver's T̂ error: x̃ − x gains D (T Ŵ* − I) with D = x − nπ ~ (0, ρn·C), so the
        # coordinates' variance gains ρn·q_j, q_j = E*[(E P)ᵀ C (E P)]_jj (diagonal kept)
        self.q = np.zeros(k - 1)
        if errors is not None and len(errors):
            EP = np.asarray(errors)[:, s][:, :, s] @ self.P  # (B, k, k−1)
            self.q = np.einsum("bij,ik,bkj->j", EP, C, EP) / len(EP)

    def fit(self, Xt: np.ndarray, n: np.ndarray, mu: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(x̂ (rows, k) before the projection, ρ̂ (rows,), the minimised −2 log marginal likelihood
        (rows,)) from inversions ``Xt`` on the support, shrunk towards ``mu`` (rows, k; default nπ)."""
        mu = n[:, None] * self.pi if mu is None else mu
        c = (Xt - mu) @ self.P
        nn = np.maximum(n, 1.0)
        grid = np.exp(np.linspace(0.0, 1.0, RHO_GRID)[None, :] * np.log(nn)[:, None])  # (rows, G)
        rho, best = np.empty(len(n)), np.empty(len(n))
        # the share n/N of the channel noise that the published counts carry cancels (f̂ Ŵ = f̂)
        fpc = np.clip(1.0 - n / self.N, 0.0, 1.0) if self.N > 0 else np.ones(len(n))
        step = max(1, (1 << 22) // max(1, RHO_GRID * len(self.lam)))
        for a in range(0, len(n), step):
            v = nn[a:a + step, None, None] * (grid[a:a + step, :, None] * (1.0 + self.q[None, None, :])
                                              + fpc[a:a + step, None, None] * self.lam[None, None, :])
            nll = np.log(v).sum(axis=2) + (c[a:a + step, None, :] ** 2 / v).sum(axis=2)
            j = np.argmin(nll, axis=1)
            rho[a:a + step] = grid[a:a + step][np.arange(len(v)), j]
            best[a:a + step] = nll[np.arange(len(v)), j]
        g = rho[:, None] / (rho[:, None] * (1.0 + self.q[None, :]) + fpc[:, None] * self.lam[None, :])
        return mu + (c * g) @ self.U.T, rho, best

    def inversion(self, Y: np.ndarray) -> np.ndarray:
        """x̃ = y T⁻¹ on the support (rows, k)."""
        return Y[:, self.support] @ self.W


def full_eb(Y: np.ndarray, T: np.ndarray, pi: np.ndarray, model: EBTransition | None = None,
            parents: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Empirical-Bayes counts (rows, m) and each row's ρ̂ for published counts ``Y`` (rows, m)
    of one SA through ``T`` with table distribution ``pi`` (module docstring).

    ``parents`` = (Y_par (V, m), par (rows, J) indices into Y_par, −1 for none): each row may
    instead be shrunk towards the SA distribution of one of its parent predicates (its own
    predicate with one column's condition dropped), that parent's counts fitted first towards
    the table's; the prior (the table's or a parent's) that gives the row's published counts
    the highest marginal likelihood is used (model choice by marginal likelihood)."""
    Y = np.asarray(Y, dtype=np.float64)
    model = model or EBTransition(T, pi)
    n = Y.sum(axis=1)
    out = np.zeros_like(Y)
    rho = np.ones(len(Y))
    if model.k < 2:
        out[:, model.support] = n[:, None]
        return out, rho
    Xt = model.inversion(Y)
    Xs, rho, best = model.fit(Xt, n)
    if parents is not None and parents[1].size and len(parents[0]):
        Yp, par = np.asarray(parents[0], dtype=np.float64), parents[1]
        npar = Yp.sum(axis=1)
        Xp = model.fit(model.inversion(Yp), npar)[0]
        Xp = norm_sub(Xp, np.ones(Xp.shape, dtype=bool), npar)
        share = np.where(npar[:, None] > 0, Xp / np.maximum(npar, 1.0)[:, None], model.pi[None, :])
        for j in range(par.shape[1]):
            rows = np.flatnonzero(par[:, j] >= 0)
            if not len(rows):
                continue
            X2, r2, b2 = model.fit(Xt[rows], n[rows], n[rows, None] * share[par[rows, j]])
            better = b2 < best[rows]
            r = rows[better]
            Xs[r], rho[r], best[r] = X2[better], r2[better], b2[better]
    out[:, model.support] = norm_sub(Xs, np.ones(Xs.shape, dtype=bool), n)
    return out, rho
