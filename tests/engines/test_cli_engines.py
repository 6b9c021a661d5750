"""``--engine spark|stream`` from the CLI (the Spark case in tests/engines/test_spark.py, on the shared session), on a user's CSV read through a schema file: the
release is partitioned, verifies (streamed and in memory) against the CSV, and streamed
answers equal the in-memory ones; bad flag combinations are one line, exit 2, nothing on disk."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli

SCHEMA = """
[file]
sep = ";"
na = ["NA"]
missing = "category"

[columns.age]
role = "quasi"
type = "numeric"
bins = { width = 10, min = 10, max = 100 }

[columns.education]
role = "quasi"

[columns.sex]
role = "quasi"

[columns.occupation]
role = "sensitive"

[columns.fnlwgt]
role = "drop"
"""


def write_own_csv(d):
    """6,000 Adult rows as a custodian would have them: ';'-separated, 'NA' for missing values,
    and their schema file; returns (csv, schema)."""
    df = ppdp.datasets.load("adult", n=6000, seed=3).to_pandas()
    df = df[["age", "education", "sex", "occupation", "fnlwgt"]].astype(str).replace("(missing)", "NA")
    df.to_csv(d / "adult.csv", sep=";", index=False)
    (d / "adult.toml").write_text(SCHEMA)
    return d / "adult.csv", d / "adult.toml"


@pytest.fixture(scope="module")
def csv(tmp_path_factory):
    return write_own_csv(tmp_path_factory.mktemp("own"))


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_publish_sdr_streamed_verifies_and_answers_as_in_memory(csv, tmp_path):
    path, schema = csv
    out = tmp_path / "rel"
    res = run("publish", "sdr", path, "--schema", schema, "--rho1", "0.1", "--rho2", "0.5", "--engine", "stream", "-o", out)
    assert res.exit_code == 0, res.output
    assert "verify: OK" in res.output
    m = json.loads((out / "manifest.json").read_text())
    assert m["engine"] == "stream" and m["files"]["data"]["partitioned"] and m["n_input"] == 6000
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".rel.input-")]  # the staging directory is gone
    for engine in ("stream", "local"):
        res = run("verify", out, "--engine", engine, "--input", path, "--schema", schema)
        assert res.exit_code == 0 and "verify: OK" in res.output, (engine, res.output)
    sql = "SELECT COUNT(*) FROM t WHERE sex = 'Female' AND occupation = 'Sales'"
    streamed = run("query", out, sql, "--engine", "stream", "-o", tmp_path / "s.csv")
    local = run("query", out, sql, "--estimator", "inversion", "-o", tmp_path / "l.csv")
    assert streamed.exit_code == 0 and local.exit_code == 0, (streamed.output, local.output)
    import pandas as pd

    a, b = pd.read_csv(tmp_path / "s.csv")["estimate"], pd.read_csv(tmp_path / "l.csv")["estimate"]
    assert np.allclose(a, b) and float(a[0]) > 0


def test_publish_fprivacy_streamed(csv, tmp_path):
    path, schema = csv
    out = tmp_path / "fp"
    # safe by default on the streaming engine too: θ = 8 leaves the two commonest occupations unbounded
    res = run("publish", "fprivacy", path, "--schema", schema, "--theta", "8", "--engine", "stream", "-o", out)
    assert res.exit_code == 2 and "refused" in res.output and not out.exists(), res.output
    res = run("publish", "fprivacy", path, "--schema", schema, "--theta", "8", "--engine", "stream", "--allow-disclosure", "-o", out)
    assert res.exit_code == 0, res.output
    assert json.loads((out / "manifest.json").read_text())["disclosure"]["disclosure_allowed"] is True
    res = run("verify", out, "--engine", "stream", "--input", path, "--schema", schema)
    assert res.exit_code == 0 and "verify: OK" in res.output, res.output


@pytest.mark.parametrize("args, flag", [
    (["--engine", "stream", "--spark-master", "local[1]"], "--spark-master"),
    (["--engine", "stream", "--custodian", "{tmp}/c.json"], "--custodian"),
    (["--engine", "warp"], "--engine"),
])
def test_bad_engine_flags(csv, tmp_path, args, flag):
    path, schema = csv
    out = tmp_path / "bad"
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    res = run("publish", "sdr", path, "--schema", schema, "--rho1", "0.1", "--rho2", "0.5", *args, "-o", out)
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and flag in lines[0], res.stderr
    assert os.listdir(tmp_path) == []


def test_query_stream_refuses_group_by_and_exact_counts(csv, tmp_path):
    path, schema = csv
    out = tmp_path / "rel"
    assert run("publish", "uniform", path, "--schema", schema, "--retention", "0.5", "--engine", "stream",
               "-o", out).exit_code == 0
    res = run("query", out, "SELECT sex, COUNT(*) FROM t GROUP BY sex", "--engine", "stream")
    assert res.exit_code == 2 and "GROUP BY" in res.stderr and "--engine local" in res.stderr
    res = run("query", out, "sex = 'Male'", "--engine", "stream", "--input", path, "--schema", schema)
    assert res.exit_code == 2 and "--input" in res.stderr
