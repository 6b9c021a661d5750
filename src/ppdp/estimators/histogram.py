"""Estimators of the histogram family: a cell estimate from the released noisy counts, then
range queries as box sums over one summed-area table of the estimated cells.

* ``cells`` — the noisy cells as they are (a sparse cell histogram: its released cells);
* ``uniform`` — each partition's noisy count spread evenly over its cells;
* ``ls`` — weighted least squares over both histograms, weights = inverse noise variances
  (Xiao et al.'s H⁺ is the α1 = α2 case). Partitions are disjoint, so the problem splits by
  partition and has a closed form: every cell of partition p moves by the same
  δ_p = (y_p − Σ_{c∈p} y_c)·v1/(v2 + n_p·v1);
* ``ls-eb`` — the same least squares plus the partitions' uniformity as a prior: penalty
  Σ(x_c − x̄_p)²/τ_p with τ_p the within-partition variance of the noisy cells beyond the
  noise variance, an empirical-Bayes estimate (docs/dpcube.md). Same partition totals as
  ``ls``; deviations from the partition mean shrunk by τ_p/(τ_p + v1).

Each is an immutable object: ``release.answer(workload, estimator="ls")`` or
``estimator=LeastSquaresEstimator()``. ``cells(release)`` gives the estimated cube and
``answer_boxes`` sums it over boxes; both are cached per release.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..claims import claim_of
from ..errors import QueryError
from ..kernels.grid import box_sums, paint, summed_area
from ..kernels.noise import discrete_laplace_variance
from ..queries import CountIndex, as_workload
from .base import Estimator

__all__ = ["HistogramEstimator", "CellsEstimator", "UniformEstimator", "LeastSquaresEstimator",
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
