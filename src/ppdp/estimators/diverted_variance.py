"""Variance of the A' full-transition estimators with the receiver's transition rebuilt from the
published counts (``variance="rebuilt"``, the default of ``FullIterative`` and ``FullClosed``).

The mechanism (:mod:`ppdp.mechanisms.randomization.diverted`): the decoy schedule on the SA
counts f builds G = N/ℓ' groups, each holding ℓ' distinct values (g[x, y] groups hold both x
and y); the f_x rows of value x fill x's f_x groups one each, in uniformly random order
(independently across values), and every row publishes a uniform draw from its group's ℓ'
values, independently. A receiver sees the published counts f', rebuilds T̂ = T(f̂) from the
schedule on f̂ = ``receiver_counts(f')`` and, for the rows of an NSA predicate P (n_P rows, x
the true SA counts among them, y_P the published ones), takes x̂ = y_P Ŵ with Ŵ = T̂⁻¹ (the
linear ``full-closed``; ``full-iterative``'s interval is built on it).

**Exact second moments.** Write e = f' − f and e_P = y_P − x T, where T = T(f) and f T = f.
With u_G = 1_{V_G}/ℓ' (the law of one draw of group G), a row of value x in group G publishes
with mean u_G, so e_P = within_P + between_P: within_P (the draws around their groups' means)
has covariance C = diag(x T) − ℓ'⁻² Σ_τ c_τ π_τ 1_τ 1_τᵀ over the group types τ (value set
V_τ, c_τ groups, π_τ = Σ_{x ∈ V_τ} x_x/f_x rows of P expected in each), and between_P (which of
x's groups P's x-rows fill: a draw without replacement of x_x of the f_x groups) has
covariance Σ_x x_x (f_x − x_x)/(f_x − 1) (M_x − T[x]ᵀT[x]), M_x = mean of u_G u_Gᵀ over x's
groups — the finite-population correction of the decoy slots. The between parts of P and of
its complement cancel (together they fill every group), so Cov(e_P, e) = C and
Var e = Σ_f = diag(f) − G/ℓ' = diag(f)(I − T) (each group's ℓ' draws are independent). The
slot correction changes the variance by < 1 % on the bundled tables; the per-row model with T
(rows independent, Var e_P = Σ_x x_x (diag T[x] − T[x]ᵀT[x])) is the ``variance="fixed"``
closed form.

**The receiver's T̂ is rebuilt from the same published counts.** The schedule reproduces its
own counts, f̂ T̂ = f̂, so f̂ Ŵ = f̂: the inversions of P's rows and of the other rows add up to
f̂ exactly, and a share of y_P's noise cancels. With ρ = n_P/N and D = x − ρf (P's deviation
from the table's SA distribution), exactly (given f' = f̂, no clipping)

    x̂ − x = (e_P − ρe) Ŵ + ρ (f̂ − f) + D (T Ŵ − I).

The first two terms are the linear noise, e_P·ŵ − ρ e·v for a query selecting ``sel``
(ŵ = Ŵ sel, v = ŵ − sel), with variance

    ŵᵀ Var(e_P) ŵ − 2ρ ŵᵀ C v + ρ² vᵀ Σ_f v

(:func:`linear_noise_variance`): conditional on the release's Ŵ, the part ρe of y_P's
noise that f̂ carries does not enter, a finite-population correction relative to the
published counts (≈ (1 − n_P/N) times the fixed-T variance when P's SA distribution is the
table's). The third term is the error of T̂ itself (it vanishes when P's rows have the table's
SA distribution, D = 0, or T̂ = T); it is not a smooth function of f' (the schedule's greedy
pairing jumps), so its mean square is simulated (:class:`TransitionDraws`): published counts
redrawn from the mechanism's exact law on f̂ (every group publishes ℓ' uniform draws from its
values), T̂* rebuilt from each as the receiver does, E*[(D̂ (T̂ Ŵ* − I) sel)²] with
D̂ = x̂ − ρf̂.

Plug-ins: T = T̂, f = f̂, x = the ``full-iterative`` fit (non-negative, summing to n_P),
clipped to [0, f̂]. Assumptions: the three terms are treated as uncorrelated; the clipping of
f' to the N/ℓ' cap (``receiver_counts``) is ignored in the linear part; the normal
approximation of a sum of many independent draws.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from ..kernels.transition import decoy_group_types, diverted_matrix, receiver_counts

#: simulated published-count draws per release and sensitive attribute for the T̂ term
DRAWS = 50
#: above this many SA values the T̂ term is not simulated (the linear part alone is reported)
MAX_VALUES = 200

_CACHE: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()

__all__ = ["DRAWS", "MAX_VALUES", "GroupTypes", "TransitionDraws", "linear_noise_variance", "receiver_parts"]


class GroupTypes:
    """The decoy groups of the schedule on counts ``f`` as types: ``sets`` (K, ℓ') value sets,
    ``mult`` (K,) number of groups of each, ``member`` (K, m) indicator."""

    def __init__(self, f: np.ndarray, lp: int):
        self.f = np.asarray(f, dtype=np.int64)
        self.lp = int(lp)
        m = len(self.f)
        sets, mult = decoy_group_types(self.f, self.lp)
        self.sets, self.mult = sets, mult.astype(np.float64)
        self.member = np.zeros((len(sets), m))
        self.member[np.repeat(np.arange(len(sets)), self.lp), sets.ravel()] = 1.0

    def sums(self, v: np.ndarray) -> np.ndarray:
        """(Q, K): Σ_{y ∈ V_τ} v[q, y] for every type."""
        return v @ self.member.T


def linear_noise_variance(X: np.ndarray, w: np.ndarray, sel: np.ndarray, n: np.ndarray, types: GroupTypes,
                          T: np.ndarray) -> np.ndarray:
    """Var(e_P·w − ρ e·(w − sel)) per query (module docstring): ``X`` (Q, m) the plug-in SA
    counts of the query's rows, ``w`` (Q, m) = Ŵ sel, ``sel`` (Q, m) the query's selection,
    ``n`` (Q,) its n_P; ``types``/``T`` the groups and transition of the schedule on f̂."""
    f = types.f.astype(np.float64)
    lp, c = types.lp, types.mult
    fs = np.maximum(f, 1.0)
    X = np.clip(X, 0.0, f)
    rho = n / max(float(f.sum()), 1.0)
    v = w - sel
    XT = X @ T  # E y_P
    Sw, Sv = types.sums(w), types.sums(v)  # (Q, K)
    pi = types.sums(X / fs)  # P's rows expected in one group of each type
    # within: ŵᵀCŵ and ŵᵀCv
    wCw = (XT * w * w).sum(axis=1) - (c * pi * Sw * Sw).sum(axis=1) / lp**2
    wCv = (XT * w * v).sum(axis=1) - (c * pi * Sw * Sv).sum(axis=1) / lp**2
    # between (slots filled without replacement): Σ_x x_x fpc_x (wᵀM_x w − (T w)_x²)
    wMw = ((c * Sw * Sw) @ types.member) / (lp**2 * fs)  # (Q, m)
    fpc = np.clip((f - X) / np.maximum(f - 1.0, 1.0), 0.0, 1.0)
    between = (X * fpc * (wMw - (w @ T.T) ** 2)).sum(axis=1)
    # Σ_f: vᵀ(diag f − G/ℓ')v
    vSv = (f * v * v).sum(axis=1) - (c * Sv * Sv).sum(axis=1) / lp
    return np.maximum(wCw + between - 2 * rho * wCv + rho**2 * vSv, 0.0)


class TransitionDraws:
    """The receiver's T̂ over the mechanism's randomness: ``DRAWS`` published-count vectors drawn
    from their exact law given the counts ``f`` (every decoy group of the schedule on ``f``
    publishes ℓ' uniform draws from its ℓ' values), each turned into T̂* = T(receiver_counts(f'*))
    as a receiver does; ``E`` (B, m, m) = T Ŵ* − I with T = T(f). Seeded from the counts: the
    same release always gives the same variance."""

    def __init__(self, f: np.ndarray, lp: int, T: np.ndarray, types: GroupTypes | None = None, draws: int = DRAWS):
        f = np.asarray(f, dtype=np.int64)
        m = len(f)
        types = types or GroupTypes(f, lp)
        seed = int.from_bytes(np.asarray([lp, draws, *f.tolist()], dtype=np.int64).tobytes(), "little") % (1 << 63)
        rng = np.random.default_rng(seed)
        Z = rng.multinomial(np.repeat((lp * types.mult.astype(np.int64))[None, :], draws, axis=0),
                            np.full(lp, 1.0 / lp))  # (B, K, ℓ')
        F = np.zeros((draws, m), dtype=np.int64)
        for j in range(lp):
            np.add.at(F, (slice(None), types.sets[:, j]), Z[:, :, j])  # type: ignore[arg-type]
        self.E = np.empty((draws, m, m))
        eye = np.eye(m)
        with threadpool_limits(limits=1, user_api="blas"):
            for b in range(draws):
                Wb = np.linalg.pinv(diverted_matrix(receiver_counts(F[b], lp), lp))
                self.E[b] = T @ Wb - eye
        self.F = F

    def mean_square(self, D: np.ndarray, sel: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """E*[(D[pos[q]] E* sel[q])²] per query q: ``D`` (U, m) the deviations x̂ − ρ f̂ of the
        distinct predicates, ``pos`` (Q,) the predicate of each query, ``sel`` (Q, m)."""
        out = np.zeros(len(sel))
        with threadpool_limits(limits=1, user_api="blas"):
            for Eb in self.E:
                out += ((D @ Eb)[pos] * sel).sum(axis=1) ** 2
        return out / len(self.E)


def receiver_parts(release, i: int, f: np.ndarray, lp: int, T: np.ndarray) -> tuple[GroupTypes, TransitionDraws | None]:
    """(group types, T̂ draws) of SA ``i`` for the receiver's counts ``f``, cached per release,
    SA and counts; no draws above ``MAX_VALUES`` values."""
    key = (i, int(lp), bytes(np.asarray(f, dtype=np.int64)))
    try:
        cache = _CACHE.setdefault(release, {})
    except TypeError:  # not weakly referenceable: no cache
        cache = {}
    if key not in cache:
        types = GroupTypes(f, lp)
        cache[key] = (types, TransitionDraws(f, lp, T, types) if len(f) <= MAX_VALUES else None)
    return cache[key]
