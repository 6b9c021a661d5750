"""The count index's alternative paths give the sums of a per-query row scan, exactly for
integer keys: a combined row key instead of the columns (:class:`LazyColumns`), predicates
that select a whole domain dropped, repeated predicates answered once, a column set answered
on its own derived grouping or on a parent grouping (the cost model forced either way), the
matching pairs summed bit by bit or a byte at a time, in blocks of any size."""

from __future__ import annotations

import numpy as np
import pytest

from ppdp.queries import engine
from ppdp.queries.engine import CountIndex, LazyColumns, combine


def naive_sums(index: CountIndex, masks) -> np.ndarray:
    """R[q, k] by scanning every row for every query (the definition; integer keys)."""
    out = np.zeros((len(masks), index.K))
    for q, mk in enumerate(masks):
        hit = np.ones(index.n, dtype=bool)
        for c, v in mk.items():
            hit &= np.asarray(v)[index.columns[c]]
        out[q] = np.bincount(index.keys[hit].astype(np.int64), minlength=index.K)
    return out


def _case(seed: int, n: int = 3000):
    rng = np.random.default_rng(seed)
    sizes = {"a": 11, "b": 2, "c": 7, "d": 5}
    cols = {c: rng.integers(0, s, n).astype(np.int16) for c, s in sizes.items()}
    K = int(rng.integers(2, 60))
    keys = rng.integers(0, K, n).astype(np.int16)
    masks = []
    for _ in range(300):
        chosen = [c for c in sizes if rng.random() < 0.7]
        share = rng.random()
        mk = {c: rng.random(sizes[c]) < share for c in chosen}
        if chosen and rng.random() < 0.3:  # a predicate over its whole domain
            mk[chosen[0]] = np.ones(sizes[chosen[0]], dtype=bool)
        masks.append(mk)
    masks += masks[:40]  # repeated predicates
    return cols, sizes, keys, K, masks


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["default", "always-derive", "never-derive", "bytes", "tiny-blocks", "dense", "evict",
                                  "scatter", "add-dense"])
def test_paths_equal_row_scan(seed, mode, monkeypatch):
    cols, sizes, keys, K, masks = _case(seed)
    if mode != "dense":  # the case's groupings are small: the dense product would answer them all
        monkeypatch.setattr(engine, "_DENSE_COMBOS", 0)
    else:
        monkeypatch.setattr(engine, "_DENSE_COMBOS", 10**9)
        monkeypatch.setattr(engine, "_DENSE_CELLS", 10**12)
        monkeypatch.setattr(engine, "_SPARSE_MIN_CELLS", 0)  # sparse weights too (counted by one sort)
        monkeypatch.setattr(engine, "_SPARSE_DENSITY", 1.0)
    if mode == "always-derive":
        monkeypatch.setattr(engine, "_COST_DERIVE_BASE", -1e9)
    elif mode == "never-derive":
        monkeypatch.setattr(engine, "_COST_DERIVE_BASE", 1e9)
    elif mode == "bytes":
        monkeypatch.setattr(engine, "_BYTE_PATH_BITS", 0.0)
    elif mode == "evict":  # every derived grouping dropped once no later column set needs it, and after
        monkeypatch.setattr(engine, "_KEEP_CELLS", 0)
        monkeypatch.setattr(engine, "_COST_DERIVE_BASE", -1e9)
    elif mode in ("scatter", "add-dense"):  # sparse block products added entry by entry, or densely
        monkeypatch.setattr(engine, "_DENSE_KEYS", 0)
        monkeypatch.setattr(engine, "_SPARSE_MIN_CELLS", 0)  # sparse weights
        monkeypatch.setattr(engine, "_SPARSE_DENSITY", 1.0)
        monkeypatch.setattr(engine, "_BYTE_PATH_BITS", np.inf)
        monkeypatch.setattr(engine, "_BLOCK_PAIRS", 50)
        monkeypatch.setattr(engine, "_BLOCK_WORDS", 64)
        monkeypatch.setattr(engine, "_ADD_DENSE_SHARE", np.inf if mode == "scatter" else 0.0)
    elif mode == "tiny-blocks":
        monkeypatch.setattr(engine, "_BLOCK_PAIRS", 7)
        monkeypatch.setattr(engine, "_BLOCK_WORDS", 3)
        monkeypatch.setattr(engine, "_COUNT_ROWS", 100)
        monkeypatch.setattr(engine, "_SPARSE_MIN_CELLS", 0)
        monkeypatch.setattr(engine, "_SPARSE_DENSITY", 1.0)
        monkeypatch.setattr(engine, "_SORT_COUNT_BYTES", 0)  # the block-wise sparse counts
        monkeypatch.setattr(engine, "_RANK_ROWS", 5)
    index = CountIndex(cols, sizes, keys, n_keys=K)
    got = index.sums(masks)
    np.testing.assert_array_equal(got, naive_sums(index, masks))
    np.testing.assert_array_equal(index.sums(masks[::-1]), got[::-1])  # cached groupings, another order
    if mode == "evict":
        assert not index._groups  # nothing derived is kept


@pytest.mark.parametrize("seed", range(4))
def test_reduced_sums_equal_the_sums(seed, monkeypatch):
    """``sums(reduce=...)``: each chunk of queries reduced as its sums are made (repeated
    predicates, whole-domain predicates and queries constraining nothing included) gives the
    reduction of the whole sums, row by row; the reducer sees every query once."""
    cols, sizes, keys, K, masks = _case(seed)
    masks = [*masks, {}, {"a": np.ones(11, dtype=bool)}]
    monkeypatch.setattr(engine, "_DENSE_COMBOS", 0)
    monkeypatch.setattr(engine, "_CHUNK_BITS", 64 * 40)  # several chunks per column set
    rng = np.random.default_rng(seed)
    F = rng.random((len(masks), K))  # a per-query function of the sums
    seen = []

    def reduce(queries, R):
        seen.append(np.asarray(queries).copy())
        return np.stack([(R * F[queries]).sum(axis=1), R.sum(axis=1)], axis=1)

    index = CountIndex(cols, sizes, keys, n_keys=K)
    got = index.sums(masks, reduce=reduce, width=2)
    want = naive_sums(index, masks)
    np.testing.assert_allclose(got[:, 0], (want * F).sum(axis=1), rtol=1e-12)
    np.testing.assert_array_equal(got[:, 1], want.sum(axis=1))
    assert np.array_equal(np.sort(np.concatenate(seen)), np.arange(len(masks)))
    assert len(seen) > 3


@pytest.mark.parametrize("seed", range(4))
def test_row_key_equals_columns(seed):
    """A combined row key (the columns decoded lazily, a column at a time) gives the sums of
    the index over the columns themselves."""
    cols, sizes, keys, K, masks = _case(seed)
    names = tuple(sizes)
    key = combine([cols[c] for c in names], [sizes[c] for c in names])
    lazy = LazyColumns(names, lambda c: cols[c])
    assert list(lazy) == list(names) and len(lazy) == len(names)
    with pytest.raises(KeyError):
        lazy["nope"]
    by_key = CountIndex(lazy, sizes, keys, n_keys=K, row_key=key.copy())
    plain = CountIndex(cols, sizes, keys, n_keys=K)
    np.testing.assert_array_equal(by_key.sums(masks), plain.sums(masks))
    np.testing.assert_array_equal(by_key.sums(masks), naive_sums(by_key, masks))


def test_distinct_keys_in_place():
    rng = np.random.default_rng(3)
    for n, prod in [(10_000, 30_000), (5_000, 40), (20_000, 10**9)]:
        key = rng.integers(0, prod, n).astype(np.int32)
        want_u, want_i = np.unique(key, return_inverse=True)
        u, i = engine._distinct_keys(key.copy(), float(prod), in_place=True)
        np.testing.assert_array_equal(u, want_u)
        np.testing.assert_array_equal(i, want_i.ravel())


def test_set_bits_order():
    """Every set bit of a (rows × bytes) bit matrix, byte by byte and low bit first."""
    rng = np.random.default_rng(0)
    nb = 8
    by = (rng.random((300, nb * 8)) < rng.random()).astype(np.uint8)
    packed = np.packbits(by, axis=1, bitorder="little").ravel()
    nz = np.flatnonzero(packed)
    q = engine._set_bits(packed, nz, nb)
    rows, cols = np.nonzero(by)
    np.testing.assert_array_equal(q, cols)
    assert len(q) == len(rows)


@pytest.mark.parametrize("one_pass", [True, False])
def test_product_with_bound(one_pass, monkeypatch):
    """The sparse product into buffers of a known bound (one pass of scipy's kernel) is scipy's
    product: the same entries and values, trimmed or not; without the kernel, or over the
    bound's limit, scipy's own."""
    if not one_pass:
        monkeypatch.setattr(engine, "_ONE_PASS_ENTRIES", -1)
    rng = np.random.default_rng(5)
    from scipy import sparse
    for shape in [(40, 30, 20), (1, 5, 1), (300, 200, 50), (7, 0, 3)]:
        m, k, n = shape
        A = sparse.random(m, k, density=0.1, format="csr", random_state=rng, data_rvs=lambda s: rng.integers(1, 5, s))
        B = sparse.random(k, n, density=0.2, format="csr", random_state=rng, data_rvs=lambda s: rng.integers(1, 5, s))
        want = (A @ B).toarray()
        tight = (A @ B).nnz
        for bound, trim in [(m * n, False), (m * n, True), (tight, False)]:
            got = engine._product(A, B, bound, trim=trim)
            assert got.shape == (m, n) and got.nnz == tight
            np.testing.assert_array_equal(got.toarray(), want)
    monkeypatch.setattr(engine, "_csr_matmat", None)
    np.testing.assert_array_equal(engine._product(A, B, 10**6).toarray(), (A @ B).toarray())

    def other_signature(*args):
        raise TypeError("other arguments")
    monkeypatch.setattr(engine, "_csr_matmat", other_signature)
    np.testing.assert_array_equal(engine._product(A, B, 10**6).toarray(), (A @ B).toarray())


def test_product_checks_operands():
    from scipy import sparse
    A = sparse.random(4, 3, density=0.5, format="csr", random_state=0)
    with pytest.raises(ValueError):
        engine._product(A, A, 100)
    with pytest.raises(ValueError):
        engine._product(A, A.T.tocsc(), 100)


def test_sorted_counts_equal_block_sums(monkeypatch):
    """Counting the (group, key) cells by one sort gives the block-wise sparse sums exactly."""
    rng = np.random.default_rng(11)
    for _ in range(30):
        n, n_c, K = int(rng.integers(0, 5000)), int(rng.integers(1, 400)), int(rng.integers(1, 70))
        inv = rng.integers(0, n_c, n).astype(np.int32)
        keys = rng.integers(0, K, n).astype(np.int16)
        index = CountIndex({"a": np.zeros(n, np.int8)}, {"a": 1}, keys, n_keys=K)
        monkeypatch.setattr(engine, "_SPARSE_MIN_CELLS", 0)
        monkeypatch.setattr(engine, "_SPARSE_DENSITY", 1.0)
        monkeypatch.setattr(engine, "_COUNT_ROWS", 97)
        monkeypatch.setattr(engine, "_SORT_COUNT_BYTES", 0)
        blocks = index._count_keys(inv, n_c)
        monkeypatch.setattr(engine, "_SORT_COUNT_BYTES", 1 << 40)
        sorted_ = index._count_keys(inv, n_c)
        for attr in ("indptr", "indices", "data"):
            np.testing.assert_array_equal(getattr(sorted_, attr), getattr(blocks, attr))
        np.testing.assert_array_equal(sorted_.toarray(), np.bincount(inv.astype(np.int64) * K + keys,
                                                                    minlength=n_c * K).reshape(n_c, K))
