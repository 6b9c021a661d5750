"""Every release directory carries a generated README.md (data dictionary, the claim in words,
recipes to estimate a count without ppdp); verify regenerates it from the manifest; `ppdp
export` writes CSV/Parquet copies with histogram labels.

The receiver test runs each README's own recipe — the SQL block with DuckDB and the pandas
block — in the release directory, with the example conditions of the README replaced by the
query's, and compares with ``release.count(q)`` (to 1e-9)."""

from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import ppdp
from safe_declarations import protected
from ppdp import registry
from ppdp.cli import cli
from ppdp.releases.base import load_release

EDU = ppdp.datasets.load("edu", n=3000, seed=0)
ADULT = ppdp.datasets.load("adult", n=3000, seed=0)
OCC = ppdp.datasets.load("occ", n=3000, seed=0)


def _publish(name, table, tmp_path, **params):
    fam = registry.mechanisms()[name].family
    rel = ppdp.publish(table, registry.mechanisms()[name](**params), seed=3,
                       sensitive_values=None if fam in ("histogram", "answers") else protected(table))
    d = tmp_path / name
    rel.save(d)
    return load_release(d), d


def _blocks(text, lang):
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def _run_sql(d, sql):
    duckdb = pytest.importorskip("duckdb")
    cwd = os.getcwd()
    os.chdir(d)
    try:
        return float(duckdb.sql(sql).fetchall()[0][0])
    finally:
        os.chdir(cwd)


def _run_pandas(d, code):
    cwd = os.getcwd()
    os.chdir(d)
    try:
        env: dict = {}
        exec(code, env)  # the README's own recipe
        return float(env["estimate"])
    finally:
        os.chdir(cwd)


def test_every_release_carries_its_readme_and_verify_checks_it(tmp_path):
    rel, d = _publish("sdr", EDU, tmp_path, rho1=0.1, rho2=0.5, merge="min-size", min_size=500)
    assert sorted(os.listdir(d)) == ["README.md", "data.parquet", "manifest.json"]
    text = (d / "README.md").read_text()
    assert rel.manifest["certificate"]["model"] in text or "ρ1" in text
    assert "| `education` | text label | sensitive attribute, randomized; 17 labels" in text
    rep = ppdp.verify(rel)
    assert rep.ok and "README.md is the one the manifest gives" in rep.checks
    # a tampered README is reported
    (d / "README.md").write_text(text.replace("ρ2 = 0.5", "ρ2 = 0.05"))
    rep = ppdp.verify(load_release(d))
    assert not rep.ok and any("README.md differs" in p for p in rep.problems), rep.problems
    # a missing one too; any other extra file is still refused
    (d / "README.md").unlink()
    assert any("lacks README.md" in p for p in ppdp.verify(load_release(d)).problems)
    (d / "README.md").write_text(text)
    (d / "NOTES.md").write_text("x")
    assert any("NOTES.md is not part of" in p for p in ppdp.verify(load_release(d)).problems)


def test_readme_lists_long_domains_by_their_first_labels(tmp_path):
    rel, d = _publish("fprivacy", EDU, tmp_path, theta=8.0)
    text = (d / "README.md").read_text()
    n = len(rel.domains["country_of_birth"])
    assert f"{n} labels, the first 8: `Cambodia`" in text
    assert "disclosure:" in text and "F'-privacy" in text


def _bucketized_case(tmp_path):
    rel, d = _publish("fprivacy", EDU, tmp_path, theta=8.0)
    cases = []
    for qi, lab, sa in [("sex", "Female", "High school graduate"), ("age", "40", "Children"),
                        ("race", "Black", "Bachelors degree(BA AB BS)")]:
        cases.append((f"{qi} = '{lab}' AND education = '{sa}'",
                      {'"age" = \'0\'': f'"{qi}" = \'{lab}\'', "\"education\" = '10th grade'": f"\"education\" = '{sa}'",
                       "qit['age'] == '0'": f"qit[{qi!r}] == {lab!r}", "st['education'] == '10th grade'": f"st['education'] == {sa!r}"}))
    return rel, d, cases


def _randomized_case(tmp_path):
    rel, d = _publish("sdr", EDU, tmp_path, rho1=0.1, rho2=0.5, merge="min-size", min_size=500)
    cases = []
    for qi, lab, sa in [("sex", "Female", "10th grade"), ("marital_status", "Never married", "Children"),
                        ("race", "White", "Masters degree(MA MS MEng MEd MSW MBA)")]:
        cases.append((f"{qi} = '{lab}' AND education = '{sa}'",
                      {'"age" = \'0\'': f'"{qi}" = \'{lab}\'', "\"education\" = '10th grade'": f"\"education\" = '{sa}'",
                       "df['age'] == '0'": f"df[{qi!r}] == {lab!r}", "S = {'10th grade'}": f"S = {{{sa!r}}}"}))
    return rel, d, cases


def _histogram_case(tmp_path):
    rel, d = _publish("cells", ADULT, tmp_path, epsilon=1.0, dims=["age", "sex"], bins={"age": [17, 30, 50, 91]},
                      domains={"sex": ["Female", "Male"]})
    # age BETWEEN 30 AND 91 → the bins [30, 50) and [50, 91]: indices 1 … 2 (a range must follow the edges)
    return rel, d, [("age BETWEEN 30 AND 91", {'"age" BETWEEN 0 AND 1': '"age" BETWEEN 1 AND 2',
                                               "cells['age'].between(0, 1)": "cells['age'].between(1, 2)"}),
                    ("age >= 17 AND age < 30 AND sex = 'Male'",
                     {'"age" BETWEEN 0 AND 1': '"age" BETWEEN 0 AND 0 AND "sex" = 1',
                      "cells['age'].between(0, 1)": "cells['age'].between(0, 0) & (cells['sex'] == 1)"})]


@pytest.mark.parametrize("where", ["release", "csv export"])
@pytest.mark.parametrize("case", ["bucketized", "randomized", "histogram"])
def test_readme_recipe_reproduces_ppdp(case, where, tmp_path):
    rel, d, cases = {"bucketized": _bucketized_case, "randomized": _randomized_case,
                     "histogram": _histogram_case}[case](tmp_path)
    if where == "csv export":  # the export's README reads the exported CSV files, in their directory
        res = CliRunner().invoke(cli, ["export", str(d), "--format", "csv", "-o", str(tmp_path / "csv")])
        assert res.exit_code == 0, res.output
        d = tmp_path / "csv"
        assert not [f for f in os.listdir(d) if f.endswith(".parquet")]
    text = (d / "README.md").read_text()
    assert (".parquet'" not in text and '.parquet")' not in text) if where == "csv export" else ".parquet'" in text
    sql, py = _blocks(text, "sql")[0], _blocks(text, "python")[0]
    for where, subs in cases:
        s, p = sql, py
        for old, new in subs.items():
            assert old in s or old in p, (old, s, p)
            s, p = s.replace(old, new), p.replace(old, new)
        want = rel.count(where, estimator="inversion" if case == "randomized" else None)
        got_sql, got_pd = _run_sql(d, s), _run_pandas(d, p)
        print(f"{case}: {where}: ppdp {want:.6f}, README SQL {got_sql:.6f}, README pandas {got_pd:.6f}")
        assert abs(got_sql - want) <= 1e-9 * max(1.0, abs(want)), (where, got_sql, want)
        assert abs(got_pd - want) <= 1e-9 * max(1.0, abs(want)), (where, got_pd, want)


def test_readme_lookup_reproduces_laplace_answers(tmp_path):
    queries = ["sex = 'Female'", "age BETWEEN 30 AND 40", "race = 'Black'"]
    rel, d = _publish("laplace", OCC, tmp_path, epsilon=0.5, queries=queries)
    text = (d / "README.md").read_text()
    code = _blocks(text, "python")[0]
    sql = _blocks(text, "sql")[0]
    rows = dict((w, c) for w, c in _run_duck_rows(d, sql))
    cwd = os.getcwd()
    os.chdir(d)
    try:
        env: dict = {}
        exec(code, env)
    finally:
        os.chdir(cwd)
    for q in queries:
        key = next(w for w in env["answers"].index if _norm(w) == _norm(q))  # labels are printed quoted: '30'
        assert abs(float(env["answers"][key]) - rel.count(q)) <= 1e-9
        assert abs(float(rows[key]) - rel.count(q)) <= 1e-9


def _norm(w):
    return re.sub(r"\s+", " ", w.replace('"', "").replace("'", "")).strip().lower()


def _run_duck_rows(d, sql):
    duckdb = pytest.importorskip("duckdb")
    cwd = os.getcwd()
    os.chdir(d)
    try:
        return duckdb.sql(sql).fetchall()
    finally:
        os.chdir(cwd)


def test_export_csv_labels_histogram_cells_and_escapes_formulas(tmp_path):
    rel, d = _publish("cells", ADULT, tmp_path, epsilon=1.0, dims=["age", "sex"], bins={"age": [17, 30, 50, 91]},
                      domains={"sex": ["Female", "Male"]})
    out = tmp_path / "csv"
    res = CliRunner().invoke(cli, ["export", str(d), "--format", "csv", "-o", str(out)])
    assert res.exit_code == 0, res.output
    cells = pd.read_csv(out / "cells.csv")
    assert list(cells.columns) == ["age", "sex", "count", "age_label", "sex_label"]
    assert set(cells["age_label"]) == {"[17, 30)", "[30, 50)", "[50, 91]"}
    assert (cells["sex_label"] == np.where(cells["sex"] == 0, "Female", "Male")).all()
    readme = (out / "README.md").read_text()
    assert "`cells.csv`" in readme and "read_csv('cells.csv'" in readme and "cells.parquet" not in readme
    res = CliRunner().invoke(cli, ["export", str(d), "--format", "parquet", "-o", str(tmp_path / "pq")])
    assert res.exit_code == 0, res.output
    assert "age_label" in pd.read_parquet(tmp_path / "pq" / "cells.parquet").columns
