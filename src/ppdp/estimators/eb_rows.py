"""The fit of the empirical-Bayes estimator (:func:`~ppdp.estimators.empirical_bayes.eb_shrink`): one
fitting path (:class:`EBStrength`) for the shrinkage strength ρ, the likelihood and the prediction of
every row, over the sufficient terms a layout supplies a block of rows at a time — each row's domain
entries at the diagonal covariance (:class:`EBEntries`, on the published counts' entries of
:class:`EBCounts`), whole rows at the exact covariance (:class:`EBRows`)."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from .channel import Packed, norm_sub, norm_sub_packed

#: ρ grid of the likelihood fit of the shrinkage strength (points over log ρ ∈ [0, log n])
EB_GRID = 24
#: domain entries of the empirical-Bayes fit taken at once (:class:`EBEntries`)
EB_BLOCK_ENTRIES = 1 << 15


def eb_terms(y, n, P0, p, q) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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


def moments_rho(n: np.ndarray, dd: np.ndarray, ss: np.ndarray, pp: np.ndarray) -> np.ndarray:
    """ρ by the method of moments from each row's sums Σd², Σσ² and Σπ⁰²:
    E Σ_k d_k² = Σ_k σ²_k + n(1 − Σπ⁰²)·ρ, solved and cut to [1, n]."""
    het = n * (1.0 - pp)
    rho = np.divide(dd - ss, het, out=np.ones_like(n), where=het > 1e-12)
    return np.clip(rho, 1.0, np.maximum(n, 1.0))


def rho_grid(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The strength grid of rows with ``n`` records: (ρ at each point, G × rows; log(ρ − 1), the
    adjusted likelihood's term) — ``EB_GRID`` points over log ρ ∈ [0, log n]."""
    top = np.log(np.maximum(n, 1.0))
    grid = np.linspace(0.0, 1.0, EB_GRID)
    rhos = np.exp(grid[:, None] * top[None, :])  # (G, R): a grid point's row is contiguous
    return rhos, np.log(np.maximum(rhos - 1.0, 1e-300))


def grid_rho(n: np.ndarray, loglik_grid, adjusted: bool, grid: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """ρ maximising the log likelihood of rows with ``n`` records over [1, n], given at a (G × rows)
    grid of ρ by ``loglik_grid``: ``EB_GRID`` points in log ρ, then one parabola through the best
    point and its neighbours (in log ρ). ``adjusted``: maximise loglik + log(ρ − 1) instead — the
    adjusted likelihood of Morris (1988) and Li & Lahiri (2010) with the between-predicate
    variance component A = ρ − 1 (Var x_k = nπ⁰_k(1−π⁰_k)(1 + A)), which keeps Â off 0, where
    the plain likelihood often puts it and shrinks fully (``grid``: :func:`rho_grid` of ``n``
    when known)."""
    top = np.log(np.maximum(n, 1.0))
    rhos, adj = rho_grid(n) if grid is None else grid
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


class EBStrength:
    """The one fitting path of :func:`eb_shrink`: per row the strength ρ (:data:`EB_STRENGTHS`: the
    method of moments, :func:`moments_rho`; the likelihood or the adjusted likelihood,
    :func:`grid_rho`), the log likelihood at ρ and the best linear predictor at ρ projected onto
    {x ≥ 0, Σx = n}. A layout supplies, a block of rows at a time (:meth:`_blocks`: a row
    never split, each row's numbers its own), the block's sufficient terms: its moment sums
    (:meth:`_moment_sums`), its log likelihood at a grid of ρ (:meth:`_loglik_grid`) and its
    prediction (:meth:`_predict`, assembled by :meth:`_assemble`)."""

    n: np.ndarray

    def _blocks(self) -> Iterator[tuple[int, int, Any]]:
        """(first row, end row, the block's terms) of each block, in order."""
        raise NotImplementedError

    def _moment_sums(self, blk: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Σd², Σσ², Σπ⁰²) per row of the block."""
        raise NotImplementedError

    def _loglik_grid(self, blk: Any, rhos: np.ndarray) -> np.ndarray:
        """The normal log marginal likelihood (up to a constant) of the block's rows at every row
        of ``rhos`` (G × the block's rows; G × rows out)."""
        raise NotImplementedError

    def _predict(self, blk: Any, rho: np.ndarray) -> np.ndarray:
        """The block's best linear predictor at its rows' ρ, before the projection."""
        raise NotImplementedError

    def _assemble(self, parts: list[np.ndarray]) -> np.ndarray:
        """The blocks' predictions, projected onto {x ≥ 0, Σx = n}: (R, m), 0 off each row's domain."""
        raise NotImplementedError

    def _grid(self) -> tuple[np.ndarray, np.ndarray]:
        return rho_grid(self.n)

    def fit(self, strength: str, loglik: bool = False, predict: bool = False) -> tuple[Any, Any, Any]:
        """(ρ by ``strength``, the prediction at ρ or None, the log likelihood at ρ or None), a
        block at a time: each block's terms once for the strength, the likelihood and the
        prediction."""
        rho = np.empty(len(self.n))
        ll = np.empty(len(self.n)) if loglik else None
        parts: list[np.ndarray] = []
        grid = self._grid() if strength != "moments" else None
        for r0, r1, blk in self._blocks():
            n = self.n[r0:r1]
            if grid is None:
                rb = moments_rho(n, *self._moment_sums(blk))
            else:
                rb = grid_rho(n, lambda rhos, blk=blk: self._loglik_grid(blk, rhos), strength == "adjusted",
                              (grid[0][:, r0:r1], grid[1][:, r0:r1]))
            rho[r0:r1] = rb
            if ll is not None:
                ll[r0:r1] = self._loglik_grid(blk, rb[None, :])[0]
            if predict:
                parts.append(self._predict(blk, rb))
        return rho, (self._assemble(parts) if predict else None), ll

    def rho(self, strength: str) -> np.ndarray:
        """The strength ρ per row by ``strength`` (:data:`EB_STRENGTHS`)."""
        return self.fit(strength)[0]

    def moments_rho(self) -> np.ndarray:
        """ρ by the method of moments (:func:`moments_rho`)."""
        return self.rho("moments")

    def likelihood_rho(self, adjusted: bool = False) -> np.ndarray:
        """ρ maximising the (``adjusted``) likelihood over [1, n] (:func:`grid_rho`)."""
        return self.rho("adjusted" if adjusted else "likelihood")

    def loglik(self, rho: np.ndarray) -> np.ndarray:
        """Normal log marginal likelihood of x̃ per row at strength ρ (up to a constant)."""
        rho = np.asarray(rho, dtype=np.float64)
        out = np.empty(len(self.n))
        for r0, r1, blk in self._blocks():
            out[r0:r1] = self._loglik_grid(blk, rho[None, r0:r1])[0]
        return out

    def predict(self, rho: np.ndarray) -> np.ndarray:
        """The best linear predictor at strength ρ, projected onto {x ≥ 0, Σx = n}: (R, m)."""
        rho = np.asarray(rho, dtype=np.float64)
        return self._assemble([self._predict(blk, rho[r0:r1]) for r0, r1, blk in self._blocks()])


def segment_sums(x: np.ndarray, cnt: np.ndarray) -> np.ndarray:
    """Σ of each segment of ``x`` (segments in order, ``cnt`` entries each; 0 for none)."""
    out = np.zeros(len(cnt))
    has = cnt > 0
    if has.any():
        out[has] = np.add.reduceat(x, (np.cumsum(cnt) - cnt)[has])
    return out


class EBCounts:
    """The published counts of rows (one row: a predicate in a sub-table) at each row's domain
    entries, flat and in row order, with what does not depend on the prior (n, p, q per entry):
    computed once for every candidate parent of :func:`eb_fit`. ``n``: the records per row when
    they are not Σ of the row's counts (a channel whose reports hold several values each)."""

    def __init__(self, Y, p, q, member, n=None):
        member = np.asarray(member, dtype=bool)
        self.shape = member.shape
        self._member: np.ndarray | None = member
        self._parent: tuple[EBCounts, np.ndarray] | None = None
        pk = Packed(member)
        self.cnt = pk.cnt
        self.flat = pk.idx  # each entry's index in the (rows × m) arrays
        self.y = np.asarray(Y, dtype=np.float64).ravel()[pk.idx]
        self.n = segment_sums(self.y, self.cnt) if n is None else np.asarray(n, dtype=np.float64)
        self.p_row, self.q_row = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
        self._grid: tuple[np.ndarray, np.ndarray] | None = None

    def subset(self, r: np.ndarray) -> "EBCounts":
        """The rows ``r`` (their entries gathered, no pass over whole rows)."""
        out = object.__new__(EBCounts)
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
        """:func:`rho_grid` of the rows (they depend on n only: computed once for every candidate
        parent, and gathered for a subset of the rows)."""
        if self._grid is None:
            self._grid = rho_grid(self.n)
        return self._grid

    @property
    def member(self) -> np.ndarray:
        if self._member is None:
            assert self._parent is not None
            base, r = self._parent
            self._member = base.member[r]
        return self._member


class EBEntries(EBStrength):
    """:func:`eb_shrink`'s terms at the diagonal covariance, over each row's domain entries only,
    flat and in row order (a row of an SDR sub-table holds a few of the m values: on OCC's SDR
    sub-tables 11 or 21 of 46; a row of uniform perturbation all of them): each row's sums are
    over its own entries.

    A block of rows at a time (about :data:`EB_BLOCK_ENTRIES` entries, a row never split): a
    block's terms, its likelihood grid and its prediction are temporaries that stay in cache and
    in reused memory, and nothing of the entries' size is kept but the prior's entries. The
    numbers do not depend on the blocks (each row's sums are its own)."""

    covariance = "diagonal"

    def __init__(self, counts: EBCounts, prior):
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

    def _terms(self, r0: int, r1: int, e0: int, e1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:func:`eb_terms` (μ, d, σ², τ²/ρ) of the entries of rows r0 … r1 − 1."""
        c = self.counts
        cnt = c.cnt[r0:r1]
        pp, qq, nn = (np.repeat(v[r0:r1], cnt) for v in (c.p_row, c.q_row, c.n))
        return eb_terms(c.y[e0:e1], nn, self.P0[e0:e1], pp, qq)

    def _blocks(self) -> Iterator[tuple[int, int, Any]]:
        for r0, r1 in zip(self._rows[:-1], self._rows[1:]):
            if r1 > r0:
                e0, e1 = self._span(r0, r1)
                yield r0, r1, _EntryBlock(self, r0, r1, e0, e1)

    def _grid(self) -> tuple[np.ndarray, np.ndarray]:
        return self.counts.grid()

    def _terms_all(self, k: int) -> np.ndarray:
        return np.concatenate([blk.terms[k] for _, _, blk in self._blocks()] or [np.zeros(0)])

    @property
    def d(self) -> np.ndarray:
        return self._terms_all(1)

    @property
    def sig2(self) -> np.ndarray:
        return self._terms_all(2)

    @property
    def t(self) -> np.ndarray:
        return self._terms_all(3)

    def _moment_sums(self, blk: "_EntryBlock") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        _, d, sig2, _ = blk.terms
        cnt = blk.cnt
        return segment_sums(d**2, cnt), segment_sums(sig2, cnt), segment_sums(self.P0[blk.e0:blk.e1] ** 2, cnt)

    def _loglik_grid(self, blk: "_EntryBlock", rhos: np.ndarray) -> np.ndarray:
        """Every grid point's entry terms at once (G × the block's entries: a block is small), each
        row's ρ repeated over its entries, summed per row and point by one reduceat."""
        a, c, cnt, const = blk.grid_terms()
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

    def _predict(self, blk: "_EntryBlock", rho: np.ndarray) -> np.ndarray:
        mu, d, sig2, t = blk.terms
        tau2 = t * np.repeat(rho, blk.cnt)
        V = tau2 + sig2
        w = np.divide(tau2, V, out=np.zeros_like(tau2), where=V > 0)
        return mu + w * d

    def _assemble(self, parts: list[np.ndarray]) -> np.ndarray:
        """Norm-Sub of the entries' predictions on the rows packed: (R, m), 0 off each row's domain."""
        X = np.concatenate(parts) if parts else np.zeros(0)
        pk = Packed(self.counts.member)  # −∞ in the padding
        v = np.full(pk.valid.shape, -np.inf)
        v.ravel()[pk.pos] = X
        return pk.unpack(norm_sub_packed(v, pk.valid, self.n))


class _EntryBlock:
    """The terms of one block of :class:`EBEntries` (rows r0 … r1 − 1, entries e0 … e1 − 1):
    :func:`eb_terms` at once, the likelihood's terms when first asked for."""

    def __init__(self, owner: EBEntries, r0: int, r1: int, e0: int, e1: int):
        self.e0, self.e1 = e0, e1
        self.cnt = owner.cnt[r0:r1]
        self.terms = owner._terms(r0, r1, e0, e1)
        self._gt: tuple | None = None

    def grid_terms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(a, c, entries per row, the constant per row): an entry with τ² > 0 contributes
        log V + d²/V = log τ² + log(a + ρ) + c/(a + ρ) with a = σ²/τ², c = d²/τ²; one with
        τ² = 0 < σ² the constant log σ² + d²/σ²."""
        if self._gt is None:
            _, d, sig2, t = self.terms
            d2 = d**2
            var = t > 0
            fixed = ~var & (sig2 > 0)
            const = np.zeros(len(t))
            const[var] = np.log(t[var])
            sf = sig2[fixed]
            const[fixed] = np.log(sf) + d2[fixed] / sf
            tv = t[var]
            self._gt = (sig2[var] / tv, d2[var] / tv, segment_sums(var.astype(np.float64), self.cnt).astype(np.int64),
                        segment_sums(const, self.cnt))
        return self._gt


class EBRows(EBStrength):
    """:func:`eb_shrink`'s terms at the exact covariance, over whole rows of m entries (0 off each
    row's domain): the m × m covariance couples a row's entries, so its likelihood and its
    predictor are per row, not sums over entries (Sherman–Morrison, then the known total by a
    Lagrange multiplier: O(m) per row). One block: :func:`eb_shrink` already takes rows a block
    at a time."""

    covariance = "exact"

    def __init__(self, Y, p, q, member, prior):
        self.member = member = np.asarray(member, dtype=bool)
        # the operations of the masked forms (0 off the row's domain), in place: the same numbers
        off = ~member
        Y = np.asarray(Y, dtype=np.float64).copy()
        np.copyto(Y, 0.0, where=off)
        self.n = n = Y.sum(axis=1)
        P0 = np.asarray(prior, dtype=np.float64).copy()
        np.copyto(P0, 0.0, where=off)
        self.P0 = P0
        pp, qq = p[:, None], q[:, None]
        self.mu, d, sig2, self.t = eb_terms(Y, n[:, None], P0, pp, qq)
        np.copyto(d, 0.0, where=off)
        np.copyto(sig2, 0.0, where=off)
        self.d, self.sig2 = d, sig2
        # Σ = [nq·I + p(1−p)n·diag(π⁰) − nq²·11ᵀ − pqn(π⁰1ᵀ + 1π⁰ᵀ)]/p², T = nρ(diag(π⁰) − π⁰π⁰ᵀ):
        # on the subspace Σ_k d_k = 0 where d lives, V = Σ + T acts as M = D − nρ·π⁰π⁰ᵀ with
        # D = diag(nq/p² + n(1−p)π⁰/p + nρπ⁰) (the 11ᵀ, π⁰1ᵀ, 1π⁰ᵀ terms vanish there)
        self.live = member & (n > 0)[:, None]  # rows without records have nothing to estimate
        self.D0 = np.where(self.live, n[:, None] * qq / pp**2 + n[:, None] * (1 - pp) * P0 / pp, 1.0)
        self.m_r = member.sum(axis=1)

    def _blocks(self) -> Iterator[tuple[int, int, Any]]:
        yield 0, len(self.n), None

    def _moment_sums(self, blk: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (self.d**2).sum(axis=1), self.sig2.sum(axis=1), (self.P0**2).sum(axis=1)

    def _exact(self, rho):
        """(z = V⁺d, log pdet V) per row (Sherman–Morrison on M, then the constraint Σ z = 0 by a
        Lagrange multiplier; pdet(PMP) = det M · 1ᵀM⁻¹1/m_r)."""
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

    def _loglik_grid(self, blk: Any, rhos: np.ndarray) -> np.ndarray:
        out = np.empty(rhos.shape)
        for j, rho in enumerate(rhos):
            z, logdet = self._exact(rho)
            out[j] = -0.5 * (logdet + (z * self.d).sum(axis=1))
        return out

    def _predict(self, blk: Any, rho: np.ndarray) -> np.ndarray:
        """The predictor nπ⁰ + Cov(x)·V⁺d."""
        z, _ = self._exact(rho)
        u = self.P0
        return self.mu + (self.n * rho)[:, None] * (u * z - u * (u * z).sum(axis=1, keepdims=True))

    def _assemble(self, parts: list[np.ndarray]) -> np.ndarray:
        return norm_sub(parts[0], self.member, self.n)


def eb_rows(Y, p, q, member, prior, covariance) -> EBRows | EBEntries:
    """The terms of :func:`eb_shrink` for ``covariance``: each row's domain entries at the diagonal
    covariance (:class:`EBEntries`), whole rows at the exact one (:class:`EBRows`)."""
    if covariance == "exact":
        return EBRows(Y, p, q, member, prior)
    return EBEntries(EBCounts(Y, p, q, member), prior)
