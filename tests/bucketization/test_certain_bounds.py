"""The bucketized family's certain bounds (ppdp.estimators.bucket_bounds), by brute force:
random small tables published through ``ppdp.publish`` (F'-privacy and Anatomy, with and
without fake values), random count queries, and the table's own true counts — every true
count lies in [lower, upper], on every example."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ppdp
from ppdp.errors import InfeasibleError
from ppdp.queries import Predicate, Query
from ppdp.queries.workload import Workload, answer_exact
from ppdp.table import Table


@st.composite
def tables(draw):
    n = draw(st.integers(12, 120))
    m = draw(st.integers(3, 7))
    qi_sizes = draw(st.lists(st.integers(2, 4), min_size=1, max_size=3))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    cols = {f"q{k}": rng.integers(0, s, n) for k, s in enumerate(qi_sizes)}
    # SA values associated with the first QI column (the case the old interval got wrong)
    skew = draw(st.floats(0.0, 1.0))
    sa = np.where(rng.random(n) < skew, cols["q0"] % m, rng.integers(0, m, n))
    sa[:3] = [0, 1, 2]
    cols["s"] = sa
    doms = {f"q{k}": [f"a{k}_{v}" for v in range(s)] for k, s in enumerate(qi_sizes)}
    doms["s"] = [f"x{v}" for v in range(m)]
    return Table(cols, doms, quasi=list(doms)[:-1], sensitive=["s"]), seed


mechanisms = st.one_of(
    st.builds(lambda th, f: ppdp.FPrivacy(theta=th, fake_values=f), st.sampled_from([1.5, 2.0, 4.0, 8.0]),
              st.integers(0, 2)),
    st.builds(lambda ell, f: ppdp.Anatomy(l=ell, fake_values=f), st.integers(2, 3), st.integers(0, 2)),
)


def random_workload(table: Table, rng: np.random.Generator, n: int = 40) -> Workload:
    queries = []
    for i in range(n):
        preds = []
        for c in [*table.quasi, "s"]:
            dom = table.domain(c)
            if rng.random() < 0.5 or (i < 5 and c == "s"):
                continue  # unconstrained (the first queries: every SA value)
            k = int(rng.integers(1, len(dom) + 1))
            preds.append(Predicate(c, "in", tuple(dom[int(j)] for j in np.sort(rng.choice(len(dom), k, replace=False)))))
        queries.append(Query(tuple(preds)))
    return Workload(queries)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), mechanisms, st.integers(0, 1000))
def test_true_counts_lie_in_the_certain_bounds(drawn, mech, seed):
    table, tseed = drawn
    try:
        rel = ppdp.publish(table, mech, seed=seed)
    except InfeasibleError:
        assume(False)
    wl = random_workload(table, np.random.default_rng(tseed))
    e = rel.estimate(wl)
    truth = answer_exact(table, wl)
    assert e.kind == "certain"
    assert np.all(e.lower <= truth) and np.all(truth <= e.upper), (mech, truth, e.lower, e.upper)
    assert np.all(e.lower <= e.estimate) and np.all(e.estimate <= e.upper)
    # tightness: with every SA value allowed the release fixes the count exactly (the first
    # queries leave the SA unconstrained), fakes or not
    free = np.array(["s" not in q.columns for q in wl])
    np.testing.assert_array_equal(e.lower[free], truth[free])
    np.testing.assert_array_equal(e.upper[free], truth[free])


def test_bounds_attain_the_true_counts_when_buckets_are_pure():
    """A control with power: a table whose every bucket holds one SA value (θ allows it)
    pins every count exactly, and a skewed table attains the bounds' ends — so bounds that
    were too wide or shifted would fail here."""
    rng = np.random.default_rng(5)
    n = 400
    q0 = rng.integers(0, 4, n)
    table = Table({"q0": q0, "s": q0.copy()}, {"q0": [f"a{v}" for v in range(4)], "s": [f"x{v}" for v in range(4)]},
                  quasi=["q0"], sensitive=["s"])
    rel = ppdp.publish(table, ppdp.Anatomy(l=2), seed=0)
    wl = Workload([Query((Predicate("q0", "in", ("a0", "a1")), Predicate("s", "in", ("x0",)))),
                   Query((Predicate("q0", "in", ("a2",)), Predicate("s", "in", ("x2", "x3"))))])
    e = rel.estimate(wl)
    truth = answer_exact(table, wl)
    assert np.all(e.lower <= truth) and np.all(truth <= e.upper)
    # q0 determines s: inside each 2-diverse bucket the bounds still bracket, and some end is met
    assert np.any((e.lower == truth) | (e.upper == truth))
