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

**Full-report MLE** (``"full-mle"``): the support counts are not sufficient for the subset
channel — a report Y has likelihood ∝ 1 + (e^ε − 1)·π(Y), π(Y) = Σ_{v∈Y} π_v — so this is the
maximum-likelihood distribution of P's records given their whole reports: the iterative
Bayesian update on each record's posterior P(v | Y_r) ∝ π_v·(1 + (e^ε − 1)[v ∈ Y_r]), all
predicates at once on a sparse (predicate, record) × (predicate, value) matrix, accelerated by
SQUAREM (Varadhan & Roland 2008) from the support counts' MLE (:class:`FullReports`). Interval:
Wald from the observed information on the simplex, cut to [0, n_P]. Its Fisher information on
OCC-like distributions equals the counts' within ~1% (the counts are sufficient at a uniform
π, and OCC's distributions are far from concentrated), so it gains ≈ 1–2.5% over Norm-Sub on
large counts only (docs/subset.md).

**Empirical Bayes** (``"eb"``, the default; :mod:`ppdp.estimators.subset_eb`): the inversion
shrunk by the best linear predictor under a Dirichlet-multinomial model towards the distribution
of the predicate's best parent — the whole table's (Norm-Sub of its inversion over all records),
a parent predicate's (one QI condition dropped, or on an ordered column one condition widened
by 4 or 12 values; itself fitted the same way from its own support counts), its conditions'
combined under conditional independence or, for one value of an unordered column, another
value's of that column (a sibling, fitted towards the whole table) — the parent chosen and the
strength fitted per predicate by normal marginal likelihood (the uniform channel's fit,
:class:`~ppdp.estimators.eb_rows.EBEntries`), then projected like Norm-Sub; then the guard (half
way down to Norm-Sub's count where that is lower, up to 1,000); a count Norm-Sub puts above 1,000
takes the full-report MLE's value instead (only the predicates holding such a count are fitted).
A query's estimate depends on its predicate's support counts and its sub-predicates', never on
the other queries. On OCC it is the most accurate in every bin and on zero counts; on Adult and
EDU no shipped estimator is lower in any bin (docs/subset.md, :func:`eb_counts` for its parts).

Uncertainty, every estimator but ``full-mle``: the inversion's variance is exact given the table (the records
report independently): for a query selecting s values, a record whose value lies in the set
contributes Var|Y ∩ S| = ``var_in`` and one whose value does not ``var_out``
(:func:`~ppdp.kernels.subset.set_count_moments`), so Var = (x_S·var_in + (n_P − x_S)·var_out)/(p − q)²,
estimated at the estimator's own counts (clipped to [0, n_P]); the interval is the
inversion's normal interval cut to [0, n_P] and widened to hold the estimate (a confidence
interval whatever the shrinkage; its coverage of true counts is measured in
tests/contract/test_coverage_ldp.py).
"""

from __future__ import annotations

import weakref
from typing import Mapping, Sequence

import numpy as np
from scipy import sparse, stats

from ..kernels.subset import inclusion_probabilities, set_count_moments
from ..queries import split_masks
from .base import Estimates, Estimator
from .subset_eb import STRENGTH, WIDEN, parent_eb
from .uniform import GUARD_PULL


def _predicates(masks: Sequence[Mapping[str, np.ndarray]]) -> tuple[list, np.ndarray, list[bytes]]:
    """The distinct QI predicates among ``masks``, per query the index of its predicate, and each
    distinct predicate's key (bytes)."""
    uniq: dict[bytes, int] = {}
    inv = np.empty(len(masks), dtype=np.int64)
    reps: list = []
    keys: list[bytes] = []
    for i, mk in enumerate(masks):
        h = b"|".join(c.encode() + b"=" + np.packbits(mk[c]).tobytes() for c in sorted(mk))
        if h not in uniq:
            uniq[h] = len(reps)
            reps.append(mk)
            keys.append(h)
        inv[i] = uniq[h]
    return reps, inv, keys


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
        reps, self.inv, self.keys = _predicates(rest)
        self.reps = reps
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
        """Σ over the values each query selects of its predicate's row of X; a query selecting
        every value is its predicate's n_P, known exactly (the guard of ``eb`` lowers counts one
        by one and would take it below)."""
        est = (X[self.inv] * self.sel).sum(axis=1)
        return np.where(self.sel.all(axis=1), self.n[self.inv], est)

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


def predicate_rows(release, reps: Sequence[Mapping[str, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """(G, R): every (predicate, record) pair — record R[i] satisfies predicate G[i]'s QI masks —
    grouped by predicate. Per set of columns, the records' distinct label combinations (cells)
    are matched against all the predicates at once, and each matching cell's records are listed
    by one sort: no loop over records."""
    k = release.k
    N = len(release.reports())
    groups: dict[tuple[str, ...], list[int]] = {}
    for u, mk in enumerate(reps):
        groups.setdefault(tuple(sorted(mk)), []).append(u)
    Gs, Rs = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for cols, us in groups.items():
        ua = np.asarray(us, dtype=np.int64)
        if not cols:  # no QI condition: every record
            Gs.append(np.repeat(ua, N))
            Rs.append(np.tile(np.arange(N, dtype=np.int64), len(ua)))
            continue
        codes = [np.asarray(release.column_codes(c)[::k], dtype=np.int64) for c in cols]
        dims = [len(release.domains[c]) for c in cols]
        if float(np.prod(dims, dtype=float)) < 2**62:  # one combined key per record: a 1-D sort
            ukey, cinv = np.unique(np.ravel_multi_index(codes, dims), return_inverse=True)
            cells = np.stack(np.unravel_index(ukey, dims), axis=1)
        else:  # pragma: no cover - astronomically large label spaces
            cells, cinv = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
        cinv = np.asarray(cinv).ravel()
        size = np.bincount(cinv, minlength=len(cells))
        start = np.cumsum(size) - size
        order = np.argsort(cinv, kind="stable")
        block = max(1, int(2e7 // max(len(cells), 1)))  # predicates × cells booleans per block
        for lo in range(0, len(ua), block):
            part = ua[lo:lo + block]
            member = np.ones((len(part), len(cells)), dtype=bool)
            for j, c in enumerate(cols):
                member &= np.stack([np.asarray(reps[u][c], dtype=bool) for u in part])[:, cells[:, j]]
            pu, pc = np.nonzero(member)
            cnt = size[pc]
            offs = np.repeat(start[pc] - (np.cumsum(cnt) - cnt), cnt) + np.arange(int(cnt.sum()))
            Gs.append(np.repeat(part[pu], cnt))
            Rs.append(order[offs])
    return np.concatenate(Gs), np.concatenate(Rs)


#: the full-report fit stops when no count moves by more than TOL·√n_P in a SQUAREM cycle …
TOL = 0.03
#: … or after this many cycles
MAX_CYCLES = 100


class FullReports:
    """The full-report likelihood of the predicates of a :class:`SubsetSetup`.

    A report Y of k values has P(Y | π) = (1 + a·π(Y))/Z, a = e^ε − 1, π(Y) = Σ_{v∈Y} π_v (Z does
    not depend on π): the support counts are not sufficient for π, and the maximum-likelihood
    distribution of a predicate's records uses every report whole. ``M`` (pairs × U·m) holds, per
    (predicate u, record r) pair, a one at (u, v) for each v of r's report, so that M·π = π_u(Y_r)
    for all pairs in one sparse product."""

    def __init__(self, S: SubsetSetup):
        self.U, self.m, self.k = len(S.reps), S.m, S.k
        self.a = float(np.expm1(S.epsilon))
        self.G, R = predicate_rows(S.release, S.reps)
        Y = S.release.reports()
        cols = (self.G[:, None] * self.m + Y[R]).ravel()
        idx_t = np.int32 if self.U * self.m < 2**31 and len(cols) < 2**31 else np.int64
        self.M = sparse.csr_matrix((np.ones(len(cols)), cols.astype(idx_t),
                                    np.arange(0, len(cols) + 1, self.k, dtype=np.int64 if len(cols) >= 2**31 else idx_t)),
                                   shape=(len(R), self.U * self.m))
        self.MT = self.M.T  # (CSC: its products cost as much as the CSR's)
        self.n = np.bincount(self.G, minlength=self.U).astype(np.float64)

    def step(self, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One iterative Bayesian update of every predicate's distribution P (U, m) — each record's
        posterior P(v | Y_r) ∝ π_v·(1 + a·[v ∈ Y_r]) averaged over its predicate's records — and the
        log-likelihood (U,) of P."""
        piY = self.M @ P.ravel()
        w = 1.0 / (1.0 + self.a * piY)
        A = np.bincount(self.G, weights=w, minlength=self.U)
        B = (self.MT @ w).reshape(self.U, self.m)
        ll = np.bincount(self.G, weights=np.log1p(self.a * piY), minlength=self.U)
        n = np.where(self.n > 0, self.n, 1.0)[:, None]
        return P * (A[:, None] + self.a * B) / n, ll

    def fit(self, P0: np.ndarray, tol: float = TOL, max_cycles: int = MAX_CYCLES) -> np.ndarray:
        """The maximum-likelihood distributions (U, m) from P0 by the iterative Bayesian update
        accelerated by SQUAREM (Varadhan & Roland 2008), a step length per predicate, kept
        monotone: an extrapolation whose likelihood falls below the cycle's start is replaced by two
        plain steps. A predicate stops when none of its counts moves by more than ``tol`` × √n_P (its
        noise scale) in a cycle; all stop after ``max_cycles`` cycles (three updates each)."""
        P = np.asarray(P0, dtype=np.float64)
        active = np.ones(self.U, dtype=bool)  # a predicate stops on its own (its fit does not depend on the others)
        for _ in range(max_cycles):
            before = P
            P1, ll0 = self.step(P)
            P2, _ = self.step(P1)
            r, v = P1 - P, P2 - 2 * P1 + P
            rn = np.sqrt((r**2).sum(axis=1))
            vn = np.sqrt((v**2).sum(axis=1))
            alpha = np.minimum(-np.divide(rn, vn, out=np.ones_like(rn), where=vn > 0), -1.0)[:, None]
            Q = P - 2 * alpha * r + alpha**2 * v
            bad = (Q < 0).any(axis=1)
            Q = np.where(bad[:, None], P2, Q)
            Q /= np.maximum(Q.sum(axis=1, keepdims=True), 1e-300)
            P3, llq = self.step(Q)
            worse = llq < ll0 - 1e-9 * np.abs(ll0)
            if worse.any():
                P3[worse] = P2[worse]
            P = np.where(active[:, None], P3, P)
            active &= np.abs(P3 - before).max(axis=1) * np.sqrt(self.n) >= tol
            if not active.any():
                break
        return P

    def information(self, P: np.ndarray) -> np.ndarray:
        """(U, m, m): the observed information of each predicate's distribution at P,
        Σ_r a²·1_{Y_r}1_{Y_r}ᵀ/(1 + a·π(Y_r))² (minus the log-likelihood's Hessian)."""
        w = self.a / (1.0 + self.a * (self.M @ P.ravel()))
        J = (self.MT @ sparse.diags(w**2) @ self.M).tocoo()
        out = np.zeros((self.U, self.m, self.m))
        u = J.row // self.m
        out[u, J.row % self.m, J.col % self.m] = J.data
        return out


def constrained_covariance(J: np.ndarray) -> np.ndarray:
    """(U, m, m): the inverse of each information J restricted to the simplex's directions
    (Σδ = 0): Z(ZᵀJZ)⁺Zᵀ with Z = [I; −1ᵀ] (the last value's share is one minus the others')."""
    U, m, _ = J.shape
    Z = np.vstack([np.eye(m - 1), -np.ones((1, m - 1))])
    inner = Z.T @ J @ Z
    return Z @ np.linalg.pinv(inner, hermitian=True) @ Z.T


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


def eb_counts(S: SubsetSetup, strength: str = STRENGTH, parents: bool = True, guard: bool = True,
              switch: bool = True, widen: Sequence[int] = WIDEN, siblings: bool = True) -> np.ndarray:
    """(U, m): :class:`SubsetEB`'s counts — :func:`~ppdp.estimators.subset_eb.parent_eb` (``strength``,
    ``parents``, ``widen``, ``siblings``), then with ``guard`` the guard and with ``switch`` the full-report MLE on
    counts Norm-Sub puts above :data:`LARGE` (the options are the comparisons of docs/subset.md)."""
    shrunk = parent_eb(S, strength, parents, widen, siblings)
    plain = norm_sub(S.inversion(), S.n)
    if guard:
        # the guard of the randomized family's default (estimators/uniform.py): where Norm-Sub's count is
        # lower, half way down to it — the shrinkage lifts small and zero counts towards the parent's share
        # (OCC (0.1, 0.3), 5 releases: zero MAE 18.3 → 13.7, 1–10 3.741 → 2.936, 11–100 1.143 → 1.035;
        # 101–1,000 0.468 → 0.471, +0.002 ± 0.007; docs/subset.md)
        low = (plain < shrunk) & (shrunk <= LARGE)
        shrunk = np.where(low, shrunk + GUARD_PULL * (plain - shrunk), shrunk)
    # a count Norm-Sub puts above LARGE: the full-report maximum likelihood's — the shrinkage, even towards
    # the best parent, loses there (OCC (0.1, 0.3), 5 releases, > 1,000: 0.136 against 0.145; it costs
    # 101–1,000 0.466 → 0.471; docs/subset.md)
    big = plain > LARGE
    if not switch or not big.any():
        return shrunk
    full = full_report_fit(S, only=np.asarray(big.any(axis=1)))[0]
    return np.where(big, full, shrunk)


class SubsetEB(_SubsetEstimator):
    """Empirical Bayes: the inversion shrunk towards its best parent's distribution
    (:func:`~ppdp.estimators.subset_eb.parent_eb`), then Norm-Sub, the guard, and the full-report
    MLE on counts above :data:`LARGE` (:func:`eb_counts`)."""

    name = "eb"

    def fit(self, S: SubsetSetup) -> np.ndarray:
        return eb_counts(S)


#: per release, the full-report fits already made: predicate key → (π, covariance or None)
_FITS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


#: (predicate, record) pairs fitted together by :func:`full_report_fit` (the sparse matrix holds k per pair)
PAIRS_BLOCK = 20_000_000


def _fit_batch(S: SubsetSetup, todo: list[int], covariance: bool, memo: dict) -> None:
    """Fit the predicates ``todo`` of S together and store (π, covariance) per predicate key."""
    sub = SubsetSetup.__new__(SubsetSetup)
    sub.__dict__.update(S.__dict__)
    sub.reps, sub.keys = [S.reps[u] for u in todo], [S.keys[u] for u in todo]
    F = FullReports(sub)
    n = np.where(F.n > 0, F.n, 1.0)[:, None]
    start = uniform_channel_mle(S.C[todo], (S.p - S.q) / S.k, S.q / S.k) / S.k / n
    start = 0.98 * start / np.maximum(start.sum(axis=1, keepdims=True), 1e-300) + 0.02 / S.m
    P = F.fit(start)
    cov = constrained_covariance(F.information(P)) if covariance else None
    for i, u in enumerate(todo):
        memo[S.keys[u]] = (P[i], None if cov is None else cov[i])


def full_report_fit(S: SubsetSetup, covariance: bool = False,
                    only: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """The maximum-likelihood counts (U, m) of every predicate of S from the full reports and,
    with ``covariance``, the (U, m, m) covariance of its distribution (inverse observed information
    on the simplex); ``only`` (U,) bool: fit those predicates, the others' rows are NaN. Starts
    from the support counts' MLE; fits are kept per release and predicate, so a second workload
    on the same predicates costs no fit."""
    try:
        memo = _FITS.setdefault(S.release, {})
    except TypeError:  # a release that cannot be weakly referenced: no memo
        memo = {}
    want = np.ones(len(S.keys), dtype=bool) if only is None else np.asarray(only, dtype=bool)
    todo = [u for u, key in enumerate(S.keys)
            if want[u] and (key not in memo or (covariance and memo[key][1] is None))]
    # batches of predicates holding at most PAIRS_BLOCK (predicate, record) pairs between them (memory)
    batch: list[int] = []
    total = 0.0
    for j, u in enumerate(todo):
        batch.append(u)
        total += S.n[u]
        if j == len(todo) - 1 or total + S.n[todo[j + 1]] > PAIRS_BLOCK:
            _fit_batch(S, batch, covariance, memo)
            batch, total = [], 0.0
    nan = np.full(S.m, np.nan)
    P = np.array([memo[key][0] if want[u] else nan for u, key in enumerate(S.keys)]).reshape(len(S.keys), S.m)
    X = P * S.n[:, None]
    cov = (np.array([memo[key][1] if want[u] else np.full((S.m, S.m), np.nan) for u, key in enumerate(S.keys)])
           .reshape(len(S.keys), S.m, S.m) if covariance else None)
    return X, cov


WALD = ("observed information: Wald interval of the full-report maximum-likelihood estimate (the inverse observed "
        "information on the simplex, n_P² sᵀCov s for a query selecting s), cut to [0, n_P]")


class SubsetFullMLE(_SubsetEstimator):
    """Maximum likelihood on the full reports (the iterative Bayesian update on each record's report,
    not on the support counts), SQUAREM-accelerated; Wald intervals from the observed information."""

    name = "full-mle"

    def fit(self, S: SubsetSetup) -> np.ndarray:
        return full_report_fit(S)[0]

    def estimate(self, release, workload, level: float = 0.95) -> Estimates:
        S = SubsetSetup(release, workload)
        X, cov = full_report_fit(S, covariance=True)
        assert cov is not None
        est = S.per_query(X)
        nq = S.n[S.inv]
        sel = S.sel.astype(np.float64)
        var = np.einsum("qi,qij,qj->q", sel, cov[S.inv], sel) * nq**2 if len(sel) else np.zeros(0)
        se = np.sqrt(np.maximum(var, 0.0))
        z = float(stats.norm.ppf(0.5 + level / 2))
        lo = np.clip(est - z * se, 0.0, nq)
        hi = np.clip(est + z * se, 0.0, nq)
        return Estimates(est, se, np.minimum(lo, est), np.maximum(hi, est), WALD, level)


__all__ = ["FullReports", "SubsetEB", "SubsetFullMLE", "SubsetInversion", "SubsetMLE", "SubsetNormSub", "SubsetSetup", "constrained_covariance", "eb_counts", "full_report_fit", "norm_sub",
           "predicate_rows", "uniform_channel_mle"]
