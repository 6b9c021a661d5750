"""The disclosure and verification kernels of a bucketized release that work on its ST rows, on
blocks of buckets or on chunks of a streamed release instead of bucket × value matrices: the
multiset checks of verify (:func:`same_rows`, :func:`st_values_distinct`, :func:`cell_runs`), the
sparse, typed and streamed disclosure (:func:`sparse_disclosure`, :func:`typed_disclosure`,
:func:`types_disclosure`, :func:`streamed_disclosure`) and the receiver's fake inference over
chunks of buckets (:func:`streamed_inference`). Each gives what the dense computation of
:mod:`ppdp.releases.bucket_model` gives.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..kernels.transition import sorted_runs
from .bucket_model import CERTAIN_TOL, ForbiddenFakes, fake_candidates


def same_rows(a: Sequence[Any], b: Sequence[Any], dims: Sequence[int]) -> bool:
    """Whether two sets of code columns hold the same rows as multisets: one bincount per side
    over the mixed-radix cell index when the cube has ≤ 2^28 cells, else a sort per side. A
    column may be given as a callable returning it (decoded one at a time, then dropped). The
    cell index is int32 below 2^31 cells (4 bytes a row), counted a block at a time."""
    a = [c if callable(c) else (lambda c=c: c) for c in a]
    b = [c if callable(c) else (lambda c=c: c) for c in b]
    cells = float(np.prod(np.asarray(dims, dtype=float)))
    kd = np.int32 if cells < 2.0**31 else np.int64

    def key(cols):
        k = None
        for c, d in zip(cols, dims):
            col = np.asarray(c())
            if k is None:
                k = col.astype(kd)
            else:
                k *= kd(d)
                k += col
            del col
        return k

    if cells >= 2.0**62:  # pragma: no cover - astronomically large QI cubes
        sa_ = np.stack([c() for c in a], axis=1).astype(np.int64)
        sb_ = np.stack([c() for c in b], axis=1).astype(np.int64)
        return bool(np.array_equal(sa_[np.lexsort(sa_.T[::-1])], sb_[np.lexsort(sb_.T[::-1])]))
    ka = key(a)
    if cells <= 1 << 28:  # one count array: + each row of a, − each row of b, a block at a time
        count = blocked_bincount(ka, int(cells))
        n_a = len(ka)
        del ka
        kb = key(b)
        if len(kb) != n_a:
            return False
        for s in range(0, len(kb), 1 << 23):
            c = np.bincount(kb[s:s + (1 << 23)], minlength=len(count))
            if len(c) > len(count):  # a row of b outside a's cells
                return False
            count -= c
        return not bool(count.any())
    ka.sort()
    kb = key(b)
    if len(kb) != len(ka):
        return False
    kb.sort()
    return bool(np.array_equal(ka, kb))


def st_values_distinct(sb: np.ndarray, sc: np.ndarray, n_buckets: int, m: int) -> bool:
    """Whether no (bucket ``sb``, value ``sc``) pair repeats among the ST rows. Rows grouped by
    bucket with m ≤ 64 values: each bucket's values as a 64-bit set (OR per bucket, then a
    popcount = its number of rows), a block of whole buckets at a time, O(rows); otherwise a
    sort of the narrow pair keys."""
    if m <= 64 and len(sb) and all(bool((np.diff(sb[a:a + DISCLOSURE_BLOCK + 1]) >= 0).all())
                                   for a in range(0, len(sb), DISCLOSURE_BLOCK)):
        one = np.uint64(1)
        for a, b in bucket_blocks(sb):
            bsb = sb[a:b]
            starts = np.flatnonzero(np.concatenate(([True], bsb[1:] != bsb[:-1])))
            bits = np.left_shift(one, sc[a:b].astype(np.uint64))
            rows = np.diff(np.append(starts, len(bsb)))
            if not np.array_equal(np.bitwise_count(np.bitwise_or.reduceat(bits, starts)), rows):
                return False
        return True
    pair: Any = sb.astype(np.int32 if n_buckets * m < 2**31 else np.int64)  # narrow key, sorted in place
    pair *= m
    pair += sc
    pair.sort()
    return not bool((pair[1:] == pair[:-1]).any())


#: rows per block of :func:`cell_runs` (the codes of a block of every column stay in cache)
CELL_BLOCK = 1 << 20


def cell_runs(blocks, dims: Sequence[int], n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct rows of ``n`` rows of code columns and their multiplicities: ``(cells,
    counts)``, the sorted mixed-radix cells (domain sizes ``dims``, the first column most
    significant) and how many rows hold each. The rows come as blocks (lists of per-column code
    arrays, or callables returning them); each block's cells are written into one narrow array
    (int32 below 2^31 cells, else int64), which is sorted in place and run-length encoded: 4
    bytes a row, no count array over the cube. None when the blocks do not hold ``n`` rows or a
    cell lies outside the cube; for a cube of ≥ 2^63 cells use :func:`same_rows`."""
    cells = float(np.prod(np.asarray(dims, dtype=float)))
    k = np.empty(n, dtype=np.int32 if cells < 2.0**31 else np.int64)
    pos = 0
    for cols in blocks:
        kb: Any = None
        for col, d in zip(cols, dims):  # a column may be a callable (decoded when its turn comes)
            col = np.asarray(col() if callable(col) else col)
            if kb is None:
                if pos + len(col) > n:
                    return None
                kb = k[pos:pos + len(col)]
                kb[...] = col
            else:
                if len(col) != len(kb):
                    return None
                kb *= d
                kb += col
            del col
        pos += 0 if kb is None else len(kb)
    if pos != n:
        return None
    if not n:
        return k, np.zeros(0, np.int64)
    k.sort()
    if int(k[0]) < 0 or int(k[-1]) >= cells:
        return None
    return sorted_runs(k)


def dense_ids(bid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(bid, return_inverse=True)`` in O(N + max id) by counting when the ids are
    non-negative and not sparse (a writer's ids are a permutation of 0 … n_buckets − 1), by
    sorting otherwise."""
    bid = np.asarray(bid)
    if len(bid) and int(bid.min()) >= 0 and int(bid.max()) < 2 * len(bid) + 1024:
        present = np.bincount(bid) > 0
        ids = np.flatnonzero(present)
        rank = np.cumsum(present) - 1
        return ids.astype(np.int64), rank[bid].astype(np.int64)
    ids, inv = np.unique(bid, return_inverse=True)
    return ids, np.asarray(inv, dtype=np.int64).ravel()


DISCLOSURE_BLOCK = 1 << 22  # ST rows per block of :func:`sparse_disclosure` (whole buckets per block)


def bucket_blocks(sb: np.ndarray, block: int = DISCLOSURE_BLOCK):
    """``(start, stop)`` row ranges of about ``block`` rows over the bucket-sorted ST rows
    ``sb``, each ending at a bucket boundary (a bucket larger than ``block`` is one range)."""
    n, a = len(sb), 0
    while a < n:
        b = a + block
        if b >= n:
            b = n
        else:
            e = int(np.searchsorted(sb, sb[b], side="left"))
            b = e if e > a else int(np.searchsorted(sb, sb[b], side="right"))
        yield a, b
        a = b


def sparse_disclosure(sb: np.ndarray, sc: np.ndarray, real: np.ndarray, sizes: np.ndarray, labels,
                      fake: np.ndarray | None = None) -> dict[str, Any] | None:
    """:func:`bucket_disclosure` of the exact real shares, from the ST rows (dense bucket ``sb``,
    SA code ``sc``, real count — or the listed count and the published ``fake`` flag, a fake row
    counting 0) when they are grouped by bucket — the same result without the n_buckets × m
    posterior, block by block of whole buckets (memory O(block), not O(rows)); None when the
    rows are not grouped (then use the dense form)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    labels = list(labels)
    m, nb = len(labels), len(sizes)
    n = int(sizes.sum())
    if nb * m == 0:
        return {"records_certain": 0, "n_records": n, "share_certain": 0.0, "per_value": {}, "max_posterior": 0.0,
                "max_posterior_value": None, "buckets_certain": 0}
    for a in range(1, len(sb), DISCLOSURE_BLOCK):  # grouped by bucket: sb non-decreasing
        if not bool((np.diff(sb[a - 1:a + DISCLOSURE_BLOCK]) >= 0).all()):
            return None
    denom = np.maximum(sizes, 1)
    top = np.zeros(nb)
    best = np.zeros(nb, dtype=np.int64)
    mx, flat = 0.0, 0
    for a, b in bucket_blocks(sb):
        bsb, bsc = sb[a:b], sc[a:b]
        breal = real[a:b] if fake is None else np.where(fake[a:b], 0, real[a:b])
        post = breal / denom[bsb]
        del breal
        starts = np.flatnonzero(np.concatenate(([True], bsb[1:] != bsb[:-1])))
        owner = bsb[starts]
        top[owner] = np.maximum.reduceat(post, starts)
        at_max = post == top[bsb]
        best[owner] = np.minimum.reduceat(np.where(at_max, bsc, m), starts)  # first value at the maximum
        del at_max
        pm = float(post.max())
        if pm > 0 and pm >= mx:
            hit = post == pm
            k = int((bsb[hit].astype(np.int64) * m + bsc[hit]).min())
            flat = k if pm > mx else min(flat, k)
            mx = pm
    best[top == 0] = 0
    certain = (top >= 1.0 - CERTAIN_TOL) & (sizes > 0)
    per = np.bincount(best[certain], weights=sizes[certain], minlength=m).astype(np.int64)
    total = int(per.sum())
    return {"records_certain": total, "n_records": n, "share_certain": (total / n) if n else 0.0,
            "per_value": {labels[i]: int(per[i]) for i in np.flatnonzero(per)},
            "max_posterior": float(min(1.0, mx)), "max_posterior_value": labels[flat % m],
            "buckets_certain": int(certain.sum())}


def typed_disclosure(types: np.ndarray, type_of: np.ndarray, labels) -> dict[str, Any]:
    """:func:`sparse_disclosure` of a release without fakes whose bucket g holds the real counts
    ``types[type_of[g]]`` (buckets in dense order): the same result from the bucket types,
    O(n_types·m + n_buckets) (:func:`types_disclosure`)."""
    types = np.asarray(types, dtype=np.int64)
    type_of = np.asarray(type_of)

    def first_of(kinds: np.ndarray) -> int:
        return int(type_of[np.flatnonzero(np.isin(type_of, kinds))[0]])

    return types_disclosure(types, np.bincount(type_of, minlength=len(types)), labels, first_of)


def types_disclosure(types: np.ndarray, multiplicity: np.ndarray, labels, first_of) -> dict[str, Any]:
    """:func:`typed_disclosure` from the bucket types and their multiplicities, O(n_types·m):
    the buckets' order matters only to name the value at the largest posterior when tied types
    name different values — ``first_of(kinds)`` gives the type of the first bucket (in dense
    order) whose type is among ``kinds``."""
    types = np.asarray(types, dtype=np.int64)
    mult = np.asarray(multiplicity, dtype=np.int64)
    labels = list(labels)
    K, m = types.shape
    size_k = types.sum(axis=1)
    n = int((size_k * mult).sum())
    if int(mult.sum()) * m == 0:
        return {"records_certain": 0, "n_records": n, "share_certain": 0.0, "per_value": {}, "max_posterior": 0.0,
                "max_posterior_value": None, "buckets_certain": 0}
    post = types / np.maximum(size_k, 1)[:, None]
    best = post.argmax(axis=1)                         # the first value at the maximum
    top = post[np.arange(K), best]
    live = mult > 0
    certain = (top >= 1.0 - CERTAIN_TOL) & (size_k > 0) & live
    per = np.bincount(best[certain], weights=(size_k * mult)[certain], minlength=m).astype(np.int64)
    total = int(per.sum())
    mx = float(top[live].max())
    tied = np.flatnonzero(live & (top == mx))
    first_value = (post[tied] == mx).argmax(axis=1)    # each tied type's first value at the maximum
    x = int(first_value[0]) if (first_value == first_value[0]).all() else int(
        first_value[np.flatnonzero(tied == first_of(tied))[0]])
    return {"records_certain": total, "n_records": n, "share_certain": (total / n) if n else 0.0,
            "per_value": {labels[i]: int(per[i]) for i in np.flatnonzero(per)},
            "max_posterior": float(min(1.0, mx)), "max_posterior_value": labels[x],
            "buckets_certain": int(mult[certain].sum())}


def _chunks(col) -> list[np.ndarray]:
    """The chunks of an Arrow integer column (or a NumPy array) as NumPy arrays (zero-copy when
    the chunk allows)."""
    if isinstance(col, pa.ChunkedArray):
        return [c.to_numpy(zero_copy_only=False) for c in col.chunks]
    if isinstance(col, pa.Array):
        return [col.to_numpy(zero_copy_only=False)]
    return [np.asarray(col)]



def narrow_ints(col, limit: int | None = None) -> np.ndarray:
    """An integer column as one NumPy array, int32 when its values (or ``limit``) fit, else int64;
    filled a chunk at a time."""
    parts = _chunks(col)
    n = sum(len(p) for p in parts)
    lo = min((int(p.min()) for p in parts if len(p)), default=0)
    hi = max((int(p.max()) for p in parts if len(p)), default=0) if limit is None else limit
    out = np.empty(n, dtype=np.int32 if -2**31 <= lo and hi < 2**31 else np.int64)
    pos = 0
    for p in parts:
        out[pos:pos + len(p)] = p
        pos += len(p)
    return out


def blocked_bincount(x: np.ndarray, minlength: int, weights: np.ndarray | None = None,
                     block: int = 1 << 20) -> np.ndarray:
    """``np.bincount`` a block at a time (int64, or float64 with weights): np.bincount copies
    narrow input to intp and weights to float64 first, O(rows) bytes; here O(block + bins)
    (blocks of at least ``minlength`` rows, so the per-block bins cost no more than the block)."""
    block = max(block, minlength)
    if len(x) <= block:
        c = np.bincount(x, weights, minlength=minlength)
        return c if weights is None else c.astype(np.float64, copy=False)
    out = np.zeros(minlength, dtype=np.int64 if weights is None else np.float64)
    for a in range(0, len(x), block):
        c = np.bincount(x[a:a + block], None if weights is None else weights[a:a + block], minlength=minlength)
        if len(c) > minlength:
            out = np.concatenate([out, np.zeros(len(c) - minlength, out.dtype)])
            minlength = len(c)
        out[:len(c)] += c
    return out


def dense_ids_chunked(bid) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`dense_ids` of an Arrow (or NumPy) id column a chunk at a time: the distinct ids
    (int64), the dense index of every row (int32 when < 2^31 ids) and, when the ids are not
    sparse, the lookup table id → dense index (−1 for an absent id) for :func:`dense_lookup`."""
    parts = _chunks(bid)
    n = sum(len(p) for p in parts)
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int32), None
    lo = min(int(p.min()) for p in parts if len(p))
    hi = max(int(p.max()) for p in parts if len(p))
    if lo < 0 or hi >= 2 * n + 1024:  # sparse or negative ids: sort
        ids, inv = dense_ids(np.concatenate(parts))
        return ids, inv.astype(np.int32 if len(ids) < 2**31 else np.int64), None
    present = np.zeros(hi + 1, dtype=bool)
    for p in parts:
        present[p] = True
    ids = np.flatnonzero(present)
    rank: Any = np.cumsum(present, dtype=np.int32 if len(ids) < 2**31 else np.int64)  # no int64 temporary below 2^31 ids
    rank -= 1
    rank[~present] = -1
    del present
    out = np.empty(n, dtype=rank.dtype)
    pos = 0
    for p in parts:
        out[pos:pos + len(p)] = rank[p]
        pos += len(p)
    return ids.astype(np.int64), out, rank


def dense_lookup(ids: np.ndarray, bid, rank: np.ndarray | None = None, block: int = DISCLOSURE_BLOCK) -> np.ndarray | None:
    """The dense index (position in the sorted ``ids``) of every id of an Arrow (or NumPy) id
    column, int32 when < 2^31 ids, a block at a time — through the lookup table ``rank``
    (:func:`dense_ids_chunked`) when given, else by binary search; None when an id is not in
    ``ids``."""
    parts = _chunks(bid)
    n = sum(len(p) for p in parts)
    out = np.empty(n, dtype=np.int32 if len(ids) < 2**31 else np.int64)
    if n and not len(ids):
        return None
    pos = 0
    for p in parts:
        for a in range(0, len(p), block):
            q = p[a:a + block]
            if rank is not None:
                if len(q) and (int(q.min()) < 0 or int(q.max()) >= len(rank)):
                    return None
                d = rank[q]
                if len(d) and int(d.min()) < 0:
                    return None
            else:
                d = np.minimum(np.searchsorted(ids, q), len(ids) - 1)
                if not np.array_equal(ids[d], q):
                    return None
            out[pos:pos + len(q)] = d
            pos += len(q)
    return out


def streamed_disclosure(chunks, sigma: int, thresholds: np.ndarray, labels,
                        known_totals: np.ndarray | None = None, max_rounds: int = 64) -> dict[str, Any]:
    """``bucket_disclosure(receiver_posterior(obs, sizes, σ, thresholds, None, known_totals), sizes,
    labels)`` (:mod:`ppdp.releases.bucketized`; no negative association) without the
    n_buckets × m matrices: ``chunks()`` yields ``(obs, sizes)`` — the observed ST counts
    (buckets × m) and the QIT sizes of consecutive buckets in dense order — the same ones at
    every call, a bounded number of buckets at a time (:func:`streamed_inference`)."""
    return streamed_inference(chunks, sigma, thresholds, labels, known_totals, max_rounds)[0]


def streamed_inference(chunks, sigma: int, thresholds: np.ndarray, labels, known_totals: np.ndarray | None = None,
                       max_rounds: int = 64, forbidden: ForbiddenFakes | None = None
                       ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``(disclosure, contradictions)``: :func:`streamed_disclosure`, and for σ ≠ 0 the
    ``contradictions``, ``bad_buckets`` and ``bad_values`` of :func:`fake_inference` at the
    same final state (None for σ = 0), over the chunks of buckets that ``chunks()`` yields;
    ``forbidden``: the values negative associations forbid as fakes (the ``forbidden`` of
    :func:`fake_inference`, a pattern per bucket; none when None).

    The receiver's fake inference is a propagation over buckets (local to a bucket) and values
    (the totals per value over all buckets). A bucket's conclusions depend only on its own row
    (observed counts, size, forbidden pattern) and on the per-value conclusions, so buckets with the same row
    reach the same state: for σ ≠ 0 one pass collects the distinct rows with their
    multiplicities and first bucket (:func:`_distinct_buckets`; a typed plan's buckets are a
    few bucket types × fake sets), and the rounds run on those in memory. When there are more
    than :data:`DISTINCT_CELLS` cells of distinct rows, pass p replays, per chunk, the p completed rounds
    (their per-value conclusions are recorded: O(rounds·m)), counts the certain conclusions
    and states the disclosure and the contradictions of that state, then runs round p's bucket
    step and sums what the value step needs; the propagation has converged when a pass finds
    no new conclusion (the rounds of :func:`~ppdp.releases.bucketized.fake_inference`, same
    arithmetic). Memory O(chunk + rounds·m); passes = rounds + 2."""
    labels = list(labels)
    m = len(labels)
    thr = np.asarray(thresholds, dtype=np.float64)
    pattern_of = None if forbidden is None else forbidden.of
    distinct = _distinct_buckets(chunks, m, DISTINCT_CELLS // (m + 2), pattern_of) if sigma else None

    def source():  # (observed counts, sizes, multiplicity or None, bucket index, forbidden or None) of each row
        if distinct is not None:
            obs, sizes, w, at, pat = distinct
            yield obs, sizes, w, at, None if forbidden is None else forbidden.rows[pat]
            return
        nb = 0
        for obs, sizes in chunks():
            sizes = np.asarray(sizes, dtype=np.int64)
            yield (np.asarray(obs, dtype=np.int64), sizes, None, nb + np.arange(len(sizes)),
                   None if forbidden is None else forbidden.dense(nb, nb + len(sizes)))
            nb += len(sizes)

    steps: list[tuple[np.ndarray, np.ndarray]] = []   # (real, fake) conclusions of each value step
    known_x = np.zeros(m, bool) if known_totals is None else np.asarray(known_totals, dtype=np.int64) >= 0
    f_x = np.full(m, -1, np.int64)
    counts: list[int] = []
    for p in range(max_rounds + 1):
        acc = _DisclosureSum(m)
        n_known, und_x, kf_x, listed = 0, np.zeros(m, np.int64), np.zeros(m, np.int64), np.zeros(m, np.int64)
        bad_g, now_kf_x, now_und_x = 0, np.zeros(m, np.int64), np.zeros(m, np.int64)  # the state of this pass
        for obs, sizes, w, at, forb in source():
            if sigma == 0:
                acc.add(obs / np.maximum(sizes, 1)[:, None].astype(np.float64), sizes, w, at)
                continue
            listed += _column_sums(obs, w)
            st = _FakeState(obs, sizes, thr, forb)
            for real_x, fake_x in steps:
                st.bucket_step()
                st.value_step(real_x, fake_x)
            n_known += _weighted_total(st.kf.sum(axis=1) + st.kr.sum(axis=1), w)
            acc.add(st.posterior(), sizes, w, at)
            undecided = st.ones & ~st.kf & ~st.kr
            kf_g, und_g = st.kf.sum(axis=1), undecided.sum(axis=1)
            bad_g += _weighted_total((st.n_fake < kf_g) | (st.n_fake > kf_g + und_g), w)
            now_kf_x += _column_sums(st.kf, w)
            now_und_x += _column_sums(undecided, w)
            st.bucket_step()
            und_x += _column_sums(st.ones & ~st.kf & ~st.kr, w)
            kf_x += _column_sums(st.kf, w)
        counts.append(n_known)
        if sigma == 0 or p == max_rounds or (p and counts[p] == counts[p - 1]):
            if sigma == 0:
                return acc.result(labels), None
            if p == 0 and known_totals is not None:
                f_x = np.where(known_x, listed - np.asarray(known_totals, dtype=np.int64), -1)
            bad_x = known_x & ((f_x < now_kf_x) | (f_x > now_kf_x + now_und_x))
            return acc.result(labels), {"contradictions": int(bad_g + bad_x.sum()), "bad_buckets": bad_g,
                                        "bad_values": np.flatnonzero(bad_x)}
        if p == 0 and known_totals is not None:
            f_x = np.where(known_x, listed - np.asarray(known_totals, dtype=np.int64), -1)
        left_x = f_x - kf_x
        steps.append((known_x & (left_x <= 0), known_x & (left_x >= und_x) & (left_x > 0)))
    raise AssertionError("unreachable")  # pragma: no cover


#: cells (rows × (m + 1)) of the distinct (observed counts, size) bucket rows the receiver's fake
#: inference keeps in memory (:func:`streamed_inference`); beyond, it replays its rounds over the
#: chunks of buckets
DISTINCT_CELLS = 1 << 21


def _column_sums(a: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """Σ over buckets of ``a`` (rows × m), each row counted ``w`` times (once when None)."""
    return a.sum(axis=0) if w is None else w @ a.astype(np.int64)


def _weighted_total(v: np.ndarray, w: np.ndarray | None) -> int:
    return int(v.sum()) if w is None else int(w @ v.astype(np.int64))


@functools.lru_cache(maxsize=64)
def row_hash_multipliers(width: int) -> np.ndarray:
    """Odd 64-bit multipliers of a row hash of ``width`` columns (fixed: the hash is checked)."""
    return np.asarray(np.random.default_rng(0x5EED).integers(1, 1 << 62, size=width), dtype=np.uint64) * 2 + 1


def unique_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, inverse)`` of the distinct rows of the int64 matrix ``x``: a row hash
    (wrapping arithmetic), checked exactly, with the sorting ``np.unique`` by rows on a
    collision."""
    mult = row_hash_multipliers(x.shape[1])
    h = (x.astype(np.uint64) * mult[None, :]).sum(axis=1, dtype=np.uint64)
    _, first, inv = np.unique(h, return_index=True, return_inverse=True)
    if not np.array_equal(x[first][inv.ravel()], x):
        _, first, inv = np.unique(x, axis=0, return_index=True, return_inverse=True)
    return first, inv.ravel()


def _distinct_buckets(chunks, m: int, limit: int, pattern_of: np.ndarray | None = None):
    """``(observed counts, sizes, multiplicity, first bucket index, pattern)`` of the distinct
    bucket rows (observed counts, size and, when ``pattern_of`` is given, the bucket's pattern
    of forbidden fakes; else pattern 0) over every chunk (one pass), or None when there are
    more than ``limit`` (0: always None)."""
    held: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []   # (rows with the size last, count, first)
    n_held, nb = 0, 0

    def merge(parts):
        x = np.concatenate([p[0] for p in parts])
        first, inv = unique_rows(x)
        cnt = np.bincount(inv, weights=np.concatenate([p[1] for p in parts]), minlength=len(first)).astype(np.int64)
        at = np.full(len(first), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(at, inv, np.concatenate([p[2] for p in parts]))
        return x[first], cnt, at

    if limit <= 0:
        return None
    for obs, sizes in chunks():
        sizes = np.asarray(sizes, dtype=np.int64)
        pat = (np.zeros(len(sizes), np.int64) if pattern_of is None
               else np.asarray(pattern_of[nb:nb + len(sizes)], dtype=np.int64))
        x = np.concatenate([np.asarray(obs, dtype=np.int64).reshape(len(sizes), m), sizes[:, None], pat[:, None]],
                           axis=1)
        held.append(merge([(x, np.ones(len(x), np.int64), nb + np.arange(len(x), dtype=np.int64))]))
        nb += len(sizes)
        n_held += len(held[-1][0])
        if n_held > limit:
            held = [merge(held)]
            n_held = len(held[0][0])
            if n_held > limit:
                return None
    if not held:
        e = np.zeros(0, np.int64)
        return np.zeros((0, m), np.int64), e, e, e, e
    x, cnt, at = merge(held) if len(held) > 1 else held[0]
    return np.ascontiguousarray(x[:, :m]), x[:, m].copy(), cnt, at, x[:, m + 1].copy()


class _FakeState:
    """The receiver's certain conclusions about a chunk's count-1 values (``kr`` real, ``kf``
    fake), as :func:`~ppdp.releases.bucketized.fake_inference` draws them (``forbidden``: the
    values negative associations forbid as fakes, chunk × m, or None)."""

    def __init__(self, obs: np.ndarray, sizes: np.ndarray, thr: np.ndarray, forbidden: np.ndarray | None = None):
        self.obs, self.sizes = obs, sizes
        self.ones = obs == 1
        can_be_real = fake_candidates(sizes, thr)
        self.kf = self.ones & ~can_be_real  # no real record could hold it
        self.kr = np.zeros_like(self.ones) if forbidden is None else self.ones & can_be_real & forbidden
        self.n_real_ones = sizes - np.where(obs >= 2, obs, 0).sum(axis=1)  # r_g
        self.n_fake = self.ones.sum(axis=1) - self.n_real_ones           # σ_g

    def bucket_step(self) -> None:
        undecided = self.ones & ~self.kf & ~self.kr
        und_g = undecided.sum(axis=1)
        fakes_left = self.n_fake - self.kf.sum(axis=1)
        self.kr |= undecided & (fakes_left <= 0)[:, None]
        self.kf |= undecided & ((fakes_left >= und_g) & (fakes_left > 0))[:, None]

    def value_step(self, real_x: np.ndarray, fake_x: np.ndarray) -> None:
        undecided = self.ones & ~self.kf & ~self.kr
        self.kr |= undecided & real_x[None, :]
        self.kf |= undecided & fake_x[None, :]

    def posterior(self) -> np.ndarray:
        """:func:`receiver_posterior` of the chunk in this state."""
        undecided = self.ones & ~self.kf & ~self.kr
        und_g = undecided.sum(axis=1)
        real_left = self.n_real_ones - self.kr.sum(axis=1)
        p = np.divide(real_left, und_g, out=np.zeros(len(und_g), np.float64), where=und_g > 0).clip(0.0, 1.0)
        expected = np.where(self.obs >= 2, self.obs, 0) + self.kr + undecided * p[:, None]
        return expected / np.maximum(self.sizes, 1)[:, None].astype(np.float64)


class _DisclosureSum:
    """:func:`bucket_disclosure` summed over consecutive chunks of
    buckets (the first bucket and value at the largest posterior, as ``argmax`` finds them)."""

    def __init__(self, m: int):
        self.m, self.n, self.nb, self.certain = m, 0, 0, 0
        self.per = np.zeros(m, dtype=np.float64)
        self.mx, self.at = -np.inf, (0, 0)

    def add(self, post: np.ndarray, sizes: np.ndarray, w: np.ndarray | None = None, at: np.ndarray | None = None) -> None:
        """Add buckets with posteriors ``post`` and sizes ``sizes``; ``w``: how many buckets each
        row stands for (one when None); ``at``: each row's (first) bucket index (the next ones
        when None)."""
        sizes = np.asarray(sizes, dtype=np.int64)
        w = np.ones(len(sizes), np.int64) if w is None else np.asarray(w, dtype=np.int64)
        at = self.nb + np.arange(len(sizes)) if at is None else np.asarray(at, dtype=np.int64)
        self.n += int(sizes @ w)
        self.nb += int(w.sum())
        if post.size == 0:
            return
        best = post.argmax(axis=1)
        top = post[np.arange(len(best)), best]
        certain = (top >= 1.0 - CERTAIN_TOL) & (sizes > 0)
        self.per += np.bincount(best[certain], weights=(sizes * w)[certain], minlength=self.m)
        self.certain += int(w[certain].sum())
        mx = top.max()
        if mx > self.mx:  # the first bucket, then the first value, at the largest posterior
            tie = np.flatnonzero(top == mx)
            r = tie[np.argmin(at[tie])]
            self.mx, self.at = float(mx), (int(at[r]), int(best[r]))

    def result(self, labels: list) -> dict[str, Any]:
        n = self.n
        if self.nb * self.m == 0:
            return {"records_certain": 0, "n_records": n, "share_certain": 0.0, "per_value": {}, "max_posterior": 0.0,
                    "max_posterior_value": None, "buckets_certain": 0}
        per = self.per.astype(np.int64)
        total = int(per.sum())
        return {"records_certain": total, "n_records": n, "share_certain": (total / n) if n else 0.0,
                "per_value": {labels[i]: int(per[i]) for i in np.flatnonzero(per)},
                "max_posterior": float(min(1.0, self.mx)), "max_posterior_value": labels[self.at[1]],
                "buckets_certain": self.certain}


__all__ = ["same_rows", "st_values_distinct", "cell_runs", "dense_ids", "bucket_blocks", "sparse_disclosure", "typed_disclosure", "types_disclosure", "narrow_ints", "blocked_bincount", "dense_ids_chunked", "dense_lookup", "streamed_disclosure", "streamed_inference", "row_hash_multipliers", "unique_rows", "CELL_BLOCK", "DISCLOSURE_BLOCK", "DISTINCT_CELLS"]
