"""The evaluate report decides: privacy next to error, intervals over trials, the
recommendation rule, DP models without dims/epsilon, per-ε tables for a range workload."""

import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli
from ppdp.errors import ParameterError
from ppdp.evaluate import evaluate, interval, parse_model_spec, recommend


def _models(rows):
    base = {"family": "bucketized", "trials": 3, "error": "", "records_certain": 0.0, "max_posterior": 0.5,
            "epsilon": math.nan, "mean_rel_err_lo": math.nan, "mean_rel_err_hi": math.nan}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_recommendation_rule():
    m = _models([
        {"model": "a", "mean_rel_err": 0.10, "records_certain": 50.0, "max_posterior": 1.0},  # discloses: dropped
        {"model": "b", "mean_rel_err": 0.20, "mean_rel_err_lo": 0.15, "mean_rel_err_hi": 0.26, "max_posterior": 0.4},
        {"model": "c", "mean_rel_err": 0.25, "max_posterior": 0.2},  # inside b's interval and more private
        {"model": "d", "mean_rel_err": 0.30, "max_posterior": 0.1},  # outside b's interval
        {"model": "e", "mean_rel_err": 0.01, "error": "verify failed: x"},
    ])
    r = recommend(m)
    assert r["model"] == "c" and "more private" in r["reason"] and "disclose" in r["rule"]
    assert recommend(m, max_posterior=0.15)["model"] == "d"
    assert recommend(m, max_posterior=0.05)["model"] is None
    over = {p["model"]: p["why"] for p in r["passed_over"]}
    assert set(over) == {"a", "e"} and "with certainty" in over["a"] and over["e"].startswith("failed")
    # a model disclosing a sensitive value with certainty is never recommended, even when every model does
    m2 = _models([{"model": "x", "mean_rel_err": 0.1, "records_certain": 9.0},
                  {"model": "y", "mean_rel_err": 0.3, "records_certain": 3.0}])
    r2 = recommend(m2)
    assert r2["model"] is None and "every model that ran discloses" in r2["reason"] and len(r2["passed_over"]) == 2
    # … unless the disclosed values are declared non-sensitive (records_certain_sensitive = 0)
    m3 = _models([{"model": "x", "mean_rel_err": 0.1, "records_certain": 9.0, "records_certain_sensitive": 0.0},
                  {"model": "y", "mean_rel_err": 0.3, "records_certain": 3.0, "records_certain_sensitive": 3.0}])
    assert recommend(m3)["model"] == "x"


def test_interval_over_trials():
    m, lo, hi = interval([1.0, 2.0, 3.0], 0.95)
    assert m == 2.0 and lo == pytest.approx(2 - 4.302653 / math.sqrt(3)) and hi == pytest.approx(2 + 4.302653 / math.sqrt(3))
    assert math.isnan(interval([1.0])[1])


def test_dp_models_need_no_dims_and_take_epsilons(tmp_path):
    t = ppdp.datasets.load("adult", n=3000, seed=0).select(["age", "sex", "race", "occupation"])
    assert parse_model_spec("dpcube", epsilon_later=True).name == "dpcube"
    with pytest.raises(ParameterError, match="needs epsilon"):
        evaluate(t, ["dpcube"], n_queries=10, trials=1, progress=False)
    ev = evaluate(t, ["anatomy:l=3", "cells"], epsilons=[0.5, 2.0], n_queries=150, trials=2, progress=False,
                  public_domains="adult", out_dir=tmp_path / "ev")
    mods = ev.models.set_index("model")
    assert list(mods.index) == ["anatomy:l=3", "cells:epsilon=0.5", "cells:epsilon=2.0"]
    assert (mods["error"] == "").all(), mods["error"].to_dict()
    # dims from the declared roles (the anatomy workload's columns), domains from the declared public ones
    assert "dims=" + "+".join([*t.quasi, *t.sensitive]) in mods.loc["cells:epsilon=0.5", "filled"]
    # privacy next to error: the claim, the audit's largest posterior, the disclosure
    assert mods.loc["anatomy:l=3", "max_posterior"] == pytest.approx(1 / 3) and mods.loc["anatomy:l=3", "records_certain"] == 0
    assert "differential privacy" in mods.loc["cells:epsilon=2.0", "claim"] and mods.loc["cells:epsilon=2.0", "epsilon"] == 2
    # more budget, less error (10× the budget range; a failure here would be a broken noise scale)
    assert mods.loc["cells:epsilon=2.0", "mean_abs_err"] < mods.loc["cells:epsilon=0.5", "mean_abs_err"]
    assert (mods["mean_rel_err_lo"] <= mods["mean_rel_err"]).all() and (mods["mean_rel_err"] <= mods["mean_rel_err_hi"]).all()
    html = (tmp_path / "ev" / "report.html").read_text()
    assert "per ε" in html and "ε = 0.5" in html and "Recommendation" in html
    assert pd.read_csv(tmp_path / "ev" / "models.csv")["model"].tolist() == list(mods.index)


def test_range_workload_over_chosen_dims_cli(tmp_path):
    r = CliRunner().invoke(cli, ["evaluate", "--dataset", "adult", "-n", "4000", "--workload", "range",
                                 "--dims", "age,hours_per_week", "--model", "dpcube", "--model", "cells",
                                 "--epsilons", "0.1,1", "--queries", "200", "--trials", "2", "--out", str(tmp_path / "r")])
    assert r.exit_code == 0, r.output
    assert "cells:epsilon=0.1" in r.output and "recommendation: " in r.output
    models = pd.read_csv(tmp_path / "r" / "models.csv")
    assert models["filled"].str.contains("dims=age\\+hours_per_week").all()
    # range workload: the recommendation ranks by mean absolute error
    assert "mean absolute error" in (tmp_path / "r" / "report.html").read_text()
    assert np.all(models.groupby(models["model"].str.split(":").str[0])["mean_abs_err"].apply(
        lambda s: s.iloc[0] > s.iloc[-1]))  # ε 0.1 worse than ε 1 for each mechanism
    for bad, needle in ((["--epsilons", "0,1"], "--epsilons"), (["--max-posterior", "2"], "--max-posterior"),
                        (["--domains", "a=1", "--domains", "adult"], "--domains")):
        r = CliRunner().invoke(cli, ["evaluate", "--dataset", "occ", "--model", "cells", *bad, "--out", str(tmp_path / "x")])
        assert r.exit_code == 2 and needle in r.output, r.output


def test_schema_file_gives_dp_models_their_domains_and_bins(tmp_path):
    """The raw Adult file read with one schema file: DP histograms get the declared domains
    (a binned column's bin labels, with its missing cell where declared) without naming them."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    r = CliRunner().invoke(cli, ["evaluate", str(root / "tests/io/data/adult_head.data"), "--schema",
                                 str(root / "examples/adult.schema.toml"), "--workload", "range", "--dims", "age,sex,race",
                                 "--model", "cells", "--model", "anatomy:l=2", "--epsilons", "1", "--queries", "50",
                                 "--trials", "2", "--out", str(tmp_path / "s")])
    assert r.exit_code == 0, r.output
    m = pd.read_csv(tmp_path / "s" / "models.csv").set_index("model")
    # age is binned and the schema declares missing = "category": its cells are its bins' labels and
    # the missing cell, declared (as `ppdp publish --schema` builds them)
    assert m.loc["cells:epsilon=1.0", "filled"] == "dims=age+sex+race, domains=declared"
    assert m["error"].isna().all()


def test_recommendation_prefers_models_that_do_not_disclose_the_sensitive_set():
    """Among models inside the best one's interval, one whose buckets tell that records hold *one
    of* the declared sensitive values (no single value certain) is less private than one that does
    not; when it is the pick, the reason says what it discloses."""
    m = _models([
        {"model": "f", "mean_rel_err": 0.20, "mean_rel_err_lo": 0.15, "mean_rel_err_hi": 0.26, "max_posterior": 0.2,
         "records_certain_in_set": 1570.0},
        {"model": "g", "mean_rel_err": 0.24, "max_posterior": 0.4, "records_certain_in_set": 0.0},
        {"model": "h", "mean_rel_err": 0.40, "max_posterior": 0.1},
    ])
    r = recommend(m)
    assert r["model"] == "g" and "more private" in r["reason"] and "hold one of the sensitive values" in r["rule"]
    r2 = recommend(m[m["model"] != "g"])
    assert r2["model"] == "f" and "1,570 records are disclosed with certainty to hold one of the sensitive values" in r2["reason"]


def test_evaluate_reports_the_sensitive_set_of_a_real_table(tmp_path):
    """Fair's affairs (the gauntlet's fair.tsv, every affairs bin but 'none' declared sensitive):
    F'-privacy at θ = 8 puts 1,570 women who had an affair in buckets holding only affair values;
    evaluate's models.csv carries that count beside the per-value one (0), and Anatomy does not."""
    from pathlib import Path

    g = Path(__file__).resolve().parents[1] / "gauntlet"
    r = CliRunner().invoke(cli, ["evaluate", str(g / "data" / "fair.tsv"), "--schema", str(g / "schemas" / "fair.toml"),
                                 "--model", "fprivacy:theta=8", "--queries", "50", "--trials", "1", "--seed", "0",
                                 "--out", str(tmp_path / "f")])
    assert r.exit_code == 0, r.output
    m = pd.read_csv(tmp_path / "f" / "models.csv").set_index("model")
    row = m.loc["fprivacy:theta=8"]
    assert row["records_certain_sensitive"] == 0 and row["records_certain_in_set"] == 1570
    assert "1,570 records are disclosed with certainty to hold one of the sensitive values" in r.output


def test_a_refused_model_row_is_its_one_line_a_fault_keeps_its_name():
    """A model the table is not eligible for is a row whose error is the refusal's own line
    (what `ppdp publish` prints), not prefixed with the library's exception class."""
    t = ppdp.datasets.load("adult", n=2000, seed=0).select(["age", "sex", "race", "occupation"])
    ev = evaluate(t, ["anatomy:l=40"], n_queries=20, trials=1, progress=False)
    err = ev.models.set_index("model").loc["anatomy:l=40", "error"]
    assert err and "Error:" not in err.split(" ")[0] and "ℓ = 40" in err, err
