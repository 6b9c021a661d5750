"""The empirical-Bayes estimator's packed path (each row's domain entries only, each candidate
parent's likelihood on the rows it applies to) and the packed Norm-Sub give exactly the numbers
of the whole-row computation, on SDR (sub-tables: a small part of the domain each), uniform
perturbation and global randomization releases, and on random rows."""

import numpy as np
import pytest

import ppdp
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


def test_moments_diagonal_equals_rows():
    rng = np.random.default_rng(1)
    for _ in range(100):
        J, m = int(rng.integers(1, 30)), int(rng.integers(3, 50))
        dom = rng.random((J, m)) < rng.uniform(0.05, 0.45)
        dom[:, 0] |= ~dom.any(axis=1)
        R = int(rng.integers(1, 400))
        member = dom[rng.integers(0, J, R)]
        Y = rng.poisson(rng.uniform(0, 30), (R, m)).astype(float) * member
        p = rng.uniform(0.05, 0.9, R)
        q = (1 - p) / member.sum(axis=1)
        prior = rng.dirichlet(np.ones(m), R) * member
        ref = rz._EBRows(Y, p, q, member, prior, "diagonal")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(rz, "_PACKED_EB", False)
            want = ref.predict(ref.moments_rho())
        np.testing.assert_array_equal(rz._eb_moments_diagonal(Y, p, q, member, prior), want)


@pytest.mark.parametrize("mech", [ppdp.SDR(0.1, 0.3), ppdp.UniformPerturbation(0.1, 0.3), ppdp.GlobalRandomization(4)],
                         ids=["sdr", "uniform", "global"])
def test_estimates_equal_whole_rows(mech, monkeypatch):
    t = ppdp.datasets.load("occ", n=6000, seed=4)
    rel = ppdp.publish(t, mech, seed=1)
    wl = list(anatomy_workload(t, 200, 0.05, seed=2)) + list(point_workload(t, 60, seed=3))
    fast = rel.estimate(wl)
    monkeypatch.setattr(rz, "_PACKED_EB", False)
    ref = rel.estimate(wl)
    np.testing.assert_array_equal(fast.estimate, ref.estimate)
    np.testing.assert_array_equal(fast.se, ref.se)
    np.testing.assert_array_equal(fast.lower, ref.lower)
    np.testing.assert_array_equal(fast.upper, ref.upper)
