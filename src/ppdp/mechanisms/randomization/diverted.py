"""Mechanism A' for ℓ'-diverted zero-differential privacy (Fu, Wang, Wang & Wong, "Small
Count Privacy and Large Count Utility in Data Publishing"), SPEC §2.4.

Publishing (``Diverted(l_prime)``):

1. eligibility: every SA value occurs at most ⌊N/ℓ'⌋ times (a clear error otherwise);
2. N mod ℓ' rows chosen at random are removed (reported as ``dropped``) so N is a multiple of ℓ';
3. every row gets a random tuple id independent of its content; the decoy groups are a
   deterministic function of Π_{id,S}(D) only — Anatomy's group creation (Xiao & Tao 2006):
   repeatedly take the ℓ' SA buckets with the most remaining tuples (ties: smaller SA code
   first) and one tuple of each, the one with the smallest id (:func:`decoy_groups`);
4. each row's published SA is drawn uniformly from its group's ℓ' values (p = q = 1/ℓ',
   Theorem 1), the rows are shuffled, and only D' and ℓ' are published — never the groups.
Several sensitive attributes are randomized independently, each with its own groups (§7.2).

Estimation (registered with the "randomized" release family; :func:`estimate`):

- SA-only counts: f'_s, the count of s in D' (the MLE, Theorem 3);
- NSA predicate P with SA value s: the 4-state model of Definitions 6–7 / Figure 3 with the
  exact transition r = P(s̄ → s) = f_s(ℓ'−1)/(ℓ'(N−f_s)): a tuple whose value is not s lies in
  one of the f_s groups that contain s with probability f_s(ℓ'−1)/(N−f_s) (those groups hold
  f_s(ℓ'−1) of the N−f_s such tuples) and then publishes s with probability 1/ℓ'. The paper
  writes a_01 = a_23 = (x1+x3)/N = f_s/N, which counts the s-tuples themselves as possible
  decoy holders and over-states r by the factor ℓ'/(ℓ'−1)·(N−f_s)/N (25 % for ℓ' = 5);
  ``r="paper"`` selects that approximation for comparison. With the exact r the model also
  reproduces Theorem 3 (its fixed point keeps f̂_s = f'_s), the paper's r does not.
  * ``method="iterative"``: the iterative Bayesian update of eq 12–13, x⁰ = y, stopped when
    no component moves by more than ``tol`` (relative, with a floor of one row; the paper
    uses 1 %) — vectorised over every (query, SA value) pair at once;
  * ``method="closed"``: x̂ = (y3 − n_P·r)/(1/ℓ' − r) (the exact inversion, unbiased, can
    be negative).
  Value sets (IN) are answered by summing the per-value estimates.
- several SAs: the tensor-product transition matrix M0 ⊗ M1 ⊗ … ⊗ Mw (§7.2).

The 4-state model assumes a tuple of any other value is equally likely to sit in a group with
s; Anatomy's group creation puts large values with large values, so predicates that correlate
with the SA are biased. The default estimators use the full m × m transition instead:

- the receiver re-runs the (deterministic, counts-only) group schedule on the published
  counts f'_s (:func:`receiver_counts`) and gets T[x, y] = P(published y | true x) =
  g[x, y]/(ℓ' f_x), g = number of groups holding both (:func:`transition_matrix`);
- for an NSA predicate P, y_P = published-value counts among P's rows (one ``CountIndex``
  pass for the workload) and the true counts of every SA value among P's rows solve
  E[y_P] = x_P T: ``method="full-closed"`` x̂_P = y_P T⁻¹ (exactly unbiased with the true
  T, can be negative), ``method="full-iterative"`` (default) the iterative Bayesian update
  of eq 12–13 with the full T, x⁰ = y_P, the paper's 1 % stopping rule (non-negative);
- several SAs: T1 ⊗ T2 ⊗ … (each SA has its own, independent groups), applied per axis.

docs/diverted.md gives the numbers behind the default.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np
import pyarrow as pa
from scipy import sparse

from ...errors import InfeasibleError, PpdpError, QueryError, SchemaError
from ...queries import CountIndex, split_masks
from ...releases.base import VerifyReport, codes_to_labels
from ...releases.randomized import RandomizedRelease, register_mechanism
from ...validation import Integer
from ..base import Mechanism

__all__ = ["Diverted", "decoy_groups", "decoy_schedule", "estimate", "randomize_in_groups"]

METHODS = ("full-iterative", "full-closed", "iterative", "closed")
DEFAULT_METHOD = "full-iterative"
DEFAULT_TOL = 0.01
MAX_ITER = 10_000


# ----------------------------------------------------------------------------- groups
def _first_failure(ok, hi: int) -> int:
    """Smallest j in [0, hi) with ok(j) False (ok is monotone: True…True False…), else hi."""
    lo = 0
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid + 1
        else:
            hi = mid
    return lo


def decoy_schedule(counts: np.ndarray, l_prime: int) -> tuple[np.ndarray, np.ndarray]:
    """Anatomy's group creation on the SA counts alone.

    Returns ``(values, groups)``: one entry per tuple slot — the SA code and the index of the
    group (0 … N/ℓ'−1, in creation order) it goes to. Group g takes one tuple from each of
    the ℓ' values with the most remaining tuples (ties: smaller code first).

    The greedy is evaluated in runs instead of one group at a time. At any moment the values
    split into F (strictly above the ℓ'-th largest remaining count L: each is taken by every
    group), a block at level L (possibly with the level L−1 values when those are exactly the
    block's smaller codes) and values below. Inside the block the greedy takes the a = ℓ' − |F|
    largest by (count, −code) — a cyclic walk over the block in code order, a units per group.
    That walk stays exact while the F values remain strictly above it and the values below stay
    strictly below the lowest level it touches; both conditions are monotone in the number of
    groups, so the longest valid run is found by bisection and written out with array
    arithmetic. A run ends only when a value enters the block or a wrap breaks the code-order
    pattern, so there are O(#values) runs (a few hundred on OCC), not N/ℓ' iterations.
    """
    r = np.asarray(counts, dtype=np.int64).copy()
    n = int(r.sum())
    if n % l_prime:
        raise PpdpError(f"the number of tuples ({n}) is not a multiple of ℓ' = {l_prime}")
    G = n // l_prime
    if G and r.max() > G:
        raise InfeasibleError(f"not eligible: a value occurs {int(r.max())} times > N/ℓ' = {G}")
    codes = np.arange(len(r))
    vals, grps = [], []
    t = 0
    while t < G:
        order = np.lexsort((codes, -r))
        L = int(r[order[l_prime - 1]])
        F = np.flatnonzero(r > L)
        a = l_prime - len(F)
        top = np.flatnonzero(r == L)
        low = np.flatnonzero(r == L - 1) if L >= 2 else np.zeros(0, dtype=np.int64)
        if len(low) and low.max() < top.min():  # the level-L values are the block's largest codes
            block, p = np.concatenate([low, top]), len(low)
            below = r[r < L - 1]
        else:
            block, p = top, 0
            below = r[r < L]
        b = len(block)
        max_below = int(below.max()) if len(below) else 0
        min_f = int(r[F].min()) if len(F) else None

        def ok(j: int) -> bool:
            if L - (p + a * j + a - 1) // b <= max_below:  # lowest level the walk touches at group j
                return False
            return min_f is None or min_f - j > L - (p + a * j) // b

        J = _first_failure(ok, G - t)
        assert J >= 1
        if len(F):
            vals.append(np.repeat(F, J))
            grps.append(np.tile(np.arange(t, t + J), len(F)))
            r[F] -= J
        u = np.arange(a * J, dtype=np.int64)
        pos = (p + u) % b
        vals.append(block[pos])
        grps.append(t + u // a)
        r[block] -= np.bincount(pos, minlength=b)
        t += J
    assert not r.any(), "decoy schedule did not use every tuple"
    if not vals:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(vals).astype(np.int64), np.concatenate(grps).astype(np.int64)


def decoy_groups(sa_codes: np.ndarray, ids: np.ndarray, l_prime: int, n_values: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Decoy groups as a function of Π_{id,S}(D) only.

    Returns ``(group_of_row, group_values)``: the group index of every row and the (G, ℓ')
    SA codes of every group. Value s's k-th tuple by id goes to the k-th group (in creation
    order) that holds s — Anatomy's "smallest id first".
    """
    sa = np.asarray(sa_codes, dtype=np.int64)
    counts = np.bincount(sa, minlength=n_values or (int(sa.max()) + 1 if len(sa) else 1))
    v, g = decoy_schedule(counts, l_prime)
    n, G, m = len(sa), len(v) // l_prime, len(counts)
    # unique int64 sort keys (faster than lexsort): (value, group) per slot, (value, id) per row
    slot_order = np.argsort(v * G + g)
    row_order = np.argsort(sa * n + np.asarray(ids, dtype=np.int64))
    group_of_row = np.empty(n, dtype=np.int64)
    group_of_row[row_order] = g[slot_order]
    group_values = v[np.argsort(g * m + v)].reshape(-1, l_prime)  # a group's values are distinct
    return group_of_row, group_values


def randomize_in_groups(group_of_row: np.ndarray, group_values: np.ndarray, own: np.ndarray,
                        rng: np.random.Generator, retention: float | None = None) -> np.ndarray:
    """Published SA codes: uniform over the row's group values (``retention=None``, p = q = 1/ℓ').

    ``retention`` = p keeps the row's own value ``own`` with probability p and picks one of
    the other ℓ'−1 group values uniformly otherwise (q = (1−p)/(ℓ'−1)); only tests use it, to
    show that p ≠ q breaks Theorem 1 (Theorem 2).
    """
    lp = group_values.shape[1]
    n = len(group_of_row)
    if retention is None:
        return group_values[group_of_row, rng.integers(lp, size=n)]
    vals = group_values[group_of_row]
    own_pos = np.argmax(vals == np.asarray(own)[:, None], axis=1)
    other = (own_pos + 1 + rng.integers(lp - 1, size=n)) % lp
    pick = np.where(rng.random(n) < retention, own_pos, other)
    return vals[np.arange(n), pick]


# -------------------------------------------------------------------------- mechanism
class Diverted(Mechanism):
    """A' with parameter ℓ' (``l_prime`` ≥ 2): ℓ'-diverted zero-differential privacy."""

    name = "diverted"
    family = "randomized"

    claim_model = "l'-diverted zero-differential privacy"
    paper = "Fu, Wang, Wang, Wong 2014"
    _parameter_constraints = {"l_prime": Integer(2, None)}
    _parameter_help = {"l_prime": "ℓ' ≥ 2: the size of every decoy group."}

    def __init__(self, l_prime: int):
        self._set_params(locals())

    def check_eligible(self, table) -> None:
        """Raise unless every SA has ≥ ℓ' values and max count ≤ ⌊N/ℓ'⌋ (SPEC §2.4)."""
        lp = self.l_prime
        if not table.sensitive:
            raise SchemaError("A' needs at least one sensitive attribute")
        n_keep = (table.n_rows // lp) * lp
        if n_keep == 0:
            raise InfeasibleError(f"the table has {table.n_rows} rows, fewer than ℓ' = {lp}")
        for sa in table.sensitive:
            dom = table.domain(sa)
            if lp > len(dom):
                raise InfeasibleError(f"ℓ' = {lp} exceeds the {len(dom)} values of the sensitive attribute {sa!r}")
            counts = table.counts(sa)
            worst = int(np.argmax(counts))
            if counts[worst] > n_keep // lp:
                raise InfeasibleError(
                    f"table not eligible for ℓ' = {lp}: {sa} = {dom[worst]!r} occurs {int(counts[worst])} times, "
                    f"more than N/ℓ' = {n_keep // lp} (N = {n_keep} after dropping {table.n_rows - n_keep} rows); "
                    f"choose ℓ' ≤ {max(1, table.n_rows // int(counts[worst]))}")

    def _publish(self, table, rng: np.random.Generator):
        lp = self.l_prime
        self.check_eligible(table)
        n_in = table.n_rows
        n_drop = n_in % lp
        keep = np.ones(n_in, dtype=bool)
        if n_drop:
            keep[rng.choice(n_in, size=n_drop, replace=False)] = False
        idx = np.flatnonzero(keep)
        n = len(idx)
        published = {}
        for sa in table.sensitive:
            # random tuple ids, independent of the tuple contents and drawn afresh for every SA,
            # so that the SAs' decoy groups are independent (§7.2, the tensor-product model)
            ids = rng.permutation(n)
            own = table.codes(sa)[idx]
            grp, gvals = decoy_groups(own, ids, lp, len(table.domain(sa)))
            published[sa] = randomize_in_groups(grp, gvals, own, rng)
        shuffle = rng.permutation(n)
        cols = [*table.quasi, *table.sensitive]
        arrays = []
        for c in cols:
            codes = published[c] if c in published else table.codes(c)[idx]
            arrays.append(codes_to_labels(np.asarray(codes)[shuffle], table.domain(c)))
        data = pa.Table.from_arrays(arrays, names=cols)
        manifest = {
            "schema": {"quasi": list(table.quasi), "sensitive": list(table.sensitive),
                       "domains": {c: list(table.domain(c)) for c in cols},
                       "numeric": {c: (None if table.numeric_values(c) is None else table.numeric_values(c).tolist()) for c in cols}},
            "n_input": n_in,
            "n_published": n,
            "dropped": n_drop,
            "certificate": {
                "l_prime": lp,
                "sensitive": list(table.sensitive),
                "n_groups": n // lp,
                "dropped_reason": f"N mod ℓ' = {n_drop} random row(s) removed so that N is a multiple of ℓ'",
                "p": 1.0 / lp,
                "q": 1.0 / lp,
                "groups_published": False,
            },
        }
        return RandomizedRelease(manifest, {"data": data})


# -------------------------------------------------------------------------- estimation
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
def receiver_counts(published_counts: np.ndarray, l_prime: int) -> np.ndarray:
    """The SA counts a receiver plugs into the group schedule: the published counts f'_s (the
    MLE, Theorem 3), with any count above N/ℓ' (possible only through the randomization)
    clipped to N/ℓ' and the excess spread over the other published values in proportion to
    their room below N/ℓ' (largest remainder), so that the schedule is feasible."""
    f = np.asarray(published_counts, dtype=np.int64).copy()
    G = int(f.sum()) // l_prime
    excess = int(np.clip(f - G, 0, None).sum())
    if not excess:
        return f
    f = np.minimum(f, G)
    room = np.where((f > 0) & (f < G), G - f, 0).astype(np.float64)
    share = excess * room / room.sum()
    add = np.floor(share).astype(np.int64)
    rest = excess - int(add.sum())
    add[np.argsort(-(share - add), kind="stable")[:rest]] += 1
    return f + add


def transition_matrix(counts: np.ndarray, l_prime: int) -> np.ndarray:
    """T[x, y] = P(published y | true x) for the decoy groups that Anatomy's group creation
    builds from the SA ``counts`` (the groups depend on the counts only).

    With g[x, y] = number of groups holding both x and y (g[x, x] = f_x), a tuple of value x
    lies in one of x's f_x groups uniformly at random (its id is random) and publishes each
    of the group's ℓ' values with probability 1/ℓ', so T[x, y] = g[x, y]/(ℓ' f_x); rows sum to
    1 and f·T = f (so the inversion reproduces Theorem 3). A value with no tuple gets the
    identity row."""
    counts = np.asarray(counts, dtype=np.int64)
    m = len(counts)
    v, g = decoy_schedule(counts, l_prime)
    B = sparse.csr_matrix((np.ones(len(v)), (g, v)), shape=(len(v) // l_prime, m))
    C = np.asarray((B.T @ B).todense(), dtype=np.float64)
    f = np.diag(C).copy()
    T = C / (l_prime * np.maximum(f, 1.0))[:, None]
    empty = np.flatnonzero(f == 0)
    T[empty, empty] = 1.0
    return T


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


def _full_estimates(Yu, inv, qs, sel_sa, sa_sel, sizes, Ts, method, tol):
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
        X, its = full_iterative(Ym, mats, tol)
    Z = X[pos]
    for i in reversed(sel_sa):  # Σ over the selected values of the last remaining SA axis
        Z = (Z * sa_sel[i][qs].reshape((len(qs),) + (1,) * (Z.ndim - 2) + (sizes[i],))).sum(axis=-1)
    return Z, its[pos]


def estimate(release, workload, masks, method: str | None = None, tol: float | None = None, r: str = "exact",
             return_details: bool = False, transition_counts: Sequence[np.ndarray] | None = None):
    """Estimated counts for a resolved workload on an A' release (see the module docstring).

    ``transition_counts`` (one count vector per SA, after the dropped rows) replaces the
    published counts in the full-transition methods — only for analysis: it measures what
    knowing the true counts would change; a receiver does not have them."""
    method = method or DEFAULT_METHOD
    tol = DEFAULT_TOL if tol is None else float(tol)
    if method not in METHODS:
        raise QueryError(f"unknown estimator {method!r}; use one of {', '.join(map(repr, METHODS))}")
    if r not in ("exact", "paper"):
        raise QueryError(f"unknown transition r {r!r}; use 'exact' or 'paper'")
    lp = int(release.certificate["l_prime"])
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
        return (out, iters_out) if return_details else out
    nsa_cols = sorted({c for m in rest for c in m})
    pub = [release.column_codes(s).astype(np.int64) for s in sas]
    key = np.ravel_multi_index(pub, sizes) if len(sas) > 1 else pub[0]
    K = int(np.prod(sizes))
    if K > 2_000_000:
        raise QueryError(f"the sensitive attributes {sas} have {K} value combinations; too many to estimate jointly")
    index = CountIndex({c: release.column_codes(c) for c in nsa_cols}, {c: len(release.domains[c]) for c in nsa_cols}, key, K)
    # many queries share their NSA predicate (the point workload pairs each with every SA value)
    uniq: dict[bytes, int] = {}
    inv = np.empty(nq, dtype=np.int64)
    reps = []
    for q, m in enumerate(rest):
        h = b"|".join(c.encode() + b"=" + np.packbits(m[c]).tobytes() for c in sorted(m))
        if h not in uniq:
            uniq[h] = len(reps)
            reps.append(m)
        inv[q] = uniq[h]
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
    for q in np.flatnonzero(~none):
        patterns.setdefault(tuple(np.flatnonzero(constrained[q])), []).append(int(q))
    if method.startswith("full"):
        # transitions from the published SA counts: the receiver re-runs the group schedule
        if transition_counts is None:
            transition_counts = [receiver_counts(np.bincount(p, minlength=m_s), lp) for p, m_s in zip(pub, sizes)]
        Ts = [transition_matrix(c, lp) for c in transition_counts]
        for sel_sa, qs in patterns.items():
            qs = np.asarray(qs)
            out[qs], iters_out[qs] = _full_estimates(Yu, inv, qs, sel_sa, sa_sel, sizes, Ts, method, tol)
        return (out, iters_out) if return_details else out
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
                x, it = iterative_bayes(y, N, lp, k, tol, r)
                its[todo] = it
            est[todo] = x[:, -1]
        np.add.at(out, pair_q, est)
        np.maximum.at(iters_out, pair_q, its)
    return (out, iters_out) if return_details else out


def _estimator(release, workload, masks, **options):
    return estimate(release, workload, masks, **options)


def _verifier(release, rep: VerifyReport, table) -> None:
    m = release.manifest
    cert = release.certificate
    lp = cert.get("l_prime")
    if not rep.check(isinstance(lp, int) and lp >= 2, "certificate l_prime is an integer ≥ 2", f"certificate l_prime is {lp!r}"):
        return
    rep.check(m.get("params", {}).get("l_prime") == lp, "params.l_prime equals certificate.l_prime",
              f"params.l_prime {m.get('params', {}).get('l_prime')!r} != certificate.l_prime {lp}")
    N, n_in, dropped = int(m["n_published"]), int(m["n_input"]), int(m["dropped"])
    rep.check(N % lp == 0, "n_published is a multiple of ℓ'", f"n_published {N} is not a multiple of ℓ' = {lp}")
    rep.check(dropped == n_in % lp, "dropped = n_input mod ℓ' (< ℓ')", f"dropped {dropped} != n_input mod ℓ' = {n_in % lp}")
    rep.check(cert.get("n_groups") == N // lp, "n_groups = n_published / ℓ'", f"n_groups {cert.get('n_groups')} != {N // lp}")
    rep.check(not any(k in cert or k in m for k in ("groups", "decoy_groups")), "the decoy groups are not published",
              "the release publishes its decoy groups")
    sas = list(release.schema["sensitive"])
    rep.check(bool(sas) and sas == list(cert.get("sensitive", [])), "sensitive attributes match the certificate",
              f"schema sensitive {sas} != certificate {cert.get('sensitive')}")
    for s in sas:
        rep.check(lp <= len(release.domains[s]), f"ℓ' ≤ number of values of {s}",
                  f"ℓ' = {lp} exceeds the {len(release.domains[s])} values of {s!r}")
    cols = set(release.data.column_names)
    expected = set(release.schema["quasi"]) | set(sas)
    rep.check(cols == expected, "data.parquet holds exactly the NSA and SA columns", f"data.parquet columns {sorted(cols)} != {sorted(expected)}")
    rep.facts["l_prime"] = lp
    rep.facts["dropped"] = dropped
    if table is None:
        return
    for s in sas:
        if s not in table.column_names:
            rep.problems.append(f"the source table lacks the sensitive column {s!r}")
            continue
        c = table.counts(s)
        rep.check(int(c.max()) <= N // lp, f"source eligible for ℓ' on {s} (max count ≤ N/ℓ')",
                  f"source not eligible: {s} has a value occurring {int(c.max())} times > N/ℓ' = {N // lp}")
        rep.check(list(table.domain(s)) == list(release.domains[s]), f"domain of {s} matches the source",
                  f"the domain of {s} differs from the source table's")
    for c in release.schema["quasi"]:  # NSA values are published unchanged, minus the dropped rows
        if c not in table.column_names or list(table.domain(c)) != list(release.domains[c]):
            rep.problems.append(f"NSA column {c!r} does not match the source table")
            continue
        diff = table.counts(c) - np.bincount(release.column_codes(c), minlength=len(release.domains[c]))
        rep.check(bool((diff >= 0).all()) and int(diff.sum()) == dropped, f"NSA column {c} = source minus the dropped rows",
                  f"NSA column {c!r} is not the source column minus {dropped} dropped rows")


register_mechanism("diverted", _estimator, _verifier)
