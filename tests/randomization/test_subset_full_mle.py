"""The full-report maximum-likelihood estimator of the ldp family (``full-mle``): on a tiny table
it equals a direct numerical maximisation of the full-report likelihood; its interval holds the
estimate within [0, n_P]; it answers through the public verbs; the default's choice against it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

import ppdp
from ppdp.estimators.subset import FullReports, SubsetSetup, full_report_fit
from ppdp.table import Table

DOMAIN = [f"v{i}" for i in range(6)]


@pytest.fixture(scope="module")
def tiny():
    rng = np.random.default_rng(3)
    g = rng.choice(["a", "b", "c"], size=90, p=[0.5, 0.3, 0.2])
    s = np.where(g == "a", rng.choice(DOMAIN, size=90, p=[0.55, 0.25, 0.1, 0.1, 0.0, 0.0]), rng.choice(DOMAIN, size=90))
    t = Table.from_pandas(pd.DataFrame({"g": g, "s": s}), quasi=["g"], sensitive=["s"],
                          domains={"g": ["a", "b", "c"], "s": DOMAIN})
    return t, ppdp.publish(t, ppdp.SubsetSelection(epsilon=1.0, k=2), seed=7)


def _direct_mle(Y: np.ndarray, m: int, eps: float) -> tuple[np.ndarray, float]:
    """argmax over the simplex of Σ_r log(1 + (e^ε − 1)·π(Y_r)), by SLSQP."""
    a = math.expm1(eps)
    D = np.zeros((len(Y), m))
    np.put_along_axis(D, Y, 1.0, axis=1)

    def nll(p):
        return -np.log1p(a * (D @ p)).sum()

    def grad(p):
        return -(D * (a / (1 + a * (D @ p)))[:, None]).sum(axis=0)

    res = optimize.minimize(nll, np.full(m, 1.0 / m), jac=grad, method="SLSQP", bounds=[(0, 1)] * m,
                            constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1, "jac": lambda p: np.ones(m)}],
                            options={"ftol": 1e-14, "maxiter": 1000})
    assert res.success
    return res.x, -res.fun


def test_equals_direct_maximisation_of_the_full_report_likelihood(tiny):
    t, rel = tiny
    k, m, eps = rel.k, len(DOMAIN), rel.claim.epsilon
    wl = [f"g = '{g}' AND s = '{v}'" for g in ("a", "b", "c") for v in DOMAIN] + [f"s = '{v}'" for v in DOMAIN]
    S = SubsetSetup(rel, wl)
    F = FullReports(S)
    P0 = np.full((len(S.reps), m), 1.0 / m)
    P = F.fit(P0, tol=1e-9, max_cycles=20_000)
    est = rel.estimate(wl, estimator="full-mle")
    Y = rel.reports()
    g = np.asarray(rel.column_codes("g")[::k])
    for gi, lab in enumerate(["a", "b", "c", None]):
        rows = Y if lab is None else Y[g == gi]
        p_direct, ll_direct = _direct_mle(rows, m, eps)
        u = S.inv[gi * m]
        ll_em = np.log1p(math.expm1(eps) * P[u][rows].sum(axis=1)).sum()
        assert ll_em >= ll_direct - 1e-6, (lab, ll_em, ll_direct)
        np.testing.assert_allclose(P[u], p_direct, atol=2e-3)
        # the estimator's own fit (its default stopping rule): a likelihood within 0.05 of the maximum and
        # counts within a fifth of the noise scale √n_P of the optimum's
        x = est.estimate[gi * m:(gi + 1) * m]
        assert np.log1p(math.expm1(eps) * (x / len(rows))[rows].sum(axis=1)).sum() >= ll_direct - 0.05
        np.testing.assert_allclose(x, len(rows) * p_direct, atol=0.2 * math.sqrt(len(rows)))
    assert np.all(est.lower <= est.estimate) and np.all(est.estimate <= est.upper)
    n_p = np.repeat([(g == i).sum() for i in range(3)] + [len(g)], m)
    assert np.all(est.lower >= 0) and np.all(est.upper <= n_p) and np.all(est.se > 0)


def test_fits_are_kept_per_release_and_predicate(tiny):
    _, rel = tiny
    wl = [f"g = 'a' AND s = '{v}'" for v in DOMAIN]
    first = rel.answer(wl, estimator="full-mle")
    X, _ = full_report_fit(SubsetSetup(rel, wl[:2] + [f"g = 'b' AND s = '{v}'" for v in DOMAIN]))
    np.testing.assert_array_equal(rel.answer(wl, estimator="full-mle"), first)
    assert X.shape == (2, len(DOMAIN))


def test_default_takes_the_full_report_mle_on_large_counts():
    occ = ppdp.datasets.load("occ", n=20_000, seed=0)
    rel = ppdp.publish(occ, ppdp.SubsetSelection(rho1=0.1, rho2=0.3), seed=1)
    assert ppdp.SubsetSelection.default_estimator == "eb"
    sa = occ.sa
    wl = [f"{sa} = '{v}'" for v in occ.domain(sa)] + [f"sex = 'Female' AND {sa} = '{v}'" for v in occ.domain(sa)]
    default = rel.answer(wl)
    full = rel.answer(wl, estimator="full-mle")
    plain = rel.answer(wl, estimator="norm-sub")
    big = plain > 1000
    assert big.sum() >= 3 and (~big).sum() >= 10
    np.testing.assert_allclose(default[big], full[big], rtol=1e-9)
    assert not np.allclose(default[~big], full[~big])  # below, the shrinkage
    # through the CLI's estimator names too: every registered ldp estimator answers
    assert {"eb", "full-mle", "norm-sub", "mle", "inversion"} <= set(ppdp.registry.estimators("ldp"))


def test_batches_of_predicates_give_the_same_fit(tiny, monkeypatch):
    import ppdp.estimators.subset as sub

    t, _ = tiny
    wl = [f"g = '{g}' AND s = '{v}'" for g in ("a", "b", "c") for v in DOMAIN] + [f"s = '{v}'" for v in DOMAIN]
    one = ppdp.publish(t, ppdp.SubsetSelection(epsilon=1.0, k=2), seed=11).estimate(wl, estimator="full-mle")
    monkeypatch.setattr(sub, "PAIRS_BLOCK", 40)  # every predicate alone
    apart = ppdp.publish(t, ppdp.SubsetSelection(epsilon=1.0, k=2), seed=11).estimate(wl, estimator="full-mle")
    np.testing.assert_allclose(apart.estimate, one.estimate, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(apart.se, one.se, rtol=1e-6)
