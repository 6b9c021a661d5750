"""Coverage of the nominal 95% intervals: Anatomy's estimator (bucketized) and the Laplace
answers (lookup).

What randomness the bucketized interval covers. F'-privacy's buckets are a deterministic
function of the table; only the fakes are random. The interval is for the true count under
Anatomy's model: given the published buckets, the records of a bucket hold its real values
in a uniformly random order (and, in a bucket where every eligible value was used as a fake,
which count-1 values are real is exchangeable). So coverage is tested over tables drawn from
that model (:func:`~ppdp.estimators.bucketized.draw_assignment`), each of which the release
is a valid output for — and, with fakes, also over seeded releases (the writer's fake draw).
It is not a claim about a table whose QI and SA are associated inside buckets (the
estimator's bias is not in its se).

False alarms. Per table the coverage of the fixed query set is one number c_i (queries within
a table are correlated); the tables are independent, so the mean over R tables has standard
deviation sd(c)/√R, measured here (≈ 0.012–0.03 per table → ≤ 0.003 for R = 200): a true
coverage of 0.95 leaves the band [0.93, 0.97] with probability < 1e-9 (normal tail at > 6 sd),
and a test fails only if the true coverage is ≥ 0.01 outside the band. The answers' noise is
independent per query and release: coverage is binomial over R·Q = 200·14 = 2,800 draws (sd 0.0041);
P(outside the band | true coverage = the exact 0.95x) < 1e-5.
"""

import numpy as np
import pytest

import ppdp
from safe_declarations import protected
from ppdp.estimators.answers import laplace_halfwidth
from ppdp.estimators.bucketized import AnatomyEstimator, draw_assignment, query_row_masks
from ppdp.queries.workloads import anatomy_workload

BAND = (0.93, 0.97)


def _coverage(rel, wl, rng, n_tables):
    # the uniform-assignment model's interval, checked under its own model (tables drawn from
    # it); on real tables it does not hold (tests/contract/test_coverage_bucketized.py)
    e = AnatomyEstimator().uniform_assignment_estimate(rel, wl)
    rows, sel = query_row_masks(rel, wl)
    out = []
    for _ in range(n_tables):
        truth = (rows & sel[:, draw_assignment(rel, rng)]).sum(axis=1)
        out.append(np.mean((truth >= e.lower) & (truth <= e.upper)))
    return np.asarray(out)


def _check(cov):
    mean, sd_mean = cov.mean(), cov.std(ddof=1) / np.sqrt(len(cov))
    assert BAND[0] <= mean <= BAND[1], (mean, sd_mean)
    assert sd_mean < 0.004  # the band is > 5 sd of the mean from 0.95


def test_anatomy_coverage_no_fakes():
    t = ppdp.datasets.load("edu", n=3000, seed=0)
    rel = ppdp.publish(t, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=protected(t))
    wl = anatomy_workload(t, 150, 0.05, seed=3)
    _check(_coverage(rel, wl, np.random.default_rng(7), 200))


def test_anatomy_coverage_with_fakes():
    t = ppdp.datasets.load("edu", n=1500, seed=0)
    wl = anatomy_workload(t, 150, 0.05, seed=3)
    rng = np.random.default_rng(11)
    cov = np.concatenate([_coverage(ppdp.publish(t, ppdp.FPrivacy(theta=8, fake_values=2), seed=s), wl, rng, 20)
                          for s in range(10)])  # 10 seeded releases × 20 tables
    _check(cov)


def test_anatomy_bounds_exact_when_known():
    """Counts the files fix exactly: QI-only predicates, and an SA value over all records."""
    t = ppdp.datasets.load("edu", n=2000, seed=0)
    rel = ppdp.publish(t, ppdp.FPrivacy(theta=8), seed=1, sensitive_values=protected(t))
    res = ppdp.query(rel, f"SELECT {t.sa}, COUNT(*) FROM t GROUP BY {t.sa}", source=t)
    assert np.allclose(res["estimate"], res["exact"])
    assert np.array_equal(res["lower"], res["exact"]) and np.array_equal(res["upper"], res["exact"])
    res = ppdp.query(rel, "SELECT sex, race, COUNT(*) FROM t WHERE age > 40 GROUP BY sex, race", source=t)
    assert np.allclose(res["estimate"], res["exact"])
    assert np.array_equal(res["lower"], res["exact"]) and np.array_equal(res["upper"], res["exact"])


@pytest.mark.slow
def test_laplace_answers_coverage():
    t = ppdp.datasets.load("edu", n=2000, seed=0)
    qs = [f"sex = '{s}' AND race = '{r}'" for s in t.domain("sex") for r in t.domain("race")]
    truth = ppdp.query(ppdp.publish(t, ppdp.LaplaceBaseline(epsilon=2.0, queries=qs), seed=0), qs, source=t)["exact"]
    hits = []
    for s in range(200):
        rel = ppdp.publish(t, ppdp.LaplaceBaseline(epsilon=2.0, queries=qs), seed=s)
        e = rel.estimate(qs)
        hits.append((truth.to_numpy() >= e.lower) & (truth.to_numpy() <= e.upper))
    cov = np.mean(hits)
    alpha = np.exp(-2.0 / len(qs))
    k = laplace_halfwidth(alpha, 0.95)
    exact = 1 - 2 * alpha ** (k + 1) / (1 + alpha)
    assert 0.95 <= exact < 0.96
    assert BAND[0] <= cov <= BAND[1] and abs(cov - exact) < 5 * np.sqrt(exact * (1 - exact) / np.size(hits))
    assert np.allclose(e.se, np.sqrt(2 * alpha) / (1 - alpha))


@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.9, 0.999])
def test_laplace_halfwidth_is_smallest(alpha):
    k = laplace_halfwidth(alpha, 0.95)
    assert 1 - 2 * alpha ** (k + 1) / (1 + alpha) >= 0.95
    assert k == 0 or 1 - 2 * alpha ** k / (1 + alpha) < 0.95
