"""Posterior audit per family (SPEC §4) against brute force and on real releases."""

import itertools
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, strategies as st

import ppdp
from ppdp.audit import audit_release, bayes_posterior, decoy_cooccurrence
from ppdp.releases.base import load_release


def break_st(src, dst):
    """Copy a saved bucketized release and make one bucket's real values all equal."""
    shutil.copytree(src, dst)
    t = pq.read_table(dst / "st.parquet")
    sa = [c for c in t.column_names if c not in ("bid", "count", "fake")][0]
    real = ~t.column("fake").to_numpy(zero_copy_only=False) if "fake" in t.column_names else np.ones(t.num_rows, bool)
    bid = t.column("bid").to_numpy()
    b0 = bid[np.flatnonzero(real)[0]]
    labels = t.column(sa).cast(pa.string()).to_numpy(zero_copy_only=False).copy()
    target = labels[np.flatnonzero(real & (bid == b0))[0]]
    rows = real & (bid == b0)
    labels[rows] = target
    # merge into one ST row so the file stays well-formed (one row per value per bucket)
    keep = ~rows | (np.cumsum(rows) == 1)
    cnt = t.column("count").to_numpy().copy()
    cnt[np.flatnonzero(rows)[0]] = cnt[rows].sum()
    cols = {c: t.column(c).to_numpy(zero_copy_only=False)[keep] for c in t.column_names if c != sa}
    cols["count"] = cnt[keep]
    cols[sa] = labels[keep]
    pq.write_table(pa.table(cols), dst / "st.parquet")
    return target


def test_round_robin_release_within_bound(toy, make_rr):
    rel = make_rr(toy, 3, seed=1)
    res = audit_release(rel, toy)
    assert res.ok and res.family == "bucketized"
    assert np.allclose(res.summary["max_posterior"].dropna(), 1 / 3)
    assert (res.summary["max_posterior"].dropna() <= res.summary["bound"][res.summary["max_posterior"].notna()]).all()
    # brute force: every (bucket, value) share from the raw files
    qit, stt = rel.tables["qit"].to_pandas(), rel.tables["st"].to_pandas()
    size = qit.groupby("bid").size()
    fake = rel.custodian.get("fake")
    fk = set(zip(fake.bid.tolist(), fake.values())) if fake is not None else set()
    stt = stt[[(b, str(v)) not in fk for b, v in zip(stt["bid"], stt["dis"])]]
    shares = (stt["count"].to_numpy() / size.loc[stt["bid"]].to_numpy())
    assert np.isclose(res.classes["posterior"].max(), shares.max()) and len(res.classes) == len(stt)


def test_broken_release_flagged_by_audit_and_verify(toy, make_rr, tmp_path):
    rel = make_rr(toy, 3, seed=1)
    rel.save(tmp_path / "ok")
    assert ppdp.verify(tmp_path / "ok", toy).ok
    target = break_st(tmp_path / "ok", tmp_path / "broken")
    broken = load_release(tmp_path / "broken")
    res = audit_release(broken, toy)
    assert not res.ok
    row = res.summary.set_index("value").loc[target]
    assert row["violations"] >= 1 and row["max_posterior"] == 1.0
    assert not ppdp.verify(broken, toy).ok


def test_uniform_release_audit(make_rr):
    t = ppdp.datasets.load("occ", n=20000, seed=1)
    rel = ppdp.publish(t, ppdp.UniformPerturbation(rho1=0.1, rho2=0.3), seed=2)
    for table in (t, None):
        res = audit_release(rel, table)
        assert res.ok
        s = res.summary[res.summary["bound"].notna()]
        assert (s["max_posterior"] <= 0.3 + 1e-9).all() and (s["prior"] <= 0.1).all()
    # the posterior of a value at prior exactly ρ1 is ρ2 (Chaytor & Wang's γ)
    m = 46
    g = rel.certificate["gamma"]
    prior = np.full(m, 0.9 / (m - 1))
    prior[0] = 0.1
    post = bayes_posterior(prior, g / (m - 1 + g), 1 / (m - 1 + g))
    assert np.isclose(post[0, 0], 0.3)


@given(st.lists(st.floats(0.01, 1), min_size=2, max_size=6), st.floats(1.0, 20.0))
def test_bayes_posterior_brute_force(w, gamma):
    prior = np.asarray(w) / np.sum(w)
    m = len(prior)
    keep, other = gamma / (m - 1 + gamma), 1 / (m - 1 + gamma)
    post = bayes_posterior(prior, keep, other)
    for y in range(m):
        lik = np.array([keep if x == y else other for x in range(m)])
        np.testing.assert_allclose(post[y], lik * prior / (lik * prior).sum(), rtol=1e-12)


@given(st.integers(2, 5), st.lists(st.integers(1, 6), min_size=5, max_size=9))
def test_decoy_cooccurrence_bound(lp, counts):
    counts = np.array(sorted(counts, reverse=True))
    n = counts.sum() - counts.sum() % lp
    # trim to a multiple of ℓ' from the largest counts and require eligibility
    c = counts.copy()
    for _ in range(counts.sum() - n):
        c[np.argmax(c)] -= 1
    if c.max() > c.sum() / lp or (c > 0).sum() < lp:
        return
    C = decoy_cooccurrence(c, lp)
    assert np.array_equal(np.diag(C), c)  # each tuple's group holds its own value
    assert np.array_equal(C.sum(axis=0), lp * c)  # ℓ' values per group
    post = C[:, c > 0] / C[:, c > 0].sum(axis=0, keepdims=True)
    assert (post <= 1 / lp + 1e-12).all()
    # brute force on the group list itself
    groups = []
    cc = c.copy()
    while cc.sum():
        top = np.lexsort((np.arange(len(cc)), -cc))[:lp]
        groups.append(top)
        cc[top] -= 1
    B = np.zeros_like(C)
    for gr in groups:
        for a, b in itertools.product(gr, gr):
            B[a, b] += 1
    assert np.array_equal(B, C)


@pytest.fixture(scope="module")
def occ():
    return ppdp.datasets.load("occ")


def test_fprivacy_release_on_occ(occ, tmp_path):
    rel = ppdp.publish(occ, ppdp.FPrivacy(theta=8), seed=0)
    res = audit_release(rel, occ)
    assert res.ok
    s = res.summary.dropna(subset=["max_posterior"])
    assert (s["max_posterior"] <= s["bound"] + 1e-12).all()
    th = rel.certificate["thresholds"]
    assert np.allclose(s["bound"], [th[v] for v in s["value"]])
    rel.save(tmp_path / "ok")
    break_st(tmp_path / "ok", tmp_path / "broken")
    broken = load_release(tmp_path / "broken")
    assert not audit_release(broken, occ).ok
    assert not ppdp.verify(broken, occ).ok


def test_sdr_release_exact_priors(occ):
    rel = ppdp.publish(occ, ppdp.SDR(0.1, 0.3), seed=0)
    res = audit_release(rel, occ)
    assert res.ok and "exact" in res.notes[0]
    s = res.summary[res.summary["bound"].notna()]
    assert (s["max_posterior"] <= 0.3 + 1e-9).all()
    # some SA' value reaches ρ2 (its sub-table prior is ρ1j): the bound is tight, not vacuous
    assert s["max_posterior"].max() == pytest.approx(0.3)
    assert audit_release(rel, None).ok


def test_diverted_release(occ):
    rel = ppdp.publish(occ, ppdp.Diverted(5), seed=0)
    for table in (occ, None):
        res = audit_release(rel, table)
        assert res.ok
        assert res.summary["max_posterior"].max() == pytest.approx(0.2)
