"""Attacks that do not assume the model (ppdp.audit.attacks), through the public verbs.

Power controls: a release that discloses every record's sensitive value (published with
--allow-disclosure) must show a high attribute-inference risk; a release whose certificate
claims more than its files give (a tampered bound, an understated ε) must be flagged as beaten;
a strong release must show a low inference risk and no beaten bound. Small real tables (OCC,
Adult samples), fixed seeds.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.audit.attacks import attack_release, split_control, wilson
from ppdp.cli import cli
from ppdp.evaluate import evaluate

N = 1200  # OCC rows: 600 published, 600 held back
TARGETS = 300


@pytest.fixture(scope="module")
def occ_parts():
    return split_control(ppdp.datasets.load("occ", n=N, seed=0), seed=0)


def _row(rep, attack):
    t = rep.table
    return t[t["attack"] == attack].iloc[0]


def test_wilson_interval_matches_its_formula_and_edges():
    lo, hi = wilson(0, 50)
    assert lo == pytest.approx(0.0, abs=1e-12) and 0.05 < hi < 0.08  # 3.84/53.84 = 0.0713
    assert abs(hi - 3.8415 / (50 + 3.8415)) < 1e-3
    lo, hi = wilson(25, 50)
    assert abs((lo + hi) / 2 - 0.5) < 1e-12 and 0.36 < lo < 0.37
    assert math.isnan(wilson(0, 0)[0])


def test_disclosing_release_shows_high_inference_risk_strong_release_low(occ_parts):
    train, control = occ_parts
    leaky = ppdp.publish(train, ppdp.FPrivacy(theta=1000.0, floor=1.0), seed=1, allow_disclosure=True)
    assert leaky.manifest["disclosure"]["records_certain"] == train.n_rows  # every record's value disclosed
    rep = attack_release(leaky, train, control, n_attacks=TARGETS, seed=0)
    inf = _row(rep, "attribute inference")
    assert inf["risk_lo"] > 0.6 and inf["success_lo"] > 0.7, inf.to_dict()
    assert inf["control_hi"] < 0.3  # the population alone does not give it away
    assert inf["bound"] == pytest.approx(1.0)  # its claim allows it (f' = 1): no bound is beaten
    assert rep.ok

    strong = ppdp.publish(train, ppdp.Anatomy(l=8), seed=1)
    rep = attack_release(strong, train, control, n_attacks=TARGETS, seed=0)
    inf = _row(rep, "attribute inference")
    assert inf["risk_hi"] < 0.2 and inf["success_hi"] < 0.2, inf.to_dict()
    assert inf["bound"] == pytest.approx(1 / 8)
    assert rep.ok
    # the quasi-identifiers are published as they are: singling out is high and bounded by nothing
    so = _row(rep, "singling out")
    assert so["risk_lo"] > 0.4 and math.isnan(so["bound"])


def test_a_certificate_claiming_more_than_the_files_give_is_beaten(occ_parts):
    train, control = occ_parts
    rel = ppdp.publish(train, ppdp.FPrivacy(theta=1000.0, floor=1.0), seed=1, allow_disclosure=True)
    cert = rel.manifest["certificate"]
    cert["thresholds"] = {k: 0.05 for k in cert["thresholds"]}  # the claim now says: no posterior above 0.05
    rep = attack_release(rel, train, control, n_attacks=TARGETS, seed=0)
    inf = _row(rep, "attribute inference")
    assert inf["bound"] == pytest.approx(0.05) and bool(inf["beats_bound"])
    assert not rep.ok and rep.headline().startswith("ATTACK BEATS THE BOUND")


@pytest.fixture(scope="module")
def adult_parts():
    return split_control(ppdp.datasets.load("adult", n=3000, seed=0), seed=0)


def _dp(train, eps):
    return ppdp.publish(train, ppdp.CellHistogram(epsilon=eps, dims=["age", "sex", "occupation"], domains="adult"), seed=3)


def test_histogram_reconstruction_with_and_without_noise(adult_parts):
    train, control = adult_parts
    rel = _dp(train, 200.0)
    exact = attack_release(rel, train, control, n_attacks=TARGETS, seed=0)
    rec = _row(exact, "reconstruction")
    assert rec["success"] > 0.97  # almost no noise: almost every record is rebuilt
    assert rec["control"] < 0.7  # the held-back half is not
    assert rec["risk_lo"] > 0.8
    assert exact.ok  # ε = 200 allows it: e^ε × control ≥ 1

    noisy = attack_release(_dp(train, 0.1), train, control, n_attacks=TARGETS, seed=0)
    rec = _row(noisy, "reconstruction")
    assert rec["success"] < 0.6 and rec["risk_hi"] < 0.3, rec.to_dict()
    assert noisy.ok

    rel.manifest["certificate"]["epsilon"] = 0.01  # now claims ε = 0.01 for a (nearly) noiseless histogram
    rep = attack_release(rel, train, control, n_attacks=TARGETS, seed=0)
    assert bool(_row(rep, "reconstruction")["beats_bound"]) and not rep.ok


def test_randomized_releases_stay_within_rho2(occ_parts):
    train, control = occ_parts
    for mech in (ppdp.UniformPerturbation(rho1=0.1, rho2=0.5), ppdp.Diverted(l_prime=3)):
        rep = attack_release(ppdp.publish(train, mech, seed=2), train, control, n_attacks=TARGETS, seed=0)
        inf = _row(rep, "attribute inference")
        assert inf["bound"] <= 0.5 + 1e-9 and not inf["beats_bound"], inf.to_dict()
        assert set(rep.table["attack"]) == {"singling out", "linkability", "attribute inference"}
    # power control: ε = 8 published, the claim edited to ε = 0.01 — the attack beats the bound
    loose = ppdp.publish(train, ppdp.SubsetSelection(epsilon=8.0), seed=1)
    loose.manifest["params"]["epsilon"] = loose.manifest["certificate"]["epsilon"] = 0.01
    rep = attack_release(loose, train, control, n_attacks=TARGETS, seed=0)
    inf = _row(rep, "attribute inference")
    assert inf["success_lo"] > 0.7 and inf["bound"] < 0.2 and not rep.ok


def test_cli_audit_attacks_exit_codes_and_outputs(tmp_path):
    run = CliRunner().invoke
    rel = tmp_path / "rel"
    r = run(cli, ["publish", "fprivacy", "--dataset", "occ", "-n", "600", "--seed", "1", "--theta", "1000", "--floor", "1",
                  "--allow-disclosure", "--out", str(rel)])
    assert r.exit_code == 0, r.output
    out = tmp_path / "audit"
    r = run(cli, ["audit", str(rel), "--dataset", "occ", "-n", "600", "--attacks", "--attack-targets", "200", "--out", str(out)])
    assert r.exit_code == 1, r.output  # the disclosure
    assert "attribute inference" in r.output and "success [95% CI]" in r.output
    meta = json.loads((out / "audit.json").read_text())
    inf = next(a for a in meta["attacks"]["attacks"] if a["attack"] == "attribute inference")
    assert inf["risk_lo"] > 0.5 and inf["targets"] == 200
    assert (out / "attacks.csv").exists()
    html = (out / "report.html").read_text()
    assert "Attacks next to the bound" in html and "formal bound" in html
    # bad input: one line, exit 2
    r = run(cli, ["audit", str(rel), "--dataset", "occ", "--attacks", "--out", str(tmp_path / "a2")])
    assert r.exit_code == 2 and "control" in r.output and "Traceback" not in r.output
    r = run(cli, ["audit", str(rel), "--dataset", "occ", "-n", "600", "--control", str(rel / "manifest.json"),
                  "--out", str(tmp_path / "a3")])
    assert r.exit_code == 2 and "--attacks" in r.output


def test_evaluate_with_attacks_reports_them_next_to_the_bound(tmp_path):
    t = ppdp.datasets.load("occ", n=1000, seed=0)
    ev = evaluate(t, ["anatomy:l=4", "laplace:epsilon=1,queries=sex = 'Female'"], n_queries=50, trials=1, seed=0,
                  out_dir=tmp_path, progress=False, attacks=True, attack_rows=400)
    a = ev.attacks
    ok = a[a["error"] == ""]
    assert set(ok["model"]) == {"anatomy:l=4"} and len(ok) == 3
    assert ok[ok["attack"] == "attribute inference"]["bound"].iloc[0] == pytest.approx(0.25)
    assert "no record-level attack" in a[a["model"].str.startswith("laplace")]["error"].iloc[0]
    html = (tmp_path / "report.html").read_text()
    assert "Attacks next to the bound" in html and (tmp_path / "attacks.csv").exists()
    assert np.isfinite(ok["risk"]).all()


@pytest.mark.slow
def test_inference_success_pooled_over_releases_stays_within_tight_bounds():
    """Anatomy (ℓ = 4) and A' (ℓ' = 3) give an expected inference success of at most 1/ℓ and 1/ℓ';
    pooled over 5 releases (seeds 0–4, 300 targets each) the Wilson lower end must stay ≤ the bound."""
    table = ppdp.datasets.load("occ", n=N, seed=0)
    for mech, bound in ((ppdp.Anatomy(l=4), 0.25), (ppdp.Diverted(l_prime=3), 1 / 3)):
        k = n = 0
        for seed in range(5):
            train, control = split_control(table, seed=seed)
            rep = attack_release(ppdp.publish(train, mech, seed=seed), train, control, n_attacks=TARGETS, seed=seed)
            inf = next(o for o in rep.outcomes if o.attack == "attribute inference")
            assert inf.bound == pytest.approx(bound)
            k, n = k + inf.k_train, n + inf.n_train
        assert wilson(k, n)[0] <= bound, (type(mech).__name__, k, n)


@pytest.mark.slow  # the evaluate report's figures dominate (~15 s on a loaded 2-core machine)
def test_cli_evaluate_attacks_prints_the_table_and_rejects_a_bad_row_count(tmp_path):
    run = CliRunner().invoke
    r = run(cli, ["evaluate", "--dataset", "occ", "-n", "800", "--model", "anatomy:l=4", "--queries", "30", "--trials", "1",
                  "--attacks", "--attack-rows", "300", "--out", str(tmp_path / "ev")])
    assert r.exit_code == 0, r.output
    assert "attribute inference" in r.output and "bound 0.250" in r.output
    assert (tmp_path / "ev" / "attacks.csv").exists()
    r = run(cli, ["evaluate", "--dataset", "occ", "-n", "800", "--model", "anatomy:l=4", "--attacks", "--attack-rows", "5",
                  "--out", str(tmp_path / "ev2")])
    assert r.exit_code == 2 and "--attack-rows" in r.output


def test_subset_selection_release_is_attacked_with_its_local_dp_bound(occ_parts):
    """The ldp family: the attacker's records are each record's QI row with one value drawn from
    its report; attribute inference is held to cγ/(1+(γ−1)c) (c: the control's upper end); an
    understated ε (a tampered claim) makes the same attack beat its bound."""
    train, control = occ_parts
    rel = ppdp.publish(train, ppdp.SubsetSelection(rho1=0.1, rho2=0.3), seed=1)
    rep = attack_release(rel, train, control, n_attacks=TARGETS, seed=0)
    inf = _row(rep, "attribute inference")
    g = math.exp(rel.manifest["certificate"]["epsilon"])
    c = inf["control_hi"]
    assert inf["bound"] == pytest.approx(c * g / (1 + (g - 1) * c))
    assert rep.ok and inf["success_lo"] < inf["bound"]
    assert set(rep.table["attack"]) == {"singling out", "linkability", "attribute inference"}
