"""Safe by default: a release that discloses a sensitive value of any record with certainty is
refused, and audit / evaluate judge against the same declaration.

The table is EDU (299,285 census records, education as the sensitive attribute): F'-privacy
at θ = 8 gives the three commonest values f' = 1 (Children, High school graduate, Some college
but no degree) and puts 180,915 records (60.4%) in buckets of one value. Without a declaration
every value is sensitive and the release is refused; the controls show the two ways out (the
custodian declares those three values non-sensitive, or passes --allow-disclosure) and that a
release without disclosure publishes untouched.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli
from ppdp.errors import DisclosureError, PpdpError
from ppdp.evaluate import evaluate

EDU_COMMON = ("Children", "High school graduate", "Some college but no degree")
N_EDU_SAMPLE = 20_000


@pytest.fixture(scope="module")
def edu():
    return ppdp.datasets.load("edu", n=N_EDU_SAMPLE, seed=0)


def protected(edu) -> list[str]:
    return [v for v in edu.domain(edu.sa) if v not in EDU_COMMON]


def test_publish_refuses_a_partial_disclosure_and_names_the_two_ways_out(edu):
    with pytest.raises(DisclosureError) as e:
        ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1)
    msg = str(e.value)
    print(msg)
    assert "\n" not in msg and "records with certainty" in msg
    assert set(e.value.exposed) == set(EDU_COMMON) and e.value.n_records == N_EDU_SAMPLE
    k = sum(e.value.exposed.values())
    assert 0.5 * N_EDU_SAMPLE < k < N_EDU_SAMPLE  # a partial disclosure (about 60%), not all records
    assert f"{k:,} of {N_EDU_SAMPLE:,}" in msg
    assert "--sensitive-value" in msg and "sensitive_values" in msg and "--allow-disclosure" in msg
    # way out 1: the three common values declared non-sensitive — the same release publishes
    rel = ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=protected(edu))
    d = rel.manifest["disclosure"]
    assert d["records_certain"] == k and d["sensitive_values"] == protected(edu) and "disclosure_allowed" not in d
    assert ppdp.verify(rel).ok
    # way out 2: allowed explicitly, recorded in the manifest
    rel2 = ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, allow_disclosure=True)
    assert rel2.manifest["disclosure"]["disclosure_allowed"] is True and rel2.manifest["disclosure"]["sensitive_values"] is None
    assert ppdp.verify(rel2).ok


def test_declaring_a_disclosed_value_sensitive_is_still_refused(edu):
    with pytest.raises(DisclosureError) as e:
        ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=["Children", "Doctorate degree(PhD EdD)"])
    assert set(e.value.exposed) == {"Children"}
    with pytest.raises(PpdpError, match="--sensitive-value 'PhD'"):
        ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=["PhD"])


def test_a_release_without_disclosure_is_not_refused(edu):
    """Control: fake values hide every bucket's composition; Anatomy is ℓ-diverse; a DP histogram is aggregate."""
    assert ppdp.publish(edu, ppdp.FPrivacy(theta=8, fake_values=1), seed=1).manifest["disclosure"]["records_certain"] == 0
    assert ppdp.publish(edu, ppdp.Anatomy(3), seed=1).manifest["disclosure"]["records_certain"] == 0
    rel = ppdp.publish(edu, ppdp.UniformPerturbation(rho1=0.1, rho2=0.5), seed=1)
    assert rel.manifest["disclosure"]["records_certain"] == 0 and ppdp.verify(rel).ok


def test_the_mechanisms_own_protected_values_are_the_declaration(edu):
    """F'-privacy's sensitive_values (f' = 1 for the others) is the declaration publish judges by."""
    rel = ppdp.publish(edu, ppdp.FPrivacy(theta=8, sensitive_values=protected(edu)), seed=1)
    assert rel.manifest["disclosure"]["sensitive_values"] == protected(edu)
    assert ppdp.verify(rel).ok


def _run(args):
    r = CliRunner().invoke(cli, args)
    return r.exit_code, r.output


def test_cli_refusal_one_line_exit_2_nothing_on_disk_and_the_two_ways_out(tmp_path):
    base = ["publish", "fprivacy", "--dataset", "edu", "-n", str(N_EDU_SAMPLE), "--theta", "8", "--seed", "1"]
    code, out = _run([*base, "-o", str(tmp_path / "refused")])
    print(out)
    assert code == 2 and len(out.strip().splitlines()) == 1 and "Traceback" not in out
    assert "--sensitive-value" in out and "--allow-disclosure" in out and "Children" in out
    assert not any(tmp_path.iterdir())  # neither the release nor a custodian file
    edu = ppdp.datasets.load("edu", n=N_EDU_SAMPLE, seed=0)
    code, out = _run([*base, "--sensitive-value", *protected(edu), "-o", str(tmp_path / "declared")])
    assert code == 0 and "verify: OK" in out, out
    code, out = _run([*base, "--allow-disclosure", "-o", str(tmp_path / "allowed")])
    assert code == 0 and "(explicitly allowed)" in out, out
    m = json.loads((tmp_path / "allowed" / "manifest.json").read_text())
    assert m["disclosure"]["disclosure_allowed"] is True
    code, out = _run(["verify", str(tmp_path / "allowed")])
    assert out.startswith("verify: OK"), out  # (exit 1 only because a seeded run is not fit for publication)
    # the permission removed: verify re-derives the disclosure and fails
    m["disclosure"].pop("disclosure_allowed")
    (tmp_path / "allowed" / "manifest.json").write_text(json.dumps(m))
    code, out = _run(["verify", str(tmp_path / "allowed")])
    print(out)
    assert code != 0 and not out.startswith("verify: OK") and "allowed it" in out


def test_cli_schema_file_declares_the_sensitive_values(tmp_path):
    edu = ppdp.datasets.load("edu", n=N_EDU_SAMPLE, seed=0)
    csv = tmp_path / "edu.csv"
    edu.to_pandas().to_csv(csv, index=False)
    cols = "\n".join(f'[columns."{c}"]\nrole = "quasi"\ntype = "text"\n' for c in edu.quasi)
    sens = ", ".join(json.dumps(v) for v in protected(edu))
    schema = tmp_path / "edu.toml"
    schema.write_text(f'[file]\nsep = ","\n\n{cols}\n[columns."{edu.sa}"]\nrole = "sensitive"\nsensitive_values = [{sens}]\n')
    code, out = _run(["publish", "fprivacy", str(csv), "--schema", str(schema), "--theta", "8", "--seed", "1",
                      "-o", str(tmp_path / "r")])
    assert code == 0 and "verify: OK" in out, out
    m = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert m["disclosure"]["sensitive_values"] == protected(edu) and m["disclosure"]["records_certain"] > 0
    # the same file without the declaration: refused
    schema.write_text(f'[file]\nsep = ","\n\n{cols}\n[columns."{edu.sa}"]\nrole = "sensitive"\n')
    code, out = _run(["publish", "fprivacy", str(csv), "--schema", str(schema), "--theta", "8", "--seed", "1",
                      "-o", str(tmp_path / "r2")])
    assert code == 2 and "--allow-disclosure" in out and not (tmp_path / "r2").exists()


def test_audit_headline_judges_the_declaration(tmp_path, edu):
    rel = ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, allow_disclosure=True)
    rel.save(tmp_path / "rel")
    code, out = _run(["audit", str(tmp_path / "rel"), "-o", str(tmp_path / "a")])
    print(out)
    lines = out.splitlines()
    assert code == 1 and lines[1].startswith("DISCLOSURE:") and "allowed it" in lines[1]
    html = (tmp_path / "a" / "report.html").read_text()
    assert "DISCLOSURE:" in html and "no violations" not in html
    # the same release judged with the three common values declared non-sensitive: OK
    code, out = _run(["audit", str(tmp_path / "rel"), "-o", str(tmp_path / "b"), "--sensitive-value",
                      ",".join(protected(edu))])
    assert code == 0 and out.splitlines()[1].startswith("OK:"), out
    code, out = _run(["audit", str(tmp_path / "rel"), "-o", str(tmp_path / "c"), "--sensitive-value", "nope"])
    assert code == 2 and "--sensitive-value" in out and len(out.strip().splitlines()) == 1


def test_evaluate_never_recommends_a_disclosing_model_and_says_why(tmp_path, edu):
    ev = evaluate(edu, ["fprivacy:theta=8", "fprivacy:theta=8,fake_values=1", "anatomy:l=3"], n_queries=300,
                       trials=2, seed=0, out_dir=tmp_path / "ev", progress=False)
    rec = ev.recommendation
    print(rec["model"], "|", rec["reason"], "|", rec["passed_over"])
    assert rec["model"] in ("fprivacy:theta=8,fake_values=1", "anatomy:l=3")
    over = {p["model"]: p["why"] for p in rec["passed_over"]}
    assert "fprivacy:theta=8" in over and "with certainty" in over["fprivacy:theta=8"]
    html = (tmp_path / "ev" / "report.html").read_text()
    assert "publish refuses such a release" in html
    # the bound the custodian accepts: a posterior cap on sensitive values passes over the models above it
    row = ev.models.set_index("model").loc[rec["model"]]
    cap = float(row["max_posterior_sensitive"]) - 1e-6
    ev2 = evaluate(edu, ["fprivacy:theta=8", "fprivacy:theta=8,fake_values=1", "anatomy:l=3"], n_queries=300,
                        trials=2, seed=0, progress=False, max_posterior=cap)
    post = ev2.models.set_index("model")["max_posterior_sensitive"]
    assert ev2.recommendation["model"] is None or post[ev2.recommendation["model"]] <= cap
    assert rec["model"] in {p["model"] for p in ev2.recommendation["passed_over"]}
    # declared non-sensitive: the theta=8 model becomes a candidate
    ev3 = evaluate(edu, ["fprivacy:theta=8", "anatomy:l=3"], n_queries=300, trials=2, seed=0, progress=False,
                        sensitive_values=protected(edu))
    assert "fprivacy:theta=8" in ev3.recommendation["candidates"]


def test_randomized_disclosure_counts_a_published_value_with_one_source():
    """A transition group on one value (retention 1) discloses its records; a uniform group on ≥ 2
    values (retention < 1) none — the same computation every randomized claim uses."""
    import numpy as np

    from ppdp.claims.rho import transition_disclosure
    from ppdp.kernels.transition import TransitionModel

    class Rel:  # the three things transition_disclosure reads from a release
        manifest = {"n_published": 10}
        domains = {"s": ["a", "b", "c"]}

        def __init__(self, model, codes, groups):
            self.model, self.codes, self.groups = model, np.asarray(codes), np.asarray(groups)

        def transition_models(self):
            return (self.model,)

        def column_codes(self, attribute):
            return self.codes

    codes = [0, 1, 0, 1, 0, 2, 2, 2, 2, 1]
    single = TransitionModel.subtables("s", 3, [[0, 1], [2]], [3.0, 3.0])
    rel = Rel(single, codes, [0, 0, 0, 0, 0, 1, 1, 1, 1, 0])
    rel.tables = {"data": __import__("pyarrow").table({"subtable": rel.groups})}
    d = transition_disclosure(rel)
    assert d["records_certain"] == 4 and d["per_value"] == {"c": 4} and d["max_posterior"] == 1.0
    uniform = TransitionModel.uniform("s", 3, 3.0)
    d0 = transition_disclosure(Rel(uniform, codes, np.zeros(10, int)))
    assert d0["records_certain"] == 0 and d0["max_posterior"] < 1
