"""Mechanism A' (Fu et al.): decoy groups, publishing, Theorem 1, estimators, verify, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import ppdp
from ppdp.errors import InfeasibleError, ParameterError, PpdpError, SchemaError
from ppdp.estimators.randomized import FourStateClosed, FourStateIterative, FullIterative
from ppdp.mechanisms.randomization.diverted import decoy_groups, decoy_schedule, randomize_in_groups
from ppdp.queries import Predicate, Query, Workload


# ----------------------------------------------------------------------------- helpers
def brute_force_groups(counts, lp):
    """Anatomy's group creation, one group at a time (the reference)."""
    r = np.array(counts, dtype=np.int64)
    out = []
    for _ in range(int(r.sum()) // lp):
        pick = np.lexsort((np.arange(len(r)), -r))[:lp]
        assert (r[pick] > 0).all()
        out.append(sorted(pick.tolist()))
        r[pick] -= 1
    return out


@st.composite
def eligible_counts(draw):
    m = draw(st.integers(2, 9))
    lp = draw(st.integers(2, m))
    G = draw(st.integers(1, 25))
    # distribute N = G·ℓ' tuples with every count ≤ G, with skew from a random weight vector
    w = np.array(draw(st.lists(st.integers(1, 50), min_size=m, max_size=m)), dtype=float)
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    c = np.zeros(m, dtype=np.int64)
    for _ in range(G * lp):
        open_ = np.flatnonzero(c < G)
        p = w[open_] / w[open_].sum()
        c[rng.choice(open_, p=p)] += 1
    return c, lp


def make_table(sa_codes, nsa=None, m=None, extra_sa=None):
    sa_codes = np.asarray(sa_codes)
    n = len(sa_codes)
    m = m or int(sa_codes.max()) + 1
    nsa = np.arange(n) % 7 if nsa is None else np.asarray(nsa)
    cols = {"a": nsa, "s": sa_codes}
    doms = {"a": [f"a{i}" for i in range(int(nsa.max()) + 1)], "s": [f"s{i}" for i in range(m)]}
    sens = ["s"]
    if extra_sa is not None:
        cols["t"] = np.asarray(extra_sa)
        doms["t"] = [f"t{i}" for i in range(int(np.max(extra_sa)) + 1)]
        sens.append("t")
    return ppdp.Table(cols, doms, quasi=["a"], sensitive=sens)


# ----------------------------------------------------------------------------- groups
@settings(max_examples=150, deadline=None)
@given(eligible_counts())
def test_schedule_equals_brute_force_greedy(case):
    counts, lp = case
    v, g = decoy_schedule(counts, lp)
    G = int(counts.sum()) // lp
    fast = [sorted(v[g == i].tolist()) for i in range(G)]
    assert fast == brute_force_groups(counts, lp)


def test_schedule_on_occ_500k_equals_brute_force():
    t = ppdp.datasets.load("occ", n=500_000)
    c = t.counts("occupation")
    c[np.argmax(c)] -= int(c.sum()) % 5
    v, g = decoy_schedule(c, 5)
    fast = v[np.lexsort((v, g))].reshape(-1, 5)
    assert np.array_equal(fast, np.array(brute_force_groups(c, 5)))


@settings(max_examples=60, deadline=None)
@given(eligible_counts(), st.integers(0, 2**31))
def test_groups_from_id_and_sa_only(case, seed):
    counts, lp = case
    rng = np.random.default_rng(seed)
    sa = rng.permutation(np.repeat(np.arange(len(counts)), counts))
    ids = rng.permutation(len(sa))
    grp, gvals = decoy_groups(sa, ids, lp, len(counts))
    assert gvals.shape == (len(sa) // lp, lp)
    assert all(len(set(row)) == lp for row in gvals.tolist())  # ℓ' distinct values per group
    assert np.array_equal(np.sort(gvals[grp], axis=1), np.sort(gvals[grp], axis=1))
    assert (gvals[grp] == sa[:, None]).any(axis=1).all()  # a row's own value is in its group
    assert np.array_equal(np.bincount(grp, minlength=len(gvals)), np.full(len(gvals), lp))
    # "smallest id first": within a value, the group creation order follows the id order
    for s in range(len(counts)):
        rows = np.flatnonzero(sa == s)
        assert np.all(np.diff(grp[rows[np.argsort(ids[rows])]]) > 0)
    # the same (id, SA) pairs in another row order give the same groups per id
    perm = rng.permutation(len(sa))
    grp2, gvals2 = decoy_groups(sa[perm], ids[perm], lp, len(counts))
    assert np.array_equal(gvals2, gvals) and np.array_equal(grp2, grp[perm])


# ----------------------------------------------------------------------------- Theorem 1
def _outcome_histogram(nsa_of_row, grp, gvals, own, runs, seed, retention=None):
    """Simulate the per-row draw ``runs`` times (vectorised); encode each output D' (rows are
    unique on the NSA, so D' is the map NSA → published SA) as one integer."""
    n = len(own)
    rng = np.random.default_rng(seed)
    pub = randomize_in_groups(np.tile(grp, runs), gvals, np.tile(own, runs), rng, retention).reshape(runs, n)
    by_nsa = np.empty_like(pub)
    by_nsa[:, nsa_of_row] = pub
    m = int(gvals.max()) + 1
    code = (by_nsa * m ** np.arange(n)).sum(axis=1)
    return np.bincount(code, minlength=m ** n)


@pytest.mark.parametrize("retention, distinguishable", [(None, False), (0.6, True)])
def test_theorem_1_neighbours_indistinguishable(retention, distinguishable):
    lp, sa = 3, np.array([0, 1, 2, 0, 1, 2])
    ids = np.arange(6)
    grp, gvals = decoy_groups(sa, ids, lp, 3)
    a = 0
    b = int(np.flatnonzero((grp == grp[a]) & (sa != sa[a]))[0])  # t̆: same decoy group, other value
    nsa1 = np.arange(6)
    nsa2 = nsa1.copy()
    nsa2[[a, b]] = nsa2[[b, a]]  # D2: the NSA values of t and t̆ swapped
    runs = 100_000
    h1 = _outcome_histogram(nsa1, grp, gvals, sa, runs, 1, retention)
    h2 = _outcome_histogram(nsa2, grp, gvals, sa, runs, 2, retention)
    keep = (h1 + h2) > 0
    _, p, _, _ = stats.chi2_contingency(np.stack([h1[keep], h2[keep]]))
    if distinguishable:
        assert p < 1e-6
    else:
        assert p > 0.01


# ----------------------------------------------------------------------------- publish
def test_publish_manifest_and_rows():
    rng = np.random.default_rng(0)
    sa = rng.permutation(np.repeat(np.arange(6), [40, 35, 30, 25, 20, 13]))  # N = 163
    t = make_table(sa, nsa=rng.integers(0, 5, len(sa)))
    r = ppdp.publish(t, ppdp.Diverted(4), seed=3)
    m = r.manifest
    assert (m["n_input"], m["n_published"], m["dropped"]) == (163, 160, 3)
    assert m["certificate"]["l_prime"] == 4 and m["certificate"]["n_groups"] == 40
    assert "groups" not in m and "groups" not in m["certificate"]
    assert m["mechanism"] == "diverted" and m["family"] == "randomized" and m["fit_for_publication"] is False
    assert r.data.column_names == ["a", "s"]
    rep = ppdp.verify(r, t)
    assert rep.ok, rep.problems
    # NSA column = source minus the 3 dropped rows
    diff = t.counts("a") - np.bincount(r.column_codes("a"), minlength=5)
    assert diff.min() >= 0 and diff.sum() == 3
    # seeded runs repeat
    r2 = ppdp.publish(t, ppdp.Diverted(4), seed=3)
    assert r2.data.equals(r.data)


def test_published_values_come_from_the_group_uniformly():
    sa = np.repeat(np.arange(5), 2000)
    grp, gvals = decoy_groups(sa, np.arange(len(sa)), 5, 5)
    rng = np.random.default_rng(0)
    pub = randomize_in_groups(grp, gvals, sa, rng)
    assert (gvals[grp] == pub[:, None]).any(axis=1).all()
    kept = (pub == sa).mean()
    assert abs(kept - 0.2) < 4 * np.sqrt(0.2 * 0.8 / len(sa))


def test_save_load_query_roundtrip(tmp_path):
    t = ppdp.datasets.load("adult", n=5000).with_roles(["age", "sex", "race"], ["occupation"])
    r = ppdp.publish(t, ppdp.Diverted(3), seed=0)
    d = r.save(tmp_path / "rel")
    back = ppdp.load_release(d)
    q = "sex = 'Male' AND occupation = 'Prof-specialty'"
    assert back.count(q) == pytest.approx(r.count(q))
    assert ppdp.verify(d, t).ok


# ----------------------------------------------------------------------------- estimators
def _table_with_independent_P(counts, frac=0.4, seed=0):
    """NSA a ∈ {0, 1}; exactly ⌊frac·f_v⌋ rows of every SA value v have a = 1."""
    sa = np.repeat(np.arange(len(counts)), counts)
    a = np.zeros(len(sa), dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    for s0, c in zip(start, counts):
        a[s0:s0 + int(frac * c)] = 1
    perm = np.random.default_rng(seed).permutation(len(sa))
    return make_table(sa[perm], nsa=a[perm])


def test_sa_only_estimate_is_published_count():
    t = _table_with_independent_P([300, 250, 200, 150, 100])
    r = ppdp.publish(t, ppdp.Diverted(3), seed=1)
    pub = np.bincount(r.column_codes("s"), minlength=5)
    wl = Workload([Query((Predicate("s", "eq", (f"s{i}",)),)) for i in range(5)]
                  + [Query((Predicate("s", "in", ("s0", "s3")),)), Query((Predicate("a", "eq", ("a1",)),))])
    for method in ("iterative", "closed"):
        est = r.answer(wl, estimator=method)
        assert np.allclose(est[:5], pub)
        assert est[5] == pub[0] + pub[3]
        assert est[6] == ppdp.answer_exact(t, wl[6:])[0]  # NSA-only: exact


@pytest.mark.slow
def test_closed_form_unbiased_over_repeated_releases():
    counts = [800, 700, 500, 400, 350, 250]
    t = _table_with_independent_P(counts)
    lp = 3
    wl = Workload([Query((Predicate("a", "eq", ("a1",)), Predicate("s", "eq", (f"s{i}",)))) for i in range(6)])
    truth = ppdp.answer_exact(t, wl)
    R = 300
    est = np.array([ppdp.publish(t, ppdp.Diverted(lp), seed=s).answer(wl, estimator="closed") for s in range(R)])
    mean, se = est.mean(axis=0), est.std(axis=0, ddof=1) / np.sqrt(R)
    z = (mean - truth) / se
    assert np.all(np.abs(z) < 3.5), (mean, truth, se)
    # the paper's r = f_s/N is biased: on the largest value the bias is many standard errors
    est_p = np.array([ppdp.publish(t, ppdp.Diverted(lp), seed=s).answer(wl[:1], estimator=FourStateClosed(r="paper")) for s in range(100)])
    assert abs(est_p.mean() - truth[0]) > 5 * est_p.std(ddof=1) / 10


def test_iterative_matches_closed_form_on_large_counts():
    t = _table_with_independent_P([8000, 7000, 5000, 4000, 3500, 2500])
    r = ppdp.publish(t, ppdp.Diverted(3), seed=5)
    wl = Workload([Query((Predicate("a", "eq", (a,)), Predicate("s", "eq", (f"s{i}",)))) for i in range(6) for a in ("a0", "a1")])
    closed = r.answer(wl, estimator="closed")
    it = r.answer(wl, estimator=FourStateIterative(tol=1e-9))
    assert np.all(closed > 0)
    assert np.allclose(it, closed, rtol=1e-4)
    loose = r.answer(wl, estimator="iterative")  # the paper's 1 % stopping rule
    assert np.all(np.abs(loose - closed) / closed < 0.25)


def test_iterative_is_nonnegative_and_vectorised_over_sets():
    t = _table_with_independent_P([300, 250, 200, 150, 100])
    r = ppdp.publish(t, ppdp.Diverted(3), seed=2)
    q_set = Query((Predicate("a", "eq", ("a1",)), Predicate("s", "in", ("s1", "s4"))))
    q1 = Query((Predicate("a", "eq", ("a1",)), Predicate("s", "eq", ("s1",))))
    q4 = Query((Predicate("a", "eq", ("a1",)), Predicate("s", "eq", ("s4",))))
    for method in ("iterative", "closed"):
        e = r.answer([q_set, q1, q4], estimator=method)
        assert e[0] == pytest.approx(e[1] + e[2])
    est, iters = FullIterative().answer_with_iterations(r, [q1, q4])
    assert (est >= 0).all() and (iters >= 1).all()
    assert np.array_equal(est, r.answer([q1, q4], estimator="full-iterative"))
    eb = r.answer([q_set, q1, q4])  # the default (full-eb): non-negative, additive over SA values
    assert (eb >= 0).all() and eb[0] == pytest.approx(eb[1] + eb[2])
    est4, iters4 = FourStateIterative().answer_with_iterations(r, [q1, q4])
    assert (est4 >= 0).all() and (iters4 >= 1).all()
    with pytest.raises(ParameterError):
        r.answer([q1], estimator="nope")
    with pytest.raises(ParameterError):
        FourStateIterative(r="approx")


def test_two_sensitive_attributes_tensor_product():
    rng = np.random.default_rng(0)
    n = 30_000
    s = rng.choice(8, size=n, p=[0.16, 0.15, 0.14, 0.13, 0.12, 0.11, 0.1, 0.09])
    u = rng.choice(6, size=n, p=[0.2, 0.2, 0.15, 0.15, 0.15, 0.15])
    a = rng.integers(0, 2, size=n)  # independent of both SAs
    t = make_table(s, nsa=a, extra_sa=u)
    r = ppdp.publish(t, ppdp.Diverted(3), seed=4)
    assert ppdp.verify(r, t).ok
    q = Query((Predicate("a", "eq", ("a1",)), Predicate("s", "eq", ("s0",)), Predicate("t", "eq", ("t1",))))
    q_s = Query((Predicate("a", "eq", ("a1",)), Predicate("s", "eq", ("s0",))))
    truth = ppdp.answer_exact(t, [q, q_s])
    est = r.answer([q, q_s])
    assert np.all(np.abs(est - truth) / truth < 0.25), (est, truth)
    # over repeated releases the closed-form (tensor-product inversion) is unbiased
    R = 60
    cl = np.array([ppdp.publish(t, ppdp.Diverted(3), seed=k).answer([q], estimator="closed")[0] for k in range(R)])
    assert abs(cl.mean() - truth[0]) < 3.5 * cl.std(ddof=1) / np.sqrt(R)


def test_occ_100k_point_queries_accuracy():
    from ppdp.queries.workloads import point_workload

    t = ppdp.datasets.load("occ", n=100_000)
    r = ppdp.publish(t, ppdp.Diverted(5), seed=1)
    wl = point_workload(t, 5000, seed=0)  # the paper's pool of 5,000 point queries
    act = ppdp.answer_exact(t, wl)
    est = r.answer(wl)
    rel = np.abs(est - act) / np.maximum(act, 1)
    large, small = act / t.n_rows >= 0.02, (act > 0) & (act <= 10)
    assert large.sum() >= 50 and small.sum() >= 100
    assert rel[large].mean() <= 0.20
    assert rel[small].mean() >= 0.30


# ----------------------------------------------------------------------------- verify / bad input
def test_verify_detects_tampering():
    t = _table_with_independent_P([30, 25, 20, 15, 10])
    r = ppdp.publish(t, ppdp.Diverted(3), seed=0)
    r.manifest["certificate"]["l_prime"] = 4
    assert not ppdp.verify(r).ok
    r.manifest["certificate"]["l_prime"] = 3
    saved = r.manifest["dropped"], r.manifest["n_input"]
    r.manifest["dropped"] = 3  # ≥ ℓ': more rows dropped than N mod ℓ'
    r.manifest["n_input"] = r.manifest["n_published"] + 3
    assert any("dropped" in p for p in ppdp.verify(r).problems)
    r.manifest["dropped"], r.manifest["n_input"] = saved
    r.manifest["certificate"]["groups"] = [[0, 1, 2]]
    assert any("decoy groups" in p for p in ppdp.verify(r).problems)
    del r.manifest["certificate"]["groups"]
    assert ppdp.verify(r, t).ok
    other = _table_with_independent_P([60, 10, 10, 10, 10])  # not eligible for ℓ' = 3
    assert not ppdp.verify(r, other).ok


def test_bad_input(tmp_path):
    t = _table_with_independent_P([30, 25, 20, 15, 10])
    with pytest.raises(InfeasibleError, match="not eligible"):
        ppdp.publish(_table_with_independent_P([60, 10, 10, 10, 10]), ppdp.Diverted(3))
    with pytest.raises(PpdpError, match="≥ 2"):
        ppdp.Diverted(1)
    with pytest.raises(PpdpError):
        ppdp.Diverted(2.5)
    with pytest.raises(InfeasibleError, match="exceeds the 5 values"):
        ppdp.publish(t, ppdp.Diverted(6))
    with pytest.raises(SchemaError, match="unknown column"):
        t.with_roles(sensitive=["nope"])
    with pytest.raises(PpdpError, match="at least one sensitive"):
        ppdp.publish(t.with_roles(sensitive=[]), ppdp.Diverted(2))
    assert not any(tmp_path.iterdir())


def test_closed_form_stays_finite_where_a_value_is_published_exactly_n_over_l_prime_times():
    """A value published exactly N/ℓ' times makes the 4-state factor singular (r = 1/ℓ'): the release
    does not identify its count. On the Chile survey's votes (carData, tests/gauntlet; ℓ' = 3,
    N = 2,700) release 0 publishes 'N' exactly 900 times; `closed` answered 10¹⁷ there."""
    import warnings
    from pathlib import Path

    from ppdp.queries.workloads import point_workload
    from ppdp.schema import read_table

    g = Path(__file__).resolve().parent.parent / "gauntlet"
    t = read_table(g / "data" / "chile.csv", g / "schemas" / "chile.toml")
    rel = ppdp.publish(t, ppdp.Diverted(3), seed=0)
    assert t.n_rows % 3 == 0 and (t.n_rows // 3) in set(rel.published_counts("vote").tolist())  # the singular case is there
    wl = point_workload(t, 2000, seed=0)
    true = ppdp.queries.answer_exact(t, wl)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow or division by zero
        est = rel.estimate(wl, estimator="closed")
    assert np.isfinite(est.estimate).all() and np.abs(est.estimate).max() <= t.n_rows
    assert np.mean((est.lower <= true) & (true <= est.upper)) >= 0.9
