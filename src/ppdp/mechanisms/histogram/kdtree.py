"""Algorithm 3 of Xiao et al. (DPCube): kd-tree v-optimal partitioning of a (noisy) cube.

A box is a leaf when the variance of its cell values is ≤ ξ0 (or it is a single cell).
Otherwise it is split on the dimension with the largest range (most cells; ties → the
earlier dimension) at the cut that minimises the summed squared error (Σ (y − mean)²) of
the two halves — i.e. the cumulative weighted variance, v-optimal histogram style. The
sums needed for every cut come from slice sums along the split axis (prefix sums), so
one node costs O(cells in the box).
"""

from __future__ import annotations

import numpy as np


def vopt_kdtree(y: np.ndarray, xi0: float) -> tuple[np.ndarray, np.ndarray]:
    """Partition the cube ``y`` (any dimension) → (lo, hi) inclusive boxes, shape (P, d)."""
    y = np.asarray(y, dtype=np.float64)
    d = y.ndim
    y2 = y * y
    los, his = [], []
    stack = [(np.zeros(d, dtype=np.int64), np.asarray(y.shape, dtype=np.int64) - 1)]
    while stack:
        lo, hi = stack.pop()
        sl = tuple(slice(int(a), int(b) + 1) for a, b in zip(lo, hi))
        sub = y[sl]
        n = sub.size
        s, q = float(sub.sum()), float(y2[sl].sum())
        var = q / n - (s / n) ** 2
        ext = hi - lo + 1
        if n == 1 or var <= xi0:
            los.append(lo)
            his.append(hi)
            continue
        ax = int(np.argmax(ext))
        others = tuple(i for i in range(d) if i != ax)
        S = sub.sum(axis=others) if others else sub
        Q = y2[sl].sum(axis=others) if others else y2[sl]
        per = n // int(ext[ax])
        cS, cQ = np.cumsum(S)[:-1], np.cumsum(Q)[:-1]
        nl = per * np.arange(1, int(ext[ax]))
        nr = n - nl
        sse = (cQ - cS**2 / nl) + ((q - cQ) - (s - cS) ** 2 / nr)
        k = int(np.argmin(sse))
        cut = int(lo[ax]) + k  # left half ends at cut
        lhi = hi.copy()
        lhi[ax] = cut
        rlo = lo.copy()
        rlo[ax] = cut + 1
        stack.append((rlo, hi))
        stack.append((lo, lhi))
    return np.asarray(los, dtype=np.int64).reshape(-1, d), np.asarray(his, dtype=np.int64).reshape(-1, d)
