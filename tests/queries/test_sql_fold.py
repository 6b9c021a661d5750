"""Folding IN lists before the SQL parser (queries/sql.py ``_fold_in_lists``) changes nothing but
speed: on random statements — quotes doubled inside strings, IN inside strings, quoted names and
comments, numbers, NOT IN, bad input — the parsed statement, or the error, is the unfolded one's."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdp.errors import QueryError
from ppdp.queries import sql

WORDS = ["a", "b", "x y", "it''s", "IN (1)", "in ('q')", "--", "/*", ",", ")", "(", "'", "1", "2.5", "é"]
COLS = ["age", "sex", '"IN (2)"', "native_country", "`in`"]


def _string(draw):
    return "'" + "".join(draw(st.lists(st.sampled_from(WORDS), max_size=3))) + "'"


@st.composite
def item(draw):
    kind = draw(st.sampled_from(["str", "num", "dec", "neg", "name", "exp"]))
    if kind == "str":
        return _string(draw)
    return {"num": str(draw(st.integers(0, 99))), "dec": f"{draw(st.integers(0, 9))}.{draw(st.integers(0, 9))}",
            "neg": f"-{draw(st.integers(0, 9))}", "name": "Male", "exp": "1e3"}[kind]


@st.composite
def atom(draw):
    col = draw(st.sampled_from(COLS))
    kind = draw(st.sampled_from(["in", "notin", "eq", "between", "lt", "emptyin"]))
    if kind in ("in", "notin"):
        items = draw(st.lists(item(), min_size=1, max_size=5))
        sep = draw(st.sampled_from([", ", ",", " ,  "]))
        kw = draw(st.sampled_from(["IN", "in", "In"]))
        return f"{col} {'NOT ' if kind == 'notin' else ''}{kw} ({sep.join(items)})"
    if kind == "eq":
        return f"{col} = {_string(draw)}"
    if kind == "between":
        return f"{col} BETWEEN {draw(item())} AND {draw(item())}"
    if kind == "lt":
        return f"{col} < {draw(item())}"
    return f"{col} IN ()"


@st.composite
def statement(draw):
    parts = draw(st.lists(atom(), min_size=1, max_size=4))
    glue = [draw(st.sampled_from([" AND ", " OR ", " AND NOT ", " or "])) for _ in parts[1:]]
    cond = parts[0] + "".join(g + p for g, p in zip(glue, parts[1:]))
    if draw(st.booleans()):
        cond = f"({cond})"
    tail = draw(st.sampled_from(["", " -- x IN (1, 2)", " /* IN ('a') */", ";"]))
    head = draw(st.sampled_from(["", "WHERE ", "SELECT COUNT(*) FROM t WHERE "]))
    group = draw(st.sampled_from(["", " GROUP BY sex"])) if head.startswith("SELECT") and not tail else ""
    return head + cond + group + tail


def _outcome(text):
    try:
        s = sql.parse_statement(text)
        return ("ok", s.condition, s.group_by)
    except QueryError as e:
        return ("error", str(e))


@settings(max_examples=400, deadline=None)
@given(statement())
def test_folded_parse_equals_unfolded(text):
    folded = _outcome(text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sql, "_fold_in_lists", lambda body: (body, []))
        plain = _outcome(text)
    assert folded == plain, text


def test_folding_applies_to_receivers_lists():
    body, lists = sql._fold_in_lists("age IN ('1', '5') AND sex NOT IN ('it''s') AND c IN (3, 4.5) AND d = 'IN (7)'")
    assert lists == [("1", "5"), ("it's",), ("3", "4.5")]
    assert "IN (7)" in body and body.count("IN ('\x1e") == 3
    assert sql._fold_in_lists("a IN ('\x1e0')") == ("a IN ('\x1e0')", [])  # the mark itself: no folding
