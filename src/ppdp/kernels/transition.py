"""The randomized family's one transition model, and the formulas behind it.

Uniform perturbation, SDR, A' (Fu et al. 2014) and global randomization A all publish, for
each record, a value drawn from a known distribution given the record's true value and its
*group*: a :class:`TransitionModel` is a tuple of :class:`TransitionGroup` — a domain of SA
codes and a transition matrix ``T[x, y] = P(published y | true x)`` on it.

- uniform perturbation / A (Agrawal et al. 2005; Chaytor & Wang 2010): one group, the whole
  SA domain of m values, ``T = q·J + p·I`` with retention γ/(m−1+γ), q = 1/(m−1+γ),
  p = (γ−1)/(m−1+γ);
- SDR: one group per sub-table T_j, on its own domain D_j with (m_j, γ_j);
- A': the decoy groups are not published, so the receiver's model is one group on the whole
  domain whose matrix comes from the group schedule re-run on the (published) SA counts:
  T[x, y] = g[x, y]/(ℓ' f_x), g = number of decoy groups holding both x and y.

The estimators invert these matrices, ``verify`` re-derives their parameters and the audit
computes the adversary's Bayes posterior from them (:meth:`TransitionGroup.posterior`).
This module also holds the per-row kernels that apply a plan (perturbation inside a domain,
assignment of rows to decoy groups, uniform draw inside a group).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import sparse

from ..errors import InfeasibleError, PpdpError
from ..table import code_dtype

#: relative tolerance of every re-derivation of a γ, p, q or retention
TOL = 1e-9
#: rows (or schedule slots) per block of the decoy schedule and the diverted apply
SLOT_BLOCK = 1 << 20


# --------------------------------------------------------------------------- (ρ1, ρ2) formulas
def gamma_for(rho1, rho2):
    """Amplification γ = ρ2(1−ρ1)/(ρ1(1−ρ2)) that caps the posterior of a prior-ρ1 value at ρ2."""
    rho1 = np.asarray(rho1, dtype=float)
    return rho2 * (1.0 - rho1) / (rho1 * (1.0 - rho2))


def perturbation_params(m, gamma):
    """(retention, p, q) for domain size m and amplification γ: retention = γ/(m−1+γ),
    q = 1/(m−1+γ), p = retention − q (the coefficient of the reconstruction)."""
    s = np.asarray(m, dtype=float) - 1.0 + np.asarray(gamma, dtype=float)
    return np.asarray(gamma) / s, (np.asarray(gamma) - 1.0) / s, 1.0 / s


def gamma_from_retention(m, retention):
    """Inverse of the retention formula: γ = retention·(m−1)/(1−retention)."""
    return retention * (m - 1.0) / (1.0 - retention)


def posterior_retained(prior, gamma):
    """Exact Bayes posterior P(X = x | Y = x) of a value with the given prior (the largest
    posterior the release allows about x: for Y = y ≠ x it is at most the prior)."""
    prior = np.asarray(prior, dtype=float)
    return prior * gamma / (1.0 + (gamma - 1.0) * prior)


def sa_prime_mask(counts: np.ndarray, rho1: float) -> np.ndarray:
    """SA': the observed values whose relative frequency in the table is ≤ ρ1."""
    counts = np.asarray(counts)
    return (counts > 0) & (counts <= rho1 * counts.sum() * (1 + 1e-12))


def close(a: float, b: float, tol: float = TOL) -> bool:
    """|a − b| ≤ tol·max(1, |b|) — the comparison every re-derivation uses."""
    return abs(float(a) - float(b)) <= tol * max(1.0, abs(float(b)))


# --------------------------------------------------------------------------- A' decoy groups
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


def _decoy_runs(counts: np.ndarray, l_prime: int):
    """The decoy schedule's runs (see :func:`decoy_schedule`), each as ``(t, J, F, block, p, a)``:
    groups t … t+J−1 each hold every value of F and a window of a consecutive block values
    (cyclically, in code order) — group t+j the block positions (p + a·j + i) mod |block|,
    i < a. Works on the counts alone (O(#values) runs, no per-slot work)."""
    r = np.asarray(counts, dtype=np.int64).copy()
    n = int(r.sum())
    if n % l_prime:
        raise PpdpError(f"the number of tuples ({n}) is not a multiple of ℓ' = {l_prime}")
    G = n // l_prime
    if G and r.max() > G:
        raise InfeasibleError(f"not eligible: a value occurs {int(r.max())} times > N/ℓ' = {G}")
    codes = np.arange(len(r))
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
        yield t, J, F, block, p, a
        r[F] -= J
        # block position i is hit by the walk u ∈ [0, a·J) with (p + u) ≡ i (mod b)
        d = (np.arange(b) - p) % b
        r[block] -= np.maximum(a * J - d + b - 1, 0) // b
        t += J
    assert not r.any(), "decoy schedule did not use every tuple"


def decoy_schedule(counts: np.ndarray, l_prime: int, narrow: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Anatomy's group creation (Xiao & Tao 2006) on the SA counts alone.

    Returns ``(values, groups)``: one entry per tuple slot — the SA code and the index of the
    group (0 … N/ℓ'−1, in creation order) it goes to. Group g takes one tuple from each of
    the ℓ' values with the most remaining tuples (ties: smaller code first).

    The greedy is evaluated in runs (:func:`_decoy_runs`) instead of one group at a time. At
    any moment the values split into F (strictly above the ℓ'-th largest remaining count L:
    each is taken by every group), a block at level L (possibly with the level L−1 values when
    those are exactly the block's smaller codes) and values below. Inside the block the greedy
    takes the a = ℓ' − |F| largest by (count, −code) — a cyclic walk over the block in code
    order, a units per group. That walk stays exact while the F values remain strictly above
    it and the values below stay strictly below the lowest level it touches; both conditions
    are monotone in the number of groups, so the longest valid run is found by bisection and
    written out with array arithmetic. A run ends only when a value enters the block or a wrap
    breaks the code-order pattern, so there are O(#values) runs (a few hundred on OCC), not
    N/ℓ' iterations.

    The slots are written into preallocated arrays a block at a time (no per-run lists or
    N-length temporaries): int64 by default, or with ``narrow=True`` the SA codes in
    :func:`code_dtype` of the ``len(counts)`` values and the groups int32 (below 2^31 groups)
    — 6 bytes a slot on OCC instead of 16. Either way, every value's slots come out in
    increasing group order (the runs advance the groups; each run's groups increase).
    """
    r = np.asarray(counts, dtype=np.int64)
    n = int(r.sum())
    G = n // l_prime
    m = len(r)
    vdt, gdt = (code_dtype(m), np.int32 if G < 1 << 31 else np.int64) if narrow else (np.int64, np.int64)
    values, groups = np.empty(n, dtype=vdt), np.empty(n, dtype=gdt)
    k = 0  # slots written
    for t, J, F, block, p, a in _decoy_runs(r, l_prime):
        b = len(block)
        for f in F:  # each F value once in every group t … t+J−1
            values[k:k + J] = f
            groups[k:k + J] = np.arange(t, t + J, dtype=gdt)
            k += J
        for u0 in range(0, a * J, SLOT_BLOCK):  # the cyclic walk, a block of slots at a time
            u = np.arange(u0, min(a * J, u0 + SLOT_BLOCK), dtype=np.int64)
            values[k:k + len(u)] = block[(p + u) % b]
            groups[k:k + len(u)] = t + u // a
            k += len(u)
    assert k == n, "decoy schedule did not use every tuple"
    return values, groups


def decoy_group_types(counts: np.ndarray, l_prime: int) -> tuple[np.ndarray, np.ndarray]:
    """The decoy groups of the schedule on ``counts`` as types: ``(sets, weights)`` — the
    (K, ℓ') SA codes of each group type (increasing in each row) and the number of groups of
    that type (summing to N/ℓ'), from the runs alone (no per-slot work: O(#values²) per run).

    In a run of J groups, group j's block window starts at (p + a·j) mod b, which has period
    P = b / gcd(a, b): min(P, J) types, the first J mod P of them once more than the others.
    A set may appear as several types (from different runs)."""
    sets, weights = [], []
    for _t, J, F, block, p, a in _decoy_runs(counts, l_prime):
        b = len(block)
        K = min(b // int(np.gcd(a, b)), J)
        starts = (p + a * np.arange(K, dtype=np.int64)) % b
        win = block[(starts[:, None] + np.arange(a)) % b]
        rows = np.concatenate([np.broadcast_to(F, (K, len(F))), win], axis=1)
        sets.append(np.sort(rows, axis=1))
        w = np.full(K, J // K, dtype=np.int64)
        w[:J % K] += 1
        weights.append(w)
    if not sets:
        return np.zeros((0, l_prime), dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(sets).astype(np.int64), np.concatenate(weights)


def types_cooccurrence(sets: np.ndarray, weights: np.ndarray, m: int) -> np.ndarray:
    """C[x, s] (int64): the number of groups holding both x and s, for group types ``sets``
    (K × ℓ', distinct values per row) with multiplicities ``weights``."""
    K, lp = sets.shape
    B = sparse.csr_matrix((np.ones(K * lp, dtype=np.int64), sets.ravel(), np.arange(0, K * lp + 1, lp)), shape=(K, m))
    W = sparse.csr_matrix((np.repeat(np.asarray(weights, dtype=np.int64), lp), sets.ravel(),
                           np.arange(0, K * lp + 1, lp)), shape=(K, m))
    return np.asarray((B.T @ W).todense(), dtype=np.int64)


def decoy_cooccurrence(counts: np.ndarray, l_prime: int) -> np.ndarray:
    """C[x, s]: number of decoy groups holding both x and s (C[x, x] = f_x) for the group
    schedule on SA counts ``counts``."""
    c = np.asarray(counts, dtype=np.int64)
    return np.asfortranarray(types_cooccurrence(*decoy_group_types(c, int(l_prime)), len(c)))


def receiver_counts(published_counts: np.ndarray, l_prime: int) -> np.ndarray:
    """The SA counts a receiver plugs into the group schedule: the published counts f'_s (the
    MLE, Theorem 3), with any count above N/ℓ' (possible only through the randomization)
    clipped to N/ℓ' and the excess spread over the other published values in proportion to
    their room below N/ℓ' (largest remainder; over every value when the published ones have too
    little room, as on tiny tables), so that the schedule is feasible."""
    f = np.asarray(published_counts, dtype=np.int64).copy()
    G = int(f.sum()) // l_prime
    excess = int(np.clip(f - G, 0, None).sum())
    if not excess:
        return f
    f = np.minimum(f, G)
    room = np.where((f > 0) & (f < G), G - f, 0).astype(np.float64)
    if room.sum() < excess:  # too few published values below N/ℓ' (tiny tables): any value may take the rest
        room = (G - f).astype(np.float64)
    share = excess * room / room.sum()
    add = np.floor(share).astype(np.int64)
    rest = excess - int(add.sum())
    add[np.argsort(-(share - add), kind="stable")[:rest]] += 1
    return f + add


def diverted_matrix(counts: np.ndarray, l_prime: int) -> np.ndarray:
    """T[x, y] = P(published y | true x) for the decoy groups that the group schedule builds
    from the SA ``counts`` (the groups depend on the counts only).

    With g[x, y] = number of groups holding both x and y (g[x, x] = f_x), a tuple of value x
    lies in one of x's f_x groups uniformly at random (its id is random) and publishes each
    of the group's ℓ' values with probability 1/ℓ', so T[x, y] = g[x, y]/(ℓ' f_x); rows sum to
    1 and f·T = f (so the inversion reproduces Theorem 3). A value with no tuple gets the
    identity row."""
    counts = np.asarray(counts, dtype=np.int64)
    m = len(counts)
    # Fortran order, as the sparse product gave it: the later matrix products sum in the same order
    C = types_cooccurrence(*decoy_group_types(counts, l_prime), m).astype(np.float64, order="F")
    f = np.diag(C).copy()
    T = C / (l_prime * np.maximum(f, 1.0))[:, None]
    empty = np.flatnonzero(f == 0)
    T[empty, empty] = 1.0
    return T


# --------------------------------------------------------------------------- the model
def _readonly(a, dtype) -> np.ndarray:
    a = np.array(a, dtype=dtype)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class TransitionGroup:
    """Records of one group publish a value of ``domain`` (global SA codes): the record with
    true value ``domain[i]`` publishes ``domain[k]`` with probability ``matrix[i, k]``.

    ``p``/``q`` are set for a uniform matrix (``q·J + p·I``: keep with p + q, each value with
    q); ``n`` is the group's number of published rows when public."""

    domain: np.ndarray
    matrix: np.ndarray
    p: float | None = None
    q: float | None = None
    n: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "domain", _readonly(self.domain, np.int64))
        object.__setattr__(self, "matrix", _readonly(self.matrix, np.float64))
        if self.matrix.shape != (len(self.domain), len(self.domain)):
            raise PpdpError(f"a transition matrix on {len(self.domain)} values must be square of that size, "
                            f"got {self.matrix.shape}")

    @classmethod
    def uniform(cls, domain: Sequence[int] | np.ndarray, gamma: float, n: int | None = None) -> "TransitionGroup":
        """Uniform perturbation with amplification γ on ``domain`` (m = its size)."""
        m = len(domain)
        retention, p, q = (float(v) for v in perturbation_params(m, gamma))
        matrix = np.full((m, m), q)
        np.fill_diagonal(matrix, retention)
        return cls(np.asarray(domain), matrix, p=p, q=q, n=n)

    @property
    def m(self) -> int:
        return len(self.domain)

    @property
    def is_uniform(self) -> bool:
        return self.p is not None and self.q is not None

    @property
    def retention(self) -> np.ndarray:
        """P(published = true) per domain value (the matrix diagonal)."""
        return np.diag(self.matrix).copy()

    def invert(self, published_counts: np.ndarray) -> np.ndarray:
        """Unbiased true counts from published counts on the domain: x̂ = y T⁻¹ — for a
        uniform matrix x̂ = (y − n·q)/p with n = Σ y (can be negative)."""
        y = np.asarray(published_counts, dtype=float)
        if self.is_uniform:
            return (y - y.sum() * self.q) / self.p
        return y @ np.linalg.pinv(self.matrix)

    def posterior(self, prior: np.ndarray) -> np.ndarray:
        """The adversary's Bayes posterior ``post[y, x] = P(true x | published y)`` (local
        coordinates) for the prior ``prior`` over the group's domain."""
        prior = np.asarray(prior, dtype=float)
        joint = self.matrix.T * prior[None, :]  # joint[y, x] = P(y | x)·π_x
        tot = joint.sum(axis=1, keepdims=True)
        return np.divide(joint, tot, out=np.zeros_like(joint), where=tot > 0)


@dataclass(frozen=True, eq=False)
class TransitionModel:
    """The public randomization model of one sensitive attribute of a release.

    ``groups``: the transition groups; ``group_column``: the published column telling each
    row's group (``"subtable"`` for SDR), or None when there is one group."""

    attribute: str
    n_values: int
    groups: tuple[TransitionGroup, ...]
    group_column: str | None = None
    kind: str = ""

    def __post_init__(self):
        object.__setattr__(self, "groups", tuple(self.groups))
        if len(self.groups) > 1 and self.group_column is None:
            raise PpdpError("a transition model with several groups needs the column that names each row's group")
        for g in self.groups:
            if len(g.domain) and (g.domain.min() < 0 or g.domain.max() >= self.n_values):
                raise PpdpError(f"a transition group's domain lies outside the {self.n_values} values of {self.attribute!r}")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def uniform(cls, attribute: str, m: int, gamma: float, kind: str = "uniform") -> "TransitionModel":
        """Uniform perturbation (or global randomization) of the whole domain of m values."""
        return cls(attribute, m, (TransitionGroup.uniform(np.arange(m), gamma),), None, kind)

    @classmethod
    def subtables(cls, attribute: str, n_values: int, domains: Sequence[Sequence[int]], gammas: Sequence[float],
                  ns: Sequence[int | None] | None = None) -> "TransitionModel":
        """SDR: sub-table j perturbs uniformly on its own domain with γ_j."""
        ns = [None] * len(domains) if ns is None else ns
        return cls(attribute, n_values, tuple(TransitionGroup.uniform(d, g, n) for d, g, n in zip(domains, gammas, ns)),
                   "subtable", "sdr")

    @classmethod
    def diverted(cls, attribute: str, counts: np.ndarray, l_prime: int) -> "TransitionModel":
        """A': the receiver-side model — one group on the whole domain, T from the group schedule
        on ``counts`` (the receiver's counts, :func:`receiver_counts`, or the true ones)."""
        counts = np.asarray(counts, dtype=np.int64)
        return cls(attribute, len(counts), (TransitionGroup(np.arange(len(counts)), diverted_matrix(counts, l_prime)),),
                   None, "diverted")

    # ------------------------------------------------------------------ views
    @property
    def single(self) -> TransitionGroup:
        if len(self.groups) != 1:
            raise PpdpError(f"the {self.kind or 'transition'} model of {self.attribute!r} has {len(self.groups)} groups")
        return self.groups[0]

    def membership(self) -> np.ndarray:
        """(J, n_values) boolean: value x lies in group j's domain."""
        out = np.zeros((len(self.groups), self.n_values), dtype=bool)
        for j, g in enumerate(self.groups):
            out[j, g.domain] = True
        return out

    def uniform_pq(self) -> tuple[np.ndarray, np.ndarray]:
        """(p_j, q_j) per group; every group must be uniform."""
        if not all(g.is_uniform for g in self.groups):
            raise PpdpError(f"the {self.kind} model of {self.attribute!r} is not uniform perturbation")
        return np.array([g.p for g in self.groups], dtype=float), np.array([g.q for g in self.groups], dtype=float)


# --------------------------------------------------------------------------- verify: fit to the source
#: false-alarm rate of verify's goodness-of-fit test of a randomized release against its source
FIT_ALPHA = 1e-6


def row_groups(src_cols: Sequence[np.ndarray], pub_cols: Sequence[np.ndarray], dims: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Common ids of the NSA combinations of the source rows and of the published rows."""
    ns = len(src_cols[0]) if src_cols else 0
    np_ = len(pub_cols[0]) if pub_cols else 0
    if not dims:
        return np.zeros(ns, dtype=np.int64), np.zeros(np_, dtype=np.int64)
    if float(np.prod(np.asarray(dims, dtype=float))) < 2.0**62:
        ks = np.ravel_multi_index([np.asarray(c, dtype=np.int64) for c in src_cols], dims) if ns else np.zeros(0, np.int64)
        kp = np.ravel_multi_index([np.asarray(c, dtype=np.int64) for c in pub_cols], dims) if np_ else np.zeros(0, np.int64)
        _, inv = np.unique(np.concatenate([ks, kp]), return_inverse=True)
    else:
        rows = np.concatenate([np.stack(src_cols, axis=1), np.stack(pub_cols, axis=1)]).astype(np.int64)
        _, inv = np.unique(rows, axis=0, return_inverse=True)
    inv = np.asarray(inv, dtype=np.int64).ravel()
    return inv[:ns], inv[ns:]


#: cells counted per pass of :func:`pair_runs` (a 256 MiB count array) and the most passes it makes
PAIR_RANGE = 1 << 25
PAIR_PASSES = 16


def pair_runs(g: np.ndarray, v: np.ndarray, m: int, n_groups: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (group, value) pairs of rows — keys g·m + v, sorted — and their row counts.
    Keys in the narrowest integer type that holds the (group × value) cube (int32 below 2^31
    cells); counted over the cube when it is small (≤ max(2^24, rows/2) cells), or over ranges
    of :data:`PAIR_RANGE` cells, one pass over the keys per range, when it takes at most
    :data:`PAIR_PASSES` ranges (O(rows · passes), bounded memory), else one sort of the keys in
    place (no argsort, no inverse, no int64 copy of the rows)."""
    g, v = np.asarray(g), np.asarray(v)
    G = int(g.max(initial=-1)) + 1 if n_groups is None else int(n_groups)
    cells = G * int(m)
    kd = np.dtype(np.int32 if cells < 2**31 else np.int64)
    k: np.ndarray = g.astype(kd)
    k *= int(m)
    k += v
    if cells <= max(1 << 24, len(k) // 2):
        cnt = np.bincount(k, minlength=cells)
        keys = np.flatnonzero(cnt)
        return keys.astype(kd), cnt[keys]
    if cells <= PAIR_PASSES * PAIR_RANGE:
        keys_l, cnt_l = [], []
        for lo in range(0, cells, PAIR_RANGE):
            sel = k[(k >= lo) & (k < lo + PAIR_RANGE)]
            sel -= lo
            cnt = np.bincount(sel, minlength=min(PAIR_RANGE, cells - lo))
            del sel
            nz = np.flatnonzero(cnt)
            keys_l.append((nz + lo).astype(kd))
            cnt_l.append(cnt[nz])
        return np.concatenate(keys_l), np.concatenate(cnt_l)
    k.sort()
    return sorted_runs(k)


def sorted_runs(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct values, how many times each occurs) of a sorted array: one boolean mask of
    run starts, no other array of its length."""
    n = len(k)
    if not n:
        return k, np.zeros(0, np.int64)
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(k[1:], k[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    del new
    return k[starts], np.diff(starts, append=n)


def cell_pair_runs(cols: Sequence[np.ndarray], dims: Sequence[int], v: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct (NSA combination, value) pairs of rows and their row counts, as
    :func:`pair_runs` gives them for group ids that number the combinations in order: keys
    c·m + v, sorted, where c is the row's mixed-radix cell of the code columns ``cols`` (domain
    sizes ``dims``, the first column most significant). No group ids and no relabelling: one key
    per row, int32 when the (cell × value) cube has < 2^31 entries (int64 below 2^63), built in
    place from the narrow codes, sorted in place and run-length encoded — 4 bytes a row, no count
    array over the cube. None when the cube has ≥ 2^63 entries (:func:`row_groups` then)."""
    size = float(np.prod(np.asarray([*dims, m], dtype=float)))
    if size >= 2.0**63:
        return None
    kd = np.dtype(np.int32 if size < 2.0**31 else np.int64)
    k: np.ndarray = np.asarray(cols[0] if len(cols) else v).astype(kd)
    for col, d in zip(cols[1:], dims[1:]):
        k *= d
        k += np.asarray(col)
    if len(cols):
        k *= int(m)
        k += np.asarray(v)
    k.sort()
    return sorted_runs(k)


def randomization_fit(gs: np.ndarray, xs: np.ndarray, gp: np.ndarray, yp: np.ndarray, m: int, kind: str, *,
                      retention: float | None = None, q: float | None = None, subtables=None,
                      l_prime: int | None = None, decoy_sets=None, alpha: float = FIT_ALPHA) -> dict:
    """Goodness of fit of published SA codes ``yp`` against the declared randomization, given the
    source's true codes ``xs`` (rows grouped by their NSA combination: ``gs`` source, ``gp``
    published; the release is shuffled, so rows are matched only through these groups).

    Statistic: W = Σ_published a_g[y], a_g[v] = (source rows of group g with value v)/|g|; each
    term lies in [0, 1]. Given the mechanism's hidden state (which rows were dropped, A''s decoy
    groups, SDR's sub-table of each row) the terms are independent, and E[W | state] lies in
    [lower, upper], computed per source row from the declared model (``kind``):

    - "uniform": keep with ``retention``, each other value with ``q``: E = r·a[x] + q(1 − a[x]);
    - "subtables": [(domain codes, retention, q)] per SDR sub-table; bounds over the sub-tables
      whose domain holds x;
    - "decoy": A' with p = q = 1/ℓ': E = Σ_{v∈V} a_g[v]/ℓ' for the row's decoy group V ∋ x;
      bounds over the distinct value sets ``decoy_sets`` of the groups (the schedule of the
      source's counts, known when no row was dropped), else (a[x] + the ℓ'−1 largest other
      a_g)/ℓ' and a[x]/ℓ'.

    Hoeffding: P(W ≥ upper + t) and P(W ≤ lower − t) are each ≤ exp(−2t²/n) with n published
    rows; t = √(n·ln(2/α)/2) makes the false-alarm rate ≤ α (default 1e-6). A release whose SA
    column is the true SA has W = Σ a_g[x] (= n when the NSA combinations are unique), far
    above ``upper`` once n is a few dozen rows and the NSA columns tell rows apart."""
    gs, xs, gp, yp = (np.asarray(a) for a in (gs, xs, gp, yp))  # no int64 copies of narrow codes
    G = int(max(gs.max(initial=-1), gp.max(initial=-1))) + 1
    if len(yp) == 0 or len(xs) == 0:
        return {"W": 0.0, "lower": 0.0, "upper": float(len(yp)), "slack": 0.0, "ok": True, "n": len(yp),
                "group_deficit": len(xs), "group_excess": len(yp)}
    # the (group, value) pairs of each side with their row counts, sorted by key: a count over
    # the cube when it is small, else a sort of narrow keys (no argsort, no inverse)
    pairs, pair_n = pair_runs(gs, xs, m, G)
    ppairs, ppair_n = pair_runs(gp, yp, m, G)
    return pairs_fit(pairs, pair_n, ppairs, ppair_n, m, kind, retention=retention, q=q, subtables=subtables,
                     l_prime=l_prime, decoy_sets=decoy_sets, alpha=alpha)


def pairs_fit(pairs: np.ndarray, pair_n: np.ndarray, ppairs: np.ndarray, ppair_n: np.ndarray, m: int, kind: str, *,
              retention: float | None = None, q: float | None = None, subtables=None,
              l_prime: int | None = None, decoy_sets=None, alpha: float = FIT_ALPHA) -> dict:
    """:func:`randomization_fit` from the (group, value) pairs of each side: keys g·m + v, distinct
    and increasing, with their row counts (> 0) — the source's ``pairs``/``pair_n`` and the
    published ``ppairs``/``ppair_n`` (:func:`pair_runs` or :func:`cell_pair_runs`). Any group
    numbering shared by both sides gives the same fit: only equality of groups and the order of
    the pairs inside a group are used. O(pairs), no pass over the rows."""
    pairs, pair_n, ppairs, ppair_n = (np.asarray(a) for a in (pairs, pair_n, ppairs, ppair_n))
    n_pub, n_src = int(ppair_n.sum()), int(pair_n.sum())
    if n_pub == 0 or n_src == 0:
        return {"W": 0.0, "lower": 0.0, "upper": float(n_pub), "slack": 0.0, "ok": True, "n": n_pub,
                "group_deficit": n_src, "group_excess": n_pub}
    pg, px = pairs // m, pairs % m
    # the source groups (sorted), their sizes and each pair's group index: O(pairs), no row pass
    gstart = np.flatnonzero(np.concatenate(([True], pg[1:] != pg[:-1])))
    gid = pg[gstart]
    n_grp = np.add.reduceat(pair_n, gstart) if len(gstart) else np.zeros(0, np.int64)
    gi = np.repeat(np.arange(len(gid)), np.diff(np.concatenate((gstart, [len(pg)]))))
    a = pair_n / n_grp[gi]
    # the published pairs the source holds: one stable merge of the two sorted key runs, where a
    # source key is followed by the equal published key (terms in key order, as ppairs)
    both = np.concatenate((pairs, ppairs))
    o = np.argsort(both, kind="stable")
    both = both[o]
    hit = np.flatnonzero(both[1:] == both[:-1])
    W = float(np.dot(a[o[hit]], ppair_n[o[hit + 1] - len(pairs)]))
    del both, o, hit
    n_gid = len(gid)
    if kind == "uniform":
        assert retention is not None and q is not None
        lo = up = retention * a + q * (1.0 - a)
    elif kind == "subtables":  # the pairs in value-major order: a sub-table reads its domain's slices only
        by_value = counting_order(px, m)
        vstart = np.concatenate(([0], np.cumsum(np.bincount(px, minlength=m)))).tolist()
        a_v, g_v = a[by_value], gi[by_value]
        up_v, lo_v = np.full(len(a), -np.inf), np.full(len(a), np.inf)
        for dom, r, qq in subtables:
            segs = [(vstart[x], vstart[x + 1]) for x in np.asarray(dom, dtype=np.int64).tolist()]
            if not segs:
                continue
            a_sel = np.concatenate([a_v[s:t] for s, t in segs])
            g_sel = np.concatenate([g_v[s:t] for s, t in segs])
            e = r * a_sel + qq * (np.bincount(g_sel, weights=a_sel, minlength=n_gid)[g_sel] - a_sel)
            k = 0
            for s, t in segs:
                np.maximum(up_v[s:t], e[k:k + t - s], out=up_v[s:t])
                np.minimum(lo_v[s:t], e[k:k + t - s], out=lo_v[s:t])
                k += t - s
        up, lo = np.empty(len(a)), np.empty(len(a))
        up[by_value] = np.where(np.isfinite(up_v), up_v, 1.0)
        lo[by_value] = np.where(np.isfinite(lo_v), lo_v, 0.0)
        del a_v, g_v, up_v, lo_v, by_value
    elif kind == "decoy" and decoy_sets is not None:  # the groups' value sets are known (no row dropped)
        A = sparse.csr_matrix((a, (gi, px)), shape=(n_gid, m))
        up, lo = np.full(len(a), -np.inf), np.full(len(a), np.inf)
        for dom in decoy_sets:
            member = np.zeros(m)
            member[np.asarray(dom, dtype=np.int64)] = 1.0
            e = np.asarray(A @ member).ravel()[gi] / len(dom)
            inside = member[px] > 0
            up = np.where(inside, np.maximum(up, e), up)
            lo = np.where(inside, np.minimum(lo, e), lo)
        up = np.where(np.isfinite(up), up, 1.0)
        lo = np.where(np.isfinite(lo), lo, 0.0)
    elif kind == "decoy":
        assert l_prime is not None
        lp = int(l_prime)
        # each pair's rank in its group by decreasing share (ties: value order) — by row count, as
        # the shares of a group have one denominator: one argsort of unique int64 keys
        # (group, −count, value), the order of a lexsort by (group, −share)
        top_n = int(pair_n.max())
        if float(n_gid) * (top_n + 1) * m < 2.0**63:
            key = gi * (top_n + 1)
            key += top_n - pair_n
            key *= m
            key += px
            order = np.argsort(key)
            del key
        else:  # pragma: no cover - beyond 2^63 (group, count, value) keys
            order = np.lexsort((-a, gi))
        rank = np.empty(len(a), dtype=np.int64)
        rank[order] = np.arange(len(a)) - gstart[gi[order]]  # the groups keep their places
        top = np.bincount(gi, weights=a * (rank < lp), minlength=n_gid)
        top1 = np.bincount(gi, weights=a * (rank < lp - 1), minlength=n_gid)
        up = (a + np.where(rank < lp, top[gi] - a, top1[gi])) / lp
        lo = a / lp
    else:
        raise PpdpError(f"unknown randomization kind {kind!r}")
    # published rows per source group (0 where none); published rows of groups the source lacks
    ppg = ppairs // m
    pstart = np.flatnonzero(np.concatenate(([True], ppg[1:] != ppg[:-1]))) if len(ppg) else np.zeros(0, np.int64)
    pgid, np_grp = ppg[pstart], np.add.reduceat(ppair_n, pstart) if len(pstart) else np.zeros(0, np.int64)
    j = np.minimum(np.searchsorted(gid, pgid), max(n_gid - 1, 0))
    inside = (gid[j] == pgid) if n_gid else np.zeros(len(pgid), bool)
    np_g = np.zeros(n_gid, dtype=np.int64)
    np_g[j[inside]] = np_grp[inside]
    excess = int(np_grp[~inside].sum()) + int(np.maximum(np_g - n_grp, 0).sum())
    deficit = int(np.maximum(n_grp - np_g, 0).sum())
    if excess == 0 and deficit == 0:  # Σ over source rows = Σ over pairs weighted by their row counts
        upper, lower = float(np.dot(up, pair_n)), float(np.dot(lo, pair_n))
    else:  # fewer published rows in a group (A' drops N mod ℓ' rows): the extreme source rows
        short = np.flatnonzero(np_g[gi] < n_grp[gi])  # pairs of the groups that lost rows (few)
        whole = np.ones(len(gi), dtype=bool)
        whole[short] = False

        def extreme(vals, sign):  # per group, the sum of its np_g largest (sign −1) / smallest values
            total = float(np.dot(vals[whole], pair_n[whole]))  # groups with every row published: all of them
            o = short[np.lexsort((sign * vals[short], gi[short]))]
            cnt, g_o = pair_n[o], gi[o]
            before = np.cumsum(cnt) - cnt  # rows before this pair among the short groups' pairs
            start = np.flatnonzero(np.concatenate(([True], g_o[1:] != g_o[:-1]))) if len(o) else np.zeros(0, np.int64)
            first = np.repeat(before[start], np.diff(np.concatenate((start, [len(o)]))))
            take = np.clip(np_g[g_o] - (before - first), 0, cnt)
            return total + float(np.dot(vals[o], take))
        upper = extreme(up, -1.0) + excess
        lower = extreme(lo, 1.0)
    t = float(np.sqrt(n_pub * np.log(2.0 / alpha) / 2.0))
    return {"W": W, "lower": lower, "upper": upper, "slack": t, "ok": bool(lower - t <= W <= upper + t), "n": n_pub,
            "group_deficit": deficit, "group_excess": excess}


def largest_posterior(group: "TransitionGroup", published: np.ndarray, prior: np.ndarray | None = None) -> float:
    """The largest Bayes posterior P(true x | published y) over the group's values that are
    published, for ``prior`` (default: the inversion of the published counts, clipped at 0)."""
    y = np.asarray(published, dtype=float)
    if prior is None:
        prior = np.clip(group.invert(y), 0.0, None)
    prior = np.asarray(prior, dtype=float)
    if prior.sum() <= 0 or y.sum() <= 0:
        return 0.0
    post = group.posterior(prior / prior.sum())
    return float(post[y > 0].max()) if (y > 0).any() else 0.0


# --------------------------------------------------------------------------- per-row kernels
def perturb_local(local: np.ndarray, m: np.ndarray, retention: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Vectorised uniform perturbation of local codes in [0, m) (m, retention per row): keep
    with probability ``retention``, otherwise a uniformly chosen *other* local code."""
    n = len(local)
    keep = rng.random(n) < retention
    r = np.minimum(np.floor(rng.random(n) * (m - 1)).astype(np.int64), m - 2)
    other = r + (r >= local)
    return np.where(keep, local, other).astype(np.int64)


def counting_order(keys: np.ndarray, n_keys: int, rows: np.ndarray | None = None) -> np.ndarray:
    """The rows stably ordered by their small non-negative integer ``keys`` (< ``n_keys``): a
    counting sort a block at a time, into int32 positions below 2^31 rows (no int64 argsort of
    N). ``rows`` (a permutation of 0 … N−1) gives the order in which rows are taken — ties
    keep it; None: row order."""
    n = len(keys)
    idx = np.int32 if n < 1 << 31 else np.int64
    kd = np.uint8 if n_keys <= 1 << 8 else np.uint16 if n_keys <= 1 << 16 else np.int64  # radix sorts below 2^16
    nxt = _key_counts(keys, n_keys)
    nxt = np.cumsum(nxt) - nxt  # first position of every key
    out = np.empty(n, dtype=idx)
    for a in range(0, n, SLOT_BLOCK):
        r = np.arange(a, min(n, a + SLOT_BLOCK), dtype=idx) if rows is None else rows[a:a + SLOT_BLOCK]
        k = np.asarray(keys[r] if rows is not None else keys[a:a + SLOT_BLOCK]).astype(kd, copy=False)
        o = np.argsort(k, kind="stable")
        ks = k[o]
        cb = np.bincount(ks, minlength=n_keys)
        first = np.cumsum(cb) - cb
        out[nxt[ks] + np.arange(len(ks)) - first[ks]] = r[o]
        nxt += cb
    return out


def random_grouped_order(keys: np.ndarray, n_keys: int, rng: np.random.Generator) -> np.ndarray:
    """A random order of the rows grouped by key: the rows of key 0 first, then key 1 …, each
    key's rows in uniformly random order — a stable counting sort by key
    (:func:`counting_order`, int32 below 2^31 rows) and then an independent shuffle of every
    key's run: O(N), 4 bytes a row, no float keys, no argsort of N."""
    out = counting_order(keys, n_keys)
    ends = np.cumsum(_key_counts(keys, n_keys)).tolist()
    start = 0
    for end in ends:
        if end - start > 1:
            rng.shuffle(out[start:end])
        start = end
    return out


def _key_counts(keys: np.ndarray, n_keys: int) -> np.ndarray:
    cnt = np.zeros(n_keys, dtype=np.int64)
    for a in range(0, len(keys), SLOT_BLOCK):
        cnt += np.bincount(keys[a:a + SLOT_BLOCK], minlength=n_keys)
    return cnt


def slots_by_value(values: np.ndarray, groups: np.ndarray, start: np.ndarray, m: int) -> np.ndarray:
    """The schedule's slot groups in (value, group) order: a stable counting sort of the slots by
    value, a block at a time (every value's slots are already in group order); ``start`` holds
    every value's first position (the cumulative counts)."""
    by_value = np.empty(len(groups), dtype=groups.dtype)
    nxt = np.array(start, dtype=np.int64)
    for a in range(0, len(values), SLOT_BLOCK):
        v = values[a:a + SLOT_BLOCK]
        o = np.argsort(v, kind="stable")
        vs = v[o]
        cb = np.bincount(vs, minlength=m)
        first = np.cumsum(cb) - cb  # first position of every value in the sorted block
        by_value[nxt[vs] + np.arange(len(vs)) - first[vs]] = groups[a:a + SLOT_BLOCK][o]
        nxt += cb
    return by_value


def values_of_groups(by_value: np.ndarray, counts: np.ndarray, l_prime: int, dtype) -> np.ndarray:
    """The (G, ℓ') distinct values of every group in increasing order, from the slot groups in
    (value, group) order (:func:`slots_by_value`): the values are taken in order, each adding
    itself to the next free column of its groups."""
    counts = np.asarray(counts, dtype=np.int64)
    G = int(counts.sum()) // l_prime
    out = np.empty((G, l_prime), dtype=dtype)
    fill = np.zeros(G, dtype=np.int32)
    a = 0
    for s, c in enumerate(counts.tolist()):
        if c:
            g = by_value[a:a + c]
            out[g, fill[g]] = s
            fill[g] += 1
            a += c
    return out


def decoy_group_values(counts: np.ndarray, l_prime: int) -> np.ndarray:
    """The (G, ℓ') SA codes (in increasing order) of the decoy groups that the group schedule
    builds from ``counts`` — narrow (about 10 bytes a tuple at the peak, no N-length int64)."""
    counts = np.asarray(counts, dtype=np.int64)
    m = len(counts)
    v, g = decoy_schedule(counts, l_prime, narrow=True)
    by_value = slots_by_value(v, g, np.cumsum(counts) - counts, m)
    del g
    return values_of_groups(by_value, counts, l_prime, v.dtype)


def group_cooccurrence(group_values: np.ndarray, m: int) -> np.ndarray:
    """C[x, s] (int64): the number of groups holding both x and s, from the (G, ℓ') values of
    the groups (each group's values distinct), a block of groups at a time."""
    G, lp = group_values.shape
    C = np.zeros((m, m), dtype=np.int64)
    step = max(1, SLOT_BLOCK // max(lp, 1))
    for a in range(0, G, step):
        gv = group_values[a:a + step]
        B = sparse.csr_matrix((np.ones(gv.size, dtype=np.int64), gv.ravel().astype(np.int64),
                               np.arange(0, gv.size + 1, lp)), shape=(len(gv), m))
        C += np.asarray((B.T @ B).todense(), dtype=np.int64)
    return C


def groups_of_rows(sa_codes: np.ndarray, ids: np.ndarray, values: np.ndarray, groups: np.ndarray,
                   l_prime: int, n_values: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows → decoy groups for a schedule ``(values, groups)`` of :func:`decoy_schedule`: value
    s's k-th tuple by id goes to the k-th group (in creation order) holding s — Anatomy's
    "smallest id first". ``ids`` is a permutation of 0 … N−1.

    Returns ``(group_of_row, group_values)`` with the (G, ℓ') SA codes of every group (in
    increasing code order), in the dtypes of ``groups`` and ``values``.

    No int64 sort key: every value's slots are already in group order, so a stable sort of the
    slots by value gives the (value, group) order — done as a counting sort a block at a time;
    the rows in id order (the inverse of ``ids``) stably sorted by their SA code give the
    (value, id) order — the same counting sort. Indices are int32 below 2^31 rows;
    the group values are filled value by value (each group's values in increasing order)."""
    sa = np.asarray(sa_codes)
    n, m = len(sa), n_values
    idx = np.int32 if n < 1 << 31 else np.int64
    counts = np.bincount(sa, minlength=m).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)  # first slot of every value
    by_value = slots_by_value(values, groups, start, m)
    # rows in (value, id) order: the rows taken in id order (the inverse of ids), stably
    # counting-sorted by SA code a block at a time; the r-th row of value s gets the group of
    # value s's r-th slot
    inv = np.empty(n, dtype=idx)
    for a in range(0, n, SLOT_BLOCK):
        inv[np.asarray(ids[a:a + SLOT_BLOCK])] = np.arange(a, min(n, a + SLOT_BLOCK), dtype=idx)
    group_of_row = np.empty(n, dtype=groups.dtype)
    nxt = start.copy()
    for a in range(0, n, SLOT_BLOCK):
        rows = inv[a:a + SLOT_BLOCK]
        k = sa[rows]
        o = np.argsort(k, kind="stable")
        ks = k[o]
        cb = np.bincount(ks, minlength=m)
        first = np.cumsum(cb) - cb
        group_of_row[rows[o]] = by_value[nxt[ks] + np.arange(len(ks)) - first[ks]]
        nxt += cb
    del inv
    group_values = values_of_groups(by_value, counts, l_prime, values.dtype)
    return group_of_row, group_values


def random_groups_of_rows(sa_codes: np.ndarray, values: np.ndarray, groups: np.ndarray, l_prime: int, n_values: int,
                          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rows → decoy groups for a schedule ``(values, groups)``, drawn: every value's rows get
    its slots' groups in uniformly random order (independent shuffles, one per value).

    The same distribution as :func:`groups_of_rows` with uniformly random tuple ids ("value
    s's k-th tuple by id goes to the k-th group holding s"): under random ids the order of
    s's rows by id is a uniform permutation, independent across values, and so is the bijection
    from s's rows to s's groups. Here no id is drawn: the slot groups are counting-sorted by
    value (:func:`slots_by_value`), each value's run shuffled (4-byte elements, inside the run)
    and given to the value's rows in row order (:func:`counting_order`) — no permutation of N,
    no random gather or scatter over all rows. Returns ``(group_of_row, group_values)`` as
    :func:`groups_of_rows` does."""
    sa = np.asarray(sa_codes)
    counts = _key_counts(sa, n_values)
    start = np.cumsum(counts) - counts
    by_value = slots_by_value(values, groups, start, n_values)
    group_values = values_of_groups(by_value, counts, l_prime, values.dtype)
    for a, c in zip(start.tolist(), counts.tolist()):
        if c > 1:
            rng.shuffle(by_value[a:a + c])
    group_of_row = np.empty(len(sa), dtype=groups.dtype)
    group_of_row[counting_order(sa, n_values)] = by_value
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
    if retention is None:  # drawn a block at a time: the same stream as one rng.integers(lp, size=n)
        out = np.empty(n, dtype=group_values.dtype)
        for a in range(0, n, SLOT_BLOCK):
            g = group_of_row[a:a + SLOT_BLOCK]
            out[a:a + len(g)] = group_values[g, rng.integers(lp, size=len(g))]
        return out
    vals = group_values[group_of_row]
    own_pos = np.argmax(vals == np.asarray(own)[:, None], axis=1)
    other = (own_pos + 1 + rng.integers(lp - 1, size=n)) % lp
    pick = np.where(rng.random(n) < retention, own_pos, other)
    return vals[np.arange(n), pick]


__all__ = ["FIT_ALPHA", "TOL", "TransitionGroup", "TransitionModel", "close", "counting_order", "decoy_cooccurrence", "decoy_group_types", "decoy_group_values", "decoy_schedule",
           "cell_pair_runs", "diverted_matrix", "largest_posterior", "randomization_fit", "pair_runs", "pairs_fit", "row_groups", "gamma_for", "gamma_from_retention", "group_cooccurrence", "groups_of_rows", "types_cooccurrence", "perturb_local",
           "perturbation_params", "posterior_retained", "random_grouped_order", "random_groups_of_rows", "randomize_in_groups", "receiver_counts", "sa_prime_mask", "slots_by_value", "sorted_runs", "values_of_groups"]
