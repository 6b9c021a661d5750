"""Negative associations learned from the bucketized table (privacy-laws paper §6):
the learning rule by hand, the fakes of a real publication avoid what was learned (and would
not without learning), the certificate and the custodian file list the learned triples, verify
re-checks the settings, and the CLI says what is learned and what is given."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli
from ppdp.mechanisms.bucketization.associations import learn_negative_associations


def test_learning_rule_by_hand():
    # 3 buckets; column c with values a (records 0-3) and b (records 4-7); SA labels x, y, w
    bid = np.array([0, 0, 1, 1, 2, 2, 2, 2])
    counts = np.array([[1, 1, 0],    # bucket 0: x, y
                       [0, 2, 0],    # bucket 1: y, y
                       [1, 1, 2]])   # bucket 2: x, y, w, w
    codes = {"c": np.array([0, 0, 0, 0, 1, 1, 1, 1])}
    doms = {"c": ["a", "b"]}
    # ê(a, x) = 2·½ + 2·0 = 1 → conf ¼; ê(a, w) = 0 → conf 0; f_w = 2/8, expected(a, w) = 4·¼ = 1
    got = learn_negative_associations(bid, counts, codes, doms, ["x", "y", "w"], support=4, confidence=0.0, expected=1.0)
    assert [(a["column"], a["value"], a["sa_value"]) for a in got] == [("c", "a", "w")]
    assert got[0]["support"] == 4 and got[0]["confidence"] == 0 and got[0]["expected"] == pytest.approx(1.0)
    # thresholds matter: a larger support, expected count or a lower confidence learns nothing / more
    assert learn_negative_associations(bid, counts, codes, doms, ["x", "y", "w"], 5, 0.0, 1.0) == []
    assert learn_negative_associations(bid, counts, codes, doms, ["x", "y", "w"], 4, 0.0, 1.5) == []
    more = learn_negative_associations(bid, counts, codes, doms, ["x", "y", "w"], 4, 0.25, 1.0)
    # b's records all sit in bucket 2 (shares x ¼, y ¼, w ½): (b, x) and (b, y) have confidence ¼ too
    assert {(a["value"], a["sa_value"]) for a in more} == {("a", "x"), ("a", "w"), ("b", "x"), ("b", "y")}


def _fakes_breaking(rel, triples) -> int:
    """Fake values that a triple (column, z, x) excludes: x injected into a bucket holding a record with z."""
    from ppdp.releases.bucketized import negative_association_mask

    qit = rel.tables["qit"]
    bid = qit.column("bid").to_numpy()
    n_buckets = int(bid.max()) + 1
    codes = {c: rel.codes("qit", c) for c in rel.quasi}
    forbid = negative_association_mask(bid, n_buckets, codes, rel.domains, rel.sa, triples)
    fake = rel.custodian.get("fake")
    if fake is None:
        return 0
    fb, fx = fake.bid, fake.codes_in(rel.domains[rel.sa])
    return int(forbid[fb, fx].sum()) if len(fb) else 0


@pytest.fixture(scope="module")
def adult():
    return ppdp.datasets.load("adult", n=20000, seed=0)


def test_publication_learns_and_fakes_respect_it(adult, tmp_path):
    mech = ppdp.Anatomy(l=4, fake_values=2, learn_associations=True, association_confidence=0.02,
                        association_expected=10.0)
    rel = ppdp.publish(adult, mech, seed=0)
    cert = rel.manifest["certificate"]
    learned = cert["negative_associations_learned"]
    assert cert["negative_association_learning"] == {"enabled": True, "support": 20, "confidence": 0.02, "expected": 10.0}
    # adult: a missing workclass goes with a missing occupation — learned, never Farming-fishing etc.
    assert ["workclass", "(missing)", "Farming-fishing"] in learned and len(learned) >= 10
    assert _fakes_breaking(rel, learned) == 0
    assert rel.verify(adult).ok
    # without learning, the same publication injects fakes an adversary could exclude with those associations
    plain = ppdp.publish(adult, ppdp.Anatomy(l=4, fake_values=2), seed=0)
    assert _fakes_breaking(plain, learned) > 0
    # the custodian file lists the learned associations with their support, confidence and expected count
    rel.save(tmp_path / "rel")
    cust = json.loads((tmp_path / "rel.custodian.json").read_text())
    entry = cust["negative_associations_learned"]
    assert entry["thresholds"] == {"support": 20, "confidence": 0.02, "expected": 10.0}
    assert [[a["column"], a["value"], a["sa_value"]] for a in entry["associations"]] == learned
    assert all(a["support"] >= 20 and a["confidence"] <= 0.02 and a["expected"] >= 10 for a in entry["associations"])
    assert ppdp.verify(tmp_path / "rel", custodian=tmp_path / "rel.custodian.json").ok


def test_verify_rechecks_the_learning_settings(adult):
    rel = ppdp.publish(adult, ppdp.Anatomy(l=4, fake_values=1, learn_associations=True), seed=1)
    assert rel.verify().ok
    rel.manifest["certificate"]["negative_association_learning"]["enabled"] = False
    assert not rel.verify().ok
    rel2 = ppdp.publish(adult, ppdp.Anatomy(l=4), seed=1)
    rel2.manifest["params"]["association_support"] = 99
    assert not rel2.verify().ok


def test_cli_says_what_is_learned_and_what_is_given(tmp_path):
    r = CliRunner().invoke(cli, ["publish", "anatomy", "--help"])
    text = " ".join(r.output.split())
    assert "Given negative association (your background knowledge, used as is)" in text
    assert "Also learn negative associations from the bucketized table" in text
    r = CliRunner().invoke(cli, ["publish", "anatomy", "--dataset", "adult", "-n", "5000", "--l", "4", "--fake-values", "1",
                                 "--learn-associations", "--association-confidence", "0.02", "--out", str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    cert = json.loads((tmp_path / "a" / "manifest.json").read_text())["certificate"]
    assert cert["negative_association_learning"]["enabled"] is True and cert["negative_associations_learned"]
