"""Receivers' SQL: GROUP BY, OR/NOT, ppdp.query and `ppdp query` over every release family."""

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

import ppdp
from safe_declarations import protected
from ppdp.cli import cli
from ppdp.errors import QueryError
from ppdp.queries.sql import compile_condition, parse_statement
from ppdp.queries.model import Resolver


@pytest.fixture(scope="module")
def edu():
    return ppdp.datasets.load("edu", n=3000, seed=0)


@pytest.fixture(scope="module")
def releases(edu):
    sa = edu.sa
    return {
        "bucketized": ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=protected(edu)),
        "randomized": ppdp.publish(edu, ppdp.SDR(rho1=0.1, rho2=0.3), seed=1),
        "histogram": ppdp.publish(edu, ppdp.CellHistogram(1.0, ["sex", "race", sa], domains="edu"), seed=1),
        "answers": ppdp.publish(edu, ppdp.LaplaceBaseline(
            epsilon=1.0, queries=[f"sex = '{s}' AND race = '{r}'" for s in edu.domain("sex") for r in edu.domain("race")]),
            seed=1),
    }


def _duckdb_groups(table, sql):
    duckdb = pytest.importorskip("duckdb")
    df = table.to_pandas().astype(str)  # noqa: F841 — read by DuckDB by name
    return duckdb.sql(sql.replace("FROM t", "FROM df")).df()


def test_group_by_exact_counts_match_duckdb(edu, releases):
    sql = ("SELECT sex, education, COUNT(*) FROM t WHERE race IN ('White', 'Black') AND NOT (sex = 'Male' AND "
           "education = 'Masters degree') GROUP BY sex, education")
    sql = sql.replace("'Masters degree'", repr(edu.domain("education")[3]))
    res = ppdp.query(releases["bucketized"], sql, source=edu)
    ref = _duckdb_groups(edu, sql.replace("COUNT(*)", "COUNT(*) AS n"))
    got = {(a, b): c for a, b, c in zip(res["sex"], res["education"], res["exact"]) if c > 0}
    want = {(a, b): float(c) for a, b, c in zip(ref["sex"], ref["education"], ref["n"])}
    assert got == want
    assert set(res.columns) >= {"query", "sex", "education", "estimate", "se", "lower", "upper", "exact"}
    assert (res["lower"] <= res["estimate"]).all() and (res["estimate"] <= res["upper"]).all()


@pytest.mark.parametrize("cond", [
    "sex = 'Male' OR race = 'White'",
    "NOT (sex = 'Male') AND age > 40",
    "(age BETWEEN 20 AND 30 OR age >= 60) AND race <> 'White'",
    "sex = 'Male' OR sex = 'Female'",
    "NOT (age < 30 OR race IN ('White', 'Black')) OR sex = 'Female'",
    "age > 30 AND age < 20",
])
def test_boolean_conditions_exact(edu, cond):
    duckdb = pytest.importorskip("duckdb")
    df = edu.to_pandas().astype(str)
    df["age"] = pd.to_numeric(df["age"])
    want = duckdb.sql(f"SELECT COUNT(*) AS n FROM df WHERE {cond}").df()["n"].iloc[0]
    got = ppdp.query(ppdp.publish(edu, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=protected(edu)), cond, source=edu)
    assert got["exact"].iloc[0] == want


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2)), min_size=1, max_size=5), st.integers(0, 2**16))
def test_compiled_terms_are_disjoint_and_exact(atoms, shape):
    """Random AND/OR/NOT trees over atoms a IN S / b IN T: the compiled terms partition the
    condition's cells exactly."""
    doms = {"a": ["0", "1", "2", "3"], "b": ["x", "y", "z"]}
    rng = np.random.default_rng(shape)
    leaves = []
    for ia, ib in atoms:
        if rng.random() < 0.5:
            leaves.append(f"a IN ({', '.join(repr(str(v)) for v in range(ia + 1))})")
        else:
            leaves.append(f"b <> {doms['b'][ib]!r}")
    expr = leaves[0]
    for leaf in leaves[1:]:
        op = rng.choice(["AND", "OR"])
        expr = f"({expr}) {op} {'NOT ' if rng.random() < 0.3 else ''}({leaf})"
    st_ = parse_statement(expr)
    terms = compile_condition(st_.condition, Resolver(doms))
    grid = np.zeros((4, 3), dtype=int)
    for t in terms:
        ma = t.get("a", np.ones(4, bool))
        mb = t.get("b", np.ones(3, bool))
        grid += np.outer(ma, mb)
    assert grid.max() <= 1  # disjoint
    py = expr.replace("<>", "!=").replace("NOT", "not").replace("AND", "and").replace("OR", "or").replace("IN (", "in (")
    inside = np.array([eval(py, {}, {"a": a, "b": b}) for a in doms["a"] for b in doms["b"]])
    assert np.array_equal(grid.ravel().astype(bool), inside)


@pytest.mark.parametrize("family", ["bucketized", "randomized", "histogram", "answers"])
def test_group_by_every_family(edu, releases, family):
    rel = releases[family]
    res = ppdp.query(rel, "SELECT sex, race, COUNT(*) FROM t GROUP BY sex, race", source=edu)
    assert len(res) == len(edu.domain("sex")) * len(edu.domain("race"))
    assert np.isclose(res["exact"].sum(), edu.n_rows)
    assert np.isfinite(res["estimate"]).all()
    if family in ("bucketized", "answers"):
        assert np.isfinite(res["se"]).all() and (res["lower"] <= res["upper"]).all()


def test_answers_matches_however_written(edu, releases):
    rel = releases["answers"]
    s, r = edu.domain("sex")[0], edu.domain("race")[0]
    a = ppdp.query(rel, f"race IN ('{r}') AND sex = '{s}'")
    b = ppdp.query(rel, f"SELECT COUNT(*) FROM t WHERE sex = '{s}' GROUP BY race")
    assert a["estimate"].iloc[0] == b.loc[b["race"] == r, "estimate"].iloc[0]
    with pytest.raises(QueryError, match="only its own workload"):
        ppdp.query(rel, "age > 30")


@pytest.mark.parametrize("sql,construct", [
    ("SELECT COUNT(*) FROM t GROUP BY sex HAVING COUNT(*) > 3", "HAVING"),
    ("SELECT COUNT(*) FROM t LIMIT 3", "LIMIT"),
    ("SELECT COUNT(*) FROM t JOIN u ON t.a = u.a", "JOIN"),
    ("SELECT COUNT(*) FROM t UNION SELECT COUNT(*) FROM t", "UNION"),
    ("SELECT SUM(age) FROM t", "COUNT"),
    ("SELECT COUNT(DISTINCT sex) FROM t", "COUNT"),
    ("SELECT COUNT(*) FROM t ORDER BY sex", "ORDER BY"),
    ("SELECT race, COUNT(*) FROM t GROUP BY sex", "not in GROUP BY"),
    ("sex LIKE 'M%'", "LIKE"),
    ("SELECT COUNT(*) FROM t GROUP BY age + 1", "GROUP BY takes column names"),
])
def test_unsupported_sql_names_the_construct(sql, construct):
    with pytest.raises(QueryError, match=construct):
        parse_statement(sql)


def test_cli_query_table_and_files(tmp_path, edu, releases):
    rel_dir = tmp_path / "rel"
    releases["bucketized"].save(rel_dir)
    run = CliRunner().invoke
    r = run(cli, ["query", str(rel_dir), "SELECT sex, COUNT(*) FROM t WHERE age > 30 GROUP BY sex"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert "estimate" in lines[0] and "se" in lines[0] and "95% lower" in lines[0] and len(lines) >= 3
    wl = tmp_path / "wl.sql"
    wl.write_text("-- two statements\nsex = 'Male';\nSELECT race, COUNT(*)\n  FROM t GROUP BY race;\n")
    for ext in ("csv", "parquet"):
        out = tmp_path / f"out.{ext}"
        r = run(cli, ["query", str(rel_dir), "--workload", str(wl), "-o", str(out), "--dataset", "edu", "-n", "3000"])
        assert r.exit_code == 0, r.output
        df = pd.read_csv(out) if ext == "csv" else pd.read_parquet(out)
        assert list(df["query"].unique()) == ["sex = 'Male'", "SELECT race, COUNT(*)\n  FROM t GROUP BY race"]
        assert {"estimate", "se", "lower", "upper", "exact"} <= set(df.columns)
    jl = tmp_path / "wl.jsonl"
    ppdp.Workload([ppdp.queries.parse_where("sex = 'Male'")]).save(jl)
    r = run(cli, ["query", str(rel_dir), "--workload", str(jl)])
    assert r.exit_code == 0, r.output
    for args, flag in ((["sex = 'Male'", "--estimator", "nope"], "--estimator"),
                       (["sex = 'Male'", "-o", str(tmp_path / "x.txt")], "--out"),
                       (["sex = 'Male'", "--level", "1.5"], "--level")):
        r = run(cli, ["query", str(rel_dir), *args])
        assert r.exit_code == 2 and flag in r.output and len(r.output.strip().splitlines()) == 1, r.output
    bad = tmp_path / "bad.sql"
    bad.write_text("SELECT COUNT(*) FROM t LIMIT 2\n")
    r = run(cli, ["query", str(rel_dir), "--workload", str(bad)])
    assert r.exit_code == 2 and "--workload" in r.output and "LIMIT" in r.output
