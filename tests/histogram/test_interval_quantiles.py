"""The intervals of the closed-form histogram estimators: the discrete Laplace's fourth cumulant,
the quantiles of linear combinations of discrete Laplace variables
(``ppdp.kernels.noise_quantiles``) against brute force, and the coverage of the shipped
intervals over fixed-seed releases (tolerances from the binomial distribution of the hits)."""

from __future__ import annotations

import numpy as np
import pytest

from ppdp.kernels.noise import discrete_laplace_fourth_cumulant, discrete_laplace_pmf, discrete_laplace_variance


@pytest.mark.parametrize("eps", [0.05, 0.3, 1.0, 3.0])
def test_fourth_cumulant_matches_the_pmf(eps):
    """κ4 = E Z⁴ − 3(E Z²)² by a direct sum over the pmf (truncated where p^k < 1e-30)."""
    top = int(np.ceil(70 / eps))
    k = np.arange(-top, top + 1, dtype=np.float64)
    p = discrete_laplace_pmf(k, eps)
    m2, m4 = float((p * k**2).sum()), float((p * k**4).sum())
    assert m2 == pytest.approx(discrete_laplace_variance(eps), rel=1e-12)
    assert m4 - 3 * m2**2 == pytest.approx(discrete_laplace_fourth_cumulant(eps), rel=1e-9)


# ---------------------------------------------------------------- quantiles against brute force
def _sum_pmf(m: int, eps: float, top: int = 4000) -> np.ndarray:
    """pmf of a sum of m iid discrete Laplace(ε) on −top..top by repeated direct convolution."""
    k = np.arange(-top, top + 1)
    one = discrete_laplace_pmf(k, eps)
    out = one.copy()
    for _ in range(m - 1):
        out = np.convolve(out, one)[top:-top]
    return out


def _cover_abs(pmf: np.ndarray, h) -> np.ndarray:
    """P(|S| ≤ h) from a centred pmf array."""
    c = len(pmf) // 2
    cum = np.concatenate([[0.0], np.cumsum(pmf)])
    h = np.asarray(h)
    return cum[c + h + 1] - cum[c - h]


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("m", [1, 2, 3, 7, 40])
def test_lattice_law_and_halfwidth_match_convolution(m, eps):
    """P(|S| ≤ s) of the kernel's exact law (closed form for m = 1, the characteristic
    function's table beyond) equals the direct convolution to 1e-12, and the lattice half-width
    is the smallest integer h with P(|S| ≤ h) ≥ level, for several levels."""
    from ppdp.kernels.noise_quantiles import FORMS, halfwidths, lattice_cdf_abs

    top = 400 if eps < 0.5 else 200
    pmf = _sum_pmf(m, eps, top)
    s = np.arange(0, 60)
    np.testing.assert_allclose(lattice_cdf_abs(m, eps, s), _cover_abs(pmf, s), atol=1e-12, rtol=0)
    v = discrete_laplace_variance(eps)
    for level in (0.5, 0.8, 0.9, 0.95, 0.99):
        x, form = halfwidths([m * v], [m * discrete_laplace_fourth_cumulant(eps)], [1.0], [m], [eps], level)
        assert FORMS[form[0]] == "lattice"
        h = int(x[0])
        assert x[0] == h
        assert _cover_abs(pmf, h) >= level
        assert h == 0 or _cover_abs(pmf, h - 1) < level


def test_lattice_beyond_the_table_is_continuity_corrected():
    """Sums with sd(S) > TABLE_SD (m ≥ 2) take the continuity-corrected Cornish–Fisher h: checked
    against the exact law (difference of two negative binomials, scipy) — coverage ≥ level − 2e-4
    (the expansion's error) and h − 1 below the level."""
    from scipy import stats

    from ppdp.kernels.noise_quantiles import FORMS, TABLE_SD, halfwidths

    for m, eps in ((1200, 1.0), (4, 0.05), (60, 0.3)):
        v = discrete_laplace_variance(eps)
        assert np.sqrt(m * v) > TABLE_SD
        x, form = halfwidths([m * v], [m * discrete_laplace_fourth_cumulant(eps)], [1.0], [m], [eps])
        assert FORMS[form[0]] == "lattice-cc"
        h = int(x[0])
        j = np.arange(0, int(60 * np.sqrt(m * v) + 200))
        nb = stats.nbinom.pmf(j, m, -np.expm1(-eps))  # failures before the m-th success: S = N1 − N2
        pmf = np.convolve(nb, nb[::-1])  # P(S = s) at index s + len(j) − 1

        def cover(t):
            return float(pmf[len(j) - 1 - t: len(j) + t].sum())

        assert cover(h) >= 0.95 - 2e-4, (m, eps, h, cover(h))
        assert cover(h - 1) < 0.95 + 2e-4, (m, eps, h, cover(h - 1))


def _laplace_sum_cover(x: float, k: int) -> float:
    """P(|X| ≤ x) for X a sum of k iid continuous Laplace(1) (characteristic function 1/(1+t²)^k)."""
    from scipy import integrate

    if k == 1:
        return 1 - np.exp(-x)
    return 2 / np.pi * integrate.quad(lambda t: (1 + t * t) ** (-k) * np.sin(x * t) / t, 0, np.inf, limit=2000)[0]


@pytest.mark.parametrize("k", [1, 2, 3, 6, 20])
def test_cornish_fisher_against_exact_laplace_sums(k):
    """The continuous form (no lattice group: m = 0) on sums of k continuous Laplace variables
    (Var 2k, κ4 12k; excess kurtosis 3/k): coverage within [0.9497, 0.9535] at the 95% level (0.9499 at k = 4–10), where
    the normal quantile gives 0.9375 at k = 1."""
    from ppdp.kernels.noise_quantiles import FORMS, halfwidths

    x, form = halfwidths([2.0 * k], [12.0 * k], [0.0], [0], [1.0])
    assert FORMS[form[0]] == "cornish-fisher"
    assert 0.95 - 3e-4 <= _laplace_sum_cover(float(x[0]), k) <= 0.9535


#: (label, [(coefficient, m, ε), …]): errors of least-squares and Kronecker estimates, dominated by
#: one lattice group (the first) or by a continuous-looking one
MIXED_CASES = [
    ("one cell of a 176-cell partition (ls)", [(0.996, 1, 0.9), (0.0038, 175, 0.9), (0.0038, 1, 0.1)]),
    ("a whole 3,626-cell partition (ls)", [(0.977, 1, 0.1), (0.023, 3626, 0.9)]),
    ("two cells of unequal ε", [(1.0, 1, 1.0), (1.0, 1, 0.5)]),
    ("one cell and its block (kron-like)", [(0.8, 1, 0.36), (0.15, 10, 0.24), (0.1, 12, 0.24), (0.05, 100, 0.16)]),
    ("a group of 40 and a Laplace", [(0.5, 40, 1.0), (0.3, 1, 0.2)]),
]


@pytest.mark.parametrize("label,terms", MIXED_CASES, ids=[c[0] for c in MIXED_CASES])
def test_non_integer_combinations_against_monte_carlo(label, terms):
    """Coverage of the half-width over 400,000 draws of the combination itself (fixed seed):
    within [0.95 − 5·se, 0.9535 + 5·se], se the binomial standard error of the Monte Carlo
    estimate (~3.4e-4) — the forms' own error is ≤ 0.0033 above the level (Cornish–Fisher at
    excess kurtosis 3) and none below beyond Monte Carlo noise."""
    from ppdp.kernels.noise_quantiles import halfwidths

    rng = np.random.default_rng(2024)
    n = 400_000
    var = sum(c * c * m * discrete_laplace_variance(e) for c, m, e in terms)
    k4 = sum(c**4 * m * discrete_laplace_fourth_cumulant(e) for c, m, e in terms)
    c0, m0, e0 = terms[0]
    x, _ = halfwidths([var], [k4], [c0], [m0], [e0])
    err = np.zeros(n)
    for c, m, e in terms:
        q = -np.expm1(-e)
        err += c * (rng.negative_binomial(m, q, n) - rng.negative_binomial(m, q, n))
    cov = float(np.mean(np.abs(err) <= x[0]))
    se = np.sqrt(0.95 * 0.05 / n)
    assert 0.95 - 5 * se <= cov <= 0.9535 + 5 * se, (label, cov)
