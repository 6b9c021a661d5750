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
