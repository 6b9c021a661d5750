"""Baselines of Xiao et al. §6.3: a hierarchical kd-tree after Inan, Kantarcioglu, Ghinita &
Bertino (2010) and a hierarchical tree with consistency after Hay, Rastogi, Miklau & Suciu
(2010). The identity baseline is :class:`~ppdp.mechanisms.histogram.CellHistogram`.

Both draw every noisy count with the hardened discrete Laplace sampler.
"""

from __future__ import annotations

from ...claims.dp import POSTPROCESSING, kdtree_total_step
from ...kernels.grid import box_counts, summed_area, tree_counts, tree_levels
from ...kernels.noise import Budget, discrete_laplace_variance
from ...validation import Integer, Optional, Options, Real
from .dpcube import HistogramMechanism
from .operators import leaf_cells, median_slices, split_at_medians, tree_least_squares, whole_cube


class HierarchicalKDTree(HistogramMechanism):
    """kd-tree with noisy medians and noisy leaf counts (Inan et al. 2010 style).

    ``depth`` levels of splits; level ℓ splits every box on dimension ℓ mod d (the next one
    with more than one cell if that one is exhausted) at a noisy median: the box's slice
    counts along that dimension get discrete Laplace noise (ε_level; slices of all boxes of a
    level are disjoint → parallel composition) and the cut is where their running sum first
    reaches half the noisy total. Budget: ``median_fraction``·ε spread evenly over the levels,
    the rest on the leaf counts. Default depth (documented rule,
    :func:`ppdp.claims.dp.kdtree_default_depth`): the largest d with N̂·ε_leaf/2^d ≥ 10, i.e.
    leaves expected to hold ≥ 10 noise scales, capped by the number of halvings that reach
    single cells, where N̂ is a noisy total measured first with
    ``KDTREE_TOTAL_FRACTION``·ε (2%; the rest is split as above) and recorded in the claim —
    never the exact row count. With an explicit ``depth`` no total is measured.
    """

    name = "kdtree"
    paper = "Inan, Kantarcioglu, Ghinita, Bertino 2010"
    default_estimator = "uniform"

    _parameter_constraints = {
        **HistogramMechanism._common_constraints,
        "depth": Optional(Integer(1, None)),
        "median_fraction": Real(0, 1, closed="neither"),
    }
    _parameter_help = {
        **HistogramMechanism._common_help,
        "depth": "Number of split levels (default: the documented rule).",
        "median_fraction": "Share of ε spent on the noisy medians (spread evenly over the levels).",
    }

    def __init__(self, epsilon: float, dims, depth=None, median_fraction=0.5, domains=None, bins=None):
        self._set_params(locals())

    @property
    def reads_noisy_total(self) -> bool:  # type: ignore[override]
        return kdtree_total_step(self.get_params()) is not None

    def _noisy_total(self, budget, rng, x):
        total = kdtree_total_step(self.get_params())                    # the default depth reads a noisy N
        return None if total is None else int(budget.measure(rng, [int(x.sum())], total)[0])

    def _publish(self, table, rng):
        spec, x = self._dense_cube(table)                               # select: the cube
        budget = Budget(self.epsilon)
        n_hat = self._noisy_total(budget, rng, x)
        plan, _, parts, _ = self._measure(budget, rng, x, n_hat)
        return self._release(table, spec, plan, budget, partitions=parts)

    def _measure(self, budget, rng, x, n_hat):
        total = kdtree_total_step(self.get_params())
        plan = self._plan(x.shape, n_hat)                               # depth, ε per level, ε of the leaves
        lo, hi = whole_cube(x.shape)
        for level, medians in enumerate(plan.structure[1 if total else 0:]):
            axis, slices = median_slices(x, lo, hi, level)              # select: slice counts of every box
            noisy = budget.measure_parts(rng, slices, medians, parallel_over=len(lo))  # measure (boxes disjoint)
            lo, hi = split_at_medians(lo, hi, axis, noisy)              # partition at the noisy medians
        (leaves,) = plan.partitions
        y = budget.measure(rng, box_counts(summed_area(x), lo, hi), leaves)  # measure every leaf
        return plan, None, (lo, hi, y), {}


class ConsistentHierarchy(HistogramMechanism):
    """Hierarchical histogram with constrained inference (Hay et al. 2010), d-dimensional.

    A data-independent tree over the cells down to single cells (:func:`~ppdp.kernels.grid.tree_levels`; default
    the quadtree, every dimension halved per level, H = 1 + max_d ⌈log2 size_d⌉ levels;
    ``fanout="binary"`` a binary kd-tree with about twice the levels); every node gets a
    noisy count with ε/H (the nodes of one level are disjoint → parallel; levels →
    sequential), as in Hay et al.; the released cells are the consistent least-squares leaf
    estimates (:func:`~ppdp.mechanisms.histogram.operators.tree_least_squares`) — a post-processing of the noisy tree, recorded as
    such in the certificate. Range queries sum the consistent cells (equivalent to summing
    the consistent node estimates of the range's canonical decomposition).
    """

    name = "consistency"
    paper = "Hay, Rastogi, Miklau, Suciu 2010"
    default_estimator = "cells"

    _parameter_constraints = {**HistogramMechanism._common_constraints, "fanout": Options("quad", "binary")}
    _parameter_help = {**HistogramMechanism._common_help,
                       "fanout": "Tree over the cells: quad (every dimension halved per level) or binary (kd-tree)."}

    def __init__(self, epsilon: float, dims, fanout="quad", domains=None, bins=None):
        self._set_params(locals())

    def _measure(self, budget, rng, x, n_hat):
        plan = self._plan(x.shape)                                      # H levels, ε/H each
        levels = tree_levels(x.shape, self.fanout)                      # select: the tree's nodes, level by level
        noisy = [budget.measure(rng, counts, step)                      # measure every level
                 for counts, step in zip(tree_counts(x, levels), plan.cells, strict=True)]
        est = tree_least_squares(noisy, [p for _, _, p in levels],      # infer: consistent node estimates
                                 discrete_laplace_variance(plan.epsilon_per_level))
        return plan, leaf_cells(x.shape, levels, est), None, {}

    def _publish(self, table, rng):
        spec, x = self._dense_cube(table)                               # select: the cube
        plan = self._plan(spec.shape)
        budget = Budget(plan.epsilon)
        _, cells, _, _ = self._measure(budget, rng, x, None)
        return self._release(table, spec, plan, budget, cells=cells,
                             extra={"fanout": self.fanout,
                                    "cells_postprocessed": POSTPROCESSING[self.name]})
