"""``ppdp reproduce dpcube --quick`` end to end, and the pieces of it that stand in for the
paper's own algorithm: its unweighted least squares (H⁺), Algorithm 3 as printed, ID3."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli
from ppdp.experiments import dpcube as X


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("dpcube-quick")
    res = CliRunner().invoke(cli, ["reproduce", "dpcube", "--quick", "--out", str(out)])
    assert res.exit_code == 0, res.output + repr(res.exception)
    return out


@pytest.mark.slow
def test_summary_lists_every_setup_difference(quick_run):
    text = (quick_run / "summary.md").read_text()
    assert "## Set-up differences from the paper" in text
    for key in ("data", "domains", "query generation", "noise", "split rule ξ0", "α1/α", "estimator", "trials",
                "classification tree"):
        assert f"- **{key}**:" in text
    assert "variance-weighted" in text and "unweighted" in text
    # the paper's claims are checked one by one, both outcomes possible
    assert text.count("reproduced") >= 8
    for section in ("Figure 13", "Fig 10", "Figure 16 in the paper's set-up", "usefulness", "Figure 17", "Figure 18"):
        assert section in text


@pytest.mark.slow
def test_figure_files(quick_run):
    for stem in ("fig13_histograms_age_income", "fig16a_age_income_error_vs_epsilon", "usefulness_cells_age_income",
                 "fig10_error_vs_alpha1", "fig15a_paper_error_vs_xi0", "fig17_classification_vs_epsilon"):
        assert (quick_run / f"{stem}.png").stat().st_size > 0
    f13 = pd.read_csv(quick_run / "fig13_histograms_age_income.csv")
    assert len(f13) == 74 * 2 and f13.original.sum() == 10_000   # the paper's first 10^4 rows, Age × Income


@pytest.mark.slow
def test_figure10_has_both_least_squares(quick_run):
    f10 = pd.read_csv(quick_run / "fig10_error_vs_alpha1.csv")
    assert {"ls", "ls_unweighted", "uniform_any_eta5_eq34"} <= set(f10.columns)
    eq = f10[np.isclose(f10.alpha1, 0.1)]            # α1 = α2: the weighted LS is the paper's H⁺ (same draws)
    assert len(eq) == 1 and eq.ls.iloc[0] == pytest.approx(eq.ls_unweighted.iloc[0], rel=1e-12)
    assert (f10.ls <= f10.ls_unweighted * 1.05).all()


@pytest.mark.slow
def test_age_income_table_and_usefulness(quick_run):
    t = pd.read_csv(quick_run / "fig16a_age_income_error_vs_epsilon.csv")
    for m in ("cells", "dpcube-default-ls", "dpcube-default-ls-unweighted", "dpcube-paper-uniform",
              "dpcube-paper-ls-unweighted", "dpcube-paper-ls-weighted", "kdtree", "consistency"):
        assert m in set(t.method)
    u = pd.read_csv(quick_run / "usefulness_cells_age_income.csv")
    cur = u[u.eps.notna()]
    assert (cur.delta_observed_workload <= cur.delta_theorem42 + 1e-12).all()          # Theorem 4.2 holds
    assert (cur.delta_exact_sum_abs_noise <= cur.delta_theorem42 + 1e-12).all()
    f17 = pd.read_csv(quick_run / "fig17_classification_vs_epsilon.csv")
    assert {"dpcube_id3", "dpcube_cart_entropy", "true_data_id3", "private_interactive_id3"} <= set(f17.columns)


# ----------------------------------------------------------------------- the pieces
def _h_plus_cells(y, lo, hi, yp):
    """H⁺y over the full query matrix [partition rows; identity], by pinv (the paper's LS)."""
    m = y.size
    from ppdp.kernels.grid import paint

    pid = paint(y.shape, lo, hi).ravel()
    H = np.vstack([np.stack([(pid == p).astype(float) for p in range(len(lo))]), np.eye(m)])
    return (np.linalg.pinv(H) @ np.concatenate([yp, y.ravel()])).reshape(y.shape)


def test_unweighted_ls_is_the_papers_h_plus_and_weighted_is_the_library_ls():
    t = ppdp.datasets.load("adult").take(np.arange(10_000))
    for f in (0.5, 0.9):
        r = ppdp.publish(t, ppdp.DPCube(0.3, X.PAPER_DIMS, alpha1_fraction=f, count_threshold=3.0, domains="adult"), seed=3)
        y, (lo, hi, yp) = r.noisy_cells(), r.partition_boxes()
        assert len(lo) > 1
        np.testing.assert_allclose(X.ls_unweighted_cells(y, lo, hi, yp), _h_plus_cells(y, lo, hi, yp), atol=1e-6)
        a1, a2 = r.certificate["epsilon_cells"], r.certificate["epsilon_partitions"]
        np.testing.assert_allclose(X.ls_weighted_cells(y, lo, hi, yp, a1, a2), r.estimator("ls").cells(r), atol=1e-9)
        if f == 0.5:   # α1 = α2: one estimator
            np.testing.assert_allclose(X.ls_unweighted_cells(y, lo, hi, yp), r.estimator("ls").cells(r), atol=1e-9)


def test_paper_dpcube_tiles_and_follows_xi0():
    from ppdp.kernels.grid import cover_counts

    rng = np.random.default_rng(0)
    x = rng.poisson(50, size=(20, 6)).astype(float)
    x[10:] += 200                                   # two flat halves: noise variance 800 at α1 = 0.05
    counts = []
    for xi0 in (0.0, 4e3, 1e12):
        y1, lo, hi, yp, a1, a2 = X.paper_dpcube(x, 0.2, 0.25, xi0, np.random.default_rng(1))
        assert (cover_counts(x.shape, lo, hi) == 1).all() and a1 + a2 == pytest.approx(0.2)
        counts.append(len(lo))
        if xi0 == 4e3:   # the root's noisy variance (≈ 10^4 + 800) exceeds ξ0, the halves' (≈ 850) do not
            assert sorted(map(tuple, lo.tolist())) == [(0, 0), (10, 0)]
    assert counts[0] > 0.9 * x.size and counts[1] == 2 and counts[2] == 1


def test_id3_is_multiway_and_weighted():
    rng = np.random.default_rng(2)
    Xa = rng.integers(0, 4, size=(400, 3))
    y = ((Xa[:, 0] == 2) | (Xa[:, 1] == 0)).astype(int)    # not a threshold on the codes
    pred = X.id3_fit(Xa, y, [4, 4, 4], 2)
    assert (pred(Xa) == y).all()
    # weights = replication
    w = rng.integers(1, 4, size=len(y))
    rep = np.repeat(np.arange(len(y)), w)
    Xq = rng.integers(0, 4, size=(200, 3))
    noisy = np.where(rng.random(len(y)) < 0.3, 1 - y, y)
    np.testing.assert_array_equal(X.id3_fit(Xa, noisy, [4, 4, 4], 2, weights=w)(Xq),
                                  X.id3_fit(Xa[rep], noisy[rep], [4, 4, 4], 2)(Xq))


def test_random_boxes_are_ranges_of_the_cube():
    lo, hi = X.random_boxes((74, 2), 10_000, 0)
    assert (lo >= 0).all() and (lo <= hi).all() and (hi < np.array([74, 2])).all()
    inc = pd.Series(list(map(tuple, np.stack([lo[:, 1], hi[:, 1]], 1)))).value_counts(normalize=True)
    assert inc[(0, 1)] == pytest.approx(0.5, abs=0.03) and inc[(0, 0)] == pytest.approx(0.25, abs=0.03)
