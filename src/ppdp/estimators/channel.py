"""The uniform channel of the randomized family (uniform perturbation, SDR, global randomization A):
the transition model every estimator of those releases shares (:class:`UniformSetup`: the published
counts per distinct QI predicate and group, T = q·J + p·I per group), its exact maximum-likelihood
counts and the iterative Bayesian update, the parent distribution of each group, Norm-Sub, and the
base class of the randomized family's estimators (:class:`RandomizedEstimator`)."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..errors import ParameterError
from ..queries import split_masks
from .base import Estimator

DEFAULT_TOL = 0.01
MAX_ITER = 10_000
#: EM's default tolerance on uniform / SDR / A releases, chosen on EDU and ADULT (docs/sdr.md):
#: 0.01 stops far from the fixed point on a near-uniform channel (uniform perturbation, A)
EM_TOL = 1e-3


#: Norm-Sub on packed rows (:class:`Packed`: each row's domain entries only) — the numbers of the
#: whole-row computation exactly (False: that one, the reference of the tests)
PACKED_EB = True


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
        #: (U·J, m): the parent distribution :func:`~ppdp.estimators.empirical_bayes.eb_fit` chose for
        #: every (predicate, group) row, once it has run
        self.eb_prior: np.ndarray | None = None

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

    @property
    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(Y as (U·J, m) rows, the group of each row)."""
        U, J, m = self.Y.shape
        return self.Y.reshape(U * J, m), np.tile(np.arange(J), U)

    def per_query(self, X: np.ndarray) -> np.ndarray:
        """(n_q, J): Σ over each query's selected values of X (U, J, m) of its predicate; where a
        query selects every value of a group's domain, that group's known number n_P,j (the
        quasi-identifiers are published as they are: such a count is exact, whatever estimator
        made X)."""
        out = np.einsum("qjm,qm->qj", X[self.inv], self.sel.astype(np.float64), optimize=True)
        full = self.k_per_query() >= self.member.sum(axis=1)[None, :]
        return np.where(full, self.n_per_query(), out) if full.any() else out

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


class Packed:
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

    Each row's domain values are gathered first (:class:`Packed`: rows × the largest domain,
    not × m); the sort, the running sums and δ only read them, so the result is
    :func:`norm_sub_full`'s exactly."""
    X = np.asarray(X, dtype=np.float64)
    member = np.asarray(member, dtype=bool)
    if not PACKED_EB or (X.shape[1] and np.count_nonzero(member, axis=1).max(initial=0) * 2 > X.shape[1]):
        return norm_sub_full(X, member, total)  # most of each row is its domain: nothing to gain
    pk = Packed(member)
    return pk.unpack(norm_sub_packed(pk.pack(X, -np.inf), pk.valid, np.asarray(total, dtype=np.float64)))


def norm_sub_packed(v: np.ndarray, valid: np.ndarray, total: np.ndarray) -> np.ndarray:
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
    return norm_sub_packed(np.where(member, X, -np.inf), member, np.asarray(total, dtype=np.float64))



class RandomizedEstimator(Estimator):
    """Base of the randomized family's estimators: each reads the release's public transition
    model and answers with ``answer_with_iterations`` (estimates and the iterations each query
    took, 0 for closed forms)."""

    family = "randomized"
    method = ""

    def check(self, release) -> None:
        """Refuse a release of a mechanism this estimator does not apply to."""
        if not self.supports(release):
            raise ParameterError(f"estimator {self.name!r} does not apply to a {release.manifest.get('mechanism')} release",
                                 param="estimator")

    def answer_with_iterations(self, release, workload) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def answer(self, release, workload) -> np.ndarray:
        return self.answer_with_iterations(release, workload)[0]
