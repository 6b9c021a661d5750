"""CountIndex with integer keys: the sparse groupings (large, mostly-zero combinations × keys)
give exactly the dense path's and a row-by-row count's sums, for every column set."""

import itertools

import numpy as np
import pytest

from ppdp.queries import engine
from ppdp.queries.engine import CountIndex


@pytest.mark.parametrize("seed", range(4))
def test_sparse_equals_dense_and_brute(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    sizes = {"a": 7, "b": 3, "c": 5, "d": 2}
    n, k = 3000, 11
    cols = {c: rng.integers(0, s, n).astype(np.int32) for c, s in sizes.items()}
    keys = rng.integers(0, k, n).astype(np.int16)
    masks = []
    for r in range(1, 5):
        for combo in itertools.combinations(sizes, r):
            for _ in range(5):
                masks.append({c: rng.random(sizes[c]) < 0.6 for c in combo})
    masks.append({})
    dense = CountIndex(cols, sizes, keys, n_keys=k).sums(masks)
    monkeypatch.setattr(engine, "_SPARSE_MIN_CELLS", 0)
    monkeypatch.setattr(engine, "_SPARSE_DENSITY", 1.0)
    idx = CountIndex(cols, sizes, keys, n_keys=k)
    sparse_out = idx.sums(masks)
    assert any(hasattr(w, "tocoo") for _, w in idx._groups.values())  # the sparse path ran
    brute = np.zeros((len(masks), k))
    for q, mk in enumerate(masks):
        hit = np.ones(n, dtype=bool)
        for c, v in mk.items():
            hit &= v[cols[c]]
        brute[q] = np.bincount(keys[hit], minlength=k)
    np.testing.assert_array_equal(sparse_out, brute)
    np.testing.assert_array_equal(dense, brute)
