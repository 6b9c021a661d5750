"""The new ε-DP histograms (kron, agrid, marginals, the default dp): privacy accounting through
the public verb, the noise scale (statistical tests with fixed seeds and stated false-alarm
rates), the closed-form standard errors, and the default's rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import ppdp
import ppdp.kernels.noise as noise_mod
from ppdp.claims.dp import budget_plan, dp_choice, expected_error
from ppdp.errors import PpdpError
from ppdp.kernels.strategies import design_dimension
from ppdp.mechanisms.histogram import (AdaptiveGrid, CellHistogram, DefaultHistogram, DPCube, KroneckerLeastSquares,
                                       MarginalsModel)
from ppdp.queries import parse_where
from ppdp.queries.workload import answer_exact
from ppdp.queries.workloads import range_workload

AGE = {"age": [17, 22, 27, 32, 37, 42, 47, 52, 57, 62, 67, 72, 91]}
HOURS = {"hours_per_week": [1, 10, 20, 30, 35, 40, 41, 45, 50, 60, 80, 100]}
DIMS = ["age", "hours_per_week"]


@pytest.fixture(scope="module")
def adult():
    return ppdp.datasets.load("adult", n=4000, seed=1)


def test_design_rule_is_public_and_beats_identity():
    # the per-dimension strategy depends on the size only, and is never worse than the identity
    for n in (2, 16, 74, 99):
        s = design_dimension(n)
        assert s == design_dimension(n)
        ident = float(np.mean([math.sqrt(b - a + 1) for a in range(n) for b in range(a, n)]))
        assert s.score <= ident + 1e-9
    assert design_dimension(74).block > 1  # a coarse level pays off on a long dimension


def _draws(monkeypatch):
    seen: list[tuple[float, int]] = []
    real = noise_mod.discrete_laplace

    def spy(rng, eps, size):
        out = real(rng, eps, size)
        seen.append((float(eps), int(np.size(out))))
        return out

    monkeypatch.setattr(noise_mod, "discrete_laplace", spy)
    return seen


@pytest.mark.parametrize("mech", [KroneckerLeastSquares(1.0, DIMS, bins={**AGE, **HOURS}),
                                  AdaptiveGrid(0.5, DIMS, domains="adult"),
                                  MarginalsModel(1.0, ["age", "sex", "race"], way=2, domains="adult"),
                                  DefaultHistogram(0.1, DIMS, domains="adult"),
                                  AdaptiveGrid(1.0, DIMS, profile=0.1, domains="adult"),
                                  DefaultHistogram(2.0, DIMS, bins={**AGE, **HOURS})])
def test_every_draw_is_the_hardened_sampler_at_the_ledgers_epsilon(adult, monkeypatch, mech):
    """Every noisy count comes from the hardened sampler with the ε its ledger entry declares,
    the ledger adds up to ε, and verify (with the source) accepts the release."""
    seen = _draws(monkeypatch)
    rel = ppdp.publish(adult, mech, seed=3)
    ledger = rel.certificate["ledger"]
    assert math.isclose(sum(e["epsilon"] for e in ledger), mech.epsilon, rel_tol=1e-9)
    draws = iter(seen)
    for entry in ledger:  # one step's draws (several arrays for a step over many boxes' sub-grids)
        n = 0
        while n < entry["parts"]:
            eps, k = next(draws)
            assert math.isclose(eps, entry["epsilon"], rel_tol=1e-12), entry["what"]
            n += k
        assert n == entry["parts"], entry["what"]
    assert next(draws, None) is None
    assert ppdp.verify(rel, adult).ok


def test_tampered_choice_and_expected_error_fail_verify(adult):
    rel = ppdp.publish(adult, DefaultHistogram(1.0, DIMS, bins={**AGE, **HOURS}), seed=0)
    assert ppdp.verify(rel).ok
    m = rel.manifest
    m["certificate"]["choice"]["algorithm"] = "marginals"
    assert not ppdp.verify(rel).ok


def _z_statistic(mech_of, adult, seeds, wl, truth, estimator=None):
    z = []
    for s in seeds:
        e = ppdp.publish(adult, mech_of(), seed=s).estimate(wl, estimator=estimator)
        z.append((e.estimate - truth) / e.se)
    return np.asarray(z)


@pytest.mark.parametrize("name", ["kron", "cells", "dpcube-ls", "dpcube-ls-unweighted", "dp"])
def test_noise_scale_matches_the_closed_form_standard_errors(adult, name):
    """Noise scale: across 40 independent releases (fixed seeds), the standardised errors of 3
    fixed queries, Σ z² over releases ~ χ²(40) per query (normal approximation of a
    sum of many discrete Laplace draws). Two-sided test at 1e-4 per query: false-alarm ≤ 3e-4 per
    mechanism. Noise at ε/2 or 2ε (variance ×4 or ÷4) moves Σ z² to ~160 or ~10, far outside."""
    mech_of, est = {
        "kron": (lambda: KroneckerLeastSquares(1.0, DIMS, bins={**AGE, **HOURS}), None),
        "cells": (lambda: CellHistogram(1.0, DIMS, bins={**AGE, **HOURS}), None),
        "dpcube-ls": (lambda: DPCube(1.0, DIMS, bins={**AGE, **HOURS}), "ls"),
        "dpcube-ls-unweighted": (lambda: DPCube(1.0, DIMS, bins={**AGE, **HOURS}), "ls-unweighted"),
        "dp": (lambda: DefaultHistogram(1.0, ["age"], domains="adult"), None),  # one dimension: kron
    }[name]
    wl = [parse_where("age >= 32 AND age < 47 AND hours_per_week >= 35 AND hours_per_week < 45"),  # whole bins
          parse_where("age >= 17 AND hours_per_week >= 1"),
          parse_where("age >= 62 AND age < 72 AND hours_per_week < 30")]
    if name == "dp":
        wl = [parse_where("age BETWEEN 32 AND 46"), parse_where("age BETWEEN 17 AND 90"),
              parse_where("age BETWEEN 62 AND 71")]
    truth = answer_exact(adult, wl)
    z = _z_statistic(mech_of, adult, range(40), wl, truth, est)
    s = (z**2).sum(axis=0)
    lo, hi = stats.chi2.ppf(0.5e-4, 40), stats.chi2.isf(0.5e-4, 40)
    assert np.all((s > lo) & (s < hi)), (s, lo, hi)


def test_expected_error_in_the_certificate_predicts_the_error(adult):
    rel = ppdp.publish(adult, KroneckerLeastSquares(0.5, DIMS, domains="adult"), seed=4)
    err = rel.certificate["expected_error"]
    assert err == expected_error("kron", rel.manifest["params"], rel.shape)
    wl = range_workload(adult.domains, DIMS, 400, seed=5)
    mae = float(np.abs(rel.answer(wl) - answer_exact(adult, wl)).mean())
    assert 0.6 * err["random_range_mae"] < mae < 1.5 * err["random_range_mae"]


def test_default_rule_uses_public_facts_and_is_in_the_plan():
    # more signal → the data-independent strategy; little signal → adaptive (2-D) or marginals (≥ 3-D)
    assert dp_choice(4.0, (74, 99), 48_842)["algorithm"] == "kron"
    assert dp_choice(1.0, (74, 99), 48_842)["algorithm"] == "agrid"
    assert dp_choice(0.05, (74, 99), 48_842)["algorithm"] == "agrid"
    with pytest.raises(PpdpError, match="bias probe"):  # ≥ 3-D with a model in contention: the probe is read
        dp_choice(0.05, (74, 16, 99, 2), 48_842)
    plan = budget_plan("dp", {"epsilon": 1.0, "dims": ["a", "b"]}, (74, 99), 48_842)
    assert math.isclose(sum(s.epsilon for s in plan.steps), 1.0)
    assert plan.structure[0].parts == 1  # the noisy total


def test_default_is_at_least_as_good_as_identity_on_the_2d_cube(adult):
    wl = range_workload(adult.domains, DIMS, 300, seed=21)
    truth = answer_exact(adult, wl)
    for eps in (0.1, 1.0):
        e_dp = np.mean([np.abs(ppdp.publish(adult, DefaultHistogram(eps, DIMS, domains="adult"), seed=s).answer(wl)
                               - truth).mean() for s in range(3)])
        e_id = np.mean([np.abs(ppdp.publish(adult, CellHistogram(eps, DIMS, domains="adult"), seed=s).answer(wl)
                               - truth).mean() for s in range(3)])
        assert e_dp < e_id, (eps, e_dp, e_id)




def test_unweighted_least_squares_is_eq35_and_equals_ls_when_alpha1_is_alpha2(adult):
    rel = ppdp.publish(adult, DPCube(1.0, DIMS, alpha1_fraction=0.5, bins={**AGE, **HOURS}), seed=2)
    wl = range_workload(rel.domains, DIMS, 50, seed=1)  # ranges over the release's bins (whole bins)
    assert np.allclose(rel.answer(wl, estimator="ls"), rel.answer(wl, estimator="ls-unweighted"))
    rel = ppdp.publish(adult, DPCube(1.0, DIMS, alpha1_fraction=0.9, bins={**AGE, **HOURS}), seed=2)
    # eq 35 against the pseudo-inverse of H = [I; partition indicators]
    y = rel.noisy_cells().ravel()
    lo, hi, yp = rel.partition_boxes()
    H = [np.eye(y.size)]
    for a, b in zip(lo, hi):
        m = np.zeros(rel.shape)
        m[tuple(slice(i, j + 1) for i, j in zip(a, b))] = 1
        H.append(m.ravel()[None, :])
    x = np.linalg.pinv(np.vstack(H)) @ np.concatenate([y, yp])
    from ppdp.estimators.histogram import UnweightedLeastSquaresEstimator
    assert np.allclose(UnweightedLeastSquaresEstimator().cells(rel).ravel(), x)
