"""ppdp evaluate: model specs, the shared workload, the result files, failures as rows, the CLI."""

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli
from ppdp import registry
from ppdp.errors import ParameterError, PpdpError
from ppdp.evaluate import evaluate, parse_model_spec, parse_value, selectivity_bin


def test_parse_model_specs():
    s = parse_model_spec("fprivacy:theta=8")
    assert s.name == "fprivacy" and s.params == {"theta": 8} and s.label == "fprivacy:theta=8"
    assert parse_model_spec("sdr:rho1=0.1,rho2=0.3").params == {"rho1": 0.1, "rho2": 0.3}
    assert parse_model_spec("fprivacy:theta=4,overrides={\"1\":0.5,\"2\":0.4}").params["overrides"] == {"1": 0.5, "2": 0.4}
    assert parse_value("age+sex") == ["age", "sex"] and parse_value("true") is True and parse_value("x") == "x"
    assert isinstance(parse_model_spec("uniform:retention=0.5").build(), ppdp.UniformPerturbation)


def test_bad_specs_list_valid_choices():
    with pytest.raises(PpdpError, match="valid models: fprivacy, anatomy"):
        parse_model_spec("kanon:k=5")
    with pytest.raises(PpdpError, match="valid parameters: rho1, rho2"):
        parse_model_spec("sdr:rho=0.1")
    with pytest.raises(PpdpError, match="not key=value"):
        parse_model_spec("sdr:0.1")


def test_model_names_are_the_registry():
    from ppdp.evaluate import ModelSpec, model_classes

    assert model_classes() == registry.mechanisms()
    for name, cls in registry.mechanisms().items():
        assert ModelSpec(name).mechanism_class() is cls
    assert parse_model_spec("cells:epsilon=1,dims=age+sex").build() == ppdp.CellHistogram(1.0, ["age", "sex"])
    with pytest.raises(ParameterError, match="unknown model 'cell'"):
        parse_model_spec("cell:epsilon=1,dims=age")


@pytest.mark.parametrize("spec, needle", [
    ("fprivacy:theta=0", "theta must be a finite number > 0"),
    ("fprivacy:theta=nan", "theta must be"),
    ("fprivacy:method=best", "method must be one of"),
    ("sdr:rho1=0.5,rho2=0.3", "rho1 < rho2"),
    ("sdr:rho1=0.1", "needs rho2"),
    ("diverted:l_prime=2.5", "l_prime must be a whole number"),
    ("dpcube:epsilon=1,dims=age,bins={\"sex\":[0,1]}", "bins given for 'sex'"),
])
def test_bad_values_fail_before_any_work(spec, needle):
    with pytest.raises(ParameterError, match=needle.replace("(", r"\(")):
        parse_model_spec(spec)


def test_bad_value_is_an_error_not_a_row(tmp_path, monkeypatch):
    import ppdp.evaluate as ev_mod
    from ppdp.evaluate import ModelSpec

    def boom(*a, **k):  # the workload must not even be built
        raise AssertionError("work started")

    monkeypatch.setattr(ev_mod, "make_workload", boom)
    t = ppdp.datasets.load("occ", n=2000, seed=0)
    with pytest.raises(ParameterError, match="rho1 < rho2"):
        evaluate(t, [ModelSpec("sdr", {"rho1": 0.5, "rho2": 0.3})], n_queries=10, trials=1, progress=False)
    r = CliRunner().invoke(cli, ["evaluate", "--dataset", "occ", "-n", "2000", "--model", "fprivacy:theta=8",
                                 "--model", "fprivacy:theta=-1", "--out", str(tmp_path / "q")])
    assert r.exit_code == 2 and "theta must be a finite number > 0" in r.output and "FAILED" not in r.output
    assert not (tmp_path / "q").exists()


def test_selectivity_bins():
    b = selectivity_bin(np.array([1, 10, 60, 100, 400, 999]), 10_000)
    assert list(b) == ["0%–0.1%", "0.1%–0.5%", "0.5%–1%", "1%–5%", "1%–5%", "5%–100%"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    t = ppdp.datasets.load("occ", n=6000, seed=0)
    out = tmp_path_factory.mktemp("ev")
    ev = evaluate(t, ["fprivacy:theta=8", "uniform:rho1=0.1,rho2=0.3", "anatomy:l=40"], n_queries=300, trials=2,
                  seed=5, out_dir=out, progress=False)
    return t, ev, out


def test_files_and_shared_workload(run):
    t, ev, out = run
    for f in ("workload.jsonl", "results.csv", "summary.csv", "runs.csv", "meta.json", "report.html"):
        assert (out / f).exists()
    res = pd.read_csv(out / "results.csv")
    assert list(res.columns) == ["model", "params", "trial", "query_id", "true", "estimate"]
    # one workload: the same true answers for every model and trial, equal to the exact answers
    wl = ppdp.Workload.load(out / "workload.jsonl")
    exact = ppdp.answer_exact(t, wl)
    for _, g in res.groupby(["model", "trial"]):
        np.testing.assert_allclose(g.sort_values("query_id")["true"].to_numpy(), exact)
    # trials differ (own seeds) and the release estimates are the releases' own answers
    fp = res[res["model"] == "fprivacy:theta=8"]
    assert not np.allclose(fp[fp.trial == 0]["estimate"].to_numpy(), fp[fp.trial == 1]["estimate"].to_numpy())
    seed0 = json.loads((out / "meta.json").read_text())["trial_seeds"][0]
    rel = ppdp.publish(t, ppdp.FPrivacy(theta=8), seed=seed0)
    np.testing.assert_allclose(fp[fp.trial == 0]["estimate"].to_numpy(), rel.answer(wl), rtol=1e-5)


def test_summary_metrics(run):
    _, ev, out = run
    s = pd.read_csv(out / "summary.csv")
    res = pd.read_csv(out / "results.csv")
    row = s[(s.model == "fprivacy:theta=8") & (s.bin == "all")].iloc[0]
    r = res[res.model == "fprivacy:theta=8"]
    rel = (r["true"] - r["estimate"]).abs() / r["true"]
    assert row["mean_rel_err"] == pytest.approx(rel.mean(), rel=1e-5)
    assert row["median_rel_err"] == pytest.approx(rel.median(), rel=1e-5)
    assert row["p95_rel_err"] == pytest.approx(np.percentile(rel, 95), rel=1e-5)
    assert row["mse"] > 0 and np.isnan(s[(s.model == "uniform:rho1=0.1,rho2=0.3") & (s.bin == "all")]["mse"].iloc[0])
    bins = s[(s.model == "fprivacy:theta=8") & ~s.bin.isin(["all", "count≤10"])]
    assert bins["n_queries"].sum() == row["n_queries"]


def test_failing_model_is_a_row(run):
    _, ev, _ = run
    row = ev.summary[(ev.summary.model == "anatomy:l=40") & (ev.summary.bin == "all")].iloc[0]
    assert row["trials"] == 0 and "l" in row["error"].lower()


def test_cli(tmp_path):
    r = CliRunner().invoke(cli, ["evaluate", "--dataset", "occ", "-n", "4000", "--model", "fprivacy:theta=8",
                                 "--model", "sdr:rho1=0.1,rho2=0.3", "--queries", "100", "--trials", "1",
                                 "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert "fprivacy:theta=8" in r.output and (tmp_path / "o" / "report.html").exists()
    r = CliRunner().invoke(cli, ["evaluate", "--dataset", "occ", "--model", "nope:x=1", "--out", str(tmp_path / "p")])
    assert r.exit_code == 2 and "valid models" in r.output


def test_cli_sql_workload_file(tmp_path):
    """--workload FILE: `ppdp query`'s SQL, one query per GROUP BY group; the true counts are the
    table's own (pandas on the same sample); bad SQL is one line, exit 2, nothing written."""
    wl = tmp_path / "q.sql"
    wl.write_text("SELECT sex, COUNT(*) FROM t WHERE age < 30 GROUP BY sex;\n-- a comment\nSELECT COUNT(*) FROM t WHERE race = 'Black';\n")
    r = CliRunner().invoke(cli, ["evaluate", "--dataset", "occ", "-n", "2000", "--model", "fprivacy:theta=8",
                                 "--workload", str(wl), "--trials", "1", "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    res = pd.read_csv(tmp_path / "o" / "results.csv")
    df = ppdp.datasets.load("occ", n=2000).to_pandas()
    age = pd.to_numeric(df["age"])
    want = [int(((age < 30) & (df["sex"] == s)).sum()) for s in ("Female", "Male")] + [int((df["race"] == "Black").sum())]
    assert res.sort_values("query_id")["true"].tolist() == want
    bad = tmp_path / "bad.sql"
    bad.write_text("SELECT sex COUNT(*) FROM t\n")
    r = CliRunner().invoke(cli, ["evaluate", "--dataset", "occ", "-n", "2000", "--model", "fprivacy:theta=8",
                                 "--workload", str(bad), "--trials", "1", "--out", str(tmp_path / "p")])
    assert r.exit_code == 2 and "--workload: statement 1: " in r.output and not (tmp_path / "p").exists()
