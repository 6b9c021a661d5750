"""The row layouts of the empirical-Bayes estimator (:func:`~ppdp.estimators.empirical_bayes.eb_shrink`):
its terms, the fit of the shrinkage strength ρ (:class:`EBStrength`), whole rows (:class:`EBRows`, the
reference and the exact covariance), each row's domain entries only (:class:`EBCounts`, :class:`EBEntries`)
and the default options' likelihood for many candidate parents (:class:`MomentsLikelihood`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import channel
from .channel import Packed, norm_sub, norm_sub_packed

#: ρ grid of the likelihood fit of the shrinkage strength (points over log ρ ∈ [0, log n])
EB_GRID = 24
#: domain entries of the empirical-Bayes fit taken at once (:class:`EBEntries`)
EB_BLOCK_ENTRIES = 1 << 15
#: rows of :func:`eb_shrink` (and of the candidate parents of :func:`eb_fit`) taken at once: the
#: whole-row temporaries (rows × m) stay small, and their memory is reused rather than fresh


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


class EBStrength:
    """The likelihood fit of the shrinkage strength ρ, shared by the row layouts of
    :func:`eb_shrink` (:class:`EBRows`, whole rows; :class:`EBEntries`, domain entries)."""

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
        return grid_rho(self.n, self._loglik_grid, adjusted)

    def loglik(self, rho: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def predict(self, rho: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def fit(self, strength: str, loglik: bool = False, predict: bool = False) -> tuple[Any, Any, Any]:
        """(ρ by ``strength``, the prediction at ρ or None, the log likelihood at ρ or None)."""
        rho = self.rho(strength)
        return rho, (self.predict(rho) if predict else None), (self.loglik(rho) if loglik else None)


def rho_grid(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The strength grid of rows with ``n`` records: (ρ at each point, G × rows; log(ρ − 1), the
    adjusted likelihood's term) — ``EB_GRID`` points over log ρ ∈ [0, log n]."""
    top = np.log(np.maximum(n, 1.0))
    grid = np.linspace(0.0, 1.0, EB_GRID)
    rhos = np.exp(grid[:, None] * top[None, :])  # (G, R): a grid point's row is contiguous
    return rhos, np.log(np.maximum(rhos - 1.0, 1e-300))


def grid_rho(n: np.ndarray, loglik_grid, adjusted: bool, grid: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """:meth:`EBStrength.likelihood_rho` of rows with ``n`` records, their log likelihood at a
    (G × rows) grid of ρ given by ``loglik_grid`` (``grid``: :func:`rho_grid` of ``n`` when known)."""
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


class EBRows(EBStrength):
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
        self.mu, d, sig2, self.t = eb_terms(Y, n[:, None], P0, pp, qq)
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
    computed once for every candidate parent of :func:`eb_fit`."""

    def __init__(self, Y, p, q, member):
        member = np.asarray(member, dtype=bool)
        self.shape = member.shape
        self._member: np.ndarray | None = member
        self._parent: tuple[EBCounts, np.ndarray] | None = None
        pk = Packed(member)
        self.cnt = pk.cnt
        self.flat = pk.idx  # each entry's index in the (rows × m) arrays
        self.y = np.asarray(Y, dtype=np.float64).ravel()[pk.idx]
        self.n = segment_sums(self.y, self.cnt)
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
    """:class:`EBRows` at the diagonal covariance over each row's domain entries only, flat and
    in row order (a row of an SDR sub-table holds a few of the m values: on OCC's SDR sub-tables
    11 or 21 of 46): the same quantities entry by entry, each row's sums over its own entries.
    The numbers equal the whole-row layout's up to the order of floating-point sums.

    Everything is computed a block of rows at a time (about :data:`EB_BLOCK_ENTRIES` entries,
    a row never split): a block's terms, its likelihood grid and its prediction are temporaries
    that stay in cache and in reused memory, and nothing of the entries' size is kept but the
    prior's entries. The numbers do not depend on the blocks (each row's sums are its own)."""

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

    def _blocks(self):
        """(row range, entry range) of each block."""
        for r0, r1 in zip(self._rows[:-1], self._rows[1:]):
            if r1 > r0:
                yield (r0, r1, *self._span(r0, r1))

    def _terms(self, r0: int, r1: int, e0: int, e1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:func:`eb_terms` (μ, d, σ², τ²/ρ) of the entries of rows r0 … r1 − 1."""
        c = self.counts
        cnt = c.cnt[r0:r1]
        pp, qq, nn = (np.repeat(v[r0:r1], cnt) for v in (c.p_row, c.q_row, c.n))
        return eb_terms(c.y[e0:e1], nn, self.P0[e0:e1], pp, qq)

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
        het = n * (1.0 - segment_sums(P0**2, cnt))
        rho = np.divide(segment_sums(d**2, cnt) - segment_sums(sig2, cnt), het, out=np.ones_like(n),
                        where=het > 1e-12)
        return np.clip(rho, 1.0, np.maximum(n, 1.0))

    def moments_rho(self) -> np.ndarray:
        """As :meth:`EBRows.moments_rho`."""
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
        return (sig2[var] / tv, d2[var] / tv, segment_sums(var.astype(np.float64), cnt).astype(np.int64),
                segment_sums(const, cnt))

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
        """As :meth:`EBStrength.fit`, a block at a time: each block's terms once for the
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
                rb = grid_rho(self.n[r0:r1], lambda rhos, gt=gt: self._grid(gt, rhos), strength == "adjusted",
                               (g[0][:, r0:r1], g[1][:, r0:r1]))
            rho[r0:r1] = rb
            if ll is not None and gt is not None:
                ll[r0:r1] = self._grid(gt, rb[None, :])[0]
            if X is not None:
                X[e0:e1] = self._predict_entries(r0, r1, terms, rb)
        return rho, (self._unpack(X) if X is not None else None), ll

    def rho(self, strength: str) -> np.ndarray:
        """As :meth:`EBStrength.rho`."""
        return self.fit(strength)[0]

    def likelihood_rho(self, adjusted: bool = False) -> np.ndarray:
        """As :meth:`EBStrength.likelihood_rho`."""
        return self.fit("adjusted" if adjusted else "likelihood")[0]

    def loglik(self, rho: np.ndarray) -> np.ndarray:
        """As :meth:`EBRows.loglik`."""
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
        pk = Packed(self.counts.member)  # −∞ in the padding
        v = np.full(pk.valid.shape, -np.inf)
        v.ravel()[pk.pos] = X
        return pk.unpack(norm_sub_packed(v, pk.valid, self.n))

    def predict(self, rho: np.ndarray) -> np.ndarray:
        """As :meth:`EBRows.predict`: (R, m), 0 off each row's domain."""
        rho = np.asarray(rho, dtype=np.float64)
        X = np.empty(len(self.P0))
        for r0, r1, e0, e1 in self._blocks():
            X[e0:e1] = self._predict_entries(r0, r1, self._terms(r0, r1, e0, e1), rho[r0:r1])
        return self._unpack(X)


def eb_rows(Y, p, q, member, prior, covariance, entries: bool | None = None) -> EBRows | EBEntries:
    """The layout of :func:`eb_shrink`'s quantities: the domain entries (:class:`EBEntries`) at
    the diagonal covariance when the domains are a small part of the rows, else whole rows
    (``entries``: the layout when already decided)."""
    member = np.asarray(member, dtype=bool)
    if entries_layout(member, covariance) if entries is None else entries:
        return EBEntries(EBCounts(Y, p, q, member), prior)
    return EBRows(Y, p, q, member, prior, covariance)


def entries_layout(member: np.ndarray, covariance: str) -> bool:
    """Whether :func:`eb_rows` takes the domain entries: the diagonal covariance, and domains of at
    most half the m values (else whole rows cost no more)."""
    return (channel.PACKED_EB and covariance == "diagonal"
            and (not member.shape[1] or np.count_nonzero(member, axis=1).max(initial=0) * 2 <= member.shape[1]))


class MomentsLikelihood:
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

