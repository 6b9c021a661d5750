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

Value sets (IN) are answered by summing the per-value estimates. docs/diverted.md gives the
numbers behind the default. ``answer_with_iterations`` returns the A' estimators' iteration
counts next to the estimates.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import ParameterError, QueryError, ReleaseError
from ..queries import CountIndex, split_masks
from ..validation import Constraint, Integer, Optional, Options, Real
from .base import Estimator

METHODS = ("full-iterative", "full-closed", "iterative", "closed")
DEFAULT_TOL = 0.01
MAX_ITER = 10_000
#: EM's default tolerance on uniform / SDR / A releases, chosen on EDU and ADULT (docs/sdr.md):
#: 0.01 stops far from the fixed point on a near-uniform channel (uniform perturbation, A)
EM_TOL = 1e-3


# ----------------------------------------------------------------------------- inversion
def inversion_estimates(release, masks, model) -> np.ndarray:
    """x̂(query) = Σ_j Σ_{x ∈ sel ∩ D_j} (y_jx − n_j q_j)/p_j for a whole resolved workload.

    The estimator is linear in the rows: x̂ = Σ_{x ∈ sel} Σ_{rows meeting the QI part} w[row, x]
    with w[row, x] = ([y_row = x] − q_j [x ∈ D_j]) / p_j for the row's group j. One
    CountIndex over the (N × |SA|) weights gives Σ_rows w for every query and value.
    """
    sa = model.attribute
    m_sa = model.n_values
    y = release.column_codes(sa)
    if model.group_column is None:
        sub = np.zeros(len(y), dtype=np.int64)
    else:
        sub = np.asarray(release.data.column(model.group_column).to_numpy(), dtype=np.int64)
        if sub.size and (sub.min() < 0 or sub.max() >= len(model.groups)):
            raise ReleaseError(f"data.parquet has {model.group_column} ids outside the model's {len(model.groups)} groups")
    p, q = model.uniform_pq()
    in_dom = model.membership()
    if not in_dom[sub, y].all():
        raise ReleaseError("a published SA value lies outside its sub-table's domain")
    w = in_dom[sub] * (-(q / p))[sub][:, None]
    w[np.arange(len(y)), y] += (1.0 / p)[sub]
    rest, sel = split_masks(masks, sa, m_sa)
    qi_cols = sorted({c for mk in rest for c in mk})
    index = CountIndex({c: release.column_codes(c) for c in qi_cols}, {c: len(release.domains[c]) for c in qi_cols}, w)
    return (index.sums(rest) * sel).sum(axis=1)


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


class Inversion(Estimator):
    """x̂ = (y − n·q)/p per group: uniform perturbation, SDR and global randomization A."""

    name = "inversion"
    family = "randomized"
    mechanisms = ("uniform", "sdr", "global")

    def __init__(self) -> None:
        self._set_params(locals())

    def answer(self, release, workload) -> np.ndarray:
        _, masks = release.resolve(workload)
        return inversion_estimates(release, masks, release.transition_models()[0])


# ----------------------------------------------------------------------------- EM and Norm-Sub
def _published_vectors(release, masks, model):
    """Per distinct QI predicate u and group j, the published SA counts y[u, j, :] of the rows
    meeting the predicate (one CountIndex pass over the (group, value) keys), plus the query →
    predicate map and the (n_queries, m) SA selections."""
    sa = model.attribute
    m = model.n_values
    J = len(model.groups)
    y = release.column_codes(sa).astype(np.int64)
    if model.group_column is None:
        sub = np.zeros(len(y), dtype=np.int64)
    else:
        sub = np.asarray(release.data.column(model.group_column).to_numpy(), dtype=np.int64)
        if sub.size and (sub.min() < 0 or sub.max() >= J):
            raise ReleaseError(f"data.parquet has {model.group_column} ids outside the model's {J} groups")
    in_dom = model.membership()
    if not in_dom[sub, y].all():
        raise ReleaseError("a published SA value lies outside its sub-table's domain")
    rest, sel = split_masks(masks, sa, m)
    # many queries share their QI predicate (the point workload pairs each with every SA value)
    reps, inv = distinct_predicates(rest)
    qi_cols = sorted({c for mk in reps for c in mk})
    index = CountIndex({c: release.column_codes(c) for c in qi_cols}, {c: len(release.domains[c]) for c in qi_cols},
                       sub * m + y, J * m)
    Y = index.sums(reps).reshape(len(reps), J, m) if reps else np.zeros((0, J, m))
    return Y, inv, sel, in_dom


def uniform_em(Y: np.ndarray, p: np.ndarray, q: np.ndarray, member: np.ndarray, tol: float = EM_TOL,
               max_iter: int = MAX_ITER) -> tuple[np.ndarray, np.ndarray]:
    """Iterative Bayesian update (Agrawal & Aggarwal 2001) for many rows of uniform channels.

    Row r holds the published counts y (on its group's domain, ``member[r]``) of n = Σ y records
    randomized by T = q·J + p·I on that domain: E[y] = x T, (x T)_k = q·n + p·x_k. The update
    x ← x ∘ ((y / (x T)) Tᵀ), i.e. x_i ← x_i (q Σ_k y_k/d_k + p·y_i/d_i), starts at x⁰ = y,
    keeps x ≥ 0 and Σ x = n (the known number of records of the row), and increases the
    likelihood; a row stops when no component moves by more than ``tol`` (relative, floor one
    record). Returns (x̂, iterations per row)."""
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


def norm_sub(X: np.ndarray, member: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Norm-Sub (Wang, Lopuhaä-Zwakenberg, Li, Škorić & Li 2020): x̂_i = max(x_i + δ, 0) on each
    row's domain with the one δ that makes Σ x̂ = total — the Euclidean projection onto
    {x ≥ 0, Σ x = total}. Rows with total ≤ 0 become 0."""
    X = np.asarray(X, dtype=np.float64)
    total = np.asarray(total, dtype=np.float64)
    v = np.where(member, X, -np.inf)
    srt = -np.sort(-v, axis=1)  # descending, non-members (−∞) last
    finite = np.isfinite(srt)
    css = np.cumsum(np.where(finite, srt, 0.0), axis=1)
    k = np.arange(1, X.shape[1] + 1)
    delta_k = (total[:, None] - css) / k
    ok = finite & (srt + delta_k > 0)
    kk = np.where(ok.any(axis=1), X.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1), 0)
    delta = delta_k[np.arange(len(X)), kk]
    out = np.where(member, np.maximum(X + delta[:, None], 0.0), 0.0)
    out[total <= 0] = 0.0
    return out


def consistent_estimates(release, masks, model, method: str, tol: float = EM_TOL,
                         max_iter: int = MAX_ITER) -> tuple[np.ndarray, np.ndarray]:
    """(estimates, iterations) of ``"em"`` or ``"norm-sub"`` for a resolved workload on a
    uniform / SDR / global-randomization release: per distinct QI predicate and group
    (sub-table), the full vector of SA counts is estimated from the published counts of the
    rows meeting the predicate — non-negative, summing to their known number n_P,j — and each
    query adds up the values it selects."""
    nq = len(masks)
    if nq == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    Y, inv, sel, in_dom = _published_vectors(release, masks, model)
    U, J, m = Y.shape
    p, q = model.uniform_pq()
    rows = Y.reshape(U * J, m)
    grp = np.tile(np.arange(J), U)
    member = in_dom[grp]
    if method == "em":
        X, its = uniform_em(rows, p[grp], q[grp], member, tol, max_iter)
    else:
        n = rows.sum(axis=1)
        inv_x = np.where(member, (rows - (n * q[grp])[:, None]) / p[grp][:, None], 0.0)
        X, its = norm_sub(inv_x, member, n), np.zeros(len(rows), dtype=np.int64)
    Xu = X.reshape(U, J, m).sum(axis=1)
    est = (Xu[inv] * sel).sum(axis=1)
    return est, its.reshape(U, J).max(axis=1)[inv]


class _ConsistentEstimator(Estimator):
    """Base of the non-negative estimators of uniform perturbation, SDR and global randomization A."""

    family = "randomized"
    mechanisms = ("uniform", "sdr", "global")
    method = ""

    def answer_with_iterations(self, release, workload) -> tuple[np.ndarray, np.ndarray]:
        """(estimates, iterations): per query, the largest iteration count over its predicate's
        sub-tables (0 for Norm-Sub)."""
        if not self.supports(release):
            raise ParameterError(f"estimator {self.name!r} does not apply to a {release.manifest.get('mechanism')} release",
                                 param="estimator")
        _, masks = release.resolve(workload)
        p = self.get_params()
        return consistent_estimates(release, masks, release.transition_models()[0], self.method,
                                    p.get("tol", EM_TOL), p.get("max_iter", MAX_ITER))

    def answer(self, release, workload) -> np.ndarray:
        return self.answer_with_iterations(release, workload)[0]


class EM(_ConsistentEstimator):
    """Iterative Bayesian update per sub-table on the rows meeting each QI predicate (non-negative,
    keeps the known totals; Agrawal & Aggarwal 2001)."""

    name = method = "em"
    _parameter_constraints = {"tol": Real(0, None, closed="neither"), "max_iter": Integer(1, None)}
    _parameter_help = {"tol": "Stop when no count moves by more than this (relative, floor one record).",
                       "max_iter": "Iteration cap."}

    def __init__(self, tol: float = EM_TOL, max_iter: int = MAX_ITER):
        self._set_params(locals())


class NormSub(_ConsistentEstimator):
    """The inversion per sub-table, projected onto non-negative counts with the known total
    (Norm-Sub, Wang et al. 2020)."""

    name = method = "norm-sub"

    def __init__(self) -> None:
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
    Y = np.asarray(Y, dtype=np.float64)
    X = Y.copy()
    Tt = [T.T for T in Ts]
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


def _full_estimates(Yu, inv, qs, sel_sa, sa_sel, sizes, Ts, method, tol, max_iter=MAX_ITER):
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
    Z = X[pos]
    for i in reversed(sel_sa):  # Σ over the selected values of the last remaining SA axis
        Z = (Z * sa_sel[i][qs].reshape((len(qs),) + (1,) * (Z.ndim - 2) + (sizes[i],))).sum(axis=-1)
    return Z, its[pos]



def diverted_estimates(release, masks, method: str, tol: float = DEFAULT_TOL, r: str = "exact",
                       transition_counts: Sequence[np.ndarray] | None = None,
                       max_iter: int = MAX_ITER) -> tuple[np.ndarray, np.ndarray]:
    """(estimates, iterations) for a resolved workload on an A' release (module docstring).

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
    if nq == 0:
        return out, iters_out
    nsa_cols = sorted({c for m in rest for c in m})
    pub = [release.column_codes(s).astype(np.int64) for s in sas]
    key = np.ravel_multi_index(pub, sizes) if len(sas) > 1 else pub[0]
    K = int(np.prod(sizes))
    if K > 2_000_000:
        raise QueryError(f"the sensitive attributes {sas} have {K} value combinations; too many to estimate jointly")
    index = CountIndex({c: release.column_codes(c) for c in nsa_cols}, {c: len(release.domains[c]) for c in nsa_cols}, key, K)
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
    # group the rest by which SAs they constrain; expand into (query, value combination) pairs
    patterns: dict[tuple[int, ...], list[int]] = {}
    for q in np.flatnonzero(~none).tolist():
        patterns.setdefault(tuple(np.flatnonzero(constrained[q])), []).append(int(q))
    qs: Any; pair_q: Any; combos: Any  # lists turned into arrays below
    if method.startswith("full"):
        # transitions from the published SA counts: the receiver re-runs the group schedule
        Ts = [model.single.matrix for model in release.transition_models(transition_counts)]
        for sel_sa, qs in patterns.items():
            qs = np.asarray(qs)
            out[qs], iters_out[qs] = _full_estimates(Yu, inv, qs, sel_sa, sa_sel, sizes, Ts, method, tol, max_iter)
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
        if k == 1:  # Theorem 3: the MLE of an SA-only count is its published count
            est[sa_only] = f_pub[sa_only, 0]
            todo = ~sa_only
        else:
            todo = np.ones(len(pair_q), dtype=bool)
        if todo.any():
            yP = _states_from_subsets({T: z[todo] for T, z in Zp.items()}, k)
            yA = _states_from_subsets({T: z[todo] for T, z in Zg.items()}, k)
            y = np.concatenate([yA - yP, yP], axis=1)  # P bit first: (P̄ …, P …)
            if method == "closed":
                x = closed_form(y, f_pub[todo], N, lp, k, r)
            else:
                x, it = iterative_bayes(y, N, lp, k, tol, r, max_iter)
                its[todo] = it
            est[todo] = x[:, -1]
        np.add.at(out, pair_q, est)
        np.maximum.at(iters_out, pair_q, its)
    return out, iters_out


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


class FullIterative(DivertedEstimator):
    """A' default: iterative Bayesian update with the full m × m transition of the decoy schedule."""

    name = method = "full-iterative"
    _parameter_constraints = {"tol": Real(0, None, closed="neither"), "max_iter": Integer(1, None),
                              "transition_counts": Optional(CountVectors())}
    _parameter_help = {"tol": "Stop when no component moves by more than this (relative; the paper uses 1 %).",
                       "max_iter": "Iteration cap.",
                       "transition_counts": "Counts per SA for the group schedule instead of the published ones (analysis only)."}

    def __init__(self, tol: float = DEFAULT_TOL, max_iter: int = MAX_ITER, transition_counts=None):
        self._set_params(locals())


class FullClosed(DivertedEstimator):
    """A': x̂ = y T⁻¹ with the full transition (unbiased with the true T; can be negative)."""

    name = method = "full-closed"
    _parameter_constraints = {"transition_counts": Optional(CountVectors())}
    _parameter_help = {"transition_counts": FullIterative._parameter_help["transition_counts"]}

    def __init__(self, transition_counts=None):
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


__all__ = ["EM", "NormSub", "consistent_estimates", "norm_sub", "uniform_em",
           "CountVectors", "DivertedEstimator", "FourStateClosed", "FourStateIterative", "FullClosed", "FullIterative",
           "Inversion", "closed_form", "diverted_estimates", "full_closed", "full_iterative", "inversion_estimates",
           "iterative_bayes"]
