"""The compact plan and the row-form verify (issue 15) agree with the dense forms they replace."""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ppdp
from ppdp.kernels.transition import pair_runs, row_groups
from ppdp.mechanisms.bucketization.anatomy_plan import anatomy_setting, group_creation_types
from ppdp.mechanisms.bucketization.apply import assign_buckets, assign_typed
from ppdp.mechanisms.bucketization.plan import (SizeClass, classes_to_counts, classes_to_types, compress_rows,
                                                expand_types)
from ppdp.releases.bucketized import bucket_disclosure, dense_ids, same_rows, sparse_disclosure


def test_class_types_expand_to_the_round_robin_counts():
    rng = np.random.default_rng(0)
    for _ in range(200):
        m = int(rng.integers(2, 12))
        classes = [SizeClass(int(S), int(b), rng.integers(0, 3 * b, m)) for S, b in rng.integers(1, 40, (3, 2))]
        types, mult = classes_to_types(classes, m)
        assert len(types) <= sum(2 * m + 1 for _ in classes)
        np.testing.assert_array_equal(expand_types(types, mult), classes_to_counts(classes, m))
        t2, m2 = compress_rows(classes_to_counts(classes, m))
        np.testing.assert_array_equal(expand_types(t2, m2), classes_to_counts(classes, m))


def test_typed_apply_gives_the_dense_apply_bucket_ids():
    rng = np.random.default_rng(1)
    for trial in range(30):
        m = int(rng.integers(2, 8))
        types = rng.integers(0, 4, (int(rng.integers(1, 6)), m))
        types[types.sum(axis=1) == 0, 0] = 1
        mult = rng.integers(1, 50, len(types))
        counts = expand_types(types, mult)
        sa = np.repeat(np.arange(m), counts.sum(axis=0))
        sa = sa[rng.permutation(len(sa))].astype(np.uint8)
        bid_d, relab = assign_buckets(sa, counts, np.random.default_rng(trial))
        bid_t, type_of = assign_typed(sa, types, mult, np.random.default_rng(trial), block=7)
        np.testing.assert_array_equal(bid_d, bid_t)
        np.testing.assert_array_equal(relab, types[type_of])


@pytest.mark.parametrize("kind", ["ties", "random", "staircase"])
def test_batched_group_creation_makes_the_rules_groups(kind):
    rng = np.random.default_rng({"ties": 2, "random": 3, "staircase": 4}[kind])
    for _ in range(150):
        m = int(rng.integers(2, 10))
        o = {"ties": lambda: np.full(m, int(rng.integers(1, 15))) + rng.integers(0, 2, m),
             "random": lambda: rng.integers(0, 25, m),
             "staircase": lambda: 10 + np.arange(m)[::-1] + rng.integers(0, 2, m)}[kind]().astype(np.int64)
        l = int(rng.integers(1, m + 1))  # noqa: E741
        rest, want = o.copy(), Counter()
        while (rest > 0).sum() >= l:                   # the rule, one group at a time
            top = np.lexsort((np.arange(m), -rest))[:l]
            rest[top] -= 1
            want[tuple(sorted(top.tolist()))] += 1
        sets, mult, left = group_creation_types(o, l)
        got = Counter()
        for row, k in zip(sets, mult):
            got[tuple(np.flatnonzero(row).tolist())] += int(k)
        assert got == want and left.tolist() == rest.tolist()


def test_anatomy_planning_time_does_not_grow_with_n():
    o = ppdp.datasets.load("occ").counts("occupation").astype(np.int64)
    for scale in (1, 1000, 100_000):                   # 1.5·10^5 … 1.5·10^10 records
        t0 = time.process_time()
        s = anatomy_setting(o * scale + np.arange(len(o)) % 3, 4)
        assert time.process_time() - t0 < 2.0 and len(s.multiplicity) < 5000
        assert s.problems(o * scale + np.arange(len(o)) % 3, np.full(len(o), 0.25)) == []


def test_row_form_verify_helpers_agree_with_dense():
    t = ppdp.datasets.load("occ", n=20000, seed=3)
    rel = ppdp.publish(t, ppdp.FPrivacy(theta=8), seed=3)
    b = rel.buckets()
    dense = bucket_disclosure(rel.posterior(), b["sizes"], rel.domains[rel.sa])
    assert sparse_disclosure(b["sb"], b["sc"], b["count"], b["sizes"], rel.domains[rel.sa]) == dense
    qbid = rel.tables["qit"].column("bid").to_numpy()
    ids, inv = np.unique(qbid, return_inverse=True)
    got = dense_ids(qbid)
    np.testing.assert_array_equal(got[0], ids) and np.testing.assert_array_equal(got[1], inv.ravel())
    cols = rel.quasi
    dims = [len(rel.domains[c]) for c in cols]
    assert same_rows([rel.codes("qit", c) for c in cols], [t.codes(c) for c in cols], dims)
    other = ppdp.datasets.load("occ", n=20000, seed=4)
    assert not same_rows([rel.codes("qit", c) for c in cols], [other.codes(c) for c in cols], dims)


def test_randomized_cell_pair_runs_are_the_pair_runs_of_row_groups():
    t = ppdp.datasets.load("occ", n=20000, seed=5)
    for mech in (ppdp.UniformPerturbation(0.1, 0.3), ppdp.SDR(0.1, 0.3)):
        rel = ppdp.publish(t, mech, seed=5)
        qi, sa = list(rel.schema["quasi"]), rel.sensitive[0]
        m = len(rel.domains[sa])
        got = rel._pair_counts(t, qi)(t.codes(sa), rel.column_codes(sa), m)
        gs, gp = row_groups([t.codes(c) for c in qi], [rel.column_codes(c) for c in qi], [len(rel.domains[c]) for c in qi])
        G = int(max(gs.max(), gp.max())) + 1
        want = (*pair_runs(gs, t.codes(sa), m, G), *pair_runs(gp, rel.column_codes(sa), m, G))
        for k in (1, 3):  # the same row counts, pair for pair
            np.testing.assert_array_equal(got[k], want[k])
        for k in (0, 2):  # the same values; the cells number the groups in the ids' order
            np.testing.assert_array_equal(got[k] % m, want[k] % m)
        cells = np.concatenate([got[0], got[2]]) // m
        ids = np.concatenate([want[0], want[2]]) // m
        o = np.argsort(cells, kind="stable")
        assert (np.diff(ids[o]) >= 0).all() and len(np.unique(cells)) == len(np.unique(ids))


def test_grouped_random_order_radix_passes_give_the_key_order():
    from ppdp.mechanisms.bucketization.apply import grouped_random_order
    for trial, (n, top) in enumerate([(1, 1), (50, 3), (5000, 200), (70000, 1 << 17), (30000, (1 << 32) - 1)]):
        rng = np.random.default_rng(trial)
        groups = rng.integers(0, top, n).astype(np.int64 if top >= 1 << 31 else np.int32)
        if trial == 3:
            groups.sort()  # bucket-major, as the ST rows
        pi = np.random.default_rng(100 + trial).permutation(n)
        want = np.argsort(groups.astype(np.int64) * n + pi)
        got = grouped_random_order(groups, np.random.default_rng(100 + trial))
        np.testing.assert_array_equal(got, want)


def test_randomization_fit_pair_level_bounds_match_the_row_level_reference():
    """The fit's upper/lower bounds when groups lost rows (per pair, with multiplicities) equal
    the per-row definition: per group, the sum of its n_p largest / smallest row terms."""
    from ppdp.kernels.transition import randomization_fit
    rng = np.random.default_rng(11)
    for trial in range(20):
        m, G, n = int(rng.integers(2, 6)), int(rng.integers(1, 30)), int(rng.integers(5, 400))
        gs, xs = rng.integers(0, G, n), rng.integers(0, m, n)
        keep = rng.random(n) < 0.8
        gp, yp = gs[keep], rng.integers(0, m, int(keep.sum()))
        for kind, kw in (("uniform", {"retention": 0.5, "q": 0.5 / (m - 1)}), ("decoy", {"l_prime": 2})):
            fit = randomization_fit(gs, xs, gp, yp, m, kind, **kw)
            a = np.zeros((G, m))
            np.add.at(a, (gs, xs), 1.0)
            a /= np.maximum(a.sum(axis=1, keepdims=True), 1)
            if kind == "uniform":
                term = 0.5 * a[gs, xs] + kw["q"] * (1 - a[gs, xs])
                lo_t = up_t = term
            else:
                srt = -np.sort(-a, axis=1)
                other = np.where(a[gs, xs] >= srt[gs, 0], srt[gs, 1], srt[gs, 0])  # the largest other share
                up_t, lo_t = (a[gs, xs] + other) / 2, a[gs, xs] / 2
            n_p = np.bincount(gp, minlength=G)
            up = sum(np.sort(up_t[gs == g])[::-1][:n_p[g]].sum() for g in range(G))
            lo = sum(np.sort(lo_t[gs == g])[:n_p[g]].sum() for g in range(G))
            W = a[gp, yp].sum()
            assert fit["upper"] == pytest.approx(up) and fit["lower"] == pytest.approx(lo) and fit["W"] == pytest.approx(W)
            assert fit["group_excess"] == 0 and fit["group_deficit"] == int((~keep).sum())


def test_grouped_random_order_presorted_blocks_give_the_key_order(monkeypatch):
    from ppdp.mechanisms.bucketization import apply
    monkeypatch.setattr(apply, "ORDER_BLOCK", 1000)
    for trial, (n, top) in enumerate([(5000, 40), (20000, 3000), (9000, 2), (4001, 4001)]):
        groups = np.sort(np.random.default_rng(trial).integers(0, top, n)).astype(np.int32)
        want = np.argsort(groups.astype(np.int64) * n + np.random.default_rng(50 + trial).permutation(n))
        np.testing.assert_array_equal(apply.grouped_random_order(groups, np.random.default_rng(50 + trial)), want)


def _key_groups_of_rows(sa, ids, values, groups, lp, m):
    """The int64-key reference the narrow decoy-group assignment replaced."""
    sa, n, G = np.asarray(sa, dtype=np.int64), len(sa), len(values) // lp
    values, groups = np.asarray(values, dtype=np.int64), np.asarray(groups, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    out[np.argsort(sa * n + np.asarray(ids, dtype=np.int64))] = groups[np.argsort(values * G + groups)]
    return out, values[np.argsort(groups * m + values)].reshape(-1, lp)


def test_narrow_decoy_groups_match_the_int64_key_sort(monkeypatch):
    from ppdp.kernels import transition
    from ppdp.kernels.transition import decoy_schedule, groups_of_rows
    monkeypatch.setattr(transition, "SLOT_BLOCK", 97)  # many blocks, boundaries inside runs
    rng = np.random.default_rng(15)
    for trial in range(40):
        m = int(rng.choice([3, 12, 300])) if trial % 4 else 70000  # uint8, uint16 codes
        lp = int(rng.integers(2, min(m, 9) + 1))
        n = lp * int(rng.integers(1, 400))
        sa = np.concatenate([np.arange(lp), rng.integers(0, m, n - lp)]) % m
        counts = np.bincount(sa, minlength=m)
        if counts.max() > n // lp:
            continue
        v64, g64 = decoy_schedule(counts, lp)
        v, g = decoy_schedule(counts, lp, narrow=True)
        assert v.dtype == ppdp.table.code_dtype(m) and g.dtype == np.int32 and v64.dtype == g64.dtype == np.int64
        np.testing.assert_array_equal(v, v64)
        np.testing.assert_array_equal(g, g64)
        assert all((np.diff(g64[v64 == s]) > 0).all() for s in np.flatnonzero(counts))  # slots in group order
        ids = rng.permutation(np.arange(n, dtype=np.int32))
        want_rows, want_vals = _key_groups_of_rows(sa, ids, v64, g64, lp, m)
        for args in ((sa.astype(v.dtype), ids, v, g), (sa, ids.astype(np.int64), v64, g64)):
            rows, vals = groups_of_rows(*args, lp, m)
            np.testing.assert_array_equal(rows, want_rows)
            np.testing.assert_array_equal(vals, want_vals)


def test_diverted_release_does_not_depend_on_the_block_size(monkeypatch):
    from ppdp.kernels import transition
    t = ppdp.datasets.load("occ", 3001, seed=3)
    lp = 3 if len(t.domain(t.sensitive[0])) >= 3 else 2
    whole = ppdp.publish(t, ppdp.Diverted(lp), seed=11)
    monkeypatch.setattr(transition, "SLOT_BLOCK", 61)
    blocked = ppdp.publish(t, ppdp.Diverted(lp), seed=11)
    assert whole.manifest["dropped"] == blocked.manifest["dropped"] == 3001 % lp
    assert whole.tables["data"].equals(blocked.tables["data"])


def test_decoy_cooccurrence_from_narrow_group_values_matches_the_slot_matrix(monkeypatch):
    from scipy import sparse

    from ppdp.kernels import transition
    from ppdp.kernels.transition import decoy_cooccurrence, decoy_schedule, diverted_matrix
    monkeypatch.setattr(transition, "SLOT_BLOCK", 53)
    rng = np.random.default_rng(16)
    for _ in range(30):
        m = int(rng.integers(3, 40))
        lp = int(rng.integers(2, min(m, 8) + 1))
        n = lp * int(rng.integers(1, 300))
        c = np.bincount(np.concatenate([np.arange(lp), rng.integers(0, m, n - lp)]) % m, minlength=m)
        if c.max() > n // lp:
            continue
        v, g = decoy_schedule(c, lp)
        B = sparse.csr_matrix((np.ones(len(v)), (g, v)), shape=(n // lp, m))
        want = np.asarray((B.T @ B).todense())
        np.testing.assert_array_equal(decoy_cooccurrence(c, lp), want)
        T = diverted_matrix(c, lp)
        assert T.flags["F_CONTIGUOUS"]  # the layout the sparse product gave: later sums in the same order
        np.testing.assert_array_equal(T[c > 0], (want / (lp * np.maximum(np.diag(want), 1.0))[:, None])[c > 0])


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_fit_from_cell_pairs_equals_the_fit_from_row_group_ids(data):
    """The source fit from cell-keyed pairs (one sorted narrow key per row, int32 or int64) is
    the fit of :func:`randomization_fit` on :func:`row_groups` ids, for every kind, with rows
    dropped from or added to the published side."""
    from ppdp.kernels.transition import cell_pair_runs, pairs_fit, randomization_fit
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    big = data.draw(st.booleans())  # a (cell × value) cube of ≥ 2^31 entries: int64 keys
    k = data.draw(st.integers(0, 3))
    dims = [int(d) for d in (rng.integers(60000, 90000, k) if big else rng.integers(1, 5, k))]
    m = data.draw(st.integers(2, 6))
    n = data.draw(st.integers(1, 300))
    src = [rng.integers(0, min(d, 4), n).astype(np.uint32 if big else np.uint8) for d in dims]
    xs = rng.integers(0, m, n).astype(np.uint8)
    keep = rng.random(n) < data.draw(st.sampled_from([1.0, 0.8]))
    extra = data.draw(st.integers(0, 3))
    pub = [np.concatenate([c[keep], rng.integers(0, min(d, 4), extra).astype(c.dtype)]) for c, d in zip(src, dims)]
    yp = rng.integers(0, m, int(keep.sum()) + extra).astype(np.uint8)
    s, p = cell_pair_runs(src, dims, xs, m), cell_pair_runs(pub, dims, yp, m)
    assert s is not None and p is not None
    assert s[0].dtype == (np.int64 if big and k >= 2 else np.int32)
    gs, gp = row_groups(src, pub, dims) if dims else (np.zeros(n, np.int64), np.zeros(len(yp), np.int64))
    sets = np.array([[0, 1], [1, 2]]) if m >= 3 else None
    for kind, kw in (("uniform", {"retention": 0.6, "q": 0.4 / (m - 1)}),
                     ("subtables", {"subtables": [([0, 1], 0.7, 0.3), (list(range(1, m)), 0.5, 0.5 / max(m - 2, 1))]}),
                     ("decoy", {"l_prime": 2}), ("decoy", {"l_prime": 2, "decoy_sets": sets})):
        if kind == "decoy" and kw.get("decoy_sets", 0) is None:
            continue
        want = randomization_fit(gs, xs, gp, yp, m, kind, **kw)
        got = pairs_fit(*s, *p, m, kind, **kw)
        assert got.keys() == want.keys()
        for key in want:
            assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-9), (kind, key)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_cell_runs_of_blocks_are_the_distinct_rows_with_counts(data):
    """The source comparison's sorted cells (blocks of rows, int32 or int64 cells) are the
    distinct rows in row-major order with their multiplicities — :func:`same_rows`' verdict."""
    from ppdp.releases.bucketized import cell_runs
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    big = data.draw(st.booleans())
    dims = [int(d) for d in (rng.integers(70000, 90000, 2) if big else rng.integers(1, 6, data.draw(st.integers(1, 4))))]
    n = data.draw(st.integers(0, 200))
    cols = [rng.integers(0, min(d, 5), n).astype(np.int32) for d in dims]
    block = data.draw(st.integers(1, 50))
    got = cell_runs(([c[a:a + block] for c in cols] for a in range(0, n, block)), dims, n)
    assert got is not None
    assert got[0].dtype == (np.int64 if big else np.int32)
    rows, counts = np.unique(np.stack(cols, axis=1).reshape(n, len(dims)), axis=0, return_counts=True)
    np.testing.assert_array_equal(got[0], np.ravel_multi_index(rows.T, dims) if n else np.zeros(0))
    np.testing.assert_array_equal(got[1], counts)
    assert cell_runs(([c[a:a + block] for c in cols] for a in range(0, n, block)), dims, n + 1) is None
    other = [c.copy() for c in cols]
    if n:
        other[0][0] = (other[0][0] + 1) % dims[0]
    want = n == 0 or dims[0] == 1
    assert same_rows(cols, other, dims) == want
    a = cell_runs([cols], dims, n)
    b = cell_runs([other], dims, n)
    assert a is not None and b is not None
    assert all(np.array_equal(x, y) for x, y in zip(a, b)) == want
