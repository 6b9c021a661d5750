"""Fuzz tests (hypothesis; derandomized under CI by tests/conftest.py) over the query parser,
workload files, CSV input and the CLI query path.

Two properties: no input ends in anything but a result or a ``PpdpError`` (on the CLI: exit 0,
or exit 2 with one ``error:`` line — never a traceback); and no query is silently reduced —
a parsed query's text reads back to the same query, and a query carrying any clause the
parser does not answer is refused rather than answered without it.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ppdp
from ppdp.cli import cli
from ppdp.errors import PpdpError, QueryError
from ppdp.queries import Workload, parse_where
from ppdp.queries.model import Predicate, Query
from ppdp.queries.sql import parse_statement
from ppdp.table import Table

SQL_WORDS = ["SELECT", "COUNT(*)", "FROM", "t", "WHERE", "AND", "OR", "NOT", "IN", "BETWEEN", "LIMIT", "GROUP", "BY",
             "HAVING", "ORDER", "UNION", "DROP", "TABLE", ";", "(", ")", ",", "=", "<", ">", "<=", ">=", "'a'", "'it''s'",
             "age", "sex", "1", "-2", "3.5", "nan", "'inf'", "NULL", "TRUE", "*", "--", "/*", "*/", '"q"', "OFFSET"]

sql_soup = st.lists(st.sampled_from(SQL_WORDS), max_size=14).map(" ".join)
any_text = st.text(max_size=80)

names = st.one_of(st.sampled_from(["age", "sex", "select", "IF", "if", "date", "left", "my col", "a\"b", "x1", "_y"]),
                  st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=8))
values = st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=0, max_size=8)


@st.composite
def predicates(draw, column):
    kind = draw(st.sampled_from(["eq", "in", "between", "lower", "upper"]))
    if kind == "eq":
        return Predicate(column, "eq", (draw(values),))
    if kind == "in":
        return Predicate(column, "in", tuple(draw(st.lists(values, min_size=1, max_size=4))))
    if kind == "between":
        return Predicate(column, "between", low=draw(values), high=draw(values))
    if kind == "lower":
        return Predicate(column, "between", low=draw(values), low_open=draw(st.booleans()))
    return Predicate(column, "between", high=draw(values), high_open=draw(st.booleans()))


@st.composite
def queries(draw):
    cols = draw(st.lists(names, unique=True, max_size=4))
    return Query(tuple(draw(predicates(c)) for c in cols))


def _parse_or_query_error(text):
    try:
        return parse_where(text)
    except QueryError as e:
        assert "\n" not in str(e)
        return None


@given(st.one_of(any_text, sql_soup))
def test_parser_never_crashes_and_round_trips(text):
    q = _parse_or_query_error(text)
    if q is not None:
        assert parse_where(str(q)) == q, (text, str(q))


@given(queries())
def test_every_condition_survives_the_text_round_trip(q):
    text = str(q)
    back = parse_where(text)
    assert back == q, text
    assert sum(1 for p in back.predicates for _ in [p]) == len(q.predicates)


TRAILERS = ["LIMIT 0", "LIMIT 1 OFFSET 2", "GROUP BY sex", "HAVING COUNT(*) > 1", "ORDER BY age", "ORDER BY age DESC",
            "UNION SELECT 1", "UNION ALL SELECT COUNT(*) FROM t", "; DROP TABLE t", "; SELECT 1", "OR age = 1",
            "OR TRUE", "INTERSECT SELECT 1", "EXCEPT SELECT 1", "GROUP BY sex HAVING COUNT(*) > 2 ORDER BY sex LIMIT 3"]


@given(queries().filter(lambda q: q.predicates), st.sampled_from(TRAILERS), st.booleans())
def test_a_clause_the_parser_does_not_answer_is_refused(q, trailer, as_select):
    """Never the plain count with the clause dropped."""
    text = f"{q} {trailer}"
    if as_select:
        text = f"SELECT COUNT(*) FROM t WHERE {text}"
    with pytest.raises(QueryError):
        parse_where(text)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), any_text),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(["where", "predicates", "column", "kind", "values", "low",
                                                             "high", "low_open", "workload"]), inner, max_size=4)),
    max_leaves=12)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(json_values.map(json.dumps), any_text))
def test_workload_lines_never_crash(tmp_path, line):
    f = tmp_path / "w.jsonl"
    f.write_text(line.replace("\n", " ") + "\n", encoding="utf-8")
    try:
        wl = Workload.load(f)
    except QueryError as e:
        assert "\n" not in str(e)
        return
    for q in wl:
        assert parse_where(str(q)) == q


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200))
def test_csv_bytes_never_crash(tmp_path, data):
    f = tmp_path / "t.csv"
    f.write_bytes(b"a,b\n" + data)
    try:
        Table.from_csv(f, quasi=["a"], sensitive=["b"], missing="category")
        Table.from_csv(f, quasi=["a"], sensitive=["b"], missing="category", numeric=["a"])
    except PpdpError as e:
        assert "\n" not in str(e)


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    rng = np.random.default_rng(0)
    pd.DataFrame({"age": rng.integers(20, 60, 200), "sex": rng.choice(["F", "M"], 200),
                  "sa": rng.choice(["a", "b", "c"], 200)}).to_csv(d / "t.csv", index=False)
    r = CliRunner().invoke(cli, ["publish", "uniform", str(d / "t.csv"), "--numeric", "age", "--quasi", "age", "sex",
                                 "--sensitive", "sa", "--retention", "0.6", "--seed", "0", "-o", str(d / "rel")])
    assert r.exit_code == 0, r.output
    return d / "rel"


@settings(max_examples=60)
@given(st.one_of(sql_soup, any_text.filter(lambda s: not s.startswith("-"))))
def test_cli_query_is_an_answer_or_one_error_line(release_dir, text):
    from ppdp import load_release

    r = CliRunner().invoke(cli, ["query", str(release_dir), text])
    assert "Traceback" not in r.output and "Traceback" not in r.stderr
    if r.exit_code == 0:
        st_ = parse_statement(text)  # answered: the text is a statement the parser accepts whole
        if not st_.group_by:
            est = float(r.stdout.splitlines()[1].split()[0])
            assert est == pytest.approx(float(ppdp.query(load_release(release_dir), text)["estimate"].iloc[0]), abs=1e-2)
    else:
        assert r.exit_code == 2, (r.exit_code, r.output)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
