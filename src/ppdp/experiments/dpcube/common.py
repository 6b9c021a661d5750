"""Shared by the DPCube reproduction: the evaluation set-up on Adult (declared domains, cubes,
errors, plots)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np


if TYPE_CHECKING:
    pass

EPS_TABLE = [0.05, 0.1, 0.5, 1.0]
DIMS = ["age", "hours_per_week"]
#: the histograms' cells are Adult's documented (public) domains, never read off the rows
DOMAINS = "adult"


def declared_cube(t, dims, bins=None, domains=DOMAINS):
    """(CubeSpec, codes) of ``t`` over the declared domains, as the mechanisms build it."""
    from ...datasets import public_domains
    from ...kernels.grid import cube_codes

    return cube_codes(t, dims, bins, public_domains(domains, [d for d in dims if d not in (bins or {})]))


def plot(df, x, ys, path, title, logx=False, logy=False, ylabel="mean absolute error", group=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    if group:
        for g, sub in df.groupby(group):
            ax.plot(sub[x], sub[ys[0]], marker="o", label=str(g))
    else:
        for y in ys:
            ax.plot(df[x], df[y], marker="o", label=y)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)




# ------------------------------------------------------------ helpers on Adult
def mae(release, wl, truth, estimator=None):
    return float(np.abs(release.answer(wl, estimator=estimator) - truth).mean())


def weighted_variance(release, x):
    """V = Σ_p x_p · Var_p (true counts) over the released partitions (Xiao et al. §6.2)."""
    lo, hi, _ = release.partition_boxes()
    return weighted_variance_boxes(x.reshape(release.shape), lo, hi)


def weighted_variance_boxes(x, lo, hi):
    """V = Σ_p x_p · Var_p of the true counts ``x`` over the partition boxes ``[lo, hi]``."""
    from ...kernels.grid import paint

    pid = paint(x.shape, lo, hi).ravel()
    xr = x.ravel().astype(float)
    n = np.bincount(pid, minlength=len(lo)).astype(float)
    s = np.bincount(pid, weights=xr, minlength=len(lo))
    q = np.bincount(pid, weights=xr * xr, minlength=len(lo))
    return float((s * (q / n - (s / n) ** 2)).sum())


def datasets_for(quick):
    import ppdp

    full, info = ppdp.datasets.load_info("adult")
    first = full.take(np.arange(10_000))
    sets = [("adult-48842", full, {**info, "rows": "all 48,842"}), ("adult-first-10000", first, {**info, "rows": "first 10,000 (paper)", "n": 10000})]
    return sets[:1] if quick else sets


