"""Bucketized release (apply, fakes, estimator, verify) on random small tables and
hand-built bucket settings — independent of the planners."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from release_helpers import brute_estimates, eligible_subsets, publish_counts, random_counts, random_table  # noqa: E402

import ppdp  # noqa: E402
from ppdp.errors import InfeasibleError, SchemaError  # noqa: E402
from ppdp.mechanisms.bucketization.apply import assign_buckets  # noqa: E402
from ppdp.estimators.bucketized import correct_counts  # noqa: E402
from ppdp.mechanisms.bucketization.fakes import draw_fakes  # noqa: E402
from ppdp.queries import Predicate, Query, answer_exact  # noqa: E402
from ppdp.releases.base import load_release  # noqa: E402


def _random_queries(rng, table, k):
    out = []
    cols = list(table.quasi) + [table.sa]
    for _ in range(k):
        chosen = [c for c in cols if rng.random() < 0.6] or [cols[-1]]
        preds = []
        for c in chosen:
            dom = table.domain(c)
            vals = rng.choice(len(dom), size=int(rng.integers(1, len(dom) + 1)), replace=False)
            preds.append(Predicate(c, "in", tuple(dom[v] for v in sorted(vals))))
        out.append(Query(tuple(preds)))
    return out


@st.composite
def small_case(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(2, 40))
    m = draw(st.integers(2, 6))
    rng = np.random.default_rng(seed)
    t = random_table(rng, n, m)
    counts = random_counts(rng, t.codes("s"), m, draw(st.integers(1, 8)))
    room = int((counts == 0).sum(axis=1).min())
    sigma = draw(st.integers(0, min(room, 2)))
    return seed, t, counts, sigma


@settings(max_examples=60, deadline=None)
@given(small_case())
def test_random_release_verifies_and_estimator_matches_brute_force(case):
    seed, t, counts, sigma = case
    rng = np.random.default_rng(seed + 1)
    rel = publish_counts(t, counts, rng, fake_values=sigma)
    rep = rel.verify(t)
    assert rep.ok, rep.problems
    # the published buckets realise the plan up to relabelling: same multiset of count rows
    assert "fake" not in rel.tables["st"].column_names  # which values are fake is never published
    real = rel.real_counts_from_files()  # the custodian side (in memory) lists the fakes
    assert sorted(map(tuple, real)) == sorted(map(tuple, counts))
    # files only: verify bounds the thresholds by the files, the estimator needs no flag
    bare = type(rel)(rel.manifest, rel.tables)
    rep = bare.verify()
    assert rep.ok, rep.problems
    qs = _random_queries(np.random.default_rng(seed + 2), t, 6)
    np.testing.assert_allclose(rel.answer(qs), brute_estimates(rel, qs), rtol=1e-9, atol=1e-9)


def test_apply_deals_every_row_once_and_relabels():
    rng = np.random.default_rng(5)
    sa = rng.integers(0, 4, 1000)
    counts = random_counts(rng, sa, 4, 37)
    bid, relab = assign_buckets(sa, counts, rng)
    got = np.zeros_like(relab)
    np.add.at(got, (bid, sa), 1)
    np.testing.assert_array_equal(got, relab)
    assert sorted(map(tuple, relab)) == sorted(map(tuple, counts))
    assert not np.array_equal(relab, counts)  # ids were permuted (37! orders; fixed seed)


def test_apply_rejects_a_plan_that_does_not_match_the_counts():
    with pytest.raises(ppdp.PpdpError, match="plan and data disagree"):
        assign_buckets(np.array([0, 1, 1]), np.array([[1, 1]]), np.random.default_rng(0))


def test_estimator_exact_when_every_bucket_holds_one_sa_value():
    rng = np.random.default_rng(3)
    t = random_table(rng, 500, 5, (6, 7))
    o = t.counts("s")
    counts = np.diag(o)[o > 0]  # one bucket per SA value
    rel = publish_counts(t, counts, rng)
    qs = _random_queries(rng, t, 200)
    np.testing.assert_allclose(rel.answer(qs), answer_exact(t, qs), atol=1e-8)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3))
def test_fake_correction_is_exactly_unbiased_by_enumeration(seed, sigma):
    """Average the corrected counts over every possible fake draw of each bucket."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(sigma + 1, 7))
    counts = np.zeros((3, m), dtype=np.int64)
    for g in range(3):
        k = int(rng.integers(1, m - sigma + 1))  # at least σ absent values
        counts[g, rng.choice(m, size=k, replace=False)] = rng.integers(1, 4, size=k)
    for g in range(3):
        subsets = eligible_subsets(counts[g], sigma)
        mean = np.zeros(m)
        for sub in subsets:
            obs = counts[g : g + 1].astype(float).copy()
            obs[0, list(sub)] += 1
            chat, _ = correct_counts(obs, sigma)
            mean += chat[0]
        mean /= len(subsets)
        if sigma < (counts[g] == 0).sum():  # some eligible value always stays unseen (D_g ≠ ∅)
            np.testing.assert_allclose(mean, counts[g], atol=1e-9)
        np.testing.assert_allclose(mean.sum(), counts[g].sum(), atol=1e-9)


@pytest.mark.slow
def test_estimator_with_fakes_is_unbiased_statistically():
    """Buckets of an OCC sample fixed, 2,000 independent fake draws (σ = 2): each query's
    mean estimate is within 4.5 standard errors of the fake-free estimate (40 queries, fixed
    seeds). The estimate is Σ_g n_g(P)·ĉ_g(S)/|g| (its equality with the release's estimator is
    the property test above)."""
    from ppdp.queries.workloads import anatomy_workload

    t = ppdp.datasets.load("occ", n=3000, seed=1)
    rng = np.random.default_rng(11)
    m = len(t.domain(t.sa))
    counts = random_counts(rng, t.codes(t.sa), m, 300)
    rel = publish_counts(t, counts, rng)
    wl = anatomy_workload(t, 40, 0.05, seed=3)
    est0 = rel.answer(wl)
    b = rel.buckets()
    real = np.zeros((b["n_buckets"], m), dtype=np.int64)
    np.add.at(real, (b["sb"], b["sc"]), b["count"])
    _, masks = rel.resolve(wl)
    qi_codes = {c: rel.codes("qit", c) for c in t.quasi}
    meets = np.array([np.logical_and.reduce([mk[c][qi_codes[c]] for c in mk if c != t.sa] + [np.ones(len(b["qb"]), bool)])
                      for mk in masks])  # queries × QIT rows
    n_gp = np.stack([np.bincount(b["qb"], weights=row, minlength=b["n_buckets"]) for row in meets]) / b["sizes"]
    sel = np.stack([mk.get(t.sa, np.ones(m, bool)) for mk in masks]).astype(float)
    np.testing.assert_allclose(((n_gp @ real) * sel).sum(axis=1), est0, rtol=1e-9)
    kernel = n_gp[:, :, None] * sel[:, None, :]  # est(q) = Σ_{g,x} kernel[q,g,x]·ĉ[g,x] (no BLAS in the loop)
    ests, naive = [], []
    for r in range(2000):
        fake = draw_fakes(real, 2, np.random.default_rng(1000 + r))
        chat, saturated = correct_counts(real + fake, 2)
        assert saturated == 0
        ests.append((kernel * chat).sum(axis=(1, 2)))
        naive.append((kernel * (real + fake)).sum(axis=(1, 2)))
    ests, naive = np.array(ests), np.array(naive)
    se = ests.std(axis=0, ddof=1) / np.sqrt(len(ests))
    z = np.abs(ests.mean(axis=0) - est0) / np.maximum(se, 1e-12)
    assert z.max() < 4.5, z.max()
    # the uncorrected estimate is biased upwards: the test would catch a missing correction
    z_naive = (naive.mean(axis=0) - est0) / np.maximum(naive.std(axis=0, ddof=1) / np.sqrt(len(naive)), 1e-12)
    assert np.median(z_naive) > 10, np.median(z_naive)


def test_save_load_verify_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    t = random_table(rng, 300, 5)
    counts = random_counts(rng, t.codes("s"), 5, 60)
    room = int((counts == 0).sum(axis=1).min())
    rel = publish_counts(t, counts, rng, fake_values=min(room, 1))
    rel.save(tmp_path / "rel")
    back = load_release(tmp_path / "rel")
    assert type(back).__name__ == "BucketizedRelease"
    rep = ppdp.verify(tmp_path / "rel", t)
    assert rep.ok, rep.problems
    qs = _random_queries(rng, t, 30)
    np.testing.assert_allclose(back.answer(qs), rel.answer(qs))


def _tamper(tmp_path, how):
    import pyarrow.parquet as pq

    rng = np.random.default_rng(4)
    t = random_table(rng, 400, 5)
    counts = random_counts(rng, t.codes("s"), 5, 50)
    rel = publish_counts(t, counts, rng, fake_values=0)
    d = rel.save(tmp_path / "rel")
    st_t = pq.read_table(d / "st.parquet").to_pandas()
    how(st_t)
    pq.write_table(pa.Table.from_pandas(st_t, preserve_index=False), d / "st.parquet")
    return ppdp.verify(d, t)


def test_tampered_count_fails_verify(tmp_path):
    def bump(df):
        df.loc[0, "count"] += 1

    rep = _tamper(tmp_path, bump)
    assert not rep.ok
    assert any("QIT size" in p or "SA counts" in p for p in rep.problems), rep.problems


def test_tampered_label_fails_verify(tmp_path):
    def concentrate(df):  # move the values of a bucket listing several onto one of them
        g = df.bid[df.bid.duplicated()].iloc[0]
        rows = df.index[df.bid == g]
        df.loc[rows, "s"] = df.loc[rows[0], "s"]

    rep = _tamper(tmp_path, concentrate)
    assert not rep.ok


def test_fakes_are_never_flagged_and_verify_uses_the_custodian_file(tmp_path):
    rng = np.random.default_rng(8)
    t = random_table(rng, 200, 6)
    counts = random_counts(rng, t.codes("s"), 6, 60)
    rel = publish_counts(t, counts, rng, fake_values=1)
    assert "fake" not in rel.tables["st"].column_names
    assert len(rel.custodian["fake"]) == rel.bucket_sizes().size > 0
    d = rel.save(tmp_path / "rel")
    cust = d.with_name(d.name + ".custodian.json")
    assert cust.is_file() and not (d / "custodian.json").exists()
    rep = ppdp.verify(d)
    assert rep.ok, rep.problems
    assert rep.facts["fake_values"].startswith("σ = 1 per bucket, unidentified")
    rep = ppdp.verify(d, custodian=cust)
    assert rep.ok, rep.problems
    assert rep.facts["fake_values"] == "checked against the custodian file"
    assert ppdp.verify(d, t).ok


def test_negative_associations_are_respected():
    rng = np.random.default_rng(9)
    t = random_table(rng, 240, 6)
    counts = random_counts(rng, t.codes("s"), 6, 120)
    assoc = [["q0", "a0_1", "x2"], ["q1", "a1_0", "x5"]]
    rel = publish_counts(t, counts, rng, fake_values=1, negative_associations=assoc)
    assert rel.verify(t).ok
    qit = rel.tables["qit"].to_pandas()
    fakes = rel.custodian["fake"]
    fakes = list(zip(fakes.bid.tolist(), fakes.values()))
    assert fakes
    for col, z, x in assoc:
        holders = set(qit.bid[qit[col].astype(str) == z])
        assert not any(b in holders and v == x for b, v in fakes)
    qs = _random_queries(rng, t, 4)
    np.testing.assert_allclose(rel.answer(qs), brute_estimates(rel, qs), rtol=1e-9, atol=1e-9)


def test_bad_negative_association_and_too_many_fakes():
    rng = np.random.default_rng(1)
    t = random_table(rng, 50, 3)
    counts = random_counts(rng, t.codes("s"), 3, 5)
    with pytest.raises(SchemaError, match="not a quasi-identifier"):
        publish_counts(t, counts, rng, 0, [["nope", "a", "x0"]], thresholds=np.ones(3))
    with pytest.raises(InfeasibleError, match="cannot receive 3 distinct fake values"):
        publish_counts(t, counts, rng, 3, thresholds=np.ones(3))


def test_qi_only_and_sa_only_queries_are_exact_without_fakes_and_qi_only_with_fakes():
    t = ppdp.datasets.load("occ", n=5000, seed=2)
    rng = np.random.default_rng(12)
    m = len(t.domain(t.sa))
    counts = random_counts(rng, t.codes(t.sa), m, 700)
    qi_only = ["age BETWEEN 30 AND 40", "sex = 'Female' AND race IN ('White', 'Black')", "age BETWEEN 17 AND 90"]
    sa_only = [f"{t.sa} IN ('2', '3', '7')", f"{t.sa} = '1'"]
    exact = answer_exact(t, qi_only + sa_only)
    plain = publish_counts(t, counts, rng)
    np.testing.assert_allclose(plain.answer(qi_only + sa_only), exact, atol=1e-6)
    room = int((counts == 0).sum(axis=1).min())
    assert room >= 2
    faked = publish_counts(t, counts, rng, fake_values=2)
    np.testing.assert_allclose(faked.answer(qi_only), exact[: len(qi_only)], atol=1e-6)
