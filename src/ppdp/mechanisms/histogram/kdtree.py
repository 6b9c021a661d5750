"""Algorithm 3 of Xiao et al. (DPCube): kd-tree v-optimal partitioning of a (noisy) cube.

A box is split on the dimension with the largest range (most cells; ties → the earlier
dimension) at the cut that minimises the summed squared error (Σ (y − mean)²) of the two
halves — the cumulative weighted variance, v-optimal histogram style.

A box is a leaf (not split) when any of these holds:

* it is a single cell;
* variance test (the paper's ξ0): the unbiased sample variance s² of its cells, minus the
  known variance v of the noise on them (v = 0 for exact data), is ≤ ξ0. On noisy cells
  the raw s² must not be thresholded (a literal reading of Algorithm 3, whose experiments
  had little noise): at small α1 the noise variance alone exceeds any fixed ξ0 and the tree
  splits down to (near) single cells whatever the data;
* count test: the box's (noisy) total is ≤ ``min_count``. DPCube sets it to θ standard
  deviations of the phase-II partition noise: splitting further would release counts that
  are mostly noise (the noise/non-uniformity balance behind the grid sizes of Qardaji, Yang
  & Li 2013 and the leaf rule of Inan et al. 2010).
"""

from __future__ import annotations

import numpy as np

from ...kernels.grid import box_sums, summed_area


def vopt_kdtree(y: np.ndarray, xi0: float | None, noise_var: float = 0.0,
                min_count: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Partition the cube ``y`` (any dimension) → (lo, hi) inclusive boxes, shape (P, d).

    ``xi0`` None switches the variance test off, ``min_count`` None the count test.
    Level-synchronous: all boxes of one tree level are tested and split together, with box
    sums of y and y² from summed-area tables (exact for integer counts) and every candidate
    cut of every box evaluated in one vectorised pass.
    """
    y = np.asarray(y, dtype=np.float64)
    d = y.ndim
    sat, sat2 = summed_area(y), summed_area(y * y)
    lo = np.zeros((1, d), np.int64)
    hi = np.asarray(y.shape, np.int64)[None, :] - 1
    out_lo, out_hi = [], []
    while len(lo):
        n = np.prod(hi - lo + 1, axis=1).astype(np.float64)
        s, q = box_sums(sat, lo, hi), box_sums(sat2, lo, hi)
        leaf = n == 1
        if xi0 is not None:
            var = np.maximum(q - s * s / n, 0.0) / np.maximum(n - 1, 1)  # unbiased sample variance
            leaf |= var - noise_var <= xi0
        if min_count is not None:
            leaf |= s <= min_count
        out_lo.append(lo[leaf])
        out_hi.append(hi[leaf])
        lo, hi, s, q, n = lo[~leaf], hi[~leaf], s[~leaf], q[~leaf], n[~leaf]
        if not len(lo):
            break
        ext = hi - lo + 1
        ax = np.argmax(ext, axis=1)  # widest dimension, ties → the earlier one
        rows = np.arange(len(lo))
        ncut = ext[rows, ax] - 1
        owner = np.repeat(rows, ncut)
        start = np.cumsum(ncut) - ncut
        k = np.arange(len(owner)) - np.repeat(start, ncut)  # cut after cell lo+k
        c_lo, c_hi = lo[owner], hi[owner].copy()
        c_hi[np.arange(len(owner)), ax[owner]] = lo[owner, ax[owner]] + k
        ls, lq = box_sums(sat, c_lo, c_hi), box_sums(sat2, c_lo, c_hi)
        nl = np.prod(c_hi - c_lo + 1, axis=1).astype(np.float64)
        nr = n[owner] - nl
        sse = (lq - ls**2 / nl) + ((q[owner] - lq) - (s[owner] - ls) ** 2 / nr)
        # first minimum per box: sort candidates by (owner, sse, k)
        order = np.lexsort((k, sse, owner))
        best = k[order[start]]
        cut = lo[rows, ax] + best
        l_hi, r_lo = hi.copy(), lo.copy()
        l_hi[rows, ax] = cut
        r_lo[rows, ax] = cut + 1
        lo, hi = np.concatenate([lo, r_lo]), np.concatenate([l_hi, hi])
    return np.concatenate(out_lo).reshape(-1, d), np.concatenate(out_hi).reshape(-1, d)
