"""Vectorised evaluation of a whole workload of count queries.

Every estimator in ppdp reduces to the same kernel: for each query q and each "key" k
(a sensitive value, a randomized value, a (sub-table, value) pair …), the weighted number
of rows that satisfy q's predicates on the *other* columns:

    R[q, k] = Σ_rows  [row meets q] · w[row, k]

:class:`CountIndex` computes R for a workload without a Python loop over rows: queries are
grouped by the set of columns they constrain; for each set the rows are collapsed to their
distinct value combinations (a group-by, cached), and R for a chunk of queries is one
boolean mask matrix (queries × combinations) times the combination weights (a BLAS matmul).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping, Sequence

import numpy as np

_CHUNK_CELLS = 16_000_000  # queries × combinations per mask matrix


class CountIndex:
    """Rows with categorical columns and per-row weights over K keys.

    ``keys`` is either an int array (N,) of key codes in [0, K) (weight 1 on that key) or a
    float array (N, K) of weights.
    """

    def __init__(self, columns: Mapping[str, np.ndarray], domain_sizes: Mapping[str, int], keys: np.ndarray, n_keys: int | None = None):
        self.columns = {c: np.asarray(v) for c, v in columns.items()}
        self.sizes = {c: int(domain_sizes[c]) for c in self.columns}
        keys = np.asarray(keys)
        if keys.ndim == 1:
            self.K = int(n_keys if n_keys is not None else (keys.max() + 1 if len(keys) else 1))
        else:
            self.K = keys.shape[1]
        self.keys = keys
        self.n = len(keys)
        self._groups: dict[tuple[str, ...], tuple[dict[str, np.ndarray], np.ndarray]] = {}

    def _aggregate(self, inv: np.ndarray, n_c: int) -> np.ndarray:
        if self.keys.ndim == 1:
            flat = inv.astype(np.int64) * self.K + self.keys
            return np.bincount(flat, minlength=n_c * self.K).reshape(n_c, self.K).astype(np.float64)
        return np.stack([np.bincount(inv, weights=self.keys[:, k], minlength=n_c) for k in range(self.K)], axis=1)

    def group(self, cols: tuple[str, ...]):
        """Distinct combinations of ``cols`` (codes per column) and their summed weights (n_c × K)."""
        g = self._groups.get(cols)
        if g is not None:
            return g
        if not cols:
            inv = np.zeros(self.n, dtype=np.int64)
            g = ({}, self._aggregate(inv, 1))
        else:
            dims = [self.sizes[c] for c in cols]
            if float(np.prod(dims, dtype=float)) < 2**62:
                key = np.ravel_multi_index([self.columns[c].astype(np.int64) for c in cols], dims)
                uniq, inv = np.unique(key, return_inverse=True)
                combo = dict(zip(cols, np.unravel_index(uniq, dims)))
            else:  # pragma: no cover - astronomically large domains
                stacked = np.stack([self.columns[c] for c in cols], axis=1)
                uniq, inv = np.unique(stacked, axis=0, return_inverse=True)
                combo = {c: uniq[:, i] for i, c in enumerate(cols)}
            g = (combo, self._aggregate(inv.ravel(), len(uniq)))
        self._groups[cols] = g
        return g

    def sums(self, masks: Sequence[Mapping[str, np.ndarray]]) -> np.ndarray:
        """R (n_queries × K): masks[q] maps each constrained column to a boolean domain mask."""
        out = np.zeros((len(masks), self.K), dtype=np.float64)
        by_cols: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for qi, m in enumerate(masks):
            by_cols[tuple(sorted(m))].append(qi)
        for cols, qidx in by_cols.items():
            combo, W = self.group(cols)
            n_c = W.shape[0]
            luts = {c: np.stack([masks[q][c] for q in qidx]) for c in cols}
            step = max(1, _CHUNK_CELLS // max(n_c, 1))
            for s in range(0, len(qidx), step):
                sl = slice(s, s + step)
                if cols:
                    M = None
                    for c in cols:
                        part = luts[c][sl][:, combo[c]]
                        M = part if M is None else (M & part)
                    out[np.asarray(qidx[sl])] = M.astype(np.float64) @ W
                else:
                    out[np.asarray(qidx[sl])] = W[0]
        return out


def split_masks(masks: Sequence[Mapping[str, np.ndarray]], column: str, size: int):
    """Separate one column's mask (default: all True) from the other columns' masks."""
    rest, sel = [], np.ones((len(masks), size), dtype=bool)
    for i, m in enumerate(masks):
        if column in m:
            sel[i] = m[column]
        rest.append({c: v for c, v in m.items() if c != column})
    return rest, sel
