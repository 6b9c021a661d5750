"""(ε, δ)-usefulness (Xiao et al. Definition 3.5, Lemma 4.1, Theorem 4.2, eq 32–34) and the
density of a sum of Laplace noises (Theorem 3.3), against the paper's formulas and simulation.

Statistical checks use fixed seeds; each states the false-alarm rate it would have with a
fresh seed (KS at 1e-3; binomial and normal checks at ≤ 1e-6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

import ppdp
from ppdp.errors import ParameterError
from ppdp.kernels import usefulness as U


def _eq2(z: float, n: int, alpha: float) -> float:
    """The paper's eq 2 as printed, by quadrature."""
    def g(v):
        return v ** (n - 1) * (abs(z) + v / (2 * alpha)) ** (n - 1) * math.exp(-v)
    return alpha**n / (2**n * math.gamma(n) ** 2) * math.exp(-alpha * abs(z)) * integrate.quad(g, 0, np.inf)[0]


@pytest.mark.parametrize("n,alpha", [(1, 0.5), (2, 0.3), (5, 0.05), (30, 1.0)])
def test_density_is_the_papers_eq2(n, alpha):
    z = np.array([0.0, 0.7, -3.0, 12.0, 40.0]) / alpha
    got = U.laplace_sum_pdf(z, n, alpha)
    want = np.array([_eq2(v, n, alpha) for v in z])
    np.testing.assert_allclose(got, want, rtol=1e-8)
    # a density: integrates to 1, is the derivative of the CDF, CDF + SF = 1
    assert integrate.quad(lambda t: U.laplace_sum_pdf(t, n, alpha), -np.inf, np.inf)[0] == pytest.approx(1, abs=1e-7)
    h = 1e-4 / alpha
    deriv = (U.laplace_sum_cdf(z + h, n, alpha) - U.laplace_sum_cdf(z - h, n, alpha)) / (2 * h)
    np.testing.assert_allclose(deriv, got, rtol=1e-4, atol=1e-12)
    np.testing.assert_allclose(U.laplace_sum_cdf(z, n, alpha) + U.laplace_sum_sf(z, n, alpha), 1.0, atol=1e-12)


def test_one_laplace_is_laplace():
    z = np.linspace(-30, 30, 61)
    np.testing.assert_allclose(U.laplace_sum_pdf(z, 1, 0.2), stats.laplace.pdf(z, scale=5.0), rtol=1e-12)
    np.testing.assert_allclose(U.laplace_sum_cdf(z, 1, 0.2), stats.laplace.cdf(z, scale=5.0), rtol=1e-12)


@pytest.mark.parametrize("n,alpha,seed", [(1, 0.5, 1), (3, 0.1, 2), (11, 0.05, 3), (200, 1.0, 4)])
def test_distribution_matches_simulated_sums(n, alpha, seed):
    """KS test of 20,000 simulated sums against the CDF (false alarm 1e-3 per case)."""
    rng = np.random.default_rng(seed)
    sums = rng.laplace(0.0, 1 / alpha, size=(20_000, n)).sum(axis=1)
    res = stats.kstest(sums, lambda x: U.laplace_sum_cdf(x, n, alpha))
    assert res.pvalue > 1e-3, res
    # and E|S| (closed form) within 6 standard errors of the simulated mean (false alarm ≈ 2e-9)
    se = np.abs(sums).std() / math.sqrt(len(sums))
    assert abs(np.abs(sums).mean() - U.laplace_sum_mean_abs(n, alpha)) < 6 * se


def test_large_n_is_stable_and_normal():
    """n = 20,000 terms: finite, and within 2e-3 of the normal limit (variance 2n/α²)."""
    n, alpha = 20_000, 0.1
    sd = math.sqrt(2 * n) / alpha
    z = np.linspace(-4, 4, 17) * sd
    cdf = U.laplace_sum_cdf(z, n, alpha)
    assert np.isfinite(cdf).all() and np.isfinite(U.laplace_sum_pdf(z, n, alpha)).all()
    assert np.max(np.abs(cdf - stats.norm.cdf(z / sd))) < 2e-3
    # the far tail stays positive and monotone in log space (no underflow to 0 before 1e-300)
    tail = U.laplace_sum_sf(np.array([10, 20, 30]) * sd, n, alpha)
    assert (tail > 0).all() and (np.diff(tail) < 0).all()


# ------------------------------------------------------------------ Definition 3.5
def test_definition_35_on_observed_errors():
    errors = np.array([[1.0, -2.0, 0.5],    # trial max 2
                       [0.1, 0.2, 7.0],     # 7
                       [-3.0, 0.0, 0.0],    # 3
                       [0.5, 0.5, 0.5]])    # 0.5
    assert U.empirical_delta(errors, 2.5) == 0.5
    assert U.empirical_delta(errors, 7.0) == 0.0
    assert U.useful_epsilon(errors, 0.25) == 3.0   # 3 of 4 trials (≥ 1 − δ) within 3
    assert U.useful_epsilon(errors, 0.5) == 2.0
    assert U.is_useful(errors, 3.0, 0.25) and not U.is_useful(errors, 2.9, 0.25)
    with pytest.raises(ParameterError):
        U.useful_epsilon(errors, 1.5)
    with pytest.raises(ParameterError):
        U.empirical_delta(np.zeros((0, 3)), 1.0)


# ------------------------------------------------------------------ Lemma 4.1 / Theorem 4.2
def test_lemma_41_bound_holds_exactly_and_in_simulation():
    m, b = 8, 2.0
    eps = np.linspace(1, 400, 200)
    exact = U.abs_laplace_sum_cdf(eps, m, b)
    assert (exact >= U.lemma41_bound(eps, m, b) - 1e-15).all()
    rng = np.random.default_rng(11)
    tot = np.abs(rng.laplace(0, b, size=(50_000, m))).sum(axis=1)
    # the exact law: KS (false alarm 1e-3) ...
    assert stats.kstest(tot, lambda t: U.abs_laplace_sum_cdf(t, m, b)).pvalue > 1e-3
    # ... and the lemma's bound at ε = 120 (bound 0.8): successes ≥ the binomial 1e-6 quantile
    k = int((tot <= 120).sum())
    assert k >= stats.binom.ppf(1e-6, len(tot), float(U.lemma41_bound(120, m, b)))


def test_theorem_42_alpha_and_delta_are_inverse():
    a = U.theorem42_alpha(50.0, 0.1, 10)
    assert a == pytest.approx(10 * math.log(100) / 50)
    assert U.theorem42_delta(a, 50.0, 10) == pytest.approx(0.1)
    # the exact probability of the proof's event is below the theorem's δ
    grid = np.linspace(5, 500, 100)
    assert (U.cell_histogram_delta(a, grid, 10) <= np.minimum(1, U.theorem42_delta(a, grid, 10)) + 1e-15).all()


@pytest.mark.slow
def test_theorem_42_through_the_public_verb():
    """CellHistogram(α = m·ln(m/δ)/ε) on Adult race × sex (m = 10 cells): in 300 releases the
    worst error over every 0/1 linear counting query (max of the positive and the negative
    noise mass) exceeds ε in no more than the binomial(300, δ) 1 − 1e-6 quantile of them."""
    from ppdp.datasets import public_domains
    from ppdp.kernels.grid import cube_codes, dense_counts

    t = ppdp.datasets.load("adult")
    dims, eps, delta = ["race", "sex"], 40.0, 0.1
    spec, codes = cube_codes(t, dims, None, public_domains("adult", dims))
    x = dense_counts(codes, spec.shape).astype(float)
    m = x.size
    alpha = U.theorem42_alpha(eps, delta, m)
    worst = []
    for s in range(300):
        noise = ppdp.publish(t, ppdp.CellHistogram(alpha, dims, domains="adult"), seed=s).noisy_cells() - x
        worst.append(max(noise[noise > 0].sum(), -noise[noise < 0].sum()))
    fails = int((np.array(worst) > eps).sum())
    assert fails <= stats.binom.ppf(1 - 1e-6, 300, delta)
    # Definition 3.5 on the same releases agrees
    assert U.is_useful(np.array(worst), eps, delta) == (fails / 300 <= delta)


def test_single_query_delta_matches_simulation():
    rng = np.random.default_rng(5)
    s, alpha, eps = 6, 0.1, 40.0
    err = rng.laplace(0, 1 / alpha, size=(100_000, s)).sum(axis=1)
    p = float(U.single_query_delta(eps, s, alpha))
    k = int((np.abs(err) > eps).sum())
    lo, hi = stats.binom.ppf([1e-7, 1 - 1e-7], len(err), p)  # two-sided, false alarm 2e-7
    assert lo <= k <= hi


# ------------------------------------------------------------------ Theorem 4.4 (eq 32–34)
@pytest.mark.parametrize("s", [2, 5, 9])
def test_eq32_uniform_estimate_is_useful_on_gamma_smooth_data(s):
    """γ-smooth partition at eq 32's largest γ, the worst case for the uniform estimate (s
    cells at 50 + γ, the rest at 50); continuous Lap(1/α2) partition noise; the failure
    fraction over 50,000 draws stays under the binomial(·, δ) 1 − 1e-6 quantile, and equals
    the exact failure probability within a two-sided 1e-7 band."""
    n_p, a2, eps, delta = 11, 0.15, 30.0, 0.05
    gamma = float(U.eq32_max_gamma(eps, delta, s, n_p, a2))
    assert gamma > 0
    assert float(U.uniform_delta(gamma, eps, s, n_p, a2)) == pytest.approx(delta)
    x = np.where(np.arange(n_p) < s, 50 + gamma, 50.0)
    rng = np.random.default_rng(100 + s)
    yp = x.sum() + rng.laplace(0, 1 / a2, 50_000)
    err = np.abs(s / n_p * yp - x[:s].sum())
    k = int((err > eps).sum())
    assert k <= stats.binom.ppf(1 - 1e-6, len(err), delta)
    bias, c = s * (n_p - s) * gamma / n_p, s / n_p
    exact = stats.laplace.sf((eps - bias) / c, scale=1 / a2) + stats.laplace.cdf((-eps - bias) / c, scale=1 / a2)
    assert exact <= delta
    lo, hi = stats.binom.ppf([1e-7, 1 - 1e-7], len(err), exact)
    assert lo <= k <= hi
    # eq 33 bounds the mean error
    assert err.mean() <= float(U.eq33_uniform_error_bound(gamma, s, n_p, a2)) + 6 * err.std() / math.sqrt(len(err))


def test_eq32_edge_cases():
    assert U.eq32_max_gamma(100.0, 0.1, 11, 11, 0.15) == np.inf
    assert U.eq32_max_gamma(1.0, 0.1, 11, 11, 0.15) == -np.inf
    assert float(U.eq32_max_gamma(1.0, 0.01, 5, 11, 0.15)) < 0   # no γ helps: the noise alone fails
    with pytest.raises(ParameterError):
        U.eq32_max_gamma(1.0, 0.1, 12, 11, 0.15)


def test_eq34_matches_simulation():
    rng = np.random.default_rng(9)
    s, a1 = 5, 0.05
    z = rng.laplace(0, 1 / a1, size=(200_000, s)).sum(axis=1)
    for eta in (0.0, 5.0, -20.0, 300.0):
        v = np.abs(eta + z)
        assert abs(v.mean() - float(U.eq34_uniform_error(eta, s, a1))) < 6 * v.std() / math.sqrt(len(v))
    assert float(U.eq34_uniform_error(0.0, s, a1)) == pytest.approx(U.laplace_sum_mean_abs(s, a1))


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_bad_counts_are_parameter_errors(bad):
    with pytest.raises(ParameterError):
        U.laplace_sum_pdf(0.0, bad, 1.0)
    with pytest.raises(ParameterError):
        U.theorem42_alpha(1.0, 0.1, bad)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "x"])
def test_bad_scales_are_parameter_errors(bad):
    with pytest.raises(ParameterError):
        U.laplace_sum_cdf(0.0, 3, bad)
    with pytest.raises(ParameterError):
        U.lemma41_bound(1.0, 3, bad)


# ------------------------------------------------------------------ eq 35
def test_combination_reduces_to_theorem_33():
    assert U.laplace_combination_mean_abs([1.0], [0.3], [7]) == pytest.approx(U.laplace_sum_mean_abs(7, 0.3), rel=1e-9)
    assert U.laplace_combination_mean_abs([2.0, 0.0], [0.5, 1.0], [1, 3]) == pytest.approx(4.0, rel=1e-9)  # E|2·Lap(2)|


@pytest.mark.parametrize("s", [1, 5, 11])
def test_eq35_matches_simulation_weighted_and_unweighted(s):
    """The least-squares error inside one partition (n_p = 11, α1 = 0.05, α2 = 0.15), both the
    paper's H⁺ and the variance-weighted estimate, against 200,000 simulated releases
    (6 standard errors, false alarm ≈ 2e-9 per check)."""
    n, a1, a2 = 11, 0.05, 0.15
    rng = np.random.default_rng(40 + s)
    N1 = rng.laplace(0, 1 / a1, (200_000, n))
    N2 = rng.laplace(0, 1 / a2, 200_000)
    gap = N2 - N1.sum(1)
    v1, v2 = 2 / a1**2, 2 / a2**2
    for w, weights in ((1 / (n + 1), None), (v1 / (v2 + n * v1), (v1, v2))):
        err = np.abs(N1[:, :s].sum(1) + s * w * gap)
        assert abs(err.mean() - U.eq35_ls_error(a1, a2, n, s, weights)) < 6 * err.std() / math.sqrt(len(err))
