"""A' empirical-Bayes counts (``full-eb``, the default): the shrinkage against the inversion on
a channel whose truth is known, consistency (non-negative, Σ = n_P, additive over SA values),
a predicate's estimate independent of the rest of the workload, and the error against a real
table's true counts compared with ``full-iterative``."""

from __future__ import annotations

import numpy as np

import ppdp
from ppdp.estimators.diverted_eb import EBTransition, full_eb
from ppdp.queries import Predicate, Query, Workload
from ppdp.queries.workloads import point_workload


def _channel_draws(rng, X, T):
    """Published counts of rows with true counts X (rows, m), each row publishing through T."""
    Y = np.zeros_like(X)
    for v in range(X.shape[1]):
        Y += np.array([rng.multinomial(int(c), T[v]) for c in X[:, v]])
    return Y


def test_shrinkage_beats_the_inversion_on_a_known_channel():
    rng = np.random.default_rng(0)
    m = 6
    T = 0.3 * np.eye(m) + 0.7 / m  # rows sum to 1; a weak channel
    pi = np.array([0.3, 0.25, 0.2, 0.1, 0.1, 0.05])
    n = rng.integers(20, 400, size=300)
    theta = rng.dirichlet(50 * pi, size=len(n))  # predicates vary around π (α = 50)
    X = np.array([rng.multinomial(k, th) for k, th in zip(n, theta)]).astype(float)
    Y = _channel_draws(rng, X, T)
    est, rho = full_eb(Y, T, pi)
    inv = Y @ np.linalg.inv(T)
    assert (est >= 0).all() and np.allclose(est.sum(axis=1), n)
    assert ((rho >= 1) & (rho <= n)).all()
    err_eb, err_inv = np.abs(est - X).mean(), np.abs(inv - X).mean()
    assert err_eb < 0.8 * err_inv, (err_eb, err_inv)


def test_identity_channel_returns_the_counts():
    """A transition that shows every direction exactly (λ = 0): no shrinkage at all."""
    pi = np.array([0.5, 0.3, 0.2])
    Y = np.array([[10.0, 0.0, 5.0], [0.0, 0.0, 7.0], [40.0, 30.0, 30.0]])
    model = EBTransition(np.eye(3), pi)
    assert np.allclose(model.lam, 0.0)
    assert np.allclose(full_eb(Y, np.eye(3), pi, model)[0], Y)


def test_default_on_a_real_table():
    t = ppdp.datasets.load("adult", n=20_000, seed=0)
    rel = ppdp.publish(t, ppdp.Diverted(4), seed=0)
    wl = point_workload(t, 600, seed=0)
    true = ppdp.queries.answer_exact(t, wl)
    eb = rel.answer(wl)  # the default
    fi = rel.answer(wl, estimator="full-iterative")
    assert (eb >= 0).all()
    small, big = true <= 10, true > 100
    assert small.sum() >= 50 and big.sum() >= 50
    # the early-stopped update over-states small counts; the empirical-Bayes counts less so
    assert np.abs(eb - true)[small].mean() < np.abs(fi - true)[small].mean()
    rel_err = np.abs(eb - true)[big] / true[big]
    assert rel_err.mean() < 1.1 * (np.abs(fi - true)[big] / true[big]).mean()
    # a predicate's estimate does not depend on the rest of the workload; value sets add up
    sa = t.sensitive[0]
    vals = t.domain(sa)
    q = next(q for q in wl if any(p.column != sa for p in q.predicates))
    k = list(wl).index(q)
    assert np.isclose(rel.answer(Workload([q]))[0], eb[k])
    nsa = [p for p in q.predicates if p.column != sa]
    two = Query((*nsa, Predicate(sa, "in", (vals[0], vals[1]))))
    ones = [Query((*nsa, Predicate(sa, "eq", (v,)))) for v in vals[:2]]
    e = rel.answer([two, *ones])
    assert np.isclose(e[0], e[1] + e[2])
