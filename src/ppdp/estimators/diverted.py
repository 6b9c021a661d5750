"""The estimators of A' (Fu, Wang, Wang & Wong 2014; SPEC §2.4): the 4-state model and the full
m × m transition of the decoy schedule, closed form and iterative Bayesian update, and their
variance with the receiver's transition estimated (:class:`TransitionNoise`)."""

from __future__ import annotations

import itertools
import weakref
from typing import Any, Sequence

import numpy as np
from scipy import stats
from threadpoolctl import threadpool_limits

from ..errors import QueryError
from ..kernels.transition import decoy_group_values, diverted_matrix, receiver_counts
from ..queries import split_masks
from ..validation import Constraint, Integer, Optional, Options, Real
from .base import Estimates
from .channel import DEFAULT_TOL, MAX_ITER, RandomizedEstimator, distinct_predicates
from .diverted_eb import EBTransition, full_eb
from .diverted_variance import DRAWS, linear_noise_variance, receiver_parts

METHODS = ("full-iterative", "full-closed", "iterative", "closed", "full-eb")


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


#: |1/ℓ' − r| below this: the 4-state factor is singular (:func:`closed_form`)
SINGULAR_GAP = 1e-9


def closed_form(y: np.ndarray, f: np.ndarray, N: float, lp: int, w: int, r: str = "exact") -> np.ndarray:
    """Exact inversion x = (Mᵀ)⁻¹ y with r from the published counts f'_{s_i} (n, w).

    For one SA this is x̂3 = (y3 − n_P·r)/(1/ℓ' − r)."""
    n, K = y.shape
    factors = []
    # a value published exactly N/ℓ' times makes its factor singular (r = 1/ℓ': a row holding it and a row
    # not holding it publish alike), so the release does not identify the count: the minimum-norm
    # least-squares solution there, not the solver's overflow (10¹⁷ on Chile's votes at ℓ' = 3)
    singular = np.zeros(n, dtype=bool)
    for i in range(w):
        rr = _r(f[:, i], N, lp, r)
        singular |= np.abs(1.0 / lp - rr) < SINGULAR_GAP
        Fm = np.empty((n, 2, 2))
        Fm[:, 0, 0], Fm[:, 0, 1] = 1 - rr, rr
        Fm[:, 1, 0], Fm[:, 1, 1] = (lp - 1) / lp, 1 / lp
        factors.append(Fm)
    Mt = np.transpose(_kron_batch(factors), (0, 2, 1))
    x = np.empty((n, K))
    ok = ~singular
    if ok.any():
        x[ok] = np.linalg.solve(Mt[ok], y[ok][:, :, None])[:, :, 0]
    if singular.any():
        x[singular] = np.einsum("nij,nj->ni", np.linalg.pinv(Mt[singular]), y[singular])
    return x


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


def _full_estimates(Yu, inv, qs, sel_sa, sa_sel, sizes, Ts, method, tol, max_iter=MAX_ITER, uncertainty=None, eb=None):
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
    elif method == "full-eb" and len(sel_sa) == 1 and eb is not None:
        models, (Ypu, par) = eb
        pu = par[u]
        kept = np.unique(pu[pu >= 0])
        Yp = Ypu[kept].reshape((len(kept), *sizes))
        if other:
            Yp = Yp.sum(axis=other)
        pu = np.where(pu >= 0, np.searchsorted(kept, np.maximum(pu, 0)), -1)
        X = full_eb(Ym, mats[0], models[sel_sa[0]][1], models[sel_sa[0]][0], parents=(Yp, pu))[0]
        its = np.zeros(len(u), dtype=np.int64)
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


def _parent_counts(reps: list, index, K: int) -> tuple[np.ndarray, np.ndarray]:
    """(Y_par (V, K), par (U, J)): the published counts of the parents of every distinct NSA
    predicate constraining two or more columns (the predicate with one column's condition
    dropped; J = the most columns of a predicate) and, per predicate and dropped column, the
    parent's row (−1: none)."""
    J = max((len(r) for r in reps), default=0)
    par = np.full((len(reps), max(J, 1)), -1, dtype=np.int64)
    pm, where = [], []
    for u, r in enumerate(reps):
        if len(r) >= 2:
            for j, c in enumerate(sorted(r)):
                pm.append({k: v for k, v in r.items() if k != c})
                where.append((u, j))
    if not pm:
        return np.zeros((0, K)), par
    preps, pinv = distinct_predicates(pm)
    uj = np.asarray(where, dtype=np.int64)
    par[uj[:, 0], uj[:, 1]] = pinv
    return index.sums(preps).reshape(len(preps), K), par


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
        eb = None
        if method == "full-eb":
            fs = ([np.asarray(c, dtype=np.float64) for c in transition_counts] if transition_counts is not None
                  else [receiver_counts(release.published_counts(s), lp).astype(np.float64) for s in sas])
            # the table's SA distribution: the receiver's counts, which its transition reproduces
            models = []
            for i, (T, f) in enumerate(zip(Ts, fs)):
                draws = receiver_parts(release, i, f.astype(np.int64), lp, T)[1]
                pi = f / max(f.sum(), 1.0)
                models.append((EBTransition(T, pi, None if draws is None else draws.E, f.sum()), pi))
            eb = (models,
                  _parent_counts(reps, index, K))
        for sel_sa, qs in patterns.items():
            qs = np.asarray(qs)
            out[qs], iters_out[qs] = _full_estimates(Yu, inv, qs, sel_sa, sa_sel, sizes, Ts, method, tol, max_iter,
                                                     uncertainty, eb)
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
                gap = (1 / lp - rr) ** 2
                # unidentified (singular factor): an unbounded variance, so the interval is all of [0, n_P]
                var[todo] = np.divide(xx * (1 / lp) * (1 - 1 / lp) + (nP - xx) * rr * (1 - rr), gap,
                                      out=np.full(len(gap), np.inf), where=gap >= SINGULAR_GAP**2)
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


class DivertedEstimator(RandomizedEstimator):
    """Base of the A' estimators: ``answer`` and ``answer_with_iterations``."""

    mechanisms = ("diverted",)

    def _options(self) -> dict[str, Any]:
        p = self.get_params()
        counts = p.get("transition_counts")
        return {"tol": p.get("tol", DEFAULT_TOL), "r": p.get("r", "exact"), "max_iter": p.get("max_iter", MAX_ITER),
                "transition_counts": None if counts is None else [np.asarray(c, dtype=np.int64) for c in counts]}

    def answer_with_iterations(self, release, workload) -> tuple[np.ndarray, np.ndarray]:
        """(estimates, iterations): the iterations each query's estimate took (0 for closed forms)."""
        self.check(release)
        _, masks = release.resolve(workload)
        return diverted_estimates(release, masks, self.method, **self._options())

    def estimate(self, release, workload, level: float = 0.95) -> Estimates:
        """Standard errors and intervals. Every A' estimator's interval is its linear
        counterpart's normal interval (``full-closed`` x̂ = y_P T̂⁻¹ for the full-transition
        estimators, the 4-state ``closed`` for the 4-state ones) cut to [0, n_P] and widened to
        hold the estimate; the non-negative estimators (``full-eb``, ``full-iterative``, ``iterative``)
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
        self.check(release)
        _, masks = release.resolve(workload)
        if self.method in ("iterative", "closed"):  # the 4-state model's own interval under-covers (0.57 on OCC)
            est, full = diverted_estimates(release, masks, self.method, **self._options())[0], FullClosed().estimate(release, workload, level)
            # full-closed's upper end already holds the dropped rows
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
        # rows dropped so that N is a multiple of ℓ' are in the input table but not in the release:
        # each may meet the query, so they widen the upper end (the interval is of the input's count)
        dropped = int(release.manifest.get("dropped", 0) or 0)
        if dropped:
            method += f"; plus the {dropped} dropped row(s) on the upper side"
        return Estimates(est, se, np.minimum(lo, est), np.maximum(hi, est) + dropped, method, level)


class FullIterative(DivertedEstimator):
    """A': iterative Bayesian update with the full m × m transition of the decoy schedule."""

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


class FullEB(FullIterative):
    """A' default: empirical-Bayes counts — the full-transition inversion shrunk towards the
    table's SA distribution with a strength fitted per predicate by marginal likelihood
    (:mod:`ppdp.estimators.diverted_eb`); queries constraining two or more SAs: ``full-iterative``."""

    name = method = "full-eb"
    _parameter_help = {"tol": "full-iterative's tolerance, for queries constraining several SAs and the variance's plug-in.",
                       "max_iter": "Iteration cap of that update.",
                       "transition_counts": "Counts per SA for the group schedule instead of the published ones (analysis only).",
                       "variance": "rebuilt (the default), fixed or bootstrap: as full-iterative's (the interval is "
                                   "the linear inversion's, widened to hold this estimate)."}


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
