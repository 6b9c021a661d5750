"""Guarantee calculators of A' (Fu et al. §6): Lemma 4, Definition 5, Examples 1–2."""

import numpy as np
import pytest
from scipy import stats

from ppdp.errors import PpdpError
from ppdp.mechanisms.randomization import guarantees as g
from ppdp.mechanisms.randomization.laplace import laplace_answers, laplace_scale


def test_example_1_first_case():
    tf = g.utility_threshold(0.2, 0.02, 10)
    assert tf == pytest.approx(np.sqrt(125))
    assert round(float(tf)) == 11  # the paper's T_f = 11
    # Lemma 4 is the fixed point of the Chebyshev bound: at f_s = T_f the bound equals T_E
    assert g.utility_error_bound(tf, 0.2, 10) == pytest.approx(0.02)


def test_example_1_second_case_is_inconsistent():
    ex = g.example_1()
    assert round(ex["case 2 read as ε=0.02"]) == 112
    assert round(ex["case 2 read as ε=ℓ'·0.001=0.01"]) == 224
    assert 49 not in (round(ex["case 2 read as ε=0.02"]), round(ex["case 2 read as ε=ℓ'·0.001=0.01"]))


def test_example_2():
    tp = g.privacy_guarantee(5, 10, 0.3)
    within = sum(stats.binom.pmf(x, 50, 0.1) for x in (4, 5, 6))
    assert within == pytest.approx(0.52, abs=0.005)
    assert tp == pytest.approx(1 - within)
    assert round(float(tp), 2) == 0.48


def test_privacy_decreases_with_count_and_chebyshev_bounds_exact():
    f = np.arange(1, 200)
    tp = g.privacy_guarantee(f, 5, 0.3)
    assert tp[0] > 0.5 and tp[-1] < 0.01
    exact = g.utility_error_probability(f, 5, 0.3)
    assert np.all(exact <= g.utility_error_bound(f, 0.3, 5, corrected=True) + 1e-12)
    # boundary rounding: f = 10, ε = 0.3 covers 7..13 exactly
    assert g.privacy_guarantee(10, 5, 0.3) == pytest.approx(1 - (stats.binom.cdf(13, 50, 0.2) - stats.binom.cdf(6, 50, 0.2)))


def test_monte_carlo_matches_privacy_guarantee():
    rng = np.random.default_rng(0)
    f, lp = 8, 5
    draws = rng.binomial(lp * f, 1 / lp, size=200_000)
    mc = np.mean(np.abs(draws - f) > 0.3 * f + 1e-9)
    assert mc == pytest.approx(g.privacy_guarantee(f, lp, 0.3), abs=0.005)


def test_plots(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    ax = g.plot_utility_thresholds()
    ax.figure.savefig(tmp_path / "f1.png")
    ax = g.plot_privacy_guarantee()
    ax.figure.savefig(tmp_path / "f2.png")
    assert (tmp_path / "f1.png").stat().st_size > 0 and (tmp_path / "f2.png").stat().st_size > 0


def test_bad_arguments():
    with pytest.raises(PpdpError):
        g.utility_threshold(0.2, 0.02, 1)
    with pytest.raises(PpdpError):
        g.utility_threshold(0.2, 1.5, 10)
    with pytest.raises(PpdpError):
        g.privacy_guarantee(5, 10, 0)


def test_laplace_baseline_scale():
    assert laplace_scale(0.05, 100) == 2000
    counts = np.full(100_000, 500)
    noisy = laplace_answers(counts, 0.05, m=100, rng=1)
    # discrete Laplace of parameter ε/m: mean |noise| ≈ m/ε for small ε/m
    assert np.mean(np.abs(noisy - counts)) == pytest.approx(2000, rel=0.02)
    seen = {}
    laplace_answers(counts[:3], 0.01, m=10, rng=0, sampler=lambda rng, e, size: seen.setdefault("e", e) * np.zeros(size))
    assert seen["e"] == pytest.approx(0.001)
    with pytest.raises(PpdpError):
        laplace_answers(counts, 0.0)


def test_lemma_4_as_published_is_violated_and_corrected_bound_holds():
    """The paper's Chebyshev step has one factor ℓ'f_s too many (docs/diverted.md)."""
    f = 11  # Example 1: T_f = 11 for ε = 0.2, ℓ' = 10, T_E = 0.02
    p = g.utility_error_probability(f, 10, 0.2)
    assert p > 0.4  # far above T_E = 0.02
    assert g.utility_error_bound(f, 0.2, 10) <= 0.021
    f_range = np.arange(1, 3000)
    exact = g.utility_error_probability(f_range, 10, 0.2)
    assert np.all(exact <= g.utility_error_bound(f_range, 0.2, 10, corrected=True) + 1e-12)
    tf_c = g.utility_threshold_chebyshev(0.2, 0.02, 10)
    assert tf_c == pytest.approx(1125)
    tf_x = g.utility_threshold_exact(0.2, 0.02, 10)
    assert 11 < tf_x <= tf_c
    assert g.utility_error_probability(tf_x, 10, 0.2) <= 0.02 < g.utility_error_probability(tf_x - 1, 10, 0.2)
