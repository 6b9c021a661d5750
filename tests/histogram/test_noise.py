"""The hardened sampler has the documented distribution (fixed seeds, sound tolerances)."""

import math

import numpy as np
import pytest
from scipy import stats

from ppdp.errors import PpdpError
from ppdp.kernels.noise import (Budget, Step, discrete_laplace, discrete_laplace_mean_abs, discrete_laplace_pmf,
                                discrete_laplace_variance)


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0])
def test_noise_matches_exact_pmf_chi_square(eps):
    rng = np.random.default_rng(12345)
    n = 200_000
    z = discrete_laplace(rng, eps, n)
    assert z.dtype == np.int64
    # bins: each integer with expected count ≥ 20, the two tails pooled
    k = np.arange(-400, 401)
    pmf = discrete_laplace_pmf(k, eps)
    keep = k[pmf * n >= 20]
    lo, hi = keep.min(), keep.max()
    inner = np.arange(lo, hi + 1)
    obs = np.concatenate([[np.sum(z < lo)], np.bincount(z[(z >= lo) & (z <= hi)] - lo, minlength=len(inner)), [np.sum(z > hi)]])
    p_in = discrete_laplace_pmf(inner, eps)
    tail = (1 - p_in.sum()) / 2
    exp = n * np.concatenate([[tail], p_in, [tail]])
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    pval = stats.chi2.sf(chi2, len(obs) - 1)
    assert pval > 1e-3, (chi2, len(obs), pval)


@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0])
def test_variance_and_mean_abs(eps):
    rng = np.random.default_rng(7)
    n = 400_000
    z = discrete_laplace(rng, eps, n).astype(float)
    var = discrete_laplace_variance(eps)
    # continuous-limit sanity: 2/ε² within 1% for small ε
    if eps <= 0.05:
        assert abs(var - 2 / eps**2) / (2 / eps**2) < 0.01
    # sample variance: SE of s² ≈ sqrt((μ4 − σ⁴)/n); μ4 of discrete Laplace ≤ 6σ⁴ (Laplace kurtosis 6)
    se = math.sqrt(5 * var**2 / n)
    assert abs(z.var() - var) < 5 * se
    se_abs = math.sqrt(var / n)
    assert abs(np.abs(z).mean() - discrete_laplace_mean_abs(eps)) < 5 * se_abs
    assert abs(z.mean()) < 5 * math.sqrt(var / n)


def test_measured_counts_are_integer_and_seeded():
    c = np.arange(10)
    a = Budget(1.0).measure(np.random.default_rng(1), c, Step(0.5, "cells"))
    b = Budget(1.0).measure(np.random.default_rng(1), c, Step(0.5, "cells"))
    assert a.dtype == np.int64 and np.array_equal(a, b)
    assert np.array_equal(a, c + discrete_laplace(np.random.default_rng(1), 0.5, c.shape))  # one draw, same stream
    budget = Budget(1.0)
    with pytest.raises(PpdpError, match="integer"):
        budget.measure(np.random.default_rng(1), c.astype(float), Step(0.5, "cells"))
    assert budget.ledger == ()  # a refused measurement spends nothing


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "x"])
def test_bad_epsilon(bad):
    with pytest.raises(PpdpError, match="epsilon"):
        discrete_laplace(np.random.default_rng(0), bad, 3)


def test_budget_ledger_spending_and_drawing_are_one_call():
    b = Budget(1.0)
    rng = np.random.default_rng(0)
    y = b.measure(rng, np.zeros(100, np.int64), Step(0.4, "cells"))
    parts = b.measure_parts(rng, [np.zeros(3, np.int64), np.zeros(4, np.int64)], Step(0.6, "partitions"),
                            parallel_over=7)
    assert len(y) == 100 and [len(p) for p in parts] == [3, 4]
    assert math.isclose(b.spent, 1.0) and abs(b.remaining) < 1e-12
    assert [(s.epsilon, s.what, s.parallel_over) for s in b.ledger] == [(0.4, "cells", 100), (0.6, "partitions", 7)]
    assert [e["composition"] for e in b.to_json()] == ["parallel", "parallel"]
    with pytest.raises(PpdpError, match="budget exceeded"):
        b.measure(rng, np.zeros(1, np.int64), Step(0.01, "more"))
    assert len(b.ledger) == 2  # overspending draws nothing and records nothing
    assert math.isclose(Budget.total_of(b.to_json()), 1.0)
    assert not hasattr(b, "spend")  # no way to spend without drawing
