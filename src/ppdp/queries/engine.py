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
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import sparse
from threadpoolctl import threadpool_limits

#: derived groupings larger than this (combinations × keys, or stored entries when sparse) are not kept
_MAX_CACHED_CELLS = 16_000_000
_CHUNK_CELLS = 16_000_000  # queries × combinations per mask matrix
#: an integer-keyed grouping of more (combinations × keys) than this, at most
#: :data:`_SPARSE_DENSITY` non-zero, is kept as a sparse matrix: its derived groupings then
#: cost its non-zeros, and a chunk of queries is a sparse mask times it
_SPARSE_MIN_CELLS = 1 << 20
_SPARSE_DENSITY = 0.2


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
        self._base: tuple[dict[str, np.ndarray], np.ndarray] | None = None
        self._f32: dict[tuple[str, ...], np.ndarray] = {}
        self._integral = keys.ndim == 1

    # ------------------------------------------------------------ grouping
    @staticmethod
    def _distinct(codes: list[np.ndarray], dims: list[int]):
        """Distinct combinations: (unique combined keys, inverse). Dense counting when the
        product of the domain sizes is small, a sort otherwise."""
        prod = float(np.prod(dims, dtype=float))
        key = np.ravel_multi_index([c.astype(np.intp, copy=False) for c in codes], dims) if prod < 2**62 else None
        if key is None:  # pragma: no cover - astronomically large domains
            stacked = np.stack(codes, axis=1)
            uniq, inv = np.unique(stacked, axis=0, return_inverse=True)
            return uniq, inv.ravel(), True
        if prod <= max(4 * len(key), 1 << 20):
            present = np.zeros(int(prod), dtype=np.int64)
            present[key] = 1
            uniq = np.flatnonzero(present)
            rank = np.cumsum(present) - 1
            return uniq, rank[key], False
        uniq, inv = np.unique(key, return_inverse=True)
        return uniq, inv.ravel(), False

    def _weights(self, inv: np.ndarray, n_c: int, weights=None):
        """Sum per-row weights into n_c groups (``inv``: group of each row); ``weights`` (rows ×
        K, dense or sparse) default: the index's own. Integer keys give exact counts, kept
        sparse when large and mostly zero (:data:`_SPARSE_MIN_CELLS`)."""
        if weights is None and self.keys.ndim == 1:
            return self._collect(inv.astype(np.int64) * self.K + self.keys, None, n_c)
        if weights is not None and sparse.issparse(weights):  # derived from a sparse grouping: O(its non-zeros)
            agg = sparse.csc_matrix((np.ones(len(inv)), inv.astype(np.int32), np.arange(len(inv) + 1)),
                                    shape=(n_c, len(inv)))
            out = (agg.tocsr() @ weights).tocsr()
            if n_c * self.K <= _SPARSE_MIN_CELLS or out.nnz > _SPARSE_DENSITY * n_c * self.K:
                return out.toarray()
            return out
        w = self.keys if weights is None else weights
        if n_c == 1:
            return w.sum(axis=0, keepdims=True)
        if w.shape[1] <= 4:  # few keys: one bincount each
            return np.stack([np.bincount(inv, weights=w[:, k], minlength=n_c) for k in range(w.shape[1])], axis=1)
        # one sparse (groups × rows) indicator product instead of one bincount per key
        agg = sparse.csr_matrix((np.ones(len(inv)), (inv, np.arange(len(inv)))), shape=(n_c, len(inv)))
        return np.asarray(agg @ w)

    def _collect(self, flat: np.ndarray, data: np.ndarray | None, n_c: int):
        """Sums of ``data`` (default 1) per flat cell (group × K + key): a dense (n_c × K)
        float64 array, or a CSR matrix when large and sparse."""
        cells = n_c * self.K
        if cells <= 1 << 28:
            sums = np.bincount(flat, weights=data, minlength=cells)
            if cells <= _SPARSE_MIN_CELLS:
                return sums.reshape(n_c, self.K).astype(np.float64, copy=False)
            nz = np.flatnonzero(sums)
            if len(nz) > _SPARSE_DENSITY * cells:
                return sums.reshape(n_c, self.K).astype(np.float64, copy=False)
            vals = sums[nz].astype(np.float64, copy=False)
        else:
            nz, inv = np.unique(flat, return_inverse=True)
            vals = np.bincount(inv.ravel(), weights=data, minlength=len(nz)).astype(np.float64, copy=False)
            keep = vals != 0
            nz, vals = nz[keep], vals[keep]
        rows, cols = np.divmod(nz, self.K)
        indptr = np.zeros(n_c + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n_c), out=indptr[1:])
        return sparse.csr_matrix((vals, cols.astype(np.int32), indptr), shape=(n_c, self.K))

    def _base_group(self):
        """All indexed columns at once; every other grouping is derived from this (fewer rows)."""
        if self._base is None:
            cols = tuple(self.columns)
            if not cols:
                self._base = ({}, self._weights(np.zeros(self.n, dtype=np.int64), 1))
            else:
                dims = [self.sizes[c] for c in cols]
                uniq, inv, stacked = self._distinct([self.columns[c] for c in cols], dims)
                combo = ({c: uniq[:, i] for i, c in enumerate(cols)} if stacked
                         else dict(zip(cols, np.unravel_index(uniq, dims))))
                self._base = (combo, self._weights(inv, len(uniq)))
        return self._base

    def group(self, cols: tuple[str, ...]):
        """Distinct combinations of ``cols`` (codes per column) and their summed weights (n_c × K)."""
        g = self._groups.get(cols)
        if g is not None:
            return g
        base_combo, base_W = self._base_group()
        if not cols:
            g = ({}, np.asarray(base_W.sum(axis=0)).reshape(1, -1))
        elif set(cols) == set(base_combo):
            g = ({c: base_combo[c] for c in cols}, base_W)
        else:
            # derive from the smallest grouping already built that contains these columns
            parent_combo, parent_W = base_combo, base_W
            for pcols, (pc, pw) in self._groups.items():
                if pw.shape[0] < parent_W.shape[0] and set(cols) <= set(pcols):
                    parent_combo, parent_W = pc, pw
            dims = [self.sizes[c] for c in cols]
            uniq, inv, stacked = self._distinct([parent_combo[c] for c in cols], dims)
            combo = ({c: uniq[:, i] for i, c in enumerate(cols)} if stacked
                     else dict(zip(cols, np.unravel_index(uniq, dims))))
            g = (combo, self._weights(inv, len(uniq), parent_W))
        w_g: Any = g[1]
        if (w_g.nnz if sparse.issparse(w_g) else w_g.size) <= _MAX_CACHED_CELLS:  # a large derived grouping is rebuilt when asked again (memory)
            self._groups[cols] = g
        return g

    # ------------------------------------------------------------- answers
    def _super_columns(self, cols: tuple[str, ...], combo: Mapping[str, np.ndarray], limit: int = 4096):
        """Pack columns into few "super-columns" whose joint domain is ≤ ``limit`` labels, so a
        query's mask over combinations needs one gather per super-column, not per column."""
        order = sorted(cols, key=lambda c: self.sizes[c])
        packs: list[list[str]] = []
        for c in reversed(order):  # largest first, first-fit
            for p in packs:
                if np.prod([self.sizes[x] for x in p]) * self.sizes[c] <= limit:
                    p.append(c)
                    break
            else:
                packs.append([c])
        out = []
        for p in packs:
            dims = [self.sizes[c] for c in p]
            code = np.ravel_multi_index([combo[c].astype(np.intp, copy=False) for c in p], dims) if len(p) > 1 else combo[p[0]]
            out.append((p, dims, code))
        return out

    def sums(self, masks: Sequence[Mapping[str, np.ndarray]]) -> np.ndarray:
        """R (n_queries × K): masks[q] maps each constrained column to a boolean domain mask."""
        # the products here are many small, memory-bound matmuls: BLAS threads only add
        # contention (measured: up to 200× slower on a loaded 2-core machine)
        with threadpool_limits(limits=1, user_api="blas"):
            return self._sums(masks)

    def _sums(self, masks: Sequence[Mapping[str, np.ndarray]]) -> np.ndarray:
        out = np.zeros((len(masks), self.K), dtype=np.float64)
        by_cols: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for qi, m in enumerate(masks):
            by_cols[tuple(sorted(m))].append(qi)
        # larger column sets first, so smaller ones can be derived from them
        for cols, qidx in sorted(by_cols.items(), key=lambda kv: -len(kv[0])):
            combo, W = self.group(cols)
            qarr = np.asarray(qidx)
            if not cols:
                out[qarr] = W[0]
                continue
            n_c = W.shape[0]
            is_sparse = sparse.issparse(W)
            # integer weights whose total stays below 2^24 are summed exactly in float32 (half the
            # memory traffic); the converted grouping is kept beside the grouping
            Wm = W
            if self._integral and self.n < 2**24 and not is_sparse:
                Wm = self._f32.get(cols)
                if Wm is None or Wm.shape != W.shape:
                    Wm = W.astype(np.float32)
                    if cols in self._groups:
                        self._f32[cols] = Wm
            packs = self._super_columns(cols, combo)
            step = max(1, _CHUNK_CELLS // max(n_c, 1))
            for s in range(0, len(qidx), step):
                chunk = qidx[s : s + step]
                M = None
                for p, dims, code in packs:
                    lut = np.stack([masks[q][p[0]] for q in chunk])
                    for c in p[1:]:  # outer AND over the packed columns → (k, Π dims)
                        nxt = np.stack([masks[q][c] for q in chunk])
                        lut = (lut[:, :, None] & nxt[:, None, :]).reshape(len(chunk), -1)
                    part = np.take(lut, code, axis=1)
                    M = part if M is None else np.logical_and(M, part, out=M)
                assert M is not None  # every combination packs at least one column
                if is_sparse:  # the matching combinations only
                    r, c = np.nonzero(M)
                    indptr = np.zeros(len(chunk) + 1, dtype=np.int64)
                    np.cumsum(np.bincount(r, minlength=len(chunk)), out=indptr[1:])
                    Ms = sparse.csr_matrix((np.ones(len(c)), c.astype(np.int32), indptr), shape=(len(chunk), n_c))
                    out[qarr[s : s + step]] = (Ms @ Wm).toarray()
                else:
                    out[qarr[s : s + step]] = M.astype(Wm.dtype) @ Wm
        return out


def split_masks(masks: Sequence[Mapping[str, np.ndarray]], column: str, size: int):
    """Separate one column's mask (default: all True) from the other columns' masks."""
    rest, sel = [], np.ones((len(masks), size), dtype=bool)
    for i, m in enumerate(masks):
        if column in m:
            sel[i] = m[column]
        rest.append({c: v for c, v in m.items() if c != column})
    return rest, sel
