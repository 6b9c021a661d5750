"""The bit-parallel count index (:class:`ppdp.queries.CountIndex`) against a naive per-query
row scan: the raw sums on random small tables (hypothesis), and every row family's
estimates and standard errors with the index's ``sums`` replaced by the row scan.

Integer keys (counts) must agree exactly; float per-row weights (Anatomy's per-row variance
path) up to float64 rounding (the two sum in different orders)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ppdp
from safe_declarations import protected
from ppdp.datasets.synthetic import synthetic
from ppdp.estimators import bucketized
from ppdp.queries import engine
from ppdp.queries.engine import CountIndex
from ppdp.queries.workloads import anatomy_workload, point_workload


def naive_sums(index: CountIndex, masks) -> np.ndarray:
    """R[q, k] by scanning every row for every query (the definition)."""
    out = np.zeros((len(masks), index.K))
    for q, mk in enumerate(masks):
        hit = np.ones(index.n, dtype=bool)
        for c, v in mk.items():
            hit &= np.asarray(v)[index.columns[c]]
        if index.keys.ndim == 1:
            out[q] = np.bincount(index.keys[hit].astype(np.int64), minlength=index.K)
        else:
            out[q] = index.keys[hit].sum(axis=0)
    return out


def _random_case(seed: int, float_weights: bool):
    rng = np.random.default_rng(seed)
    n_cols = int(rng.integers(1, 5))
    sizes = {f"c{i}": int(rng.integers(1, 12)) for i in range(n_cols)}
    n = int(rng.integers(1, 2500))
    cols = {c: rng.integers(0, s, n).astype(rng.choice([np.int8, np.int16, np.int32, np.int64])) for c, s in sizes.items()}
    K = int(rng.integers(1, 40))
    keys = rng.random((n, K)) * (rng.random((n, K)) < 0.3) if float_weights else rng.integers(0, K, n).astype(np.int16)
    names = list(sizes)
    masks = []
    for _ in range(int(rng.integers(1, 400))):
        chosen = [c for c in names if rng.random() < 0.6]
        share = rng.random()  # from very selective to nearly everything
        masks.append({c: rng.random(sizes[c]) < share for c in chosen})
    return cols, sizes, keys, K, masks


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), float_weights=st.booleans(), small=st.booleans())
def test_sums_equal_row_scan(seed, float_weights, small):
    cols, sizes, keys, K, masks = _random_case(seed, float_weights)
    with pytest.MonkeyPatch.context() as mp:
        if small:  # many chunks of queries, many blocks of combinations, sparse groupings, sorted counts
            mp.setattr(engine, "_CHUNK_BITS", 1 << 9)
            mp.setattr(engine, "_BLOCK_BYTES", 1 << 6)
            mp.setattr(engine, "_SPARSE_MIN_CELLS", 0)
            mp.setattr(engine, "_SPARSE_DENSITY", 1.0)
            mp.setattr(engine, "_COUNT_CELLS", 0)
            mp.setattr(engine, "_PACK_LABELS", 16)
        index = CountIndex(cols, sizes, keys, n_keys=None if float_weights else K)
        got = index.sums(masks)
        again = index.sums(masks[::-1])  # cached groupings, another order
    want = naive_sums(index, masks)
    if float_weights:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(again, got[::-1], rtol=1e-12, atol=1e-9)
    else:
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(again, got[::-1])


def test_many_queries_one_column_set():
    """More queries than one word and one chunk hold, every column of the index constrained."""
    rng = np.random.default_rng(5)
    sizes = {"a": 91, "b": 43, "c": 15, "d": 2}
    n = 20_000
    cols = {c: rng.integers(0, s, n).astype(np.int32) for c, s in sizes.items()}
    keys = rng.integers(0, 7, n)
    masks = [{c: rng.random(s) < 0.5 for c, s in sizes.items()} for _ in range(700)]
    index = CountIndex(cols, sizes, keys, 7)
    np.testing.assert_array_equal(index.sums(masks), naive_sums(index, masks))


@pytest.fixture(scope="module")
def small_edu():
    return synthetic(ppdp.datasets.load("edu"), 20000, seed=3)


FAMILIES = {
    "fprivacy": lambda: ppdp.FPrivacy(theta=8),
    "fprivacy_fakes": lambda: ppdp.FPrivacy(theta=8, fake_values=2),
    "anatomy": lambda: ppdp.Anatomy(4),
    "uniform": lambda: ppdp.UniformPerturbation(0.1, 0.3),
    "sdr": lambda: ppdp.SDR(0.1, 0.3),
    "global": lambda: ppdp.GlobalRandomization(4),
    "diverted": lambda: ppdp.Diverted(4),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_estimates_equal_row_scan(small_edu, family, monkeypatch):
    """Each family's default estimates, se and intervals: the fast index and a per-query row
    scan give the same numbers, to the last digits (the scan replaces ``CountIndex.sums`` for every index the
    estimator builds)."""
    mech = FAMILIES[family]()
    rel = ppdp.publish(small_edu, mech, seed=1,
                       sensitive_values=None if mech.family in ("histogram", "answers") else protected(small_edu))
    wl = list(anatomy_workload(small_edu, 150, 0.05, seed=2)) + list(point_workload(small_edu, 60, seed=4))
    fast = rel.estimate(wl)
    calls = []

    def scan(index, masks, reduce=None, width=None):
        calls.append(len(masks))
        R = naive_sums(index, masks)
        return R if reduce is None else reduce(np.arange(len(masks)), R)

    with monkeypatch.context() as mp:
        mp.setattr(CountIndex, "sums", scan)
        naive = _fresh(rel).estimate(wl)
    assert calls  # the estimator went through the index
    # equal up to the order of floating sums (the per-type terms are reduced chunk by chunk)
    for a, b in [(fast.estimate, naive.estimate), (fast.se, naive.se), (fast.lower, naive.lower)]:
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9)
    assert np.isfinite(fast.se).all()


def test_anatomy_per_row_path_equals_row_scan(small_edu, monkeypatch):
    """Anatomy's per-row path (float weights per row, quadratic keys): as the row scan, up to
    rounding."""
    rel = ppdp.publish(small_edu, ppdp.FPrivacy(theta=8, fake_values=2), seed=1)
    wl = anatomy_workload(small_edu, 120, 0.05, seed=6)
    monkeypatch.setattr(bucketized, "MAX_TYPES", 0)
    fast = rel.estimate(wl)
    monkeypatch.setattr(CountIndex, "sums", naive_sums)
    naive = _fresh(rel).estimate(wl)
    np.testing.assert_allclose(fast.estimate, naive.estimate, rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(fast.se, naive.se, rtol=1e-8, atol=1e-8)


def _fresh(rel):
    """The same release without its cached indexes (a saved-and-loaded copy)."""
    import tempfile

    from ppdp.releases.base import load_release

    d = tempfile.mkdtemp()
    rel.save(d + "/r")
    return load_release(d + "/r")
