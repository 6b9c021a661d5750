"""Baselines of Xiao et al. §6.3: a hierarchical kd-tree after Inan, Kantarcioglu, Ghinita &
Bertino (2010) and a hierarchical tree with consistency after Hay, Rastogi, Miklau & Suciu
(2010). The identity baseline is :class:`~ppdp.mechanisms.histogram.CellHistogram`.

Both draw every noisy count with the hardened discrete Laplace sampler.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import PpdpError
from ...validation import Integer, Optional, Options, Real
from ..noise import Budget, discrete_laplace_variance, noisy_counts
from .cube import DENSE_MAX_CELLS, box_sums, dense_counts, summed_area
from .dpcube import _HistogramMechanism


def _dense_cube(mech, table):
    spec, codes = mech._cube(table)
    if spec.n_cells > DENSE_MAX_CELLS:
        raise PpdpError(f"the cube has {spec.n_cells:,} cells, more than the dense limit {DENSE_MAX_CELLS:,}; bin coarser")
    return spec, dense_counts(codes, spec.shape)


class HierarchicalKDTree(_HistogramMechanism):
    """kd-tree with noisy medians and noisy leaf counts (Inan et al. 2010 style).

    ``depth`` levels of splits; level ℓ splits every box on dimension ℓ mod d (the next one
    with more than one cell if that one is exhausted) at a noisy median: the box's slice
    counts along that dimension get discrete Laplace noise (ε_level; slices of all boxes of a
    level are disjoint → parallel composition) and the cut is where their running sum first
    reaches half the noisy total. Budget: ``median_fraction``·ε spread evenly over the levels,
    the rest on the leaf counts. Default depth (documented rule): the largest d with
    n·ε_leaf/2^d ≥ 10, i.e. leaves expected to hold ≥ 10 noise scales, capped by the number of
    halvings that reach single cells.
    """

    name = "kdtree"
    default_estimator = "uniform"

    _parameter_constraints = {
        **_HistogramMechanism._common_constraints,
        "depth": Optional(Integer(1, None)),
        "median_fraction": Real(0, 1, closed="neither"),
    }
    _parameter_help = {
        **_HistogramMechanism._common_help,
        "depth": "Number of split levels (default: the documented rule).",
        "median_fraction": "Share of ε spent on the noisy medians (spread evenly over the levels).",
    }

    def __init__(self, epsilon: float, dims, depth=None, median_fraction=0.5, bins=None):
        self._set_params(locals())

    def _publish(self, table, rng):
        spec, x = _dense_cube(self, table)
        shape = np.asarray(spec.shape, np.int64)
        eps_leaf = self.epsilon * (1 - self.median_fraction)
        max_depth = int(sum(math.ceil(math.log2(s)) for s in spec.shape if s > 1)) or 1
        depth = self.depth or max(1, min(max_depth, int(math.floor(math.log2(max(table.n_rows * eps_leaf / 10, 2))))))
        eps_level = self.epsilon * self.median_fraction / depth
        budget = Budget(self.epsilon)
        D = len(shape)
        lo = np.zeros((1, D), np.int64)
        hi = (shape - 1)[None, :]
        for level in range(depth):
            budget.spend(eps_level, f"level {level}: noisy medians", parallel_over=len(lo))
            new_lo, new_hi = [], []
            for b in range(len(lo)):
                ext = hi[b] - lo[b] + 1
                axes = [(level + k) % D for k in range(D) if ext[(level + k) % D] > 1]
                if not axes:
                    new_lo.append(lo[b])
                    new_hi.append(hi[b])
                    continue
                ax = axes[0]
                sl = tuple(slice(int(a), int(z) + 1) for a, z in zip(lo[b], hi[b]))
                others = tuple(i for i in range(D) if i != ax)
                marg = x[sl].sum(axis=others) if others else x[sl]
                noisy = np.maximum(noisy_counts(rng, marg, eps_level), 0).astype(np.float64)
                cum = np.cumsum(noisy)[:-1]
                hit = np.flatnonzero(cum >= noisy.sum() / 2)
                k = int(hit[0]) if len(hit) else int(ext[ax]) - 2
                l_hi, r_lo = hi[b].copy(), lo[b].copy()
                l_hi[ax] = lo[b][ax] + k
                r_lo[ax] = lo[b][ax] + k + 1
                new_lo += [lo[b], r_lo]
                new_hi += [l_hi, hi[b]]
            lo, hi = np.asarray(new_lo), np.asarray(new_hi)
        budget.spend(eps_leaf, "noisy leaf counts", parallel_over=len(lo))
        true_p = np.rint(box_sums(summed_area(x), lo, hi)).astype(np.int64)
        y = noisy_counts(rng, true_p, eps_leaf)
        return self._release(table, spec, budget, (0.0, eps_leaf), partitions=(lo, hi, y),
                             extra={"depth": depth, "epsilon_per_level": eps_level})


def tree_levels(shape, fanout: str = "quad") -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Data-independent tree down to single cells: per level (lo, hi, parent index).

    ``fanout="quad"``: every box is halved on every dimension with more than one cell at once
    (up to 2^d children: the quadtree of 2-D data, Cormode et al. 2012); ``"binary"``: a box
    is halved on its widest dimension only (ties → earlier), a binary kd-tree. Halves: the
    lower one gets ⌊ext/2⌋ cells.
    """
    if fanout not in ("quad", "binary"):
        raise PpdpError(f"fanout must be 'quad' or 'binary', got {fanout!r}")
    shape = np.asarray(shape, np.int64)
    D = len(shape)
    lo, hi, parent = np.zeros((1, D), np.int64), (shape - 1)[None, :], np.full(1, -1)
    levels = [(lo, hi, parent)]
    while True:
        ext = hi - lo + 1
        split = np.flatnonzero(ext.max(axis=1) > 1)
        if not len(split):
            return levels
        e = ext[split]
        if fanout == "quad":
            cut = e > 1
        else:
            cut = np.zeros_like(e, bool)
            cut[np.arange(len(split)), e.argmax(axis=1)] = True
        mid = lo[split] + e // 2 - 1  # last cell of the lower half
        new_lo, new_hi, new_parent = [], [], []
        for corner in range(1 << D):  # child = choice of lower/upper half per cut dimension
            upper = np.array([(corner >> ax) & 1 for ax in range(D)], bool)
            ok = np.all(cut | ~upper[None, :], axis=1)  # uncut dimensions only take "lower" (= whole)
            c_lo, c_hi = lo[split].copy(), hi[split].copy()
            for ax in range(D):
                sel = cut[:, ax]
                if upper[ax]:
                    c_lo[sel, ax] = mid[sel, ax] + 1
                else:
                    c_hi[sel, ax] = mid[sel, ax]
            new_lo.append(c_lo[ok])
            new_hi.append(c_hi[ok])
            new_parent.append(split[ok])
        lo, hi, parent = np.concatenate(new_lo), np.concatenate(new_hi), np.concatenate(new_parent)
        levels.append((lo, hi, parent))


def tree_least_squares(noisy: list[np.ndarray], parents: list[np.ndarray], var: float) -> list[np.ndarray]:
    """Consistent least-squares node estimates on a tree (Hay et al. 2010, any fan-out).

    Up: z_v = inverse-variance combination of the node's own noisy count and its children's
    summed z; down: the parent's estimate is shared among the children in proportion to
    their variances. This is the exact generalised-least-squares solution on a tree
    (equal noise variance ``var`` at every node).
    """
    L = len(noisy)
    z = [None] * L
    zv = [None] * L
    child_sum = [None] * L
    child_var = [None] * L
    for lv in range(L - 1, -1, -1):
        h = noisy[lv].astype(np.float64)
        n = len(h)
        if lv + 1 < L:
            s = np.bincount(parents[lv + 1], weights=z[lv + 1], minlength=n)
            sv = np.bincount(parents[lv + 1], weights=zv[lv + 1], minlength=n)
        else:
            s = np.zeros(n)
            sv = np.zeros(n)
        has = sv > 0
        zz, vv = h.copy(), np.full(n, var)
        zz[has] = (h[has] / var + s[has] / sv[has]) / (1 / var + 1 / sv[has])
        vv[has] = 1 / (1 / var + 1 / sv[has])
        z[lv], zv[lv], child_sum[lv], child_var[lv] = zz, vv, s, sv
    est = [None] * L
    est[0] = z[0]
    for lv in range(1, L):
        p = parents[lv]
        est[lv] = z[lv] + (est[lv - 1][p] - child_sum[lv - 1][p]) * zv[lv] / child_var[lv - 1][p]
    return est


class ConsistentHierarchy(_HistogramMechanism):
    """Hierarchical histogram with constrained inference (Hay et al. 2010), d-dimensional.

    A data-independent tree over the cells down to single cells (:func:`tree_levels`; default
    the quadtree, every dimension halved per level, H = 1 + max_d ⌈log2 size_d⌉ levels;
    ``fanout="binary"`` a binary kd-tree with about twice the levels); every node gets a
    noisy count with ε/H (the nodes of one level are disjoint → parallel; levels →
    sequential), as in Hay et al.; the released cells are the consistent least-squares leaf
    estimates (:func:`tree_least_squares`) — a post-processing of the noisy tree, recorded as
    such in the certificate. Range queries sum the consistent cells (equivalent to summing
    the consistent node estimates of the range's canonical decomposition).
    """

    name = "consistency"
    default_estimator = "cells"

    _parameter_constraints = {**_HistogramMechanism._common_constraints, "fanout": Options("quad", "binary")}
    _parameter_help = {**_HistogramMechanism._common_help,
                       "fanout": "Tree over the cells: quad (every dimension halved per level) or binary (kd-tree)."}

    def __init__(self, epsilon: float, dims, fanout="quad", bins=None):
        self._set_params(locals())

    def _publish(self, table, rng):
        spec, x = _dense_cube(self, table)
        levels = tree_levels(spec.shape, self.fanout)
        H = len(levels)
        eps_level = self.epsilon / H
        budget = Budget(self.epsilon)
        sat = summed_area(x)
        noisy, parents = [], []
        for i, (lo, hi, parent) in enumerate(levels):
            budget.spend(eps_level, f"tree level {i}: noisy node counts", parallel_over=len(lo))
            noisy.append(noisy_counts(rng, np.rint(box_sums(sat, lo, hi)).astype(np.int64), eps_level))
            parents.append(parent)
        est = tree_least_squares(noisy, parents, discrete_laplace_variance(eps_level))
        cells = np.zeros(spec.shape, np.float64)
        for (lo, hi, _), e in zip(levels, est):
            leaf = np.all(lo == hi, axis=1)
            cells[tuple(lo[leaf].T)] = e[leaf]
        return self._release(table, spec, budget, (self.epsilon, 0.0), cells=cells,
                             extra={"levels": H, "epsilon_per_level": eps_level, "fanout": self.fanout,
                                    "cells_postprocessed": "hierarchical constrained inference (Hay et al. 2010)"})
