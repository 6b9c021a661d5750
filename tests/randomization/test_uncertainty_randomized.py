"""Standard errors and intervals of the randomized family's estimators (``release.estimate``).

- closed forms against Monte Carlo: the inversion's exact variance given the table and the
  exact MLE against EM run to convergence;
- coverage, tested statistically: each mechanism's default estimator over R seeded releases
  of a fixed EDU sample and a fixed point-query set. The queries of one release share its
  randomness, so the releases are the independent units: c_r = coverage within release r,
  c̄ = mean over releases, SE(c̄) = sd(c_r)/√R. The acceptance band [0.92, 0.98] is ±0.03
  around 0.95. The between-release sd measured in the full run
  (benchmarks/bench_coverage_randomized.py, 200 queries) is 0.017–0.027 for the defaults;
  allowing sd(c_r) ≤ 0.06 for the 100 queries here, SE(c̄) ≤ 0.06/√R = 0.0077 for R = 60, so
  an interval whose true coverage is exactly 0.95 falls outside the band with probability
  ≤ 2Φ(−0.03/0.0077) ≈ 1e-4 (normal approximation of a mean of 60 independent terms). The
  test's band is wider than the must-show band [0.93, 0.97] of the full run: with 60
  releases that one would be a ±2.6 SE band (false-alarm rate ≈ 1 %).
"""

from __future__ import annotations

import numpy as np
import pytest

import ppdp
from ppdp.errors import ParameterError
from ppdp.estimators import Estimates
from ppdp.estimators.randomized import EM, MLE, EmpiricalBayes, NormSub, uniform_em, uniform_mle
from ppdp.queries.workloads import point_workload

R = 60
BAND = (0.92, 0.98)


@pytest.fixture(scope="module")
def small():
    t = ppdp.datasets.load("edu", n=5000, seed=0)
    wl = point_workload(t, 100, seed=0)
    return t, wl, ppdp.queries.answer_exact(t, wl)


def test_mle_is_the_limit_of_em():
    rng = np.random.default_rng(0)
    m = 6
    member = np.ones((12, m), dtype=bool)
    member[:4, 4:] = False  # smaller domains for some rows
    Y = np.where(member, rng.integers(0, 40, size=(12, m)), 0).astype(float)
    gamma = 3.0
    mr = member.sum(axis=1)
    p, q = (gamma - 1) / (mr - 1 + gamma), 1 / (mr - 1 + gamma)
    x_em, _ = uniform_em(Y, p, q, member, tol=1e-9, max_iter=100_000)
    x_mle = uniform_mle(Y, p, q, member)
    assert np.allclose(x_mle.sum(axis=1), Y.sum(axis=1)) and (x_mle >= 0).all()
    assert np.abs(x_em - x_mle).max() < 0.05  # EM creeps towards 0 sublinearly at the boundary


def test_closed_form_se_matches_the_spread(small):
    """Over 80 releases, the inversion's reported se (median over releases) matches the
    empirical sd of its estimates within 25 % for the median query (sampling error of an sd
    from 80 draws ≈ 8 %)."""
    t, wl, true = small
    E, S = [], []
    for s in range(80):
        rel = ppdp.publish(t, ppdp.UniformPerturbation(0.1, 0.3), seed=s)
        e = rel.estimate(wl, estimator="inversion")
        E.append(e.estimate)
        S.append(e.se)
    ratio = np.median(np.array(S), axis=0) / np.array(E).std(axis=0, ddof=1)
    assert 0.75 < np.median(ratio) < 1.25


# SDR and A in the slow set: the coverage contract against a real table's true counts
# (tests/contract/test_coverage_randomized.py, slow too) holds every default to the same band
@pytest.mark.parametrize("mech", [ppdp.UniformPerturbation(0.1, 0.3), pytest.param(ppdp.SDR(0.1, 0.3), marks=pytest.mark.slow),
                                  pytest.param(ppdp.GlobalRandomization(4), marks=pytest.mark.slow),
                                  pytest.param(ppdp.Diverted(4), marks=pytest.mark.slow)], ids=lambda m: m.name)
def test_default_interval_coverage(small, mech):
    t, wl, true = small
    cov = []
    for s in range(R):
        E = ppdp.publish(t, mech, seed=1000 + s).estimate(wl)
        assert isinstance(E, Estimates) and E.level == 0.95 and np.isfinite(E.se).all()
        assert (E.lower <= E.estimate + 1e-9).all() and (E.estimate <= E.upper + 1e-9).all()
        cov.append(np.mean((E.lower <= true) & (true <= E.upper)))
    c = float(np.mean(cov))
    if mech.name == "diverted":
        # A''s default interval (variance="rebuilt") measures 0.971 here (sd(c_r) 0.042: SE 0.0054,
        # too close to the upper edge for a sound two-sided test on this small table; 0.989 with
        # the former fixed-T̂ variance); asserted: not below the band. The two-sided test is in
        # test_diverted_coverage.py (ADULT, 80 releases)
        assert c >= BAND[0], (mech.name, c)
        return
    assert BAND[0] <= c <= BAND[1], (mech.name, c, np.std(cov, ddof=1))


def test_estimators_and_options(small):
    t, wl, _ = small
    rel = ppdp.publish(t, ppdp.SDR(0.1, 0.3), seed=3)
    ns = rel.estimate(wl, estimator="norm-sub")
    assert "closed form" in ns.method and np.array_equal(ns.estimate, rel.answer(wl, estimator="norm-sub"))
    eb = rel.estimate(wl)  # the default
    assert "closed form" in eb.method and np.array_equal(eb.estimate, rel.answer(wl, estimator="eb"))
    ebb = rel.estimate(wl, estimator=EmpiricalBayes(replicates=20, seed=1))
    assert "bootstrap" in ebb.method and np.array_equal(ebb.estimate, eb.estimate) and np.isfinite(ebb.se).all()
    boot = rel.estimate(wl, estimator=NormSub(replicates=20, seed=1))
    again = rel.estimate(wl, estimator=NormSub(replicates=20, seed=1))
    assert "bootstrap" in boot.method and np.array_equal(boot.se, again.se)  # seeded, reproducible
    assert np.array_equal(boot.estimate, ns.estimate)
    em = rel.estimate(wl, estimator=EM(replicates=10))
    assert (em.estimate >= 0).all() and np.isfinite(em.se).all()
    mle = rel.estimate(wl, estimator=MLE(), level=0.5)
    assert mle.level == 0.5 and ((mle.upper - mle.lower) <= (rel.estimate(wl, estimator=MLE()).upper
                                                           - rel.estimate(wl, estimator=MLE()).lower) + 1e-9).all()
    with pytest.raises(ParameterError):
        NormSub(replicates=0, interval="basic").estimate(rel, wl)
    a = ppdp.publish(t, ppdp.Diverted(4), seed=0)
    for name in ("full-iterative", "full-closed", "iterative", "closed"):
        e = a.estimate(wl, estimator=name)
        assert np.isfinite(e.se).all() and (e.lower >= np.minimum(e.estimate, 0)).all(), name
    # queries without an SA condition are exact on A' (NSA columns published unchanged)
    e = a.estimate(["sex = 'Female'"])
    assert e.se[0] == 0 and e.lower[0] == e.upper[0] == e.estimate[0]


def test_diverted_simulated_counts_follow_the_mechanism(small):
    """The A' bootstrap's simulated published counts have the mechanism's law given the table's
    counts: mean f_s and variance f_s(1 − 1/ℓ') (each group publishes ℓ' uniform draws from its
    values). 200 draws: the variance ratio of one value has sd ≈ 0.1, its mean over the values
    is checked to ±0.1 (about 3 sd of the mean: false alarm < 1e-3)."""
    from ppdp.estimators.randomized import TransitionNoise

    t, _, _ = small
    sa = t.sensitive[0]
    f = np.bincount(t.codes(sa), minlength=len(t.domain(sa)))
    tn = TransitionNoise(f, 4)
    F = np.zeros((len(tn.Z), len(f)))
    np.add.at(F, (slice(None), tn.vals.ravel()), tn.Z.reshape(len(tn.Z), -1))
    assert np.allclose(F.sum(axis=1), f.sum())
    live = f > 20
    assert np.abs(F.mean(axis=0) - f)[live].max() < 4 * np.sqrt(f[live]).max() / np.sqrt(len(F))
    ratio = F.var(axis=0, ddof=1)[live] / (f[live] * (1 - 1 / 4))
    assert abs(ratio.mean() - 1) < 0.1
    # the receiver's matrices rebuilt from the draws are stochastic matrices
    assert np.allclose(tn.T.sum(axis=2), 1)


def test_diverted_bootstrap_option(small):
    """FullIterative(variance='bootstrap'): the estimator re-run on simulated releases with the
    receiver's transition rebuilt from each; seeded from the counts (reproducible), interval
    centred on the estimate and holding it."""
    from ppdp.estimators.randomized import FullIterative

    t, wl, _ = small
    a = ppdp.publish(t, ppdp.Diverted(4), seed=0)
    e = a.estimate(wl[:40], estimator=FullIterative(variance="bootstrap"))
    again = a.estimate(wl[:40], estimator=FullIterative(variance="bootstrap"))
    fixed = a.estimate(wl[:40], estimator="full-iterative")
    assert np.array_equal(e.se, again.se) and np.array_equal(e.estimate, fixed.estimate)
    assert np.isfinite(e.se).all() and (e.se > 0).any() and "bootstrap" in e.method
    assert (e.lower <= e.estimate).all() and (e.estimate <= e.upper).all()
    with pytest.raises(ParameterError):
        FullIterative(variance="delta")
