"""The typed claims of the bucketized family (F'-privacy, ℓ-diversity): written once as the
certificate, re-derived by verify from params and the files (or the source table), read by audit."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ppdp
from safe_declarations import protected
from ppdp.audit import audit_release
from ppdp.claims import claim_of
from ppdp.claims.fprivacy import FPrivacyClaim, fprime_thresholds
from ppdp.claims.ldiversity import LDiversityClaim
from ppdp.mechanisms.bucketization import BucketizationPlan, SACounts


@pytest.fixture(scope="module")
def edu():
    return ppdp.datasets.load("edu", n=20_000, seed=4)


def _edit(tmp_path, rel, name, edit):
    d = rel.save(tmp_path / name)
    m = json.loads((d / "manifest.json").read_text())
    edit(m)
    (d / "manifest.json").write_text(json.dumps(m))
    return d


def test_certificate_is_the_typed_claim(edu):
    rel = ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=protected(edu))
    cert = rel.manifest["certificate"]
    assert cert["model"] == "F'-privacy" and cert["theta"] == 8.0 and cert["floor"] == 0.02
    claim = claim_of(rel.manifest)
    assert isinstance(claim, FPrivacyClaim)
    assert FPrivacyClaim.from_certificate(claim.to_certificate()) == claim
    o = edu.counts(edu.sa)
    np.testing.assert_array_equal(claim.threshold_array(edu.domain(edu.sa)),
                                  fprime_thresholds(o, edu.domain(edu.sa), theta=8, floor=0.02))
    for key in ("loss", "mse", "n_buckets", "bucket_sizes", "fake_values", "negative_associations", "method"):
        assert key in cert
    assert "F'-privacy" in claim.statement()


def test_thresholds_edited_to_one_fail_verify_with_and_without_the_source(edu, tmp_path):
    """The issue's tampering: a θ = 8 release whose thresholds are all set to 1.0."""
    rel = ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=protected(edu))
    assert ppdp.verify(rel).ok and ppdp.verify(rel, edu).ok

    def all_one(m):
        m["certificate"]["thresholds"] = {k: 1.0 for k in m["certificate"]["thresholds"]}

    d = _edit(tmp_path, rel, "ones", all_one)
    for table in (None, edu):
        rep = ppdp.verify(d, table)
        assert not rep.ok
        assert any("re-derived" in p for p in rep.problems), rep.problems


def test_params_theta_edited_fails_verify(edu, tmp_path):
    rel = ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=protected(edu))

    def theta(m):
        m["params"]["theta"] = 4.0

    d = _edit(tmp_path, rel, "theta", theta)
    for table in (None, edu):
        rep = ppdp.verify(d, table)
        assert not rep.ok
        assert any("θ" in p or "theta" in p for p in rep.problems), rep.problems

    def both(m):  # params and certificate θ edited together: the thresholds no longer follow
        m["params"]["theta"] = 4.0
        m["certificate"]["theta"] = 4.0

    rep = ppdp.verify(_edit(tmp_path, rel, "both", both))
    assert not rep.ok and any("re-derived" in p for p in rep.problems), rep.problems


@pytest.mark.parametrize("key,value", [("floor", 0.5), ("overrides", {"x": 0.5}), ("sensitive_values", ["a"])])
def test_other_claim_fields_edited_fail_verify(edu, tmp_path, key, value):
    rel = ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=protected(edu))

    def edit(m):
        m["certificate"][key] = value

    assert not ppdp.verify(_edit(tmp_path, rel, key, edit)).ok


def test_fakes_unidentified_thresholds_bounded_by_the_files_exact_with_source_or_custodian(edu, tmp_path):
    rel = ppdp.publish(edu, ppdp.FPrivacy(theta=8, fake_values=1), seed=2)
    assert "fake" not in rel.tables["st"].column_names
    d = rel.save(tmp_path / "rel")
    rep = ppdp.verify(d)  # files only: the thresholds are checked against the counts the files allow
    assert rep.ok, rep.problems
    assert "bounds" in rep.facts["thresholds"]
    assert ppdp.verify(d, edu).ok
    assert ppdp.verify(d, custodian=d.with_name(d.name + ".custodian.json")).ok

    def raise_all(m):
        m["certificate"]["thresholds"] = {k: 1.0 for k in m["certificate"]["thresholds"]}

    rep = ppdp.verify(_edit(tmp_path, rel, "thr", raise_all))
    assert not rep.ok and any("for any SA counts the files allow" in p for p in rep.problems), rep.problems


def test_privacy_check_still_catches_an_over_threshold_bucket(edu, tmp_path):
    rel = ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=protected(edu))
    st = rel.tables["st"].to_pandas()
    sizes = st.groupby("bid")["count"].sum()
    big = sizes[sizes > 2].index[0]
    rows = st.index[st.bid == big]
    st.loc[rows, edu.sa] = st.loc[rows[0], edu.sa]  # one value takes the whole bucket
    st = st.groupby(["bid", edu.sa], observed=True, as_index=False).agg(count=("count", "sum"))
    import pyarrow as pa

    rel.tables["st"] = pa.Table.from_pandas(st, preserve_index=False)
    rep = rel.verify()
    assert not rep.ok and any("exceed a threshold" in p for p in rep.problems), rep.problems


def test_anatomy_claim_and_tampering(tmp_path):
    t = ppdp.datasets.load("occ", n=5000, seed=1)
    rel = ppdp.publish(t, ppdp.Anatomy(4), seed=1)
    claim = claim_of(rel.manifest)
    assert isinstance(claim, LDiversityClaim) and claim.l == 4
    assert rel.manifest["certificate"]["model"] == "l-diversity"
    assert ppdp.verify(rel, t).ok and ppdp.verify(rel).ok

    def ell(m):
        m["certificate"]["l"] = 2

    def thr(m):
        m["certificate"]["thresholds"] = {k: 1.0 for k in m["certificate"]["thresholds"]}

    def param(m):
        m["params"]["l"] = 6

    for name, edit in (("l", ell), ("thr", thr), ("param", param)):
        assert not ppdp.verify(_edit(tmp_path, rel, name, edit)).ok, name


def test_audit_bound_is_the_claims(edu):
    rel = ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=protected(edu))
    res = audit_release(rel, edu)
    post = claim_of(rel.manifest).bound()["posterior"]
    np.testing.assert_allclose(res.summary["bound"].to_numpy(), [post[v] for v in edu.domain(edu.sa)])
    assert res.ok
    t = ppdp.datasets.load("occ", n=5000, seed=1)
    res = audit_release(ppdp.publish(t, ppdp.Anatomy(4), seed=1), t)
    assert np.allclose(res.summary["bound"], 0.25) and res.bound_name == "1/ℓ = 1/4"


def test_plan_is_public_typed_and_frozen(edu):
    stats = SACounts.of_table(edu)
    plan = ppdp.FPrivacy(theta=8).plan(stats)
    assert isinstance(plan, BucketizationPlan) and isinstance(plan.claim, FPrivacyClaim)
    assert plan.counts.sum() == edu.n_rows and not plan.counts.flags.writeable
    np.testing.assert_array_equal(plan.counts.sum(axis=0), edu.counts(edu.sa))
    with pytest.raises(AttributeError):
        plan.fake_values = 3
    # a setting that breaks the thresholds is refused
    bad = np.asarray(edu.counts(edu.sa))[None, :]  # one bucket: every share = f_i ≤ f'_i, fine
    assert ppdp.FPrivacy(theta=8).plan_for_counts(stats, bad).n_buckets == 1
    with pytest.raises(ppdp.PpdpError, match="does not fit"):
        ppdp.FPrivacy(theta=8).plan_for_counts(stats, np.diag(edu.counts(edu.sa))[edu.counts(edu.sa) > 0])
