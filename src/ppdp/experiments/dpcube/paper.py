"""The DPCube paper's own set-up (Xiao, Xiong, Fan & Goryczka): Age × Income, paper-literal
DPCube, Figures 13, 14–15, 16 and the (ε, δ)-usefulness figure."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd

from ...claims.dp import PAPER_XI0_NOISE_MULTIPLE
from ...mechanisms.histogram.dpcube import PAPER_ALPHA1_FRACTION

if TYPE_CHECKING:
    from ...releases.histogram import HistogramRelease

from .common import DOMAINS, declared_cube, plot, weighted_variance_boxes


# ------------------------------------------------------------ the paper's own set-up: Age × Income
PAPER_DIMS = ["age", "income"]
#: the paper's DPCube as printed: α1 = 0.05 of α = 0.2 (Table II), Algorithm 3 splits a box while
#: the sample variance of its *noisy* phase-I cells exceeds ξ0 (no count test)
#: (the registered mechanism ``dpcube-paper``, :class:`~ppdp.mechanisms.histogram.DPCubePaper`, whose
#: defaults are ``PAPER_ALPHA1_FRACTION`` and ξ0 = ``PAPER_XI0_NOISE_MULTIPLE`` × the phase-I noise
#: variance, fixed in advance, not tuned)
PAPER_ALPHA = 0.2


def ls_unweighted_cells(y, lo, hi, yp):
    """The paper's least squares (Theorem 4.6's H⁺ = (HᵀH)⁻¹Hᵀ, unweighted): every cell of
    partition p moves by (y_p − Σ_{c∈p} y_c)/(n_p + 1), whatever α1 and α2 are."""
    from ...kernels.grid import paint

    y = np.asarray(y, float)
    pid = paint(y.shape, lo, hi)
    n_p = np.prod(hi - lo + 1, axis=1).astype(float)
    sums = np.bincount(pid.ravel(), weights=y.ravel(), minlength=len(yp))
    return y + ((np.asarray(yp, float) - sums) / (n_p + 1))[pid]


def ls_weighted_cells(y, lo, hi, yp, a1, a2):
    """The library's ``ls`` on arrays: the same correction weighted by the noise variances."""
    from ...kernels.grid import paint
    from ...kernels.noise import discrete_laplace_variance

    y = np.asarray(y, float)
    pid = paint(y.shape, lo, hi)
    n_p = np.prod(hi - lo + 1, axis=1).astype(float)
    v1, v2 = discrete_laplace_variance(a1), discrete_laplace_variance(a2)
    sums = np.bincount(pid.ravel(), weights=y.ravel(), minlength=len(yp))
    return y + ((np.asarray(yp, float) - sums) * v1 / (v2 + n_p * v1))[pid]


def uniform_cells(shape, lo, hi, yp):
    from ...kernels.grid import paint

    n_p = np.prod(hi - lo + 1, axis=1).astype(float)
    return paint(shape, lo, hi, np.asarray(yp, float) / n_p, dtype=np.float64)


def paper_dpcube(x, alpha, alpha1_fraction, xi0, rng):
    """Algorithms 2–3 exactly as printed, on the dense true cube ``x`` (an array reference, not a
    release): y1 = x + Lap(α1); kd-tree on y1 splitting every box whose raw sample variance
    exceeds ξ0 (SSE cut on the widest dimension); y_p = partition counts + Lap(α2). Noise from
    the library's sampler. Returns (y1, lo, hi, yp, α1, α2). The registered ``dpcube-paper``
    publishes the same draws from the same generator (tests/histogram/test_dpcube_paper.py);
    the figures publish through it (:func:`paper_release`)."""
    from ...kernels.grid import box_counts, summed_area
    from ...kernels.noise import discrete_laplace
    from ...mechanisms.histogram.kdtree import vopt_kdtree

    a1 = alpha * alpha1_fraction
    a2 = alpha - a1
    y1 = x + discrete_laplace(rng, a1, x.shape)
    lo, hi = vopt_kdtree(y1, xi0=xi0, noise_var=0.0, min_count=None)
    yp = box_counts(summed_area(x), lo, hi) + discrete_laplace(rng, a2, len(lo))
    return y1, lo, hi, yp, a1, a2


def paper_release(table, alpha, alpha1_fraction, xi0, seed):
    """The registered ``dpcube-paper`` published through ``ppdp.publish`` on ``table`` (Age ×
    Income): (y1, lo, hi, yp, α1, α2) as :func:`paper_dpcube` returns them."""
    from ...claims.dp import dpcube_alphas
    from ...mechanisms.histogram import DPCubePaper

    r = _hpublish(table, DPCubePaper(alpha, PAPER_DIMS, alpha1_fraction=alpha1_fraction, xi0=xi0, domains=DOMAINS), seed)
    lo, hi, yp = r.partition_boxes()
    a1, a2 = dpcube_alphas(alpha, alpha1_fraction)
    return np.asarray(r.noisy_cells(), float), lo, hi, np.asarray(yp, float), a1, a2


def random_boxes(shape, n, seed):
    """``n`` random range queries on the cube: per dimension two uniform cell indices, sorted
    (inclusive) — the generator of ``range_workload``, drawn as arrays."""
    rng = np.random.default_rng(seed)
    ab = np.sort(rng.integers(0, np.asarray(shape)[None, :, None], size=(n, len(shape), 2)), axis=2)
    return ab[:, :, 0], ab[:, :, 1]


def _hpublish(table, mechanism, seed) -> "HistogramRelease":
    import ppdp
    from ...releases.histogram import HistogramRelease

    return cast(HistogramRelease, ppdp.publish(table, mechanism, seed=seed))


def _box_answers(cells, lo, hi):
    from ...kernels.grid import box_sums, summed_area

    return box_sums(summed_area(np.asarray(cells, float)), lo, hi)


def _paper_xi0(alpha, f):
    from ...kernels.noise import discrete_laplace_variance

    return PAPER_XI0_NOISE_MULTIPLE * discrete_laplace_variance(alpha * f)


def paper_sets(quick):
    import ppdp

    full = ppdp.datasets.load("adult")
    first = full.take(np.arange(10_000))
    sets = [("adult-first-10000", first), ("adult-48842", full)]
    return sets[:1] if quick else sets


def fig13(out, seed, quick) -> dict:
    """Fig 13: the original Age × Income histogram (first 10^4 rows), the phase-I cell histogram
    (α1 = 0.05), the subcube histogram under uniform estimation and the LS-estimated cells
    (paper's unweighted and the library's weighted), paper-literal DPCube at α = 0.2."""
    t = paper_sets(True)[0][1]
    spec, codes = declared_cube(t, PAPER_DIMS)
    from ...kernels.grid import dense_counts

    x = dense_counts(codes, spec.shape).astype(float)
    f = PAPER_ALPHA1_FRACTION
    y1, lo, hi, yp, a1, a2 = paper_release(t, PAPER_ALPHA, f, _paper_xi0(PAPER_ALPHA, f), seed)
    panels = {"original": x, "cell_histogram": y1, "subcube_uniform": uniform_cells(x.shape, lo, hi, yp),
              "ls_unweighted": ls_unweighted_cells(y1, lo, hi, yp), "ls_weighted": ls_weighted_cells(y1, lo, hi, yp, a1, a2)}
    from ...datasets import public_domains

    ages = public_domains("adult", ["age"])["age"]
    incomes = public_domains("adult", ["income"])["income"]
    df = pd.DataFrame({"age": np.repeat(ages, len(incomes)), "income": np.tile(incomes, len(ages)),
                       **{k: v.ravel() for k, v in panels.items()}})
    df.to_csv(out / "fig13_histograms_age_income.csv", index=False)
    qlo, qhi = random_boxes(x.shape, 10_000 if quick else 100_000, seed + 13)
    truth = _box_answers(x, qlo, qhi)
    mae = {k: float(np.abs(_box_answers(v, qlo, qhi) - truth).mean()) for k, v in panels.items() if k != "original"}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(14, 3.4), sharey=True)
    for ax, key, title in zip(axes, ["original", "cell_histogram", "subcube_uniform", "ls_unweighted"],
                              ["(a) original", f"(b) cell histogram, α1={a1:g}", f"(c) subcube (uniform), {len(lo)} partitions",
                               "(d) LS-estimated cells (H⁺)"]):
        for j, inc in enumerate(incomes):
            ax.plot(np.asarray(ages, int), panels[key][:, j], label=f"income {inc}", lw=1)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("age")
    axes[0].set_ylabel("count")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Fig 13: Adult first 10^4 rows, Age × Income (74 × 2 cells), α = {PAPER_ALPHA}, ξ0 = 2·Var(Lap(α1))", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "fig13_histograms_age_income.png", dpi=110)
    plt.close(fig)
    return {"partitions": int(len(lo)), "alpha1": a1, "alpha2": a2, "mae": mae}


def figs_14_15_paper(out, quick, seed) -> pd.DataFrame:
    """Figs 14–15 in the paper's set-up: paper-literal DPCube on Age × Income (first 10^4 rows),
    α = 0.2; weighted variance and mean absolute error (uniform and both LS estimates) vs ξ0
    (α1/α = 0.25) and vs α1/α (ξ0 fixed at 2 × the phase-I noise variance of α1/α = 0.25)."""
    from ...kernels.grid import dense_counts
    from ...kernels.noise import discrete_laplace_variance

    t = paper_sets(True)[0][1]
    spec, codes = declared_cube(t, PAPER_DIMS)
    x = dense_counts(codes, spec.shape).astype(float)
    qlo, qhi = random_boxes(x.shape, 10_000 if quick else 100_000, seed + 15)
    truth = _box_answers(x, qlo, qhi)
    trials = 1 if quick else 10
    rows = []
    grid = [("xi0", PAPER_ALPHA1_FRACTION, m) for m in ((0.5, 2, 8) if quick else (0.25, 0.5, 1, 2, 4, 8, 16))]
    # the α1 sweep keeps ξ0 fixed (the paper's Fig 14b: "with fixed ξ0") at its value for α1/α = 0.25
    xi0_fixed = _paper_xi0(PAPER_ALPHA, PAPER_ALPHA1_FRACTION)
    grid += [("alpha1", f, xi0_fixed / discrete_laplace_variance(PAPER_ALPHA * f))
             for f in ((0.1, 0.25, 0.75) if quick else (0.1, 0.25, 0.5, 0.75, 0.9))]
    for sweep, f, mult in grid:
        xi0 = mult * discrete_laplace_variance(PAPER_ALPHA * f)
        acc: dict[str, list] = {"weighted_variance": [], "partitions": [], "mae_uniform": [], "mae_ls_unweighted": [],
                                "mae_ls_weighted": [], "mae_cells": []}
        for tr in range(trials):
            y1, lo, hi, yp, a1, a2 = paper_release(t, PAPER_ALPHA, f, xi0, seed + 31 * tr)
            acc["weighted_variance"].append(weighted_variance_boxes(x, lo, hi))
            acc["partitions"].append(len(lo))
            for k, cells in (("mae_uniform", uniform_cells(x.shape, lo, hi, yp)), ("mae_ls_unweighted", ls_unweighted_cells(y1, lo, hi, yp)),
                             ("mae_ls_weighted", ls_weighted_cells(y1, lo, hi, yp, a1, a2)), ("mae_cells", y1)):
                acc[k].append(float(np.abs(_box_answers(cells, qlo, qhi) - truth).mean()))
        rows.append({"sweep": sweep, "alpha1_fraction": f, "xi0_noise_multiple": mult, "xi0": xi0,
                     **{k: float(np.mean(v)) for k, v in acc.items()}})
    df = pd.DataFrame(rows)
    df.to_csv(out / "fig14_15_paper_setup_age_income.csv", index=False)
    a, b = df[df.sweep == "xi0"], df[df.sweep == "alpha1"]
    plot(a, "xi0", ["weighted_variance"], out / "fig14a_paper_variance_vs_xi0.png",
          "Fig 14a (paper set-up): Age × Income, α = 0.2, α1/α = 0.25", logx=True, logy=True, ylabel="weighted variance")
    plot(b, "alpha1_fraction", ["weighted_variance"], out / "fig14b_paper_variance_vs_alpha1.png",
          "Fig 14b (paper set-up): ξ0 fixed = 2·Var(Lap(0.05))", logy=True, ylabel="weighted variance")
    plot(a, "xi0", ["mae_uniform", "mae_ls_unweighted", "mae_ls_weighted"], out / "fig15a_paper_error_vs_xi0.png",
          "Fig 15a (paper set-up): Age × Income, α = 0.2, α1/α = 0.25", logx=True)
    plot(b, "alpha1_fraction", ["mae_uniform", "mae_ls_unweighted", "mae_ls_weighted"], out / "fig15b_paper_error_vs_alpha1.png",
          "Fig 15b (paper set-up): ξ0 fixed = 2·Var(Lap(0.05))")
    return df


PAPER_EPS = [0.05, 0.1, 0.2, 0.5, 1.0]


def fig16_age_income(out, quick, seed) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig 16 in the paper's set-up: Age × Income, 10^5 random range queries (two range
    predicates), DPCube (the library default with every estimator incl. the paper's unweighted
    LS, and the paper-literal algorithm) against the cell histogram, the hierarchical kd-tree
    and the consistency tree. Returns (per-ε table, per-query-size table at α = 0.2)."""
    from ...kernels.grid import dense_counts
    from ...mechanisms.histogram import CellHistogram, ConsistentHierarchy, DPCube, HierarchicalKDTree

    nq = 10_000 if quick else 100_000
    trials = 2 if quick else 10
    eps_list = [0.1, 1.0] if quick else PAPER_EPS
    rows, size_rows = [], []
    for name, t in paper_sets(quick):
        spec, codes = declared_cube(t, PAPER_DIMS)
        x = dense_counts(codes, spec.shape).astype(float)
        qlo, qhi = random_boxes(x.shape, nq, seed + 16)
        truth = _box_answers(x, qlo, qhi)
        vol = np.prod(qhi - qlo + 1, axis=1) / x.size
        for eps in eps_list:
            for tr in range(trials):
                s_ = seed + 1000 * tr + 7
                est: dict[str, np.ndarray] = {}
                r = _hpublish(t, CellHistogram(eps, PAPER_DIMS, domains=DOMAINS), s_)
                est["cells"] = r.noisy_cells()
                r = _hpublish(t, DPCube(eps, PAPER_DIMS, domains=DOMAINS), s_)
                for e in ("uniform", "ls", "ls-eb"):
                    est[f"dpcube-default-{e}"] = r.estimator(e).cells(r)
                lo, hi, yp = r.partition_boxes()
                est["dpcube-default-ls-unweighted"] = ls_unweighted_cells(r.noisy_cells(), lo, hi, yp)
                f = PAPER_ALPHA1_FRACTION
                y1, lo, hi, yp, a1, a2 = paper_release(t, eps, f, _paper_xi0(eps, f), s_)
                est["dpcube-paper-uniform"] = uniform_cells(x.shape, lo, hi, yp)
                est["dpcube-paper-ls-unweighted"] = ls_unweighted_cells(y1, lo, hi, yp)
                est["dpcube-paper-ls-weighted"] = ls_weighted_cells(y1, lo, hi, yp, a1, a2)
                r = _hpublish(t, HierarchicalKDTree(eps, PAPER_DIMS, domains=DOMAINS), s_)
                est["kdtree"] = r.estimator("uniform").cells(r)
                r = _hpublish(t, ConsistentHierarchy(eps, PAPER_DIMS, domains=DOMAINS), s_)
                est["consistency"] = r.noisy_cells()
                for label, cells in est.items():
                    err = np.abs(_box_answers(cells, qlo, qhi) - truth)
                    rows.append({"data": name, "epsilon": eps, "trial": tr, "method": label, "mae": float(err.mean())})
                    if eps == (0.1 if quick else PAPER_ALPHA):
                        for b, (a, z) in enumerate([(0, 0.01), (0.01, 0.05), (0.05, 0.1), (0.1, 0.25), (0.25, 1.01)]):
                            m = (vol >= a) & (vol < z)
                            size_rows.append({"data": name, "trial": tr, "method": label, "size_bin": f"{a}-{min(z, 1)}",
                                              "bin": b, "n_queries": int(m.sum()),
                                              "mae": float(err[m].mean()) if m.any() else np.nan})
    df = pd.DataFrame(rows)
    df.to_csv(out / "fig16_age_income_trials.csv", index=False)
    table = df.groupby(["data", "epsilon", "method"]).mae.agg(["mean", "std", "count"]).reset_index()
    table["se"] = table["std"] / np.sqrt(table["count"])
    table.to_csv(out / "fig16a_age_income_error_vs_epsilon.csv", index=False)
    paper_set = paper_sets(True)[0][0]   # the paper's first 10^4 rows
    t0 = table[table.data == paper_set]
    plot(t0.rename(columns={"mean": "mae"}), "epsilon", ["mae"], out / "fig16a_age_income_error_vs_epsilon.png",
          f"Fig 16a (paper set-up): {paper_set}, Age × Income, {nq:,} random ranges, {trials} trials",
          logx=True, logy=True, group="method")
    sz = pd.DataFrame(size_rows).groupby(["data", "method", "bin", "size_bin"]).mae.mean().reset_index()
    sz.to_csv(out / "fig16b_age_income_error_vs_query_size.csv", index=False)
    plot(sz[sz.data == paper_set], "bin", ["mae"], out / "fig16b_age_income_error_vs_query_size.png",
          "Fig 16b (paper set-up): volume bins 0:<1% 1:1–5% 2:5–10% 3:10–25% 4:>25%", logy=True, group="method")
    return table, sz


def usefulness_figure(out, quick, seed) -> pd.DataFrame:
    """(ε, δ)-usefulness of the cell histogram (Algorithm 1) on Age × Income (m = 148 cells):
    δ vs ε from Theorem 4.2's bound m·exp(−εα/m), from the exact law of the proof's event
    Σ|Ñ_i| (Gamma), for one query of median size (Theorem 3.3) and observed (Definition 3.5:
    the fraction of releases, published through ``ppdp.publish``, in which some query of the
    random workload is off by more than ε)."""
    from ...kernels.grid import dense_counts
    from ...kernels.usefulness import (cell_histogram_delta, empirical_delta, single_query_delta, theorem42_alpha,
                                      theorem42_delta, useful_epsilon)
    from ...mechanisms.histogram import CellHistogram

    t = paper_sets(True)[0][1]
    spec, codes = declared_cube(t, PAPER_DIMS)
    x = dense_counts(codes, spec.shape).astype(float)
    m = x.size
    qlo, qhi = random_boxes(x.shape, 10_000 if quick else 100_000, seed + 17)
    truth = _box_answers(x, qlo, qhi)
    s_med = int(np.median(np.prod(qhi - qlo + 1, axis=1)))
    T = 20 if quick else 400
    rows = []
    for alpha in (0.1, 1.0):
        worst = np.array([np.abs(_box_answers(_hpublish(t, CellHistogram(alpha, PAPER_DIMS, domains=DOMAINS), seed + k)
                                              .noisy_cells(), qlo, qhi) - truth).max() for k in range(T)])
        for eps in np.geomspace(1, 1e5, 41) / alpha:
            rows.append({"alpha": alpha, "eps": eps, "m": m, "trials": T, "median_query_cells": s_med,
                         "delta_theorem42": float(np.minimum(1.0, theorem42_delta(alpha, eps, m))),
                         "delta_exact_sum_abs_noise": float(cell_histogram_delta(alpha, eps, m)),
                         "delta_one_median_query": float(single_query_delta(eps, s_med, alpha)),
                         "delta_observed_workload": empirical_delta(worst[:, None], eps)})
        for delta in (0.05, 0.2):
            rows.append({"alpha": alpha, "eps": np.nan, "m": m, "trials": T, "median_query_cells": s_med,
                         "delta": delta, "eps_theorem42": m * np.log(m / delta) / alpha,
                         "eps_observed_workload": useful_epsilon(worst[:, None], delta),
                         "alpha_theorem42_for_observed_eps": theorem42_alpha(useful_epsilon(worst[:, None], delta), delta, m)})
    df = pd.DataFrame(rows)
    df.to_csv(out / "usefulness_cells_age_income.csv", index=False)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, alpha in zip(axes, (0.1, 1.0)):
        d = df[(df.alpha == alpha) & df.eps.notna()]
        for col, lab in (("delta_theorem42", "Theorem 4.2 bound"), ("delta_exact_sum_abs_noise", "P[Σ|Ñ| > ε] (exact)"),
                         ("delta_observed_workload", f"observed, {len(qlo):,} random ranges"),
                         ("delta_one_median_query", f"one query of {s_med} cells (Thm 3.3)")):
            ax.plot(d.eps, d[col], label=lab)
        ax.set_xscale("log")
        ax.set_xlabel("ε (absolute error)")
        ax.set_title(f"cell histogram, α = {alpha}, m = {m}", fontsize=9)
    axes[0].set_ylabel("δ")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "usefulness_cells_age_income.png", dpi=110)
    plt.close(fig)
    return df


