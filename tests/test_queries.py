import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

from ppdp.errors import QueryError
from ppdp.queries import CountIndex, Workload, answer_exact, parse_where
from ppdp.queries.workloads import anatomy_workload, point_workload, range_workload
from ppdp.table import Table


def small():
    return Table.from_pandas(
        pd.DataFrame({"age": [20, 30, 40, 50, 30], "sex": ["F", "M", "F", "M", "F"], "d": ["a", "b", "a", "c", "b"]}),
        quasi=["age", "sex"], sensitive=["d"],
    )


def test_parser_forms():
    q = parse_where("age BETWEEN 25 AND 45 AND sex = 'F' AND d IN ('a', 'b')")
    assert [p.kind for p in q.predicates] == ["between", "eq", "in"]
    assert answer_exact(small(), q)[0] == 2
    assert answer_exact(small(), "age >= 30 AND age <= 50")[0] == 4
    assert answer_exact(small(), "WHERE sex = M")[0] == 2


def test_strict_and_one_sided_bounds():
    t = small()  # ages 20, 30, 40, 50, 30
    assert answer_exact(t, "age > 30")[0] == 2
    assert answer_exact(t, "age >= 30")[0] == 4
    assert answer_exact(t, "age < 30")[0] == 1
    assert answer_exact(t, "age > 20 AND age < 50")[0] == 3
    assert answer_exact(t, "30 < age")[0] == 2
    assert answer_exact(t, "d > 'a'")[0] == 3  # labels: code order of the domain
    q = parse_where("age > 20 AND age <= 40")
    assert answer_exact(t, q)[0] == 3
    assert str(q) == "age > '20' AND age <= '40'"
    from ppdp.queries.model import Predicate

    assert Predicate.from_json(q.predicates[0].to_json()) == q.predicates[0]


@pytest.mark.parametrize("bad", ["age > 3 OR sex = 'F'", "foo(", "age BETWEEN 1", "age >= 3 AND age > 4"])
def test_parser_rejects(bad):
    with pytest.raises(QueryError):
        parse_where(bad)


def test_unknown_attribute_and_value():
    with pytest.raises(QueryError, match="unknown attribute 'zip'"):
        answer_exact(small(), "zip = 1")
    with pytest.raises(QueryError, match="not in the domain"):
        answer_exact(small(), "sex = 'X'")
    with pytest.raises(QueryError, match="neither a number"):
        answer_exact(small(), "sex > 'X'")


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2), st.integers(0, 3)), min_size=1, max_size=60),
       st.lists(st.tuples(st.sets(st.integers(0, 4), min_size=1), st.sets(st.integers(0, 2), min_size=1),
                          st.booleans()), min_size=1, max_size=20))
def test_count_index_matches_brute_force(rows, queries):
    a = np.array([r[0] for r in rows]); b = np.array([r[1] for r in rows]); k = np.array([r[2] for r in rows])
    idx = CountIndex({"a": a, "b": b}, {"a": 5, "b": 3}, k, 4)
    masks = []
    for sa, sb, use_b in queries:
        m = {"a": np.isin(np.arange(5), list(sa))}
        if use_b:
            m["b"] = np.isin(np.arange(3), list(sb))
        masks.append(m)
    got = idx.sums(masks)
    for q, m in enumerate(masks):
        sel = m["a"][a] & (m["b"][b] if "b" in m else True)
        assert np.array_equal(got[q], np.bincount(k[sel], minlength=4))


def test_workloads_roundtrip_and_nonzero(tmp_path):
    import ppdp

    t = ppdp.datasets.load("edu", n=20_000, seed=1)
    wl = anatomy_workload(t, 300, 0.01, seed=2)
    assert len(wl) == 300 and (answer_exact(t, wl) > 0).all()
    wl.save(tmp_path / "w.jsonl")
    back = Workload.load(tmp_path / "w.jsonl")
    assert back.meta["generator"] == "anatomy" and [str(q) for q in back] == [str(q) for q in wl]
    pw = point_workload(t, 170, seed=1)
    assert len(pw) == 170 and all(q.predicates[-1].column == "education" for q in pw)
    rw = range_workload(t.domains, ["age", "major_occupation"], 50, seed=1)
    assert len(rw) == 50
    # a workload is deterministic given its seed
    assert [str(q) for q in anatomy_workload(t, 50, 0.01, seed=2)] == [str(q) for q in anatomy_workload(t, 50, 0.01, seed=2)]
