"""The profile-likelihood interval of uniform-channel randomized releases
(``ppdp.estimators.randomized_profile``) against exact computations on small tables."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import ppdp
from ppdp.estimators.randomized import EmpiricalBayes
from ppdp.estimators.randomized_profile import profile_interval
from ppdp.queries.workloads import point_workload

CRIT = float(stats.chi2.ppf(0.95, 1))


def _loglik(y, n, pi):
    pi = np.clip(pi, 1e-300, 1 - 1e-16)
    return np.where(y > 0, y * np.log(pi), 0.0) + np.where(n - y > 0, (n - y) * np.log1p(-pi), 0.0)


def _brute(y, n, a, b, grid=801):
    """Profile deviance over a grid of X by brute force (two sub-tables: x_1 on a fine grid,
    x_2 = X − x_1), and the grid's interval {X : deviance ≤ χ²₁(0.95)}."""
    p = a - b
    x1 = np.linspace(0, n[0], grid)[:, None]
    x2 = np.linspace(0, n[1], grid)[None, :]
    ll = _loglik(y[0], n[0], b[0] + p[0] * x1 / n[0]) + _loglik(y[1], n[1], b[1] + p[1] * x2 / n[1])
    X = (x1 + x2).ravel()
    bins = np.round(X / (n.sum() / 400)).astype(int)  # profile: the best split for each X (binned)
    best = np.full(bins.max() + 1, -np.inf)
    np.maximum.at(best, bins, ll.ravel())
    Xb = np.arange(len(best)) * (n.sum() / 400)
    dev = 2 * (ll.max() - best)
    inside = Xb[np.isfinite(dev) & (dev <= CRIT)]
    return inside.min(), inside.max(), n.sum() / 400 + n.sum() / (grid - 1)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(1, 60), st.integers(1, 60), st.floats(0.05, 0.6), st.floats(0.005, 0.1),
       st.floats(0.05, 0.6), st.floats(0.005, 0.1), st.data())
def test_matches_brute_force_profile(n1, n2, p1, b1, p2, b2, data):
    n = np.array([n1, n2], dtype=float)
    b = np.array([b1, b2])
    a = b + np.array([p1, p2])
    y = np.array([data.draw(st.integers(0, n1)), data.draw(st.integers(0, n2))], dtype=float)
    _, lo, hi = profile_interval(y[None], n[None], a[None], b[None])
    blo, bhi, tol = _brute(y, n, a, b)
    assert lo[0] == pytest.approx(blo, abs=2 * tol)
    assert hi[0] == pytest.approx(bhi, abs=2 * tol)


@pytest.mark.parametrize("n,a,b", [(20, 0.30, 0.07), (50, 0.078, 0.02), (100, 0.30, 0.07), (8, 0.5, 0.1),
                                   (200, 0.078, 0.02)])
def test_exact_coverage_under_the_channel(n, a, b):
    """Exact coverage, for every true count x of one sub-table, under the exact law of the published
    count (Bin(x, a) + Bin(n − x, b), not the binomial the likelihood uses): a likelihood-ratio
    interval of a discrete law oscillates around its level, so the check is the mean over x ≥ 0.95
    and every x ≥ 0.9."""
    ys = np.arange(n + 1, dtype=float)
    _, lo, hi = profile_interval(ys[:, None], np.full((n + 1, 1), float(n)), a, b)
    cov = []
    for x in range(n + 1):
        pmf = np.convolve(stats.binom.pmf(np.arange(x + 1), x, a), stats.binom.pmf(np.arange(n - x + 1), n - x, b))
        cov.append(pmf[(lo <= x) & (x <= hi)].sum())
    cov = np.array(cov)
    assert cov.mean() >= 0.95 and cov.min() >= 0.9, (cov.mean(), cov.min())


def test_empty_and_degenerate_sub_tables():
    # sub-table 2 has no predicate rows, sub-table 3 no selected value in its domain: both carry no parameter
    y = np.array([[3.0, 0.0, 5.0]])
    n = np.array([[40.0, 0.0, 30.0]])
    a = np.array([[0.3, 0.3, 0.07]])
    b = np.array([[0.07, 0.07, 0.07]])
    x, lo, hi = profile_interval(y, n, a, b)
    assert 0 <= lo[0] <= x[0] <= hi[0] <= 40
    x0, lo0, hi0 = profile_interval(y[:, :1], n[:, :1], a[:, :1], b[:, :1])
    assert (x[0], lo[0], hi[0]) == pytest.approx((x0[0], lo0[0], hi0[0]))


def test_release_option_states_its_method():
    table = ppdp.datasets.load("occ", n=5000, seed=0)
    wl = point_workload(table, 40, seed=0)
    rel = ppdp.publish(table, ppdp.registry.mechanism("sdr")(rho1=0.1, rho2=0.3), seed=0)
    E = rel.estimate(wl, estimator=EmpiricalBayes(interval="profile"))
    assert E.kind == "confidence" and "profile likelihood" in E.method
    assert np.all(E.lower <= E.estimate) and np.all(E.estimate <= E.upper) and np.all(E.lower >= 0)


def test_auto_takes_profile_only_for_small_samples():
    """interval="auto" (the default of eb): the profile interval where some sub-table holding the
    count has n_j·b_j < AUTO_BELOW, the inversion's cut Wald interval elsewhere."""
    from ppdp.estimators.randomized import UniformSetup
    from ppdp.estimators.randomized_profile import AUTO_BELOW, setup_interval

    table = ppdp.datasets.load("occ", n=5000, seed=0)
    wl = point_workload(table, 400, max_dims=5, seed=1)
    rel = ppdp.publish(table, ppdp.registry.mechanism("uniform")(rho1=0.1, rho2=0.3), seed=0)
    auto, prof = rel.estimate(wl), rel.estimate(wl, estimator=EmpiricalBayes(interval="profile"))
    lin = rel.estimate(wl, estimator=EmpiricalBayes(interval="linear"))
    _, masks = rel.resolve(wl)
    S = UniformSetup(rel, masks, rel.transition_models()[0])
    small = setup_interval(S)[3]
    assert 0 < small.sum() < len(small)  # both regimes occur on this workload
    assert (S.n_per_query().max(axis=1)[small] * S.q.max() < AUTO_BELOW).all()
    np.testing.assert_allclose(auto.lower[small], prof.lower[small])
    np.testing.assert_allclose(auto.upper[~small], lin.upper[~small])
    assert auto.kind == "confidence" and "n_j·b_j" in auto.method
