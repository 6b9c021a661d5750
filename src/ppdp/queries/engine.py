"""Vectorised evaluation of a whole workload of count queries.

Every estimator in ppdp reduces to the same kernel: for each query q and each "key" k
(a sensitive value, a randomized value, a (sub-table, value) pair …), the weighted number
of rows that satisfy q's predicates on the *other* columns:

    R[q, k] = Σ_rows  [row meets q] · w[row, k]

:class:`CountIndex` computes R for a workload without a Python loop over rows or queries:

- *Groupings.* Queries are grouped by the set of columns they constrain. The rows are
  collapsed once to their distinct combinations of every indexed column (one dense-keyed
  group-by over N rows, with the weights summed per combination); the grouping of a smaller
  column set is *projected* from the smallest grouping already built that contains it (a
  group-by over that grouping's combinations, never over the N rows again). Groupings are
  cached on the index, so a second workload costs only its queries.
- *Queries as bits.* A chunk of up to 64·2^k queries is evaluated over a grouping's n_c
  combinations as an (n_c × words) uint64 matrix, bit q of a row set when the combination
  meets query q. Each query's predicate is a boolean table over each column's domain; the
  columns are packed into a few *super-columns* of ≤ 4,096 joint labels, whose label table
  (labels × words) is the outer AND of the columns' packed tables, and a combination's bits
  are the AND of one row gathered per super-column. Cost: n_c · words per super-column —
  1/64 of a per-query boolean mask.
- *Sums a byte at a time.* R = bitsᵀ·W is read in bytes (8 queries): each non-zero byte of
  combination c in byte column j adds W[c] to the cell (j, byte value) of a (K × 256·bytes)
  table — one sparse product over the non-zero bytes, whose number follows the matching
  (query, combination) pairs, not queries × combinations — and query 8j + b is the sum of
  the cells (j, v) over the byte values v with bit b set (a fixed 0/1 matrix). A small
  grouping (at most :data:`_DENSE_COMBOS` combinations) is one dense product of its unpacked
  bits and its weights instead.

Integer keys (counts) are summed exactly in float64, so the answers do not depend on the
chunking or the order of the queries; float weights agree up to rounding.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import sparse
from threadpoolctl import threadpool_limits

from ..kernels.transition import sorted_runs

try:  # scipy's kernel of the sparse product, called with a known bound on the result (:func:`_product`)
    from scipy.sparse._sparsetools import csr_matmat as _csr_matmat
except ImportError:  # pragma: no cover - then the public product (two passes)
    _csr_matmat = None

#: derived groupings larger than this (combinations × keys, or stored entries when sparse) are not kept
_MAX_CACHED_CELLS = 16_000_000
#: stored weights of the derived groupings kept after a workload (the smallest first; :meth:`CountIndex._trim`)
_KEEP_CELLS = 1 << 22
#: queries × combinations per chunk of query bits (64 MiB of words)
_CHUNK_BITS = 1 << 29
#: (group, key) cells counted in one dense table when grouping rows by integer keys (and at
#: most :data:`_SPARSE_MIN_CELLS`); more are counted as sparse entries
_COUNT_CELLS = 1 << 26
#: rows counted at once when grouping rows by integer keys (bounds the temporaries)
_COUNT_ROWS = 1 << 22
#: keys ranked at once by :func:`_distinct_keys` (bounds its temporaries)
_RANK_ROWS = 1 << 20
#: many (group, key) cells are counted by one sort of the rows' cells while they take at most
#: this many bytes (int64), else as block-wise sparse sums
_SORT_COUNT_BYTES = 1 << 30
#: bytes of query bits per reduction block (bounds the non-zero bytes held at once)
_BLOCK_BYTES = 1 << 23
#: uint64 words of query bits built at once (a block of combinations × the chunk's words)
_BLOCK_WORDS = 1 << 19
#: matching (combination, query) pairs per reduction block (bounds the sparse pairs held at once)
_BLOCK_PAIRS = 1 << 18
#: a block whose non-zero bytes hold more set bits than this on average is summed a byte at a time
_BYTE_PATH_BITS = 3.0
#: a sparse grouping of at most this many keys is summed against the query bytes densely
_DENSE_KEYS = 32
#: a sparse block product filling at least this share of the (queries × keys) cells is added
#: to the sums as a dense array, a sparser one entry by entry
_ADD_DENSE_SHARE = 0.25
#: a block of at most this many combinations (and :data:`_DENSE_CELLS` combination × query
#: cells) is summed as one dense product of its unpacked query bits and its weights: the byte
#: path's (byte cells × keys) table is larger than the product there (the single-attribute
#: predicates of the empirical-Bayes parents: tens of combinations, thousands of queries)
_DENSE_COMBOS = 1024
_DENSE_CELLS = 1 << 21
#: cells of a densified grouping kept for the next workload
_MAX_DENSE_KEPT = 1 << 21
#: the cost model that decides whether a column set's queries get their own grouping (derived
#: from the smallest built superset) or are answered on that parent, in ns per parent
#: combination (measured on EDU-like releases at 10^7 rows): answering a chunk of queries costs
#: about _COST_COMBO per combination (its query bits, their scan) plus _COST_PAIR per matching
#: (combination, query) pair and weight; a derivation about _COST_DERIVE_BASE per parent
#: combination plus _COST_DERIVE_ENTRY per weight. Derived when the combinations it removes
#: save more than it costs.
_COST_COMBO = 150.0
_COST_PAIR = 15.0
_COST_DERIVE_BASE = 10.0
_COST_DERIVE_ENTRY = 12.0
#: labels of one super-column (its label table: labels × query words)
_PACK_LABELS = 4096
#: bit b of byte v, for every byte value
_BIT_TABLE = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little").astype(bool)
#: an integer-keyed grouping of more (combinations × keys) than this, at most
#: :data:`_SPARSE_DENSITY` non-zero, is kept as a sparse matrix: its derived groupings then
#: cost its non-zeros, and a chunk of queries is a sparse mask times it
_SPARSE_MIN_CELLS = 1 << 20
_SPARSE_DENSITY = 0.2


class LazyColumns(Mapping):
    """The codes of each named column, produced by ``load(column)`` when asked (not kept): the
    ``columns`` of a :class:`CountIndex` built from a combined row key, which never needs
    them whole (they stay available for a check against a row scan)."""

    def __init__(self, names: Sequence[str], load):
        self._names = list(names)
        self._load = load

    def __getitem__(self, column: str) -> np.ndarray:
        if column not in self._names:
            raise KeyError(column)
        return np.asarray(self._load(column))

    def __contains__(self, column) -> bool:  # (Mapping's would load the column to answer)
        return column in self._names

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class CountIndex:
    """Rows with categorical columns and per-row weights over K keys.

    ``keys`` is either an int array (N,) of key codes in [0, K) (weight 1 on that key) or a
    float array (N, K) of weights. ``row_key`` (optional): the rows' combined key over the
    columns in ``columns``' order (:func:`combine`), computed by the caller a column at a time
    (then ``columns`` may be a :class:`LazyColumns`); the index takes it over (it is
    overwritten) and builds its first grouping from it instead of the columns.
    """

    def __init__(self, columns: Mapping[str, np.ndarray], domain_sizes: Mapping[str, int], keys: np.ndarray,
                 n_keys: int | None = None, row_key: np.ndarray | None = None):
        self.columns = columns if isinstance(columns, LazyColumns) else {c: np.asarray(v) for c, v in columns.items()}
        self.sizes = {c: int(domain_sizes[c]) for c in self.columns}
        self._row_key = row_key
        keys = np.asarray(keys)
        if keys.ndim == 1:
            self.K = int(n_keys if n_keys is not None else (keys.max() + 1 if len(keys) else 1))
        else:
            self.K = keys.shape[1]
        self.keys = keys
        self.n = len(keys)
        self._groups: dict[tuple[str, ...], tuple[dict[str, np.ndarray], np.ndarray]] = {}
        self._base: tuple[dict[str, np.ndarray], np.ndarray] | None = None
        self._pack_cache: dict[tuple[tuple[str, ...], tuple[str, ...]], list] = {}
        self._hist: dict[tuple[tuple[str, ...], str], np.ndarray] = {}
        self._wt: dict[tuple[str, ...], tuple[Any, Any]] = {}
        self._integral = keys.ndim == 1

    # ------------------------------------------------------------ grouping
    @staticmethod
    def _distinct(codes: list[np.ndarray], dims: list[int]):
        """Distinct combinations: (unique combined keys, inverse). Dense counting when the
        product of the domain sizes is small, a sort otherwise."""
        prod = float(np.prod(dims, dtype=float))
        if prod >= 2**62:  # pragma: no cover - astronomically large domains
            stacked = np.stack(codes, axis=1)
            uniq, inv = np.unique(stacked, axis=0, return_inverse=True)
            return uniq, inv.ravel(), True
        return (*_distinct_keys(combine(codes, dims), prod), False)

    def _unravel(self, uniq: np.ndarray, cols: tuple[str, ...]) -> dict[str, np.ndarray]:
        """Each column's codes of the combined keys ``uniq``, in narrow integers."""
        dims = [self.sizes[c] for c in cols]
        return {c: narrow(v, self.sizes[c]) for c, v in zip(cols, np.unravel_index(uniq, dims))}

    def _weights(self, inv: np.ndarray, n_c: int, weights=None):
        """Sum per-row weights into n_c groups (``inv``: group of each row); ``weights`` (rows ×
        K, dense or sparse) default: the index's own. Integer keys give exact counts, kept
        sparse when large and mostly zero (:data:`_SPARSE_MIN_CELLS`)."""
        if weights is None and self.keys.ndim == 1:
            return self._count_keys(inv, n_c)
        if weights is not None and sparse.issparse(weights):  # derived from a sparse grouping: O(its non-zeros)
            agg = sparse.csc_matrix((np.ones(len(inv)), inv.astype(np.int32), np.arange(len(inv) + 1)),
                                    shape=(n_c, len(inv)))
            # each parent combination is in one group: at most one entry per parent entry
            out = _product(agg.tocsr(), weights.tocsr(), weights.nnz, trim=True)
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

    def _count_keys(self, inv: np.ndarray, n_c: int):
        """Rows counted per (group ``inv``, integer key): a dense (n_c × K) float64 array, or a
        CSR matrix when large and mostly zero. One bincount over the (group, key) cells when
        they are few (:data:`_SPARSE_MIN_CELLS`), else the rows as (group, key) entries of a
        sparse matrix whose duplicates are summed — a counting sort by group, O(rows), a block
        of :data:`_COUNT_ROWS` rows at a time (bounded memory, narrow integers)."""
        K = self.K
        cells = n_c * K
        n = len(inv)
        if cells <= min(_COUNT_CELLS, _SPARSE_MIN_CELLS):
            sums = np.zeros(cells, dtype=np.int64)
            for a in range(0, n, _COUNT_ROWS):
                cell = inv[a:a + _COUNT_ROWS].astype(np.int64)
                cell *= K
                cell += self.keys[a:a + _COUNT_ROWS]
                sums += np.bincount(cell, minlength=cells)
            return sums.reshape(n_c, K).astype(np.float64)
        if n * 8 <= _SORT_COUNT_BYTES:  # the (group, key) cells sorted once: each run is one entry
            return self._sorted_counts(inv, n_c)
        count_t = np.int32 if n < 2**31 else np.int64
        acc = None
        for a in range(0, n, _COUNT_ROWS):
            r = inv[a:a + _COUNT_ROWS]
            part = sparse.csr_matrix((np.ones(len(r), dtype=count_t), (r, self.keys[a:a + _COUNT_ROWS])), shape=(n_c, K))
            acc = part if acc is None else acc + part
        if acc is None:
            acc = sparse.csr_matrix((n_c, K), dtype=count_t)
        acc.sum_duplicates()
        if cells <= _SPARSE_MIN_CELLS or acc.nnz > _SPARSE_DENSITY * cells:
            return acc.toarray().astype(np.float64)
        return sparse.csr_matrix((acc.data.astype(np.float64), acc.indices, acc.indptr), shape=(n_c, K))

    def _sorted_counts(self, inv: np.ndarray, n_c: int):
        """:meth:`_count_keys` of many cells by one sort of the rows' (group, key) cells: the runs
        of equal cells are the entries, in row-major order (a CSR matrix with sorted indices
        directly; dense when not mostly zero). The same counts as the block-wise sparse sums."""
        K = self.K
        cells = n_c * K
        cell: np.ndarray = inv.astype(np.int32 if cells < 2**31 else np.int64)  # a copy: ``inv`` is kept
        np.multiply(cell, K, out=cell)
        np.add(cell, self.keys, out=cell, casting="unsafe")
        cell.sort()
        u, runs = sorted_runs(cell)  # each run of equal cells is one entry
        del cell
        counts = runs.astype(np.float64)
        u = u.astype(np.int64)
        row, col = np.divmod(u, K)
        indices = col.astype(np.int32)
        indptr = np.zeros(n_c + 1, dtype=np.int64)
        np.cumsum(np.bincount(row, minlength=n_c), out=indptr[1:])
        W = sparse.csr_matrix((counts, indices, indptr), shape=(n_c, K))
        W.has_sorted_indices = True
        if cells <= _SPARSE_MIN_CELLS or W.nnz > _SPARSE_DENSITY * cells:
            return W.toarray()
        return W

    def _base_group(self):
        """All indexed columns at once; every other grouping is derived from this (fewer rows)."""
        if self._base is None:
            cols = tuple(self.columns)
            if not cols:
                self._base = ({}, self._weights(np.zeros(self.n, dtype=np.int64), 1))
            else:
                dims = [self.sizes[c] for c in cols]
                if self._row_key is not None:  # the caller's combined key (then overwritten: the index owns it)
                    key, self._row_key = self._row_key, None
                    uniq, inv = _distinct_keys(key, float(np.prod(dims, dtype=float)), in_place=True)
                    del key
                    stacked = False
                else:
                    uniq, inv, stacked = self._distinct([self.columns[c] for c in cols], dims)
                combo = {c: uniq[:, i] for i, c in enumerate(cols)} if stacked else self._unravel(uniq, cols)
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
            g = self._derive(cols, self._parent(cols))
        return self._keep(cols, g)

    def _keep(self, cols: tuple[str, ...], g):
        w_g: Any = g[1]
        if _stored(w_g) <= _MAX_CACHED_CELLS:  # a large derived grouping is rebuilt when asked again (memory)
            self._groups[cols] = g
        return g

    def _parent(self, cols: tuple[str, ...]):
        """The smallest grouping already built that contains ``cols``: (its columns, combinations, weights)."""
        base_combo, base_W = self._base_group()
        best = (tuple(base_combo), base_combo, base_W)
        for pcols, (pc, pw) in self._groups.items():
            if pw.shape[0] < best[2].shape[0] and set(cols) <= set(pcols):
                best = (pcols, pc, pw)
        return best

    def _derive(self, cols: tuple[str, ...], parent, distinct=None):
        """The grouping of ``cols`` from a grouping of a superset (a group-by over its
        combinations; ``distinct``: their (uniq, inv, stacked) over ``cols`` when known)."""
        _, parent_combo, parent_W = parent
        dims = [self.sizes[c] for c in cols]
        uniq, inv, stacked = distinct if distinct is not None else self._distinct([parent_combo[c] for c in cols], dims)
        combo = {c: uniq[:, i] for i, c in enumerate(cols)} if stacked else self._unravel(uniq, cols)
        return (combo, self._weights(inv, len(uniq), parent_W))

    def _target(self, cols: tuple[str, ...], masks, qidx: list[int]):
        """The grouping a set of queries on ``cols`` is answered over: (its columns, combinations,
        weights). Its own (derived once, cached) when that pays, else the parent (the smallest
        grouping built that contains ``cols``), which then answers them directly: a derivation
        costs a pass over the parent's combinations and weights, answering on the parent costs
        each query chunk the parent's combinations, and each query its matching combinations —
        the expected matches per parent combination (F) estimated from the parent's per-column
        value counts (cost model: :data:`_COST_COMBO`)."""
        g = self._groups.get(cols)
        if g is not None:
            return cols, g[0], g[1]
        base_combo, base_W = self._base_group()
        if set(cols) == set(base_combo):
            g = self.group(cols)
            return cols, g[0], g[1]
        parent = self._parent(cols)
        pcols, pcombo, pW = parent
        n_p = pW.shape[0]
        F = self._expected_matches(pcols, pcombo, n_p, cols, masks, qidx)
        dims = [self.sizes[c] for c in cols]
        distinct = self._distinct([pcombo[c] for c in cols], dims)
        saved = 1.0 - len(distinct[0]) / max(n_p, 1)  # the share of combinations the derivation removes
        r = (pW.nnz if sparse.issparse(pW) else pW.size) / max(n_p, 1)  # weights per combination
        if saved * (_COST_COMBO + _COST_PAIR * r * F) > _COST_DERIVE_BASE + _COST_DERIVE_ENTRY * r:
            g = self._keep(cols, self._derive(cols, parent, distinct))
            return cols, g[0], g[1]
        return parent

    def _expected_matches(self, pcols, pcombo, n_p: int, cols, masks, qidx) -> float:
        """Σ_q (share of the grouping's combinations meeting query q), each query's share the
        product of its columns' shares (value counts of the grouping's combinations, cached)."""
        share = np.ones(len(qidx))
        for c in cols:
            h = self._hist.get((pcols, c))
            if h is None or len(pcombo[c]) != n_p:
                h = np.bincount(pcombo[c], minlength=self.sizes[c]).astype(np.float64)
                if pcols in self._groups or pcols == tuple(self.columns):
                    self._hist[(pcols, c)] = h
            share *= np.stack([masks[q][c] for q in qidx]).astype(np.float64) @ h / max(n_p, 1)
        return float(share.sum())

    # ------------------------------------------------------------- answers
    def _packs(self, cols: tuple[str, ...], combo: Mapping[str, np.ndarray], limit: int = _PACK_LABELS,
               gcols: tuple[str, ...] | None = None):
        """Pack columns into few "super-columns" whose joint domain is ≤ ``limit`` labels, so a
        query's bits over the combinations need one gather per super-column, not per column:
        ``[(columns, their domain sizes, the super-column's code of every combination)]``,
        cached beside the grouping (``gcols``: its columns, default ``cols``)."""
        gcols = cols if gcols is None else gcols
        got = self._pack_cache.get((gcols, cols))
        if got is not None and len(got[0][2]) == len(next(iter(combo.values()))):
            return got
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
            out.append((p, dims, combine([combo[c] for c in p], dims)))
        if gcols in self._groups or gcols == tuple(self.columns):
            self._pack_cache[(gcols, cols)] = out
        return out

    def sums(self, masks: Sequence[Mapping[str, np.ndarray]], reduce=None, width: int | None = None) -> np.ndarray:
        """R (n_queries × K): masks[q] maps each constrained column to a boolean domain mask.

        ``reduce(queries, R_rows)`` (with ``width``): what is wanted of R is a few numbers per
        query (``R_rows``: R's rows of the query indices ``queries``; it returns their
        (len(queries) × width) numbers), applied to each chunk of queries as its sums are made:
        the (n_queries × K) sums are never held at once (with thousands of keys they are the
        largest array of a workload). Returns (n_queries × width)."""
        # the products here are many small, memory-bound matmuls: BLAS threads only add
        # contention (measured: up to 200× slower on a loaded 2-core machine)
        with threadpool_limits(limits=1, user_api="blas"):
            out = self._sums(masks, reduce, width)
        self._trim()
        return out

    def _drop_unneeded(self, cols: tuple[str, ...], later: list[set]) -> None:
        """Drop the derived grouping of ``cols`` when it is large and none of the ``later``
        column sets of the workload lies within it (its memory then serves what follows)."""
        g = self._groups.get(cols)
        if g is None or set(cols) == set(self.columns) or any(c <= set(cols) for c in later):
            return
        if _stored(g[1]) > _KEEP_CELLS // 4:
            self._forget(cols)

    def _forget(self, cols: tuple[str, ...]) -> None:
        """Drop a derived grouping and what is kept beside it."""
        del self._groups[cols]
        self._wt.pop(cols, None)
        for pk in [k for k in self._pack_cache if k[0] == cols]:
            del self._pack_cache[pk]
        for hk in [k for k in self._hist if k[0] == cols]:
            del self._hist[hk]

    def _trim(self) -> None:
        """Drop the largest derived groupings beyond :data:`_KEEP_CELLS` stored weights in all
        (with what is kept beside them): they serve the workload that built them, as parents of
        its smaller column sets; what follows (an estimator's fit) reuses their memory instead
        of fresh pages, and a later workload derives them again."""
        sizes = {c: _stored(w) for c, (_, w) in self._groups.items()}
        total = sum(sizes.values())
        for cols in sorted(sizes, key=lambda c: -sizes[c]):
            if total <= _KEEP_CELLS:
                break
            total -= sizes[cols]
            self._forget(cols)

    def _sums(self, masks: Sequence[Mapping[str, np.ndarray]], reduce=None, width: int | None = None) -> np.ndarray:
        # a predicate selecting its whole domain constrains nothing: the query is answered on
        # the grouping of the other columns (fewer combinations, the same sums); queries with
        # the same predicates (e.g. differing only in a column split off, like the SA) once
        uniq: dict[tuple, int] = {}
        first: list[dict[str, np.ndarray]] = []
        inv = np.empty(len(masks), dtype=np.int64)
        for qi, m in enumerate(masks):
            kept = {}
            for c, v in m.items():
                v = np.asarray(v, dtype=bool)
                if not v.all():
                    kept[c] = v
            h = tuple(sorted((c, v.tobytes()) for c, v in kept.items()))
            j = uniq.setdefault(h, len(first))
            if j == len(first):
                first.append(kept)
            inv[qi] = j
        fn = reduce if reduce is not None else (lambda queries, R: R)  # default: the sums themselves
        if reduce is None:
            width = self.K
        # each distinct query's original ones: order[starts[j]:starts[j + 1]]
        order = np.argsort(inv, kind="stable")
        starts = np.searchsorted(inv[order], np.arange(len(first) + 1))
        res = np.zeros((len(masks), int(width if width is not None else 1)), dtype=np.float64)

        def emit(distinct: np.ndarray, R: np.ndarray) -> None:
            counts = starts[distinct + 1] - starts[distinct]
            if np.all(counts == 1):  # no repeats in the chunk: its rows are the queries'
                res[order[starts[distinct]]] = fn(order[starts[distinct]], R)
                return
            first_of = np.repeat(starts[distinct], counts)  # each original's run start
            offset = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
            queries = order[first_of + offset]
            res[queries] = fn(queries, R[np.repeat(np.arange(len(distinct)), counts)])

        self._distinct_sums(first, emit)
        return res

    def _distinct_sums(self, masks: Sequence[Mapping[str, np.ndarray]], emit) -> None:
        """:meth:`sums` of distinct queries, each over the columns it constrains:
        ``emit(queries, R_rows)`` receives each chunk's sums as they are made (none kept)."""
        by_cols: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for qi, m in enumerate(masks):
            by_cols[tuple(sorted(m))].append(qi)
        # larger column sets first, so smaller ones can be derived from them
        order = sorted(by_cols.items(), key=lambda kv: -len(kv[0]))
        for at, (cols, qidx) in enumerate(order):
            if at:  # a derived grouping no later column set can be derived from has served
                self._drop_unneeded(order[at - 1][0], [set(c) for c, _ in order[at:]])
            qarr = np.asarray(qidx)
            if not cols:
                W = self.group(cols)[1]
                emit(qarr, np.broadcast_to(np.asarray(W[0].toarray() if sparse.issparse(W) else W[0]).ravel(),
                                           (len(qarr), self.K)))
                continue
            gcols, combo, W = self._target(cols, masks, qidx)
            n_c = W.shape[0]
            packs = self._packs(cols, combo, gcols=gcols)
            # queries per chunk: 64 × a power of two (one bit each in the words of every combination)
            step = 64 << max(0, int(np.log2(max(1, _CHUNK_BITS // max(n_c, 1) // 64))))
            for s in range(0, len(qidx), step):
                chunk = qidx[s : s + step]
                emit(qarr[s : s + step], self._chunk_sums(chunk, masks, packs, W, gcols))

    def _chunk_sums(self, chunk: list[int], masks, packs, W, cols) -> np.ndarray:
        """R for one chunk of queries over one grouping: each query is a bit in a row of
        uint64 words per combination (the AND of its columns' domain-mask bits, gathered
        through each super-column's label table), then the set bits — the (query,
        combination) pairs that match — are summed against the weights: as a sparse
        product when few match, as a dense one when many do."""
        nq = len(chunk)
        n_words = 1 << int(np.ceil(np.log2(-(-nq // 64))))  # a power of two: byte columns by shifts
        luts = []
        for p, dims, code in packs:
            lut = None
            for c in p:  # outer AND over the packed columns → (Π dims, words)
                m = np.zeros((self.sizes[c], n_words * 64), dtype=bool)
                m[:, :nq] = np.stack([masks[q][c] for q in chunk], axis=1)
                w = np.packbits(m, axis=1, bitorder="little").view(np.uint64)
                lut = w if lut is None else (lut[:, None, :] & w[None, :, :]).reshape(-1, n_words)
            assert lut is not None
            luts.append((lut, code))
        n_c = W.shape[0]
        # a block of combinations at a time: the bits and their pairs stay small (reused memory)
        rows = max(1024, _BLOCK_WORDS // n_words)
        if rows >= n_c:
            return self._reduce(self._bits(luts, 0, n_c, n_words), W, nq, cols)
        out = np.zeros((nq, self.K), dtype=np.float64)
        for a in range(0, n_c, rows):
            b = min(n_c, a + rows)
            self._reduce(self._bits(luts, a, b, n_words), W[a:b], nq, None, out=out)
        return out

    @staticmethod
    def _bits(luts, a: int, b: int, n_words: int) -> np.ndarray:
        """The query bits of combinations a … b − 1: the AND of each super-column's label row."""
        bits = np.empty((b - a, n_words), dtype=np.uint64)
        for i, (lut, code) in enumerate(luts):
            if i == 0:
                np.take(lut, code[a:b], axis=0, out=bits, mode="clip")  # codes in range; mode raise buffers `out`
            else:
                np.bitwise_and(bits, np.take(lut, code[a:b], axis=0), out=bits)
        return bits

    def _reduce(self, bits: np.ndarray, W, nq: int, cols: tuple[str, ...] | None = (),
                out: np.ndarray | None = None) -> np.ndarray:
        """Σ_c bit(c, q)·W[c] for every query q of the chunk: (nq × K) float64, added into
        ``out`` when given (the sums of several blocks of combinations).

        The set bits — the (combination, query) pairs that match — become a sparse 0/1
        (combinations × queries) matrix P, and R = Pᵀ·W: the cost is the matching pairs' times
        W's entries per combination, not the queries × combinations'. Combinations are taken in
        blocks of at most :data:`_BLOCK_PAIRS` pairs. A block whose non-zero bytes hold many
        bits each (broad queries) is summed a byte at a time instead (:meth:`_reduce_bytes`).
        A sparse block product is added entry by entry (:func:`_add_entries`), not as a dense
        (queries × keys) array: with many keys, selective queries match few of them."""
        n_c, n_words = bits.shape
        if n_c and n_c <= _DENSE_COMBOS and n_c * nq <= _DENSE_CELLS:  # a small grouping: one dense product
            M = np.unpackbits(bits.view(np.uint8), axis=1, count=nq, bitorder="little").astype(np.float64)
            R = np.ascontiguousarray((W.T @ M).T) if sparse.issparse(W) else M.T @ np.asarray(W, dtype=np.float64)
            if out is None:
                return R
            out += R
            return out
        if out is None:
            out = np.zeros((nq, self.K), dtype=np.float64)
        if n_c == 0:
            return out
        per_row = np.bitwise_count(bits).sum(axis=1, dtype=np.int64)
        cum = np.cumsum(per_row)
        if cum[-1] == 0:
            return out
        nb = n_words * 8
        cuts = np.unique(np.searchsorted(cum, np.arange(_BLOCK_PAIRS, int(cum[-1]), _BLOCK_PAIRS), side="right"))
        bounds = [0, *[int(c) for c in cuts if 0 < c < n_c], n_c]
        for a, b in zip(bounds[:-1], bounds[1:]):
            by = bits[a:b].view(np.uint8).ravel()
            nz = np.flatnonzero(by != 0)  # a boolean's non-zeros are found several times faster than a byte's
            if not len(nz):
                continue
            n_pairs = int(cum[b - 1] - (cum[a - 1] if a else 0))
            whole = (a, b) == (0, n_c)
            if n_pairs > _BYTE_PATH_BITS * len(nz):  # broad queries: a byte (8 queries) at a time
                out += self._reduce_bytes(bits[a:b], W if whole else W[a:b], nq, cols if whole else None)
                continue
            q = _set_bits(by, nz, nb)
            del nz
            indptr = np.zeros(b - a + 1, dtype=np.int64)
            np.cumsum(per_row[a:b], out=indptr[1:])
            P = sparse.csr_matrix((np.ones(len(q)), q, indptr), shape=(b - a, nb * 8))
            Wb = W if whole else W[a:b]
            if sparse.issparse(Wb) and self.K <= _DENSE_KEYS:  # few keys: one dense pass beats two sparse ones
                Wb = Wb.toarray()
            if sparse.issparse(Wb):  # one operand is transposed to CSR (Wᵀ, or Pᵀ): the smaller
                cells = P.shape[1] * self.K  # a bound on the product's entries
                if Wb.nnz < len(q):  # (keys × queries)
                    _add_entries(out, _product(Wb.T.tocsr(), P, cells), nq, transposed=True)
                else:
                    _add_entries(out, _product(P.T.tocsr(), Wb.tocsr(), cells), nq)
            else:
                out += (P.T @ np.asarray(Wb, dtype=np.float64))[:nq]
            del P, q
        return out

    def _reduce_bytes(self, bits: np.ndarray, W, nq: int, cols: tuple[str, ...] | None = ()) -> np.ndarray:
        """:meth:`_reduce` a byte (8 queries) at a time: each non-zero byte of combination c in
        byte column j adds W[c] to the cell (j, byte value) of a (K × byte columns · 256)
        table H — one sparse product over the non-zero bytes — and query 8j + b is then the
        sum of the cells (j, v) of the byte values v with bit b set (H times a fixed 0/1
        matrix). Worth it when the non-zero bytes hold many bits each."""
        n_c, n_words = bits.shape
        nb = n_words * 8
        out = np.zeros((self.K, nb * 8), dtype=np.float64)
        expand = _byte_bits(nb)
        block = max(1, _BLOCK_BYTES // nb)
        for a in range(0, n_c, block):
            b = min(n_c, a + block)
            by2 = bits[a:b].view(np.uint8)
            by = by2.ravel()
            nonzero_byte = by2 != 0
            nz = np.flatnonzero(nonzero_byte)
            if not len(nz):
                continue
            rows = b - a
            # cell (byte column j, byte value v) = 256·j + v, with j = index mod nb (nb a power of two)
            cell = (nz & (nb - 1)).astype(np.int32)
            cell <<= 8
            cell |= by[nz]
            del nz
            indptr = np.zeros(rows + 1, dtype=np.int64)
            np.cumsum(nonzero_byte.sum(axis=1), out=indptr[1:])
            del nonzero_byte
            # combinations × cells: one entry per non-zero byte
            B = sparse.csr_matrix((np.ones(len(cell)), cell, indptr), shape=(rows, nb * 256))
            Wb = self._product_form(W, cols) if (a, b) == (0, n_c) else self._product_form(W[a:b])
            if sparse.issparse(Wb):  # W's transpose
                out += (Wb @ B @ expand).toarray()
            else:
                out += (B.T @ np.asarray(Wb, dtype=np.float64)).T @ expand
        return np.ascontiguousarray(out[:, :nq].T)

    def _product_form(self, W, cols: tuple[str, ...] | None = None):
        """W as :meth:`_reduce` multiplies it: dense when it has few keys (one dense pass beats
        two sparse ones), else its transpose as CSR; kept beside a cached grouping (``cols``)."""
        got = self._wt.get(cols) if cols is not None else None
        if got is not None and got[0] is W:
            return got[1]
        if not sparse.issparse(W):
            out = W
        elif self.K <= _DENSE_KEYS:
            out = W.toarray()
        else:
            out = W.T.tocsr()
        # the transpose costs what the grouping does; a densified one only when small
        if cols is not None and cols in self._groups and self._groups[cols][1] is W and \
                (sparse.issparse(out) or (out is not W and out.size <= _MAX_DENSE_KEPT)):
            self._wt[cols] = (W, out)
        return out


def _add_entries(out: np.ndarray, R: sparse.csr_matrix, nq: int, transposed: bool = False) -> None:
    """out (nq × K, C order) += R, R a CSR product (queries × keys, or keys × queries when
    ``transposed``; query rows or columns from ``nq`` on are padding). A product holding a
    large share of the cells is added densely; otherwise its entries are scattered into
    ``out`` (each (row, column) once in a product: no duplicates to sum)."""
    if R.nnz == 0:
        return
    if R.nnz >= _ADD_DENSE_SHARE * out.size:
        D = R.toarray()
        out += D[:, :nq].T if transposed else D[:nq]
        return
    row = np.repeat(np.arange(R.shape[0], dtype=np.int64), np.diff(R.indptr))
    col = R.indices.astype(np.int64)
    q, k = (col, row) if transposed else (row, col)
    keep = q < nq
    flat = out.reshape(-1)
    if keep.all():
        flat[q * out.shape[1] + k] += R.data
    else:
        flat[q[keep] * out.shape[1] + k[keep]] += R.data[keep]


def _stored(W) -> int:
    """Stored weights of a grouping: its entries when sparse, its cells when dense."""
    return int(W.nnz) if sparse.issparse(W) else int(W.size)


#: a product whose bound (:func:`_product`) exceeds this many entries is left to scipy's two passes
_ONE_PASS_ENTRIES = 1 << 24


def _product(A: sparse.csr_matrix, B: sparse.csr_matrix, bound: int, trim: bool = False) -> sparse.csr_matrix:
    """A @ B (CSR) when the result is known to hold at most ``bound`` entries: scipy's product
    first counts them (a pass over every pair of entries, as long as the product itself); with
    the bound, its kernel runs once into buffers of that size. ``trim``: the result is copied
    out of them when it fills less (a result that is kept: no unused buffer kept with it)."""
    if _csr_matmat is None or bound > _ONE_PASS_ENTRIES:
        return (A @ B).tocsr()
    if A.format != "csr" or B.format != "csr" or A.shape[1] != B.shape[0]:
        raise ValueError("_product: two CSR matrices of matching inner dimensions")
    M, N = A.shape[0], B.shape[1]
    idx = np.int32 if max(bound, A.nnz, B.nnz, M, N, A.shape[1]) < 2**31 else np.int64
    val = np.result_type(A.dtype, B.dtype)
    indptr = np.empty(M + 1, dtype=idx)
    indices = np.empty(bound, dtype=idx)
    data = np.empty(bound, dtype=val)
    # the kernel writes into these exact arrays: every operand in the same index and value types
    try:
        _csr_matmat(M, N, A.indptr.astype(idx, copy=False), A.indices.astype(idx, copy=False),
                    A.data.astype(val, copy=False), B.indptr.astype(idx, copy=False),
                    B.indices.astype(idx, copy=False), B.data.astype(val, copy=False), indptr, indices, data)
    except TypeError:  # a scipy whose kernel takes other arguments (they are checked before it runs)
        return (A @ B).tocsr()
    k = int(indptr[-1])
    if trim and k < bound:  # shrunk where they are (realloc: no copy, the tail returned); no views exist
        indices.resize(k, refcheck=False)
        data.resize(k, refcheck=False)
    return sparse.csr_matrix((data[:k], indices[:k], indptr), shape=(M, N))


#: per byte value: its number of set bits, its lowest set bit, and its k-th set bit
_POPCOUNT8 = np.bitwise_count(np.arange(256, dtype=np.uint8)).astype(np.int64)
_LOWBIT8 = np.array([(v & -v).bit_length() - 1 if v else 0 for v in range(256)], dtype=np.int32)
_KTHBIT8 = np.array([[k for k in range(8) if v >> k & 1] + [0] * (8 - bin(v).count("1")) for v in range(256)], dtype=np.int32)


def _set_bits(by: np.ndarray, nz: np.ndarray, nb: int) -> np.ndarray:
    """The query of every set bit of the bytes ``by`` (combinations × ``nb`` bytes, flat) at
    the non-zero positions ``nz``, in order (byte by byte, low bit first): byte j of a
    combination holds queries 8j … 8j + 7. Most non-zero bytes of selective queries hold
    one bit: each byte's lowest bit by a table, the others (bytes of several bits) after it."""
    vals = by[nz]
    cnt = _POPCOUNT8[vals]
    off = np.cumsum(cnt)
    out = np.empty(int(off[-1]) if len(off) else 0, dtype=np.int32)
    off -= cnt
    q0 = (nz & (nb - 1)).astype(np.int32)
    q0 <<= 3
    out[off] = q0 + _LOWBIT8[vals]
    multi = np.flatnonzero(cnt > 1)
    if len(multi):
        more = cnt[multi] - 1
        idx = np.repeat(multi, more)
        k = np.arange(len(idx), dtype=np.int64) - np.repeat(np.cumsum(more) - more, more) + 1
        out[off[idx] + k] = q0[idx] + _KTHBIT8[vals[idx], k]
    return out


@functools.lru_cache(maxsize=16)
def _byte_bits(nb: int) -> sparse.csr_matrix:
    """(nb·256 × nb·8) 0/1: cell (byte column j, byte value v) → the queries 8j + b of v's set bits b."""
    cell, bit = np.nonzero(np.tile(_BIT_TABLE, (nb, 1)))
    return sparse.csr_matrix((np.ones(len(cell)), (cell, (cell // 256) * 8 + bit)), shape=(nb * 256, nb * 8))


def _distinct_keys(key: np.ndarray, prod: float, in_place: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct keys, each key's rank among them) of combined keys below ``prod``:
    dense counting when ``prod`` is small against the number of keys, a sort otherwise.
    ``in_place``: the ranks may be written over ``key`` (no second array of the keys' size)."""
    if prod <= max(4 * len(key), 1 << 20):
        present = np.zeros(-(-int(prod) // 64) * 64, dtype=bool)
        for a in range(0, len(key), _COUNT_ROWS):
            present[key[a:a + _COUNT_ROWS]] = True
        uniq = np.flatnonzero(present)
        # each key's rank among the present ones from a bitmap of them: the set bits of the
        # whole 64-bit words before it plus those below it in its word (a table of ranks over
        # the domain would be touched at every present key: the domain's size in fresh memory)
        words = np.packbits(present, bitorder="little").view(np.uint64)
        del present
        dt = np.int32 if len(uniq) < 2**31 else np.int64
        per = np.bitwise_count(words)
        before = np.cumsum(per, dtype=np.int64)
        before -= per
        before = before.astype(dt)
        out = key if in_place and key.dtype == dt else np.empty(len(key), dtype=dt)
        one = np.uint64(1)
        for a in range(0, len(key), _RANK_ROWS):
            k = key[a:a + _RANK_ROWS]
            w = k >> 6
            below = np.left_shift(one, (k & 63).astype(np.uint64))
            below -= one
            below &= words[w]
            np.add(np.bitwise_count(below), before[w], out=out[a:a + _RANK_ROWS], casting="unsafe")
        return uniq, out
    uniq, inv = np.unique(key, return_inverse=True)
    return uniq, inv.ravel()


def combine(codes: Sequence[np.ndarray], dims: Sequence[int]) -> np.ndarray:
    """Row-major combined key of per-column codes (``np.ravel_multi_index`` without its
    per-column int64 copies): int32 when the product of ``dims`` allows, else int64."""
    prod = float(np.prod(dims, dtype=float))
    key: np.ndarray = np.array(codes[0], dtype=np.int32 if prod < 2**31 else np.int64)
    for c, d in zip(codes[1:], dims[1:]):
        np.multiply(key, d, out=key, casting="unsafe")
        np.add(key, c, out=key, casting="unsafe")
    return key


def narrow(a: np.ndarray, size: int) -> np.ndarray:
    """``a`` (codes below ``size``) in the narrowest of int8/int16/int32/int64."""
    for t in (np.int8, np.int16, np.int32):
        if size <= np.iinfo(t).max:
            return a.astype(t, copy=False)
    return a.astype(np.int64, copy=False)


def split_masks(masks: Sequence[Mapping[str, np.ndarray]], column: str, size: int):
    """Separate one column's mask (default: all True) from the other columns' masks."""
    rest, sel = [], np.ones((len(masks), size), dtype=bool)
    for i, m in enumerate(masks):
        if column in m:
            sel[i] = m[column]
        rest.append({c: v for c, v in m.items() if c != column})
    return rest, sel
