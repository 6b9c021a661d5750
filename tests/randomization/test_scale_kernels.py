"""The O(N) kernels of the randomized mechanisms at scale: counting sorts, per-key shuffles,
the decoy schedule's group types, the drawn decoy groups and the interleaved column gather.

Statistical checks use fixed seeds; the χ² tests reject at p < 1e-6 (false-alarm rate 1e-6
per test)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import sparse, stats

import ppdp
from ppdp.kernels import transition
from ppdp.kernels.transition import (counting_order, decoy_group_types, decoy_group_values, decoy_schedule,
                                     group_cooccurrence, groups_of_rows, random_grouped_order, random_groups_of_rows,
                                     types_cooccurrence)
from ppdp.mechanisms.randomization.uniform import gather_columns


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(transition, "SLOT_BLOCK", 37)  # many blocks, boundaries inside key runs


def test_counting_order_is_the_stable_argsort(small_blocks):
    rng = np.random.default_rng(1)
    for m, dt in ((3, np.int8), (200, np.uint8), (70000, np.int32)):
        keys = rng.integers(0, m, 1000).astype(dt)
        want = np.argsort(keys, kind="stable")
        got = counting_order(keys, m)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)
        rows = rng.permutation(np.arange(1000, dtype=np.int32))
        np.testing.assert_array_equal(counting_order(keys, m, rows), rows[np.argsort(keys[rows], kind="stable")])


def test_random_grouped_order_groups_and_is_uniform_within_a_key(small_blocks):
    keys = np.array([1, 0, 1, 2, 1, 0], dtype=np.int8)
    seen = {}
    rng = np.random.default_rng(2)
    for _ in range(6000):
        o = random_grouped_order(keys, 3, rng)
        assert sorted(o.tolist()) == list(range(6)) and (np.diff(keys[o]) >= 0).all()
        seen[tuple(o.tolist())] = seen.get(tuple(o.tolist()), 0) + 1
    assert len(seen) == 2 * 6  # 2! orders of key 0 × 3! of key 1
    assert stats.chisquare(list(seen.values())).pvalue > 1e-6


def _eligible(rng, m, lp, n):
    c = np.bincount(np.concatenate([np.arange(lp), rng.integers(0, m, n - lp)]) % m, minlength=m)
    return c if c.max() <= n // lp else None


def test_group_types_match_the_slot_schedule():
    rng = np.random.default_rng(3)
    done = 0
    for _ in range(400):
        m = int(rng.integers(2, 40))
        lp = int(rng.integers(2, min(m, 8) + 1))
        c = _eligible(rng, m, lp, lp * int(rng.integers(1, 300)))
        if c is None:
            continue
        done += 1
        sets, w = decoy_group_types(c, lp)
        assert w.sum() == c.sum() // lp and (np.diff(sets, axis=1) > 0).all()
        gv = decoy_group_values(c, lp)  # the groups one by one, from the slots
        u, k = np.unique(gv, axis=0, return_counts=True)
        us, inv = np.unique(sets, axis=0, return_inverse=True)
        np.testing.assert_array_equal(u, us)
        np.testing.assert_array_equal(k, np.bincount(inv.ravel(), weights=w))
        v, g = decoy_schedule(c, lp)
        B = sparse.csr_matrix((np.ones(len(v)), (g, v)), shape=(len(v) // lp, m))
        want = np.asarray((B.T @ B).todense())
        np.testing.assert_array_equal(types_cooccurrence(sets, w, m), want)
        np.testing.assert_array_equal(group_cooccurrence(gv, m), want)
    assert done > 100


def test_drawn_decoy_groups_are_valid_and_uniform(small_blocks):
    lp, sa = 2, np.array([0, 1, 2, 0, 1, 2, 0, 1], dtype=np.int8)  # counts 3, 3, 2: G = 4
    c = np.bincount(sa, minlength=3)
    v, g = decoy_schedule(c, lp, narrow=True)
    _, want_vals = groups_of_rows(sa, np.arange(len(sa), dtype=np.int32), v, g, lp, 3)
    rng = np.random.default_rng(4)
    seen: dict = {}
    for _ in range(4000):
        grp, vals = random_groups_of_rows(sa, v, g, lp, 3, rng)
        np.testing.assert_array_equal(vals, want_vals)
        assert (vals[grp] == sa[:, None]).any(axis=1).all()  # a row's own value is in its group
        assert (np.bincount(grp, minlength=len(vals)) == lp).all()
        seen[tuple(grp.tolist())] = seen.get(tuple(grp.tolist()), 0) + 1
    # the random-id reference: every bijection from a value's rows to its groups is equally likely
    ref = set()
    for perm in itertools.permutations(range(len(sa))):
        grp, _ = groups_of_rows(sa, np.array(perm, dtype=np.int32), v, g, lp, 3)
        ref.add(tuple(grp.tolist()))
    assert set(seen) == ref and len(ref) == 3 * 2 * 3 * 2 * 2
    assert stats.chisquare(list(seen.values())).pvalue > 1e-6


def test_gather_columns_equals_take(monkeypatch):
    from ppdp.mechanisms.randomization import uniform
    monkeypatch.setattr(uniform, "GATHER_BLOCK", 29)
    rng = np.random.default_rng(5)
    cols = [rng.integers(-100, 100, 500).astype(np.int8), rng.integers(0, 250, 500).astype(np.uint8),
            rng.integers(0, 3, 500).astype(np.int8)]
    order = rng.permutation(np.arange(500, dtype=np.int32))[:300]
    for got, c in zip(gather_columns(cols, order), cols):
        assert got.dtype == c.dtype
        np.testing.assert_array_equal(got, c[order])
    wide = [cols[0], cols[1].astype(np.int32)]  # not all 1-byte: plain takes
    for got, c in zip(gather_columns(wide, order), wide):
        np.testing.assert_array_equal(got, c[order])


def test_sdr_subtables_follow_the_plan_and_publish_grouped():
    t = ppdp.datasets.load("occ", 20000, seed=5)
    rel = ppdp.publish(t, ppdp.SDR(0.1, 0.3), seed=7)
    sub = rel.tables["data"].column("subtable").to_numpy()
    assert (np.diff(sub) >= 0).all()  # rows grouped by sub-table
    assert [st["n"] for st in rel.manifest["certificate"]["subtables"]] == np.bincount(sub).tolist()
    assert ppdp.verify(rel, t).ok
