"""The empirical-Bayes fit on each row's domain entries gives the numbers of the straightforward
whole-row formulas (up to the order of floating-point sums), and the packed Norm-Sub those of
Norm-Sub over whole rows exactly, on SDR (sub-tables: a small part of the domain each), uniform
perturbation and global randomization releases, and on random rows."""

import numpy as np
import pytest

import ppdp
from ppdp.estimators import channel, eb_rows, empirical_bayes
from ppdp.estimators import randomized as rz
from ppdp.queries.workloads import anatomy_workload, point_workload


def test_norm_sub_packed_equals_full():
    rng = np.random.default_rng(0)
    for _ in range(200):
        R, m, J = int(rng.integers(1, 300)), int(rng.integers(2, 50)), int(rng.integers(1, 10))
        member = (rng.random((J, m)) < rng.random())[rng.integers(0, J, R)]
        X = rng.normal(0, 5, (R, m)) * (rng.random((R, m)) < 0.9)
        X[rng.random((R, m)) < 0.1] = 3.0  # ties
        total = rng.normal(10, 20, R)
        np.testing.assert_array_equal(rz.norm_sub(X, member, total), rz.norm_sub_full(X, member, total))


def _whole_rows(Y, p, q, member, prior):
    """The diagonal model's terms over whole rows, masked (0 off each row's domain): the
    straightforward form of the formulas, the reference of the entries' layout."""
    n = (Y * member).sum(axis=1)
    P0 = prior * member
    a, b = (p + q)[:, None], q[:, None]
    mu = n[:, None] * P0
    d = np.where(member, (Y - (n * q)[:, None]) / p[:, None] - mu, 0.0)
    sig2 = np.where(member, n[:, None] * (P0 * a * (1 - a) + (1 - P0) * b * (1 - b)) / p[:, None] ** 2, 0.0)
    t = mu * (1 - P0)

    def loglik(rho):
        V = sig2 + t * rho[:, None]
        live = member & (V > 0)
        Vs = np.where(live, V, 1.0)
        return -0.5 * np.where(live, np.log(Vs) + d**2 / Vs, 0.0).sum(axis=1)

    def predict(rho):
        tau2 = t * rho[:, None]
        V = tau2 + sig2
        w = np.divide(tau2, V, out=np.zeros_like(tau2), where=V > 0)
        return rz.norm_sub_full(mu + w * d, member, n)

    het = n * (1 - (P0**2).sum(axis=1))
    mom = np.divide((d**2).sum(axis=1) - sig2.sum(axis=1), het, out=np.ones_like(n), where=het > 1e-12)
    mom = np.clip(mom, 1.0, np.maximum(n, 1.0))

    def lik(adjusted):
        return eb_rows.grid_rho(n, lambda rhos: np.stack([loglik(r) for r in rhos]), adjusted)

    return mom, lik, loglik, predict


def test_entries_equal_rows():
    """The domain-entries layout (diagonal covariance) against the straightforward whole-row
    form: the strength by moments and by the (adjusted) likelihood, the likelihood and the
    prediction — rows without records, sub-tables of every size and degenerate priors included."""
    rng = np.random.default_rng(1)
    for _ in range(100):
        J, m = int(rng.integers(1, 30)), int(rng.integers(3, 50))
        dom = rng.random((J, m)) < rng.uniform(0.05, 0.45)
        dom[:, 0] |= ~dom.any(axis=1)
        R = int(rng.integers(1, 400))
        member = dom[rng.integers(0, J, R)]
        Y = rng.poisson(rng.uniform(0, 30), (R, m)).astype(float) * member
        Y[rng.random(R) < 0.1] = 0.0
        p = rng.uniform(0.05, 0.9, R)
        q = (1 - p) / member.sum(axis=1)
        prior = rng.dirichlet(np.ones(m), R) * member
        prior[:3] = member[:3] * (np.arange(m) == np.argmax(member[:3], axis=1)[:, None])
        mom, lik, loglik, predict = _whole_rows(Y, p, q, member, prior)
        ent = rz.EBEntries(rz.EBCounts(Y, p, q, member), prior)
        for rho_ref, rho in [(mom, ent.moments_rho()), (lik(False), ent.likelihood_rho()),
                             (lik(True), ent.likelihood_rho(adjusted=True))]:
            np.testing.assert_allclose(rho, rho_ref, rtol=1e-8)  # the parabola through the grid amplifies rounding
            np.testing.assert_allclose(ent.loglik(rho_ref), loglik(rho_ref), rtol=1e-12, atol=1e-9)
            np.testing.assert_allclose(ent.predict(rho_ref), predict(rho_ref), rtol=1e-10, atol=1e-9)
            assert (ent.predict(rho_ref)[~member] == 0).all()
        # a subset of the rows, gathered from the entries, is those rows' own computation
        r = np.flatnonzero(rng.random(R) < 0.5)
        sub = rz.EBEntries(rz.EBCounts(Y, p, q, member).subset(r), prior[r])
        own = rz.EBEntries(rz.EBCounts(Y[r], p[r], q[r], member[r]), prior[r])
        for a in ("n", "P0", "d", "sig2", "t"):
            np.testing.assert_array_equal(getattr(sub, a), getattr(own, a))
        for (_, _, bs), (_, _, bo) in zip(sub._blocks(), own._blocks()):
            for x, y in zip(bs.grid_terms(), bo.grid_terms()):
                np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(sub.predict(sub.rho("adjusted")), own.predict(own.rho("adjusted")))


@pytest.mark.parametrize("mech", [ppdp.SDR(0.1, 0.3), ppdp.UniformPerturbation(0.1, 0.3), ppdp.GlobalRandomization(4)],
                         ids=["sdr", "uniform", "global"])
def test_estimates_equal_whole_rows(mech, monkeypatch):
    t = ppdp.datasets.load("occ", n=6000, seed=4)
    rel = ppdp.publish(t, mech, seed=1)
    wl = list(anatomy_workload(t, 200, 0.05, seed=2)) + list(point_workload(t, 60, seed=3))
    fast = rel.estimate(wl)
    monkeypatch.setattr(channel, "PACKED_EB", False)
    ref = rel.estimate(wl)
    for a, b in [(fast.estimate, ref.estimate), (fast.se, ref.se), (fast.lower, ref.lower), (fast.upper, ref.upper)]:
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-8)  # the order of floating-point sums only


@pytest.mark.parametrize("strength", [pytest.param("adjusted", marks=pytest.mark.slow),
                                      pytest.param("likelihood", marks=pytest.mark.slow), "moments"])
def test_blocks_do_not_change_the_numbers(strength, monkeypatch):
    """The empirical-Bayes fit a block of entries (and of rows) at a time gives exactly the
    numbers of one block: each row's sums are its own, whatever the blocks."""
    t = ppdp.datasets.load("occ", n=6000, seed=4)
    rel = ppdp.publish(t, ppdp.SDR(0.1, 0.3), seed=1)
    wl = list(anatomy_workload(t, 60, 0.05, seed=2)) + list(point_workload(t, 30, seed=3))  # blocks, not size, matter
    est = ppdp.estimators.randomized.EmpiricalBayes(strength=strength)
    monkeypatch.setattr(eb_rows, "EB_BLOCK_ENTRIES", 1 << 30)
    monkeypatch.setattr(empirical_bayes, "EB_SHRINK_ROWS", 1 << 30)
    whole = rel.estimate(wl, estimator=est)
    for entries, rows in [(7, 5), (64, 1), (1, 1 << 30)]:
        monkeypatch.setattr(eb_rows, "EB_BLOCK_ENTRIES", entries)
        monkeypatch.setattr(empirical_bayes, "EB_SHRINK_ROWS", rows)
        again = ppdp.publish(t, ppdp.SDR(0.1, 0.3), seed=1)  # a fresh release: no cached fit
        blocks = again.estimate(wl, estimator=est)
        for a, b in [(blocks.estimate, whole.estimate), (blocks.se, whole.se), (blocks.lower, whole.lower)]:
            np.testing.assert_array_equal(a, b)
