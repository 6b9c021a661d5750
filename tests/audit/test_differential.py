"""Theorem 2 of Wang et al. (2011): Monte-Carlo of Y/X for Laplace answers."""


import pytest

from ppdp.audit import differential_inference, theorem2
from ppdp.audit.differential import exact_inverse_mean


@pytest.fixture(scope="module")
def table():
    return differential_inference(0.1, xs=(100, 1000), ratio=0.99, n_samples=2_000_000, seed=0).set_index("x")


def test_theorem2_worked_numbers():
    # ε = 0.1 → b = 10: 2b²/x² = 0.02 at x = 100 and 0.0002 at x = 1000
    assert theorem2(100, 99, 0.1)[0] / 0.99 == pytest.approx(1.02, abs=1e-12)
    assert theorem2(1000, 990, 0.1)[0] / 0.99 == pytest.approx(1.0002, abs=1e-12)


def test_monte_carlo_reproduces_seed_numbers(table):
    r100, r1000 = table.loc[100.0], table.loc[1000.0]
    # x = 100: the paper's ×1.02 to its two decimals; the exact factor (≈1.0236) within 3 s.e.
    assert round(r100["mc_factor"], 2) == 1.02
    assert abs(r100["mc_factor"] - r100["exact_factor"]) <= 3 * r100["mc_se"]
    # x = 1000: ×1.0002 within Monte-Carlo error (s.e. ≈ 1.4e-5, the effect is 2e-4 ≈ 14 s.e.)
    assert abs(r1000["mc_factor"] - 1.0002) <= 3 * r1000["mc_se"]
    assert r1000["mc_factor"] - 1 > 5 * r1000["mc_se"]  # the bias is real, not noise
    # variance: Theorem 2 holds at x = 1000 (at x = 100 the sample variance is dominated by
    # rare draws of X near 0, where 1/X has no finite variance)
    assert r1000["mc_var"] == pytest.approx(r1000["theorem2_var"], rel=0.03)


def test_exact_factor_matches_series():
    b, x = 10.0, 1000.0
    # asymptotic series Σ (2k)! (b/x)^(2k): 1 + 2e-4 + 24e-8 + 720e-12 …
    assert x * exact_inverse_mean(x, b) == pytest.approx(1 + 2e-4 + 24e-8 + 720e-12, rel=1e-9)
    assert 100 * exact_inverse_mean(100, 10) == pytest.approx(1.0236, abs=2e-4)


def test_bad_epsilon():
    with pytest.raises(ValueError, match="epsilon"):
        differential_inference(0)
