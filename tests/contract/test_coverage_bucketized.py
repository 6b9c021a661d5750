"""Coverage contract of the bucketized family, measured against a real table's true counts.

For every bucketized mechanism of the registry × every estimator of the family: ≥ 50 releases
(``ppdp.publish`` with seeds 0 … 49) of a fixed real subset of a bundled table, a fixed query set
(the anatomy workload's random IN predicates, point queries sex × SA value, and age ranges ×
SA value, counts > 100 included), and the share of intervals that hold the subset's own true
counts (never a count drawn from the estimator's model):

- ``kind="certain"``: every interval of every release holds the true count (100%);
- ``kind="confidence"``: the coverage at 0.95, overall and for true counts > 100, is at least
  0.95 minus a binomial tolerance. The releases of a table are not independent draws for every
  mechanism (Anatomy's buckets are a function of the table), so the tolerance takes the
  queries alone as the sample: 3·√(0.95·0.05/Q), Q the number of queries (or of queries with a
  count > 100) — sound whatever the correlation between releases;
- ``kind="none"``: no interval is claimed (NaN bounds, the reason in ``method``).

A control shows the check has power: the uniform-assignment interval
(``AnatomyEstimator.uniform_assignment_estimate``, the family's interval before the certain
bounds) fails it on real data.
"""

from __future__ import annotations

import numpy as np
import pytest

import ppdp
from ppdp.estimators.bucketized import AnatomyEstimator
from ppdp.queries import Predicate, Query
from ppdp.queries.workload import Workload, answer_exact
from ppdp.queries.workloads import anatomy_workload
from ppdp.registry import estimators, mechanisms

LEVEL = 0.95
N_RELEASES = 50
#: the mechanisms' parameters in the contract (a mechanism not listed runs with its defaults):
#: one case with fake values, one without (tests/bucketization/test_certain_bounds.py checks
#: the bounds on every combination, by brute force)
PARAMS = {"fprivacy": [{"theta": 8, "fake_values": 1}], "anatomy": [{"l": 5}]}


def query_set(table) -> Workload:
    """The fixed queries: 40 anatomy-workload queries (selectivity 0.05, seed 3), point
    queries sex × each of the 6 most frequent SA values, and 4 age ranges × those values."""
    sa = table.sa
    codes = table.codes(sa)
    dom = table.domain(sa)
    top = [dom[i] for i in np.argsort(-np.bincount(codes, minlength=len(dom)), kind="stable")[:6]]
    queries = list(anatomy_workload(table, 40, 0.05, seed=3))
    queries += [Query((Predicate("sex", "eq", (s,)), Predicate(sa, "eq", (x,)))) for s in table.domain("sex") for x in top]
    ages = table.domain("age")
    cuts = np.linspace(0, len(ages), 5).astype(int)
    queries += [Query((Predicate("age", "in", tuple(ages[a:b])), Predicate(sa, "eq", (x,))))
                for a, b in zip(cuts[:-1], cuts[1:]) for x in top]
    return Workload(queries)


def coverage(table, mechanism, estimate, wl: Workload, n_releases: int = N_RELEASES) -> dict:
    """Hits of the intervals on the table's true counts over ``n_releases`` seeded releases:
    ``estimate(release, workload)`` → Estimates."""
    truth = answer_exact(table, wl)
    hits, kinds, widths = [], set(), []
    for seed in range(n_releases):
        e = estimate(ppdp.publish(table, mechanism, seed=seed), wl)
        kinds.add(e.kind)
        hits.append((e.lower <= truth) & (truth <= e.upper))
        widths.append((e.upper - e.lower) / np.maximum(truth, 1))
    h = np.asarray(hits)
    big = truth > 100
    return {"truth": truth, "hits": h, "kinds": kinds, "overall": float(h.mean()),
            "big": float(h[:, big].mean()) if big.any() else float("nan"), "n_big": int(big.sum()),
            "median_width": float(np.median(widths))}


def tolerance(n: int) -> float:
    return 3 * np.sqrt(LEVEL * (1 - LEVEL) / max(n, 1))


def check(cov: dict) -> None:
    """The contract, as assertions (message: the case's figures)."""
    assert len(cov["kinds"]) == 1, f"one interval kind per estimator, got {cov['kinds']}"
    kind = next(iter(cov["kinds"]))
    figures = f"kind={kind} overall={cov['overall']:.3f} count>100={cov['big']:.3f} (n_big={cov['n_big']})"
    if kind == "none":
        return
    if kind == "certain":
        assert cov["hits"].all(), f"certain bounds missed the true count: {figures}"
        return
    q = cov["hits"].shape[1]
    assert cov["overall"] >= LEVEL - tolerance(q), f"coverage below {LEVEL}: {figures}"
    assert cov["big"] >= LEVEL - tolerance(cov["n_big"]), f"coverage below {LEVEL} for counts > 100: {figures}"


@pytest.fixture(scope="module")
def occ():
    return ppdp.datasets.load("occ", n=4000, seed=0)


CASES = [pytest.param(mname, params, ename, id=f"{mname}{i}-{ename}")
         for mname, mcls in mechanisms().items() if getattr(mcls, "family", None) == "bucketized"
         for i, params in enumerate(PARAMS.get(mname, [{}]))
         for ename in estimators("bucketized")]


@pytest.mark.slow
@pytest.mark.parametrize("mname, params, ename", CASES)
def test_intervals_cover_the_true_counts(occ, mname, params, ename):
    mech = mechanisms()[mname](**params)
    wl = query_set(occ)
    cov = coverage(occ, mech, lambda rel, w: rel.estimate(w, ename, level=LEVEL), wl)
    assert cov["n_big"] >= 20  # the query set has counts > 100 to check
    est = ppdp.publish(occ, mech, seed=0).estimate(wl, ename, level=LEVEL)
    if est.kind == "none":
        assert np.isnan(est.lower).all() and np.isnan(est.upper).all()
    check(cov)


@pytest.mark.slow
def test_the_contract_fails_the_uniform_assignment_interval(occ):
    """Control (power): the interval of the uniform within-bucket assignment model, which
    ignores the QI–SA association inside buckets, claims 0.95 and covers far less on a real
    table — the contract rejects it, as it would any new estimator that misses its level."""
    wl = query_set(occ)
    cov = coverage(occ, ppdp.FPrivacy(theta=8), lambda rel, w: AnatomyEstimator().uniform_assignment_estimate(rel, w),
                   wl, n_releases=20)
    with pytest.raises(AssertionError, match="coverage below"):
        check(cov)
    assert cov["overall"] < 0.8
