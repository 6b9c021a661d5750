"""DPCube, the cell histogram and the baselines: privacy bookkeeping, tiling, estimators vs
brute force, query translation and bad input."""

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ppdp
from ppdp.errors import PpdpError, SchemaError
from ppdp.kernels import grid as grid_mod
from ppdp.kernels.grid import box_counts, box_sums, cover_counts, summed_area, tree_counts, tree_levels
from ppdp.kernels.noise import discrete_laplace, discrete_laplace_variance
from ppdp.mechanisms.histogram import CellHistogram, ConsistentHierarchy, DPCube, HierarchicalKDTree
from ppdp.mechanisms.histogram.kdtree import vopt_kdtree
from ppdp.mechanisms.histogram.operators import tree_least_squares
from ppdp.queries import Predicate, Query, answer_exact
from ppdp.queries.workloads import range_workload


#: the declared (public) domains of small_table's columns
SMALL = {"x": [str(10 * i) for i in range(6)], "y": list("pqrstuvw"), "z": ["0", "1", "2"]}


def small_table(seed=0, n=300, a=6, b=5):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x": rng.integers(0, a, n) * 10, "y": rng.choice(list("pqrstuvw")[:b], n),
                       "z": rng.integers(0, 3, n)})
    return ppdp.Table.from_pandas(df, quasi=["x", "y", "z"])


@pytest.fixture(scope="module")
def adult():
    return ppdp.datasets.load("adult")


MECHS = [CellHistogram(0.5, ["age", "hours_per_week"], domains="adult"), DPCube(0.5, ["age", "hours_per_week"], domains="adult"),
         HierarchicalKDTree(0.5, ["age", "hours_per_week"], domains="adult"), ConsistentHierarchy(0.5, ["age", "hours_per_week"], domains="adult")]


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
def test_release_verifies_and_roundtrips(adult, mech, tmp_path):
    r = ppdp.publish(adult, mech, seed=3)
    rep = ppdp.verify(r, adult)
    assert rep.ok, rep.problems
    c = r.certificate
    assert c["epsilon_cells"] + c["epsilon_partitions"] + c["epsilon_other"] == pytest.approx(0.5)
    r.save(tmp_path / "rel")
    back = ppdp.load_release(tmp_path / "rel")
    assert ppdp.verify(back, adult).ok
    wl = range_workload(adult.domains, ["age", "hours_per_week"], 50, seed=2)
    assert np.allclose(back.answer(wl), r.answer(wl))


def _tamper(tmp_path, release, edit):
    d = tmp_path / "t"
    release.save(d)
    m = json.loads((d / "manifest.json").read_text())
    edit(m)
    (d / "manifest.json").write_text(json.dumps(m))
    return ppdp.verify(d)


def test_verify_fails_when_budgets_do_not_add_up(adult, tmp_path):
    r = ppdp.publish(adult, DPCube(1.0, ["age", "hours_per_week"], domains="adult"), seed=1)

    def edit(m):
        m["certificate"]["epsilon_cells"] = 0.95  # claims α1 = 0.95 while α2 = 0.1 and α = 1
    rep = _tamper(tmp_path, r, edit)
    assert not rep.ok
    assert any("epsilon" in p or "α1" in p for p in rep.problems)


def test_verify_fails_on_soft_sampler_and_broken_tiling(adult, tmp_path):
    r = ppdp.publish(adult, DPCube(1.0, ["age", "hours_per_week"], domains="adult"), seed=1)
    rep = _tamper(tmp_path / "a", r, lambda m: m["certificate"].__setitem__("sampler", "numpy-laplace"))
    assert any("sampler" in p for p in rep.problems)
    lo, hi, y = r.partition_boxes()
    import pyarrow as pa
    t = r.tables["partitions"]
    bad = t.set_column(t.column_names.index("age_lo"), "age_lo", pa.array(np.zeros(len(lo), np.int32)))
    r2 = type(r)(r.manifest, {"cells": r.tables["cells"], "partitions": bad})
    rep2 = ppdp.verify(r2)
    assert not rep2.ok and any("do not tile" in p for p in rep2.problems)
    worse = t.set_column(t.column_names.index("age_hi"), "age_hi", pa.array(np.asarray(hi[:, 0] + 1, np.int32)))
    rep3 = ppdp.verify(type(r)(r.manifest, {"cells": r.tables["cells"], "partitions": worse}))
    assert any("out-of-range" in p for p in rep3.problems)


def test_verify_against_wrong_source_table(adult):
    r = ppdp.publish(adult, CellHistogram(1.0, ["age", "sex"], domains="adult"), seed=0)
    other = adult.take(np.flatnonzero(adult.labels("age").astype(int) < 60))
    from ppdp.datasets import compact
    rep = ppdp.verify(r, compact(other))
    assert not rep.ok


# ------------------------------------------------------------------ kd-tree tiling
@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), st.integers(0, 10_000), st.floats(0, 50))
def test_vopt_kdtree_tiles(shape, seed, xi0):
    y = np.random.default_rng(seed).integers(-20, 60, size=shape).astype(float)
    lo, hi = vopt_kdtree(y, xi0)
    assert np.all(cover_counts(shape, lo, hi) == 1)
    # every leaf is a single cell or meets the variance threshold
    for a, b in zip(lo, hi):
        sub = y[tuple(slice(i, j + 1) for i, j in zip(a, b))]
        assert sub.size == 1 or sub.var() <= xi0 + 1e-9


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), st.integers(0, 10_000), st.floats(0, 30),
       st.floats(0, 20), st.floats(-50, 200))
def test_vopt_kdtree_noise_aware_leaf_rules(shape, seed, xi0, v, min_count):
    """Every leaf is a single cell, or its de-noised variance is ≤ ξ0, or its total ≤ min_count;
    every split box met none of these (its children tile it)."""
    y = np.random.default_rng(seed).integers(-20, 60, size=shape).astype(float)
    lo, hi = vopt_kdtree(y, xi0, noise_var=v, min_count=min_count)
    assert np.all(cover_counts(shape, lo, hi) == 1)
    for a, b in zip(lo, hi):
        sub = y[tuple(slice(i, j + 1) for i, j in zip(a, b))]
        assert sub.size == 1 or sub.var(ddof=1) - v <= xi0 + 1e-9 or sub.sum() <= min_count + 1e-9
    whole_is_leaf = len(lo) == 1
    stops = y.size == 1 or y.var(ddof=1) - v <= xi0 + 1e-9 or y.sum() <= min_count + 1e-9
    assert whole_is_leaf == stops
    assert vopt_kdtree(y, None)[0].shape[0] == y.size  # no test at all: down to single cells


def test_dpcube_tree_ignores_pure_noise():
    """On a perfectly uniform cube the de-noised variance test must stop at the root most of
    the time (raw-variance thresholds would split the noise down to single cells)."""
    rng = np.random.default_rng(0)
    v = discrete_laplace_variance(0.1)
    roots = 0
    for _ in range(40):
        y = 50 + discrete_laplace(rng, 0.1, (30, 40)).astype(float)
        roots += len(vopt_kdtree(y, 0.25 * v, noise_var=v)[0]) == 1
    assert roots >= 36  # P(s² − v > v/4 | n = 1200) ≈ 2e-4 per cube (normal approx., κ4 of the noise)


def test_vopt_split_minimises_sse():
    y = np.array([[0, 0, 0, 9, 9], [0, 0, 0, 9, 9]], float)
    lo, hi = vopt_kdtree(y, 0.0)
    assert sorted(map(tuple, hi.tolist())) == [(1, 2), (1, 4)]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 5), st.integers(1, 5))
def test_every_mechanism_tiles_and_verifies(seed, a, b):
    t = small_table(seed, n=200, a=a + 1, b=b + 1)
    for mech in (DPCube(1.0, ["x", "y"], xi0=0.0, domains=SMALL), HierarchicalKDTree(1.0, ["x", "y"], depth=3, domains=SMALL)):
        r = ppdp.publish(t, mech, seed=seed)
        assert ppdp.verify(r, t).ok
        lo, hi, _ = r.partition_boxes()
        assert np.all(cover_counts(r.shape, lo, hi) == 1)


# ---------------------------------------------------------------- estimators
def brute_force_estimates(r, est):
    """Cell estimates by explicit (slow) linear algebra over the full query matrix."""
    shape = r.shape
    m = int(np.prod(shape))
    cells = r.noisy_cells().ravel() if est != "uniform" else None
    lo, hi, yp = r.partition_boxes()
    membership = np.zeros((len(yp), m))
    for p in range(len(yp)):
        for c in range(m):
            ix = np.unravel_index(c, shape)
            membership[p, c] = all(lo[p][k] <= ix[k] <= hi[p][k] for k in range(len(shape)))
    if est == "uniform":
        return (membership.T @ (yp / membership.sum(1))).reshape(shape)
    v1 = discrete_laplace_variance(r.certificate["epsilon_cells"])
    v2 = discrete_laplace_variance(r.certificate["epsilon_partitions"])
    H = np.vstack([np.eye(m), membership])
    w = np.concatenate([np.full(m, 1 / v1), np.full(len(yp), 1 / v2)])
    yy = np.concatenate([cells, yp])
    sol = np.linalg.lstsq(H * np.sqrt(w)[:, None], yy * np.sqrt(w), rcond=None)[0]
    return sol.reshape(shape)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.2, 0.5, 0.8]))
def test_uniform_and_ls_match_brute_force(seed, frac):
    t = small_table(seed)
    r = ppdp.publish(t, DPCube(0.7, ["x", "y"], alpha1_fraction=frac, xi0=5.0, domains=SMALL), seed=seed)
    for est in ("uniform", "ls"):
        assert np.allclose(r.estimator(est).cells(r), brute_force_estimates(r, est), atol=1e-6)


def test_equal_budgets_give_the_papers_H_plus():
    t = small_table(4)
    r = ppdp.publish(t, DPCube(1.0, ["x", "y"], alpha1_fraction=0.5, xi0=3.0, domains=SMALL), seed=2)
    y = r.noisy_cells()
    lo, hi, yp = r.partition_boxes()
    est = r.estimator("ls").cells(r)
    for p in range(len(yp)):  # x̂ = H⁺ y with H = [ones; I] per partition (Xiao et al. Theorem 4.6)
        sl = tuple(slice(a, b + 1) for a, b in zip(lo[p], hi[p]))
        n = y[sl].size
        Hp = np.vstack([np.ones((1, n)), np.eye(n)])
        xh = np.linalg.pinv(Hp) @ np.concatenate([[yp[p]], y[sl].ravel()])
        assert np.allclose(est[sl].ravel(), xh)


def test_ls_eb_keeps_ls_partition_totals():
    t = small_table(5)
    r = ppdp.publish(t, DPCube(1.0, ["x", "y"], xi0=3.0, domains=SMALL), seed=2)
    lo, hi, _ = r.partition_boxes()
    a, b = r.estimator("ls").answer_boxes(r, lo, hi), r.estimator("ls-eb").answer_boxes(r, lo, hi)
    assert np.allclose(a, b)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000))
def test_range_answers_match_cellwise_sums(seed):
    t = small_table(seed)
    r = ppdp.publish(t, DPCube(1.0, ["x", "y", "z"], xi0=2.0, domains=SMALL), seed=seed)
    rng = np.random.default_rng(seed)
    queries, boxes = [], []
    doms = [r.domains[d] for d in r.dims]
    for _ in range(30):
        preds, box = [], []
        for d, dom in zip(r.dims, doms):
            k = rng.integers(0, 3)
            if k == 0:
                box.append(np.ones(len(dom), bool))
                continue
            if k == 1:
                a, b = np.sort(rng.integers(0, len(dom), 2))
                preds.append(Predicate(d, "between", low=dom[a], high=dom[b]))
                m = np.zeros(len(dom), bool)
                m[a:b + 1] = True
            else:
                m = rng.random(len(dom)) < 0.5
                preds.append(Predicate(d, "in", tuple(dom[i] for i in np.flatnonzero(m))) if m.any()
                             else Predicate(d, "in", (dom[0],)))
                if not m.any():
                    m[0] = True
            box.append(m)
        queries.append(Query(tuple(preds)))
        boxes.append(box)
    for est in ("uniform", "ls", "cells", "ls-eb"):
        cells = r.estimator(est).cells(r)
        want = [cells[np.ix_(*b)].sum() for b in boxes]
        assert np.allclose(r.answer(queries, estimator=est), want)


def test_summed_area_box_sums_brute_force():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 5, 3))
    lo = np.array([[0, 1, 0], [2, 0, 1], [3, 4, 2]])
    hi = np.array([[3, 4, 2], [2, 3, 2], [3, 4, 2]])
    want = [a[l[0]:h[0] + 1, l[1]:h[1] + 1, l[2]:h[2] + 1].sum() for l, h in zip(lo, hi)]
    assert np.allclose(box_sums(summed_area(a), lo, hi), want)


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=4), fanout=st.sampled_from(["quad", "binary"]),
       seed=st.integers(0, 2**16))
def test_tree_counts_are_the_boxes_counts(shape, fanout, seed):
    """The consistency tree's node counts, summed bottom up, are the exact box counts of every
    node (what the mechanism measured before: the same noisy release for the same seed)."""
    x = np.random.default_rng(seed).integers(0, 30, size=tuple(shape))
    levels = tree_levels(tuple(shape), fanout)
    sat = summed_area(x)
    for got, (lo, hi, _) in zip(tree_counts(x, levels), levels, strict=True):
        assert np.array_equal(got, box_counts(sat, lo, hi))
    assert tree_levels(tuple(shape), fanout)[0][0] is levels[0][0]  # built once per shape
    assert not levels[-1][0].flags.writeable


@pytest.mark.parametrize("fanout", ["quad", "binary"])
def test_tree_least_squares_matches_lstsq(fanout):
    shape = (3, 5)
    levels = tree_levels(shape, fanout)
    rng = np.random.default_rng(1)
    noisy = [rng.normal(10, 3, size=len(lo)) for lo, _, _ in levels]
    est = tree_least_squares(noisy, [p for _, _, p in levels], 2.0)
    m = 15
    rows, obs = [], []
    for (lo, hi, _), h in zip(levels, noisy):
        for b in range(len(lo)):
            row = np.zeros(shape)
            row[lo[b][0]:hi[b][0] + 1, lo[b][1]:hi[b][1] + 1] = 1
            rows.append(row.ravel())
            obs.append(h[b])
    sol = np.linalg.lstsq(np.array(rows), np.array(obs), rcond=None)[0].reshape(shape)
    for (lo, hi, _), e in zip(levels, est):
        for b in range(len(lo)):
            assert e[b] == pytest.approx(sol[lo[b][0]:hi[b][0] + 1, lo[b][1]:hi[b][1] + 1].sum())
    assert m == sum(np.all(l_ == h_, axis=1).sum() for l_, h_, _ in levels)
    for lv in range(1, len(levels)):  # children tile their parent
        lo, hi, par = levels[lv]
        plo, phi, _ = levels[lv - 1]
        assert np.all(lo >= plo[par]) and np.all(hi <= phi[par])
        vol = np.prod(hi - lo + 1, axis=1)
        assert np.allclose(np.bincount(par, weights=vol, minlength=len(plo))[np.unique(par)],
                           np.prod(phi - plo + 1, axis=1)[np.unique(par)])


def test_query_on_a_non_dimension_is_an_error(adult):
    r = ppdp.publish(adult, CellHistogram(1.0, ["age", "sex"], domains="adult"), seed=0)
    with pytest.raises(PpdpError, match="not a dimension"):
        r.count("race = 'White'")
    assert r.count("sex = 'Female' AND age BETWEEN 30 AND 40") > 0


def test_bins_and_exact_counts_at_huge_epsilon(adult):
    bins = {"age": list(range(15, 95, 5)), "hours_per_week": [0, 20, 40, 60, 100]}
    r = ppdp.publish(adult, CellHistogram(1e4, ["age", "hours_per_week"], bins=bins, domains="adult"), seed=0)
    assert ppdp.verify(r, adult).ok
    assert r.certificate["bins"]["age"][0] == 15.0
    # ε = 1e4: noise is 0 with probability ≈ 1 − 2e^{−10000}; the histogram is exact
    exact = answer_exact(adult, ["age BETWEEN 15 AND 39 AND hours_per_week BETWEEN 0 AND 39"])[0]
    # on the release, ranges follow the bin edges (integer ages 15 … 39 are the bins [15, 20) … [35, 40))
    assert r.count("age >= 15 AND age < 40 AND hours_per_week >= 0 AND hours_per_week < 40") == exact


def test_sparse_cell_histogram(monkeypatch):
    monkeypatch.setattr(grid_mod, "DENSE_MAX_CELLS", 10)
    t = small_table(0)
    r = ppdp.publish(t, CellHistogram(2.0, ["x", "y"], domains=SMALL), seed=0)
    assert r.certificate["storage"] == "sparse" and r.certificate["threshold"] >= 1
    assert ppdp.verify(r, t).ok
    idx, cnt = r.cell_index()
    assert np.all(cnt >= r.certificate["threshold"])
    assert r.count("x BETWEEN 0 AND 50") == pytest.approx(cnt.sum())


# ----------------------------------------------------------------- bad input
@pytest.mark.parametrize("bad", [0, -0.5, float("nan"), float("inf")])
def test_bad_epsilon(bad):
    with pytest.raises(PpdpError, match="epsilon"):
        DPCube(bad, ["age"])


def test_unknown_dimension(adult):
    with pytest.raises(SchemaError, match="unknown dimension 'agee'"):
        ppdp.publish(adult, DPCube(1.0, ["agee", "sex"], domains="adult"))


def test_bins_leaving_values_uncovered(adult):
    with pytest.raises(SchemaError, match="uncovered"):
        ppdp.publish(adult, CellHistogram(1.0, ["age"], bins={"age": [20, 50, 70]}, domains="adult"))


def test_empty_table(adult):
    with pytest.raises(PpdpError, match="empty"):
        ppdp.publish(adult.take(np.zeros(0, int)), CellHistogram(1.0, ["age"], domains="adult"))


def test_bad_parameters():
    with pytest.raises(PpdpError, match="alpha1_fraction"):
        DPCube(1.0, ["age"], alpha1_fraction=1.0)
    with pytest.raises(PpdpError, match="xi0"):
        DPCube(1.0, ["age"], xi0=-1)
    with pytest.raises(PpdpError, match="repeats a label"):
        DPCube(1.0, ["age", "age"])
    with pytest.raises(PpdpError, match="not one of the dims"):
        CellHistogram(1.0, ["age"], bins={"sex": [0, 1]})
