"""Disclosure stated and bounded (issue 11, item 5; SPEC §7).

Every bucketized manifest states what its files disclose (``disclosure``: records whose SA
value is disclosed with certainty, per value and in total, and the largest posterior);
publish prints it, verify re-derives it from the files (an understated manifest fails) and
audit prints it. A release disclosing a sensitive value of any record with certainty is
refused unless the custodian declares that value non-sensitive or allows it explicitly
(tests/audit/test_safe_by_default.py).

Figures (bundled tables, θ = 8, b = 0.02): EDU discloses 180,915 of 299,285 records (60.4%:
High school graduate 71,129, Children 69,436, Some college but no degree 40,350 — the three
values with f' = 1, in buckets of one); Adult with ``--sensitive income`` would disclose all
48,842 and is refused.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli
from ppdp.errors import InfeasibleError
from ppdp.releases.bucketized import receiver_posterior


#: the EDU values a custodian protects: all but the three commonest (children, high-school graduates,
#: some college), which F'-privacy at θ = 8 leaves unbounded (f' = 1) and which say little about a person
EDU_COMMON = ("Children", "High school graduate", "Some college but no degree")


@pytest.fixture(scope="module")
def edu():
    return ppdp.datasets.load("edu")


def edu_protected(edu) -> list[str]:
    return [v for v in edu.domain(edu.sa) if v not in EDU_COMMON]


def test_edu_theta8_disclosure_stated(edu):
    rel = ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=edu_protected(edu))
    d = rel.manifest["disclosure"]
    assert d["records_certain"] == 180_915 and d["n_records"] == 299_285
    assert d["per_value"] == {"High school graduate": 71_129, "Children": 69_436, "Some college but no degree": 40_350}
    assert d["max_posterior"] == 1.0
    assert ppdp.verify(rel).ok
    # with one fake value per bucket no record is disclosed with certainty (the control above has power)
    faked = ppdp.publish(edu, ppdp.FPrivacy(theta=8, fake_values=1), seed=1)
    assert faked.manifest["disclosure"]["records_certain"] == 0
    assert faked.manifest["disclosure"]["max_posterior"] < 1


def test_cli_publish_prints_the_disclosure(tmp_path):
    edu = ppdp.datasets.load("edu")
    r = CliRunner().invoke(cli, ["publish", "fprivacy", "--dataset", "edu", "--theta", "8", "--seed", "1",
                                 "--sensitive-value", *edu_protected(edu), "-o", str(tmp_path / "edu")])
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.output.splitlines() if "disclosure:" in ln)
    print(line)
    assert "180,915 of 299,285 records with certainty (60.4%)" in line and "High school graduate: 71,129" in line
    r = CliRunner().invoke(cli, ["audit", str(tmp_path / "edu"), "-o", str(tmp_path / "audit")])
    assert "180,915 of 299,285 records" in r.output, r.output


def test_adult_income_release_refused_unless_allowed(tmp_path):
    adult = ppdp.datasets.load("adult").with_roles(None, ["income"])
    with pytest.raises(InfeasibleError, match="--allow-disclosure") as e:
        ppdp.publish(adult, ppdp.FPrivacy(), seed=1)
    print(f"refused: {e.value}")
    assert "48,842 of 48,842 records" in str(e.value) and "\n" not in str(e.value)
    r = CliRunner().invoke(cli, ["publish", "fprivacy", "--dataset", "adult", "--sensitive", "income", "-o",
                                 str(tmp_path / "a")])
    assert r.exit_code == 2 and "--allow-disclosure" in r.output and not (tmp_path / "a").exists()
    assert "Traceback" not in r.output
    # explicitly allowed: published, recorded in the manifest, verify accepts it
    r = CliRunner().invoke(cli, ["publish", "fprivacy", "--dataset", "adult", "--sensitive", "income",
                                 "--allow-full-disclosure", "--seed", "1", "-o", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    assert "48,842 of 48,842 records with certainty (100.0%) (explicitly allowed)" in r.output
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert m["disclosure"]["disclosure_allowed"] is True
    assert ppdp.verify(tmp_path / "b").ok
    # the permission removed from the manifest: verify fails
    m["disclosure"].pop("disclosure_allowed")
    (tmp_path / "b" / "manifest.json").write_text(json.dumps(m))
    rep = ppdp.verify(tmp_path / "b")
    assert not rep.ok and any("allowed it" in p for p in rep.problems), rep.problems
    # the API flag
    rel = ppdp.publish(adult, ppdp.FPrivacy(), seed=1, allow_full_disclosure=True)
    assert rel.manifest["disclosure"]["disclosure_allowed"] is True


@pytest.mark.parametrize("edit", ["records_certain", "per_value", "max_posterior", "missing"])
def test_understated_disclosure_fails_verify(edu, edit):
    rel = ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=edu_protected(edu))
    m = copy.deepcopy(rel.manifest)
    if edit == "records_certain":
        m["disclosure"]["records_certain"] = 0
    elif edit == "per_value":
        m["disclosure"]["per_value"]["Children"] -= 1
    elif edit == "max_posterior":
        m["disclosure"]["max_posterior"] = 0.5
    else:
        del m["disclosure"]
    rep = ppdp.verify(type(rel)(m, rel.tables))
    assert not rep.ok and any("disclos" in p for p in rep.problems), rep.problems


def test_anatomy_and_other_families_state_a_disclosure():
    occ = ppdp.datasets.load("occ", n=3000, seed=0)
    rel = ppdp.publish(occ, ppdp.Anatomy(4), seed=1)
    d = rel.manifest["disclosure"]
    assert d["records_certain"] == 0 and 0.25 - 1e-12 <= d["max_posterior"] <= 0.25 + 1e-12 or d["max_posterior"] <= 0.25
    assert ppdp.verify(rel).ok
    uni = ppdp.publish(occ, ppdp.UniformPerturbation(rho1=0.1, rho2=0.5), seed=1)
    assert uni.manifest["disclosure"]["records_certain"] == 0


def _brute_posterior(obs_row, size, sigma):
    """Average real share over every way of choosing which σ count-1 values are fake."""
    import itertools

    ones = [x for x in range(len(obs_row)) if obs_row[x] == 1]
    acc = np.zeros(len(obs_row))
    subsets = list(itertools.combinations(ones, sigma))
    for sub in subsets:
        real = obs_row.astype(float).copy()
        real[list(sub)] = 0
        acc += real / size
    return acc / len(subsets)


def test_receiver_posterior_matches_enumeration_on_small_buckets():
    rng = np.random.default_rng(0)
    for _ in range(200):
        m = int(rng.integers(3, 8))
        sigma = int(rng.integers(1, 3))
        size = int(rng.integers(1, 6))
        real = np.bincount(rng.integers(0, m, size), minlength=m)
        absent = np.flatnonzero(real == 0)
        if len(absent) < sigma:
            continue
        obs = real.copy()
        obs[rng.choice(absent, sigma, replace=False)] = 1
        post = receiver_posterior(obs[None, :], np.array([size]), sigma, np.ones(m))[0]
        np.testing.assert_allclose(post, _brute_posterior(obs, size, sigma), atol=1e-12)
        if size == 1:
            assert post.max() == pytest.approx(1 / (1 + sigma))


def test_writer_typed_disclosure_equals_the_row_form():
    """The writer states the disclosure from its bucket types (typed_disclosure); verify
    re-derives it from the ST rows (sparse_disclosure): the two agree exactly, ties included."""
    from ppdp.releases.bucketized import sparse_disclosure, typed_disclosure

    rng = np.random.default_rng(11)
    for _ in range(300):
        m = int(rng.integers(1, 7))
        K = int(rng.integers(1, 6))
        types = rng.integers(0, 4, (K, m)) * rng.integers(0, 2, (K, m))
        types[rng.random(K) < 0.3] = 0
        types[rng.integers(0, K), rng.integers(0, m)] += int(rng.integers(1, 3))
        type_of = rng.integers(0, K, int(rng.integers(1, 30)))
        type_of = type_of[types.sum(axis=1)[type_of] > 0]
        if len(type_of) == 0:
            continue
        counts = types[type_of]
        sb, sc = np.nonzero(counts)
        labels = [f"v{i}" for i in range(m)]
        want = sparse_disclosure(sb, sc, counts[sb, sc], counts.sum(axis=1), labels)
        assert typed_disclosure(types, type_of, labels) == want
