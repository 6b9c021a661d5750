"""Estimators of the histogram family: a cell estimate from the released noisy counts, then
range queries as box sums over one summed-area table of the estimated cells.

* ``cells`` — the noisy cells as they are (a sparse cell histogram: its released cells);
* ``uniform`` — each partition's noisy count spread evenly over its cells;
* ``ls`` — *variance-weighted* least squares over both histograms, weights = inverse noise variances
  (Xiao et al.'s H⁺ is the α1 = α2 case). Partitions are disjoint, so the problem splits by
  partition and has a closed form: every cell of partition p moves by the same
  δ_p = (y_p − Σ_{c∈p} y_c)·v1/(v2 + n_p·v1);
* ``ls-unweighted`` — the paper's unweighted least squares (eq 35, H⁺y): every equation weighted
  equally; δ_p = (y_p − Σ_{c∈p} y_c)/(1 + n_p); equal to ``ls`` when α1 = α2;
* ``ls-eb`` — the same least squares plus the partitions' uniformity as a prior: penalty
  Σ(x_c − x̄_p)²/τ_p with τ_p the within-partition variance of the noisy cells beyond the
  noise variance, an empirical-Bayes estimate (docs/dpcube.md). Same partition totals as
  ``ls``; deviations from the partition mean shrunk by τ_p/(τ_p + v1).

Each is an immutable object: ``release.answer(workload, estimator="ls")`` or
``estimator=LeastSquaresEstimator()``. ``cells(release)`` gives the estimated cube and
``answer_boxes`` sums it over boxes; both are cached per release.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

import numpy as np

from ..claims import claim_of
from ..errors import QueryError
from ..kernels.grid import box_sums, paint, summed_area
from ..kernels.noise import discrete_laplace_variance
from ..queries import CountIndex, as_workload
from .base import Estimates, Estimator

__all__ = ["HistogramEstimator", "CellsEstimator", "UniformEstimator", "LeastSquaresEstimator",
           "UnweightedLeastSquaresEstimator",
           "EmpiricalBayesEstimator"]

#: release → {estimator: (estimated cells, their summed-area table)}
_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class HistogramEstimator(Estimator):
    """Base of the histogram estimators: ``estimate(release)`` → dense cell estimates."""

    family = "histogram"
    #: what the estimate reads: the released cells, the partitions; whether it can read a
    #: sparse cell histogram (cubes beyond the dense limit)
    needs_cells = False
    needs_partitions = False
    reads_sparse = False

    def supports(self, release) -> bool:
        if not super().supports(release):
            return False
        if self.needs_partitions and not release.has_partitions:
            return False
        if self.needs_cells and not release.has_cells:
            return False
        return release.storage == "dense" or self.reads_sparse

    def estimate_cells(self, release) -> np.ndarray:
        raise NotImplementedError

    def _cached(self, release) -> tuple[np.ndarray, np.ndarray]:
        per = _CACHE.setdefault(release, {})
        if self not in per:
            cells = self.estimate_cells(release)
            per[self] = (cells, summed_area(cells))
        return per[self]

    def cells(self, release) -> np.ndarray:
        """Estimated count of every cell (dense float array)."""
        return self._cached(release)[0]

    def answer_boxes(self, release, lo, hi, owner=None, n_queries=None) -> np.ndarray:
        """Sums of the estimated cells over boxes (inclusive cell indices, shape (B, d)); with
        ``owner`` (query number of each box) the box sums are added per query."""
        sat = self._cached(release)[1]
        sums = box_sums(sat, lo, hi) if len(lo) else np.zeros(0)
        if owner is None:
            return sums
        return np.bincount(owner, weights=sums, minlength=n_queries).astype(np.float64)

    def answer(self, release, workload) -> np.ndarray:
        wl = as_workload(workload)
        lo, hi, owner = release.query_boxes(wl)
        return self.answer_boxes(release, lo, hi, owner, len(wl))


class CellsEstimator(HistogramEstimator):
    """The noisy cells as released (0 where a sparse histogram released nothing)."""

    name = "cells"
    needs_cells = True
    reads_sparse = True

    def estimate_cells(self, release) -> np.ndarray:
        return release.noisy_cells()

    def answer(self, release, workload) -> np.ndarray:
        if release.storage != "sparse":
            return super().answer(release, workload)
        _, masks = release.resolve(workload)
        for m in masks:
            for c in m:
                if c not in release.dims:
                    raise QueryError(f"{c!r} is not a dimension of this histogram; its dimensions are {release.dims}")
        idx, cnt = release.cell_index()
        index = CountIndex(dict(zip(release.dims, idx)), dict(zip(release.dims, release.shape)), cnt[:, None])
        return index.sums(masks)[:, 0]


class UniformEstimator(HistogramEstimator):
    """Each partition's noisy count spread evenly over its cells."""

    name = "uniform"
    needs_partitions = True

    def estimate_cells(self, release) -> np.ndarray:
        lo, hi, yp = release.partition_boxes()
        n_p = np.prod(hi - lo + 1, axis=1).astype(np.float64)
        return paint(release.shape, lo, hi, yp / n_p, dtype=np.float64)


def _least_squares_parts(release):
    """(noisy cells y, partition of each cell, partition counts, sizes, Σ_p y, δ_p, v1)."""
    lo, hi, yp = release.partition_boxes()
    n_p = np.prod(hi - lo + 1, axis=1).astype(np.float64)
    y = release.noisy_cells()
    pid = paint(release.shape, lo, hi)
    claim = claim_of(release.manifest)
    v1 = discrete_laplace_variance(claim.epsilon_cells)
    v2 = discrete_laplace_variance(claim.epsilon_partitions)
    sums = np.bincount(pid.ravel(), weights=y.ravel(), minlength=len(yp))
    delta = (yp - sums) * v1 / (v2 + n_p * v1)
    return y, pid, yp, n_p, sums, delta, v1


class LeastSquaresEstimator(HistogramEstimator):
    """Weighted least squares over the cells and the partitions (closed form per partition)."""

    name = "ls"
    needs_cells = True
    needs_partitions = True

    def estimate_cells(self, release) -> np.ndarray:
        y, pid, _, _, _, delta, _ = _least_squares_parts(release)
        return y + delta[pid]


class UnweightedLeastSquaresEstimator(HistogramEstimator):
    """The paper's least squares (Xiao et al., eq 35: x̂ = H⁺y, every equation weighted equally,
    whatever α1 and α2): per partition δ_p = (y_p − Σ_{c∈p} y_c)/(1 + n_p). ``ls`` is the
    variance-weighted one (weights 1/v1, 1/v2); the two coincide when α1 = α2."""

    name = "ls-unweighted"
    needs_cells = True
    needs_partitions = True

    def estimate_cells(self, release) -> np.ndarray:
        y, pid, yp, n_p, sums, _, _ = _least_squares_parts(release)
        return y + ((yp - sums) / (1.0 + n_p))[pid]


class EmpiricalBayesEstimator(HistogramEstimator):
    """Least squares with the partitions' uniformity as an empirical-Bayes prior."""

    name = "ls-eb"
    needs_cells = True
    needs_partitions = True

    def estimate_cells(self, release) -> np.ndarray:
        y, pid, yp, n_p, sums, delta, v1 = _least_squares_parts(release)
        # same partition totals as ls; deviations from the partition mean shrunk by
        # τ_p/(τ_p + v1), τ_p = max(0, within-partition variance of y − v1)
        mean_y = sums / n_p
        var_y = np.bincount(pid.ravel(), weights=(y * y).ravel(), minlength=len(yp)) / n_p - mean_y**2
        tau = np.maximum(var_y - v1, 0.0)
        shrink = tau / (tau + v1)
        total = sums + n_p * delta
        return (total / n_p)[pid] + (y - mean_y[pid]) * shrink[pid]


# ------------------------------------------------------------------------- uncertainty
def _volumes_per_query(lo, hi, owner, n_queries) -> np.ndarray:
    vol = np.prod(hi - lo + 1, axis=1).astype(np.float64) if len(lo) else np.zeros(0)
    return np.bincount(owner, weights=vol, minlength=n_queries).astype(np.float64)


def _dp_claim(release) -> Any:
    """The release's ε-DP claim (a :class:`ppdp.claims.dp.DPClaim`)."""
    return claim_of(release.manifest)


def _kron_variance(release, lo, hi, owner, n_queries) -> np.ndarray:
    """Var(qᵀx̂) of the Kronecker weighted least squares for box queries, through the structure:
    Σ_steps v_s·Π_i w_{i,l_i}⁴·Σ_{b,b'} Π_i ⟨B_{i,l_i}G_i⁻¹q_{b,i}, B_{i,l_i}G_i⁻¹q_{b',i}⟩ (boxes b, b'
    of one query; v_s the discrete Laplace variance of step s). No matrix over the whole domain."""
    from ..claims.dp import budget_plan
    from ..kernels.strategies import kron_strategy

    claim = _dp_claim(release)
    params = release.manifest["params"]
    plan = budget_plan(release.manifest["mechanism"], params, release.shape, claim.noisy_total)
    strat = kron_strategy(release.shape)
    # z[i][l]: (boxes × nodes of level l of dim i) = B_{i,l} G_i⁻¹ q_{b,i}
    z: list[list[np.ndarray]] = []
    for i, s in enumerate(strat):
        gi = s.gram_inverse()
        cum = np.zeros((s.n, s.n + 1))
        cum[:, 1:] = np.cumsum(gi, axis=1)
        u = (cum[:, hi[:, i] + 1] - cum[:, lo[:, i]]).T  # boxes × n
        per = []
        for starts, _ in s.levels:
            cu = np.zeros((len(u), s.n + 1))
            cu[:, 1:] = np.cumsum(u, axis=1)
            ends = np.append(starts[1:], s.n)
            per.append(cu[:, ends] - cu[:, starts])
        z.append(per)
    combos = list(itertools.product(*[range(len(s.levels)) for s in strat]))
    steps = plan.cells
    single = np.bincount(owner, minlength=n_queries) == 1
    var = np.zeros(n_queries)
    box_single = single[owner]
    for combo, step in zip(combos, steps, strict=True):
        v_s = discrete_laplace_variance(step.epsilon)
        w4 = float(np.prod([strat[i].levels[k][1] ** 4 for i, k in enumerate(combo)]))
        # single-box queries: product of squared norms
        prod = np.ones(int(box_single.sum()))
        for i, k in enumerate(combo):
            prod *= (z[i][k][box_single] ** 2).sum(axis=1)
        var[owner[box_single]] += v_s * w4 * prod
        for q in np.flatnonzero(~single & (np.bincount(owner, minlength=n_queries) > 1)):
            bx = np.flatnonzero(owner == q)
            k_mat = np.ones((len(bx), len(bx)))
            for i, k in enumerate(combo):
                zz = z[i][k][bx]
                k_mat *= zz @ zz.T
            var[q] += v_s * w4 * k_mat.sum()
    return var


def _kron_release(release) -> bool:
    mech = release.manifest.get("mechanism")
    return mech == "kron" or (mech == "dp" and (release.certificate.get("choice") or {}).get("algorithm") == "kron")


def _overlaps(lo, hi, plo, phi, chunk: int = 2048) -> np.ndarray:
    """Number of cells each box shares with each partition: (boxes × partitions)."""
    out = np.zeros((len(lo), len(plo)))
    for a in range(0, len(lo), chunk):
        l, h = lo[a:a + chunk, None, :], hi[a:a + chunk, None, :]
        ext = np.minimum(h, phi[None]) - np.maximum(l, plo[None]) + 1
        out[a:a + chunk] = np.prod(np.clip(ext, 0, None), axis=2)
    return out


def _estimates(est, var, method, level) -> Estimates:
    return Estimates.normal(est, np.sqrt(np.maximum(var, 0.0)), method, level)


def _cells_estimate(self, release, workload, level: float = 0.95) -> Estimates:
    """Closed-form standard errors: the identity (``cells`` mechanism, dense): Var = v·(cells in
    the query), v the discrete Laplace variance of ε; the Kronecker least squares (``kron``, or
    ``dp`` when it chose it): the structured formula of :func:`_kron_variance`. Other releases
    (data-dependent partitions or models): not quantified."""
    wl = as_workload(workload)
    est = np.asarray(self.answer(release, wl), dtype=np.float64)
    mech = release.manifest.get("mechanism")
    if release.storage == "dense" and (mech == "cells" or _kron_release(release)):
        lo, hi, owner = release.query_boxes(wl)
        if mech == "cells":
            v = discrete_laplace_variance(_dp_claim(release).epsilon)
            return _estimates(est, v * _volumes_per_query(lo, hi, owner, len(wl)),
                              "closed form: independent discrete Laplace noise per cell, Var = cells·v(ε)", level)
        return _estimates(est, _kron_variance(release, lo, hi, owner, len(wl)),
                          "closed form: Var(qᵀx̂) of the weighted least squares over the Kronecker measurements, "
                          "through the per-dimension structure (discrete Laplace variances)", level)
    return Estimator.estimate(self, release, wl, level)


def _ls_estimate(self, release, workload, level: float = 0.95) -> Estimates:
    """Closed form of the weighted least squares (partitions disjoint, so per partition): a query
    holding k_p of the n_p cells of partition p has error Σ_p [e_q,p(1 − k_p r_p) − k_p r_p·e_rest,p +
    k_p r_p f_p], r_p = v1/(v2 + n_p v1), hence Var = Σ_p k_p v1 (1−k_p r_p)² + (n_p−k_p) v1 (k_p r_p)² +
    (k_p r_p)² v2 — exact for the noise (the estimate is unbiased)."""
    wl = as_workload(workload)
    est = np.asarray(self.answer(release, wl), dtype=np.float64)
    lo, hi, owner = release.query_boxes(wl)
    plo, phi, _ = release.partition_boxes()
    n_p = np.prod(phi - plo + 1, axis=1).astype(np.float64)
    claim = _dp_claim(release)
    v1 = discrete_laplace_variance(claim.epsilon_cells)
    v2 = discrete_laplace_variance(claim.epsilon_partitions)
    r = 1.0 / (1.0 + n_p) if self.name == "ls-unweighted" else v1 / (v2 + n_p * v1)
    k = _overlaps(lo, hi, plo, phi)
    kq = np.zeros((len(wl), len(plo)))
    np.add.at(kq, owner, k)
    kr = kq * r[None, :]
    var = (kq * v1 * (1 - kr) ** 2 + (n_p[None, :] - kq) * v1 * kr**2 + kr**2 * v2).sum(axis=1)
    kind = "unweighted (eq 35)" if self.name == "ls-unweighted" else "variance-weighted"
    return _estimates(est, var, f"closed form: {kind} least squares per partition (exact noise variance, "
                      "discrete Laplace v1, v2)", level)


CellsEstimator.estimate = _cells_estimate  # type: ignore[method-assign]
LeastSquaresEstimator.estimate = _ls_estimate  # type: ignore[method-assign]
UnweightedLeastSquaresEstimator.estimate = _ls_estimate  # type: ignore[method-assign]
