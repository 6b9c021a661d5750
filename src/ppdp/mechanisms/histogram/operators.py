"""The shared operators the histogram mechanisms are written in (after Ektelo, Zhang et al.
2018): *select* the counts to measure (:func:`dense_cube`, :func:`median_slices`, the boxes of
a partition or of a tree level), *measure* them (:meth:`ppdp.kernels.noise.Budget.measure`:
charge the ledger and draw the noise in one call), *partition* the cube
(:func:`~ppdp.mechanisms.histogram.kdtree.vopt_kdtree` on noisy cells,
:func:`split_at_medians`), and *infer* (:func:`tree_least_squares`, :func:`leaf_cells`; the
release-side inference is in :mod:`ppdp.estimators.histogram`). Partitioning and inference
read noisy counts only: they are post-processing.
"""

from __future__ import annotations

import numpy as np

from ...errors import PpdpError
from ...kernels.grid import DENSE_MAX_CELLS, cube_codes, dense_counts


# ------------------------------------------------------------------------------- select
def dense_cube(table, dims, bins, who: str, domains=None):
    """(CubeSpec, dense int64 count cube) of ``table`` over the declared ``domains`` / ``bins``;
    PpdpError beyond the dense limit."""
    spec, codes = cube_codes(table, dims, bins, domains)
    if spec.n_cells > DENSE_MAX_CELLS:
        raise PpdpError(f"the cube has {spec.n_cells:,} cells, more than {who}'s dense limit {DENSE_MAX_CELLS:,}; "
                        "bin the dimensions coarser or use CellHistogram (sparse)")
    return spec, dense_counts(codes, spec.shape, getattr(table, "row_weights", None))  # weights: a table of counted combinations


def whole_cube(shape) -> tuple[np.ndarray, np.ndarray]:
    """The one box covering the cube: (lo, hi), shape (1, d)."""
    shape = np.asarray(shape, np.int64)
    return np.zeros((1, len(shape)), np.int64), (shape - 1)[None, :]


def median_slices(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, level: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Level ``level`` of a kd-tree that cycles through the dimensions: every box is to be cut
    on dimension ``level mod d`` (the next one with more than one cell if that one is
    exhausted). Returns the axis per box (−1: a single cell, not cut) and, per box that is
    cut, its slice counts along that axis (disjoint across boxes and slices)."""
    D = x.ndim
    axis = np.full(len(lo), -1, np.int64)
    slices = []
    for b in range(len(lo)):
        ext = hi[b] - lo[b] + 1
        axes = [(level + k) % D for k in range(D) if ext[(level + k) % D] > 1]
        if not axes:
            continue
        ax = axis[b] = axes[0]
        sl = tuple(slice(int(a), int(z) + 1) for a, z in zip(lo[b], hi[b]))
        others = tuple(i for i in range(D) if i != ax)
        slices.append(x[sl].sum(axis=others) if others else x[sl])
    return axis, slices


# ---------------------------------------------------------------------------- partition
def split_at_medians(lo: np.ndarray, hi: np.ndarray, axis: np.ndarray, noisy: list[np.ndarray]):
    """Cut every box with ``axis`` ≥ 0 where the running sum of its noisy slice counts
    (negatives clipped to 0) first reaches half their total; the halves replace the box in
    place (lower first). ``noisy``: one array per cut box, in box order."""
    new_lo, new_hi = [], []
    cuts = iter(noisy)
    for b in range(len(lo)):
        ax = int(axis[b])
        if ax < 0:
            new_lo.append(lo[b])
            new_hi.append(hi[b])
            continue
        y = np.maximum(next(cuts), 0).astype(np.float64)
        cum = np.cumsum(y)[:-1]
        hit = np.flatnonzero(cum >= y.sum() / 2)
        k = int(hit[0]) if len(hit) else int(hi[b][ax] - lo[b][ax] + 1) - 2
        l_hi, r_lo = hi[b].copy(), lo[b].copy()
        l_hi[ax] = lo[b][ax] + k
        r_lo[ax] = lo[b][ax] + k + 1
        new_lo += [lo[b], r_lo]
        new_hi += [l_hi, hi[b]]
    return np.asarray(new_lo), np.asarray(new_hi)


# -------------------------------------------------------------------------------- infer
def tree_least_squares(noisy: list[np.ndarray], parents: list[np.ndarray], var: float) -> list[np.ndarray]:
    """Consistent least-squares node estimates on a tree (Hay et al. 2010, any fan-out).

    Up: z_v = inverse-variance combination of the node's own noisy count and its children's
    summed z; down: the parent's estimate is shared among the children in proportion to
    their variances. This is the exact generalised-least-squares solution on a tree
    (equal noise variance ``var`` at every node).
    """
    L = len(noisy)
    z: list = [None] * L
    zv: list = [None] * L
    child_sum: list = [None] * L
    child_var: list = [None] * L
    for lv in range(L - 1, -1, -1):
        h = noisy[lv].astype(np.float64)
        n = len(h)
        if lv + 1 < L:
            s: np.ndarray = np.bincount(parents[lv + 1], weights=z[lv + 1], minlength=n)
            sv: np.ndarray = np.bincount(parents[lv + 1], weights=zv[lv + 1], minlength=n)
        else:
            s = np.zeros(n)
            sv = np.zeros(n)
        has = sv > 0
        zz, vv = h.copy(), np.full(n, var)
        zz[has] = (h[has] / var + s[has] / sv[has]) / (1 / var + 1 / sv[has])
        vv[has] = 1 / (1 / var + 1 / sv[has])
        z[lv], zv[lv], child_sum[lv], child_var[lv] = zz, vv, s, sv
    est: list = [None] * L
    est[0] = z[0]
    for lv in range(1, L):
        p = parents[lv]
        est[lv] = z[lv] + (est[lv - 1][p] - child_sum[lv - 1][p]) * zv[lv] / child_var[lv - 1][p]
    return est


def leaf_cells(shape, levels, estimates: list[np.ndarray]) -> np.ndarray:
    """The dense cube of the tree's leaf (single-cell node) estimates."""
    cells = np.zeros(tuple(shape), np.float64)
    for (lo, hi, _), e in zip(levels, estimates):
        leaf = np.all(lo == hi, axis=1)
        cells[tuple(lo[leaf].T)] = e[leaf]
    return cells
