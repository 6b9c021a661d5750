"""``ppdp reproduce dpcube``: the experiments of Xiao, Xiong, Fan & Goryczka (DPCube).

Figures 9–12 (uniform vs least-squares error inside one partition, by Monte Carlo with the
hardened sampler), 14 (weighted variance vs ξ0 and α1), 15 (query error vs ξ0 and α1),
16 (error vs α and vs query size against the hierarchical kd-tree and consistency baselines;
its ε table is the issue's accuracy table), 17 (classification accuracy vs α), 18 (blocking
reduction ratio vs α and vs number of attributes), plus the held-out experiment behind the
default α1/α and ξ0 (EDU, age × major_occupation — not the evaluation data).
Runs on the bundled 48,842 Adult rows and on its first 10^4 rows (the paper's set).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from ..provenance import provenance

EPS_TABLE = [0.05, 0.1, 0.5, 1.0]
DIMS = ["age", "hours_per_week"]
#: the histograms' cells are Adult's documented (public) domains, never read off the rows
DOMAINS = "adult"


def _declared_cube(t, dims, bins=None, domains=DOMAINS):
    """(CubeSpec, codes) of ``t`` over the declared domains, as the mechanisms build it."""
    from ..datasets import public_domains
    from ..kernels.grid import cube_codes

    return cube_codes(t, dims, bins, public_domains(domains, [d for d in dims if d not in (bins or {})]))


def _plot(df, x, ys, path, title, logx=False, logy=False, ylabel="mean absolute error", group=None):
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


# ------------------------------------------------------------ Figures 9–12
def _partition_errors(n_p, s, a1, a2, x, trials, rng):
    """Monte-Carlo mean |error| of uniform and LS estimates of the first s cells of one partition."""
    from ..kernels.noise import discrete_laplace, discrete_laplace_variance

    x = np.asarray(x, float)
    y1 = x[None, :] + discrete_laplace(rng, a1, (trials, n_p))
    yp = x.sum() + discrete_laplace(rng, a2, trials)
    truth = x[:s].sum()
    uni = s / n_p * yp
    v1, v2 = discrete_laplace_variance(a1), discrete_laplace_variance(a2)
    delta = (yp - y1.sum(1)) * v1 / (v2 + n_p * v1)
    ls = y1[:, :s].sum(1) + s * delta
    return float(np.abs(uni - truth).mean()), float(np.abs(ls - truth).mean())


def _smooth_x(n_p, s, gamma):
    """γ-smooth data that is worst for the uniform estimate of the first s cells."""
    return np.where(np.arange(n_p) < s, 50.0 + gamma, 50.0)


def figs_9_12(out: Path, quick: bool, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    T = 4000 if quick else 40000
    n_p, a1, a2, gamma, eta = 11, 0.05, 0.15, 5, 5
    rows = []
    for s in range(1, n_p + 1):
        u, l = _partition_errors(n_p, s, a1, a2, _smooth_x(n_p, s, gamma), T, rng)
        # "any distribution": the uniform error given an observed inconsistency η (eq 34)
        from ..kernels.noise import discrete_laplace

        z = discrete_laplace(rng, a1, (T, s)).sum(1)
        rows.append({"s": s, "uniform_smooth": u, "ls": l, "uniform_any_eta5": float(np.abs(eta + z).mean())})
    f9 = pd.DataFrame(rows)
    f9.to_csv(out / "fig09_error_vs_query_size.csv", index=False)
    _plot(f9, "s", ["uniform_smooth", "ls", "uniform_any_eta5"], out / "fig09_error_vs_query_size.png",
          f"Fig 9: n_p={n_p}, α1={a1}, α2={a2}, γ={gamma}")
    rows = []
    for a1_ in np.round(np.arange(0.02, 0.2, 0.02), 3):
        s = 5
        u, l = _partition_errors(n_p, s, a1_, 0.2 - a1_, _smooth_x(n_p, s, gamma), T, rng)
        from ..kernels.noise import discrete_laplace

        z = discrete_laplace(rng, a1_, (T, s)).sum(1)
        rows.append({"alpha1": a1_, "uniform_smooth": u, "ls": l, "uniform_any_eta5": float(np.abs(eta + z).mean())})
    f10 = pd.DataFrame(rows)
    f10.to_csv(out / "fig10_error_vs_alpha1.csv", index=False)
    _plot(f10, "alpha1", ["uniform_smooth", "ls", "uniform_any_eta5"], out / "fig10_error_vs_alpha1.png",
          "Fig 10: α = 0.2, s = 5, n_p = 11")
    rows = []
    for n in [3, 5, 7, 11, 15, 21, 31]:
        s = (n + 1) // 2
        u, l = _partition_errors(n, s, a1, a2, _smooth_x(n, s, gamma), T, rng)
        rows.append({"n_p": n, "uniform_smooth": u, "ls": l})
    f11a = pd.DataFrame(rows)
    f11a.to_csv(out / "fig11a_error_vs_partition_size.csv", index=False)
    _plot(f11a, "n_p", ["uniform_smooth", "ls"], out / "fig11a_error_vs_partition_size.png", "Fig 11a: s ≈ n_p/2, γ = 5")
    rows = []
    for g in [0, 1, 2, 5, 10, 20]:
        u, l = _partition_errors(n_p, 5, a1, a2, _smooth_x(n_p, 5, g), T, rng)
        rows.append({"gamma": g, "uniform_smooth": u, "ls": l, "uniform_bound_eq33": g * min(5, n_p - 5) + 5 / (a2 * n_p)})
    f11b = pd.DataFrame(rows)
    f11b.to_csv(out / "fig11b_error_vs_smoothness.csv", index=False)
    _plot(f11b, "gamma", ["uniform_smooth", "ls", "uniform_bound_eq33"], out / "fig11b_error_vs_smoothness.png", "Fig 11b")
    rows = []
    from ..kernels.noise import discrete_laplace

    for e in [0, 2, 5, 10, 20, 40]:
        z = discrete_laplace(rng, a1, (T, 5)).sum(1)
        rows.append({"eta": e, "uniform_any": float(np.abs(e + z).mean())})
    f12 = pd.DataFrame(rows)
    f12.to_csv(out / "fig12_error_vs_inconsistency.csv", index=False)
    _plot(f12, "eta", ["uniform_any"], out / "fig12_error_vs_inconsistency.png", "Fig 12: s = 5, α1 = 0.05")
    return {"fig9": f9, "fig10": f10, "fig11a": f11a, "fig11b": f11b, "fig12": f12}


# ------------------------------------------------------------ helpers on Adult
def _mae(release, wl, truth, estimator=None):
    return float(np.abs(release.answer(wl, estimator=estimator) - truth).mean())


def _weighted_variance(release, x):
    """V = Σ_p x_p · Var_p (true counts) over the released partitions (Xiao et al. §6.2)."""
    from ..kernels.grid import paint

    lo, hi, _ = release.partition_boxes()
    pid = paint(release.shape, lo, hi).ravel()
    xr = x.ravel().astype(float)
    n = np.bincount(pid, minlength=len(lo)).astype(float)
    s = np.bincount(pid, weights=xr, minlength=len(lo))
    q = np.bincount(pid, weights=xr * xr, minlength=len(lo))
    return float((s * (q / n - (s / n) ** 2)).sum())


def _datasets(quick):
    import ppdp

    full, info = ppdp.datasets.load_info("adult")
    first = full.take(np.arange(10_000))
    sets = [("adult-48842", full, {**info, "rows": "all 48,842"}), ("adult-first-10000", first, {**info, "rows": "first 10,000 (paper)", "n": 10000})]
    return sets[:1] if quick else sets


def figs_14_15(out, quick, seed, datasets) -> pd.DataFrame:
    import ppdp
    from ..mechanisms.histogram import DPCube
    from ..kernels.grid import dense_counts
    from ..queries import answer_exact
    from ..queries.workloads import range_workload

    trials = 3 if quick else 10
    eps = 0.5
    rows = []
    for name, t, _ in datasets:
        spec, codes = _declared_cube(t, DIMS)
        x = dense_counts(codes, spec.shape)
        wl = range_workload(t.domains, DIMS, 500 if quick else 2000, seed=seed)
        truth = answer_exact(t, wl)
        for f in [0.3, 0.5, 0.7, 0.9]:
            for k in [1.0, 3.0, 10.0, 30.0, 100.0]:
                wv, mu, ml, npart = [], [], [], []
                for tr in range(trials):
                    r = ppdp.publish(t, DPCube(eps, DIMS, alpha1_fraction=f, count_threshold=k, domains=DOMAINS), seed=seed + tr)
                    wv.append(_weighted_variance(r, x))
                    mu.append(_mae(r, wl, truth, "uniform"))
                    ml.append(_mae(r, wl, truth, "ls"))
                    npart.append(r.certificate["n_partitions"])
                rows.append({"data": name, "epsilon": eps, "alpha1_fraction": f, "count_threshold": k,
                             "weighted_variance": np.mean(wv), "mae_uniform": np.mean(mu), "mae_ls": np.mean(ml),
                             "partitions": np.mean(npart)})
    df = pd.DataFrame(rows)
    df.to_csv(out / "fig14_15_variance_and_error_vs_threshold_alpha1.csv", index=False)
    d0 = df[df.data == datasets[0][0]]
    a = d0[d0.alpha1_fraction == 0.9]
    b = d0[d0.count_threshold == 100.0]
    _plot(a, "count_threshold", ["weighted_variance"], out / "fig14a_variance_vs_threshold.png",
          "Fig 14a: weighted variance vs stopping threshold θ (α=0.5, α1/α=0.9)", logx=True, logy=True,
          ylabel="weighted variance")
    _plot(b, "alpha1_fraction", ["weighted_variance"], out / "fig14b_variance_vs_alpha1.png",
          "Fig 14b: weighted variance vs α1/α (θ = 100)", logy=True, ylabel="weighted variance")
    _plot(a, "count_threshold", ["mae_uniform", "mae_ls"], out / "fig15a_error_vs_threshold.png",
          "Fig 15a: query error vs θ (α=0.5, α1/α=0.9)", logx=True, logy=True)
    _plot(b, "alpha1_fraction", ["mae_uniform", "mae_ls"], out / "fig15b_error_vs_alpha1.png",
          "Fig 15b: query error vs α1/α (θ = 100)", logy=True)
    return df


def best_settings(heldout: pd.DataFrame) -> dict:
    """Per DPCube estimator, its best (α1/α, θ, ξ0) on the held-out data (ξ0 'off' → None)."""
    rank = heldout_ranking(heldout)
    out = {}
    for (f, th, xi0, est), _ in rank.items():
        if est not in out:
            out[est] = {"alpha1_fraction": float(f), "count_threshold": float(th),
                        "xi0": None if xi0 == "off" else float(xi0)}
    return out


def _methods(eps, settings):
    from ..mechanisms.histogram import CellHistogram, ConsistentHierarchy, DPCube, HierarchicalKDTree

    dp = [(f"dpcube-{est}", DPCube(eps, DIMS, **settings[est], domains=DOMAINS), est) for est in ("uniform", "ls", "ls-eb")]
    return [("cells", CellHistogram(eps, DIMS, domains=DOMAINS), "cells"), *dp,
            ("kdtree", HierarchicalKDTree(eps, DIMS, domains=DOMAINS), "uniform"),
            ("consistency", ConsistentHierarchy(eps, DIMS, domains=DOMAINS), "cells")]


def fig16(out, quick, seed, datasets, settings) -> pd.DataFrame:
    from tqdm import tqdm

    import ppdp
    from ..queries import answer_exact
    from ..queries.workloads import range_workload

    trials = 3 if quick else 10
    rows, size_rows = [], []
    for name, t, _ in datasets:
        wl = range_workload(t.domains, DIMS, 2000, seed=seed)
        truth = answer_exact(t, wl)
        shape = list(_declared_cube(t, DIMS)[0].shape)
        for eps in tqdm(EPS_TABLE, desc=f"fig16 {name}"):
            for tr in range(trials):
                cache: dict = {}
                for label, mech, est in _methods(eps, settings):
                    key = repr(mech)  # one release per distinct mechanism and parameters
                    if key not in cache:
                        cache[key] = ppdp.publish(t, mech, seed=seed + 1000 * tr + 7)
                    r = cache[key]
                    err = np.abs(r.answer(wl, estimator=est) - truth)
                    rows.append({"data": name, "epsilon": eps, "trial": tr, "method": label, "mae": float(err.mean())})
                    if eps == 0.1:
                        lo, hi, _ = r.query_boxes(wl)
                        vol = np.prod(hi - lo + 1, axis=1) / np.prod(shape)
                        for b, (a, z) in enumerate([(0, 0.01), (0.01, 0.05), (0.05, 0.1), (0.1, 0.25), (0.25, 1.01)]):
                            m = (vol >= a) & (vol < z)
                            size_rows.append({"data": name, "trial": tr, "method": label, "size_bin": f"{a}-{min(z, 1)}",
                                              "bin": b, "n_queries": int(m.sum()), "mae": float(err[m].mean()) if m.any() else np.nan})
    df = pd.DataFrame(rows)
    df.to_csv(out / "fig16a_error_vs_epsilon_trials.csv", index=False)
    table = df.groupby(["data", "epsilon", "method"]).mae.agg(["mean", "std"]).reset_index()
    table.to_csv(out / "fig16a_error_vs_epsilon.csv", index=False)
    t0 = table[table.data == datasets[0][0]]
    _plot(t0.rename(columns={"mean": "mae"}), "epsilon", ["mae"], out / "fig16a_error_vs_epsilon.png",
          f"Fig 16a: {datasets[0][0]}, 2000 random ranges, {trials} trials", logx=True, logy=True, group="method")
    sz = pd.DataFrame(size_rows).groupby(["data", "method", "bin", "size_bin"]).mae.mean().reset_index()
    sz.to_csv(out / "fig16b_error_vs_query_size.csv", index=False)
    _plot(sz[sz.data == datasets[0][0]], "bin", ["mae"], out / "fig16b_error_vs_query_size.png",
          "Fig 16b: ε = 0.1; query volume bins 0:<1% 1:1–5% 2:5–10% 3:10–25% 4:>25%", logy=True, group="method")
    return table


def fig17(out, quick, seed) -> pd.DataFrame:
    import ppdp
    from ..mechanisms.histogram import DPCube
    from ..mechanisms.histogram.applications import private_id3, synthesize, tree_accuracy

    t = ppdp.datasets.load("adult")
    feats = ["workclass", "marital_status", "race", "sex"]
    cls = "income"
    train_idx, test_idx = np.arange(32561), np.arange(32561, t.n_rows)  # adult.data / adult.test
    X = np.stack([t.codes(f) for f in feats], axis=1).astype(np.int64)
    y = t.codes(cls).astype(np.int64)
    sizes = [len(t.domain(f)) for f in feats]
    base = tree_accuracy(X[train_idx], y[train_idx], X[test_idx], y[test_idx])
    train = t.take(train_idx)
    trials = 3 if quick else 10
    rows = []
    for eps in [0.05, 0.1, 0.25, 0.5, 1.0]:
        for tr in range(trials):
            r = ppdp.publish(train, DPCube(eps, feats + [cls], domains=DOMAINS), seed=seed + tr)
            idx, w = synthesize(r)
            acc_h = tree_accuracy(idx[:, :-1], idx[:, -1], X[test_idx], y[test_idx], weights=w)
            pred = private_id3(X[train_idx], y[train_idx], sizes, 2, eps, np.random.default_rng(seed + tr))
            acc_p = float(np.mean(pred(X[test_idx]) == y[test_idx]))
            rows.append({"epsilon": eps, "trial": tr, "dpcube_tree": acc_h, "private_id3": acc_p, "true_data_tree": base})
    df = pd.DataFrame(rows)
    df.to_csv(out / "fig17_classification_trials.csv", index=False)
    agg = df.groupby("epsilon")[["dpcube_tree", "private_id3", "true_data_tree"]].mean().reset_index()
    agg.to_csv(out / "fig17_classification_vs_epsilon.csv", index=False)
    _plot(agg, "epsilon", ["dpcube_tree", "private_id3", "true_data_tree"], out / "fig17_classification_vs_epsilon.png",
          "Fig 17: Adult, workclass/marital/race/sex → income", logx=True, ylabel="test accuracy")
    return agg


BLOCK_ATTRS = ["age", "education", "hours_per_week", "marital_status", "race", "sex"]
BLOCK_BINS = {"age": list(range(15, 95, 10)) + [95], "hours_per_week": list(range(0, 100, 10)) + [100]}


def fig18(out, quick, seed, partition_setting) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Blocking uses only the partitions, so DPCube runs with the held-out best setting for the
    partitions-only (uniform) estimator, not the least-squares default."""
    import ppdp
    from ..mechanisms.histogram import DPCube, HierarchicalKDTree
    from ..mechanisms.histogram.applications import blocks_of, reduction_ratio

    t = ppdp.datasets.load("adult")
    perm = np.random.default_rng(seed).permutation(t.n_rows)
    d1, d2 = t.take(np.sort(perm[: t.n_rows // 2])), t.take(np.sort(perm[t.n_rows // 2:]))
    trials = 2 if quick else 5

    def rr(mech, attrs, tr):
        bins = {a: b for a, b in BLOCK_BINS.items() if a in attrs}
        r = ppdp.publish(d1, mech, seed=seed + tr)
        _, c1 = _declared_cube(d1, attrs, bins)
        _, c2 = _declared_cube(d2, attrs, bins)
        b1, nb = blocks_of(r, c1)
        b2, _ = blocks_of(r, c2)
        return reduction_ratio(b1, b2, nb)

    rows = []
    attrs2 = BLOCK_ATTRS[:2]
    bins2 = {a: b for a, b in BLOCK_BINS.items() if a in attrs2}
    for eps in [0.05, 0.1, 0.25, 0.5, 1.0]:
        for tr in range(trials):
            rows.append({"epsilon": eps, "trial": tr,
                         "dpcube": rr(DPCube(eps, attrs2, bins=bins2, domains=DOMAINS, **partition_setting), attrs2, tr),
                         "kdtree": rr(HierarchicalKDTree(eps, attrs2, bins=bins2, domains=DOMAINS), attrs2, tr)})
    a = pd.DataFrame(rows).groupby("epsilon")[["dpcube", "kdtree"]].mean().reset_index()
    a.to_csv(out / "fig18a_reduction_ratio_vs_epsilon.csv", index=False)
    _plot(a, "epsilon", ["dpcube", "kdtree"], out / "fig18a_reduction_ratio_vs_epsilon.png",
          "Fig 18a: blocking on age × education", logx=True, ylabel="reduction ratio")
    rows = []
    for k in range(2, len(BLOCK_ATTRS) + 1):
        attrs = BLOCK_ATTRS[:k]
        bins = {a_: b for a_, b in BLOCK_BINS.items() if a_ in attrs}
        for tr in range(trials):
            rows.append({"n_attributes": k, "trial": tr, "dpcube": rr(DPCube(0.1, attrs, bins=bins, domains=DOMAINS, **partition_setting), attrs, tr),
                         "kdtree": rr(HierarchicalKDTree(0.1, attrs, bins=bins, domains=DOMAINS), attrs, tr)})
    b = pd.DataFrame(rows).groupby("n_attributes")[["dpcube", "kdtree"]].mean().reset_index()
    b.to_csv(out / "fig18b_reduction_ratio_vs_attributes.csv", index=False)
    _plot(b, "n_attributes", ["dpcube", "kdtree"], out / "fig18b_reduction_ratio_vs_attributes.png",
          "Fig 18b: ε = 0.1", ylabel="reduction ratio")
    return a, b


HELDOUT = [("edu", ["age", "major_occupation"]), ("occ", ["age", "occupation"])]


def defaults_experiment(out, quick, seed) -> pd.DataFrame:
    """Held-out data for the defaults (not the evaluation cube): EDU age × major_occupation and
    OCC age × occupation, each 48,842 rows drawn at random (Adult's size, so the same noise
    regime). Grid over α1/α, the count threshold θ, the de-noised variance threshold ξ0 (off
    or 0) and the estimator; the score of a setting is its mean, over (data, ε), of MAE / the
    best MAE of any setting at that (data, ε)."""
    import itertools

    import ppdp
    from ..mechanisms.histogram import CellHistogram, DPCube
    from ..queries import answer_exact
    from ..queries.workloads import range_workload
    from ..releases.histogram import HistogramRelease

    trials = 2 if quick else 3
    rows = []
    for name, dims in HELDOUT:
        t = ppdp.datasets.load(name, n=48842, seed=0)
        wl = range_workload(t.domains, dims, 500 if quick else 1000, seed=seed + 99)
        truth = answer_exact(t, wl)
        for eps in EPS_TABLE:
            r0 = cast(HistogramRelease, ppdp.publish(t, CellHistogram(eps, dims, domains=name), seed=0))
            qlo, qhi, owner = r0.query_boxes(wl)

            def mae(r, est):
                return float(np.abs(r.estimator(est).answer_boxes(r, qlo, qhi, owner, len(wl)) - truth).mean())
            cells = np.mean([mae(ppdp.publish(t, CellHistogram(eps, dims, domains=name), seed=s), "cells") for s in range(trials)])
            rows.append({"data": name, "epsilon": eps, "alpha1_fraction": np.nan, "count_threshold": np.nan,
                         "xi0": "", "estimator": "cells (CellHistogram)", "mae": cells, "partitions": np.nan})
            for f, th, xi0 in itertools.product([0.2, 0.3, 0.5, 0.7, 0.8, 0.9], [1.0, 3.0, 10.0, 30.0, 100.0], [None, 0.0]):
                e: dict[str, list]
                e, npart = {"uniform": [], "ls": [], "ls-eb": []}, []
                for s in range(trials):
                    r = ppdp.publish(t, DPCube(eps, dims, alpha1_fraction=f, count_threshold=th, xi0=xi0, domains=name), seed=s)
                    npart.append(r.certificate["n_partitions"])
                    for est in e:
                        e[est].append(mae(r, est))
                for est, v in e.items():
                    rows.append({"data": name, "epsilon": eps, "alpha1_fraction": f, "count_threshold": th,
                                 "xi0": "off" if xi0 is None else xi0, "estimator": est, "mae": np.mean(v),
                                 "partitions": np.mean(npart)})
    df = pd.DataFrame(rows)
    df["rel"] = df.mae / df.groupby(["data", "epsilon"]).mae.transform("min")
    df.to_csv(out / "defaults_heldout.csv", index=False)
    return df


def heldout_ranking(df: pd.DataFrame) -> pd.Series:
    d = df[df.estimator != "cells (CellHistogram)"]
    return d.groupby(["alpha1_fraction", "count_threshold", "xi0", "estimator"]).rel.mean().sort_values()


def run(out_dir: Path, quick: bool) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    seed = 20240601
    started = time.time()
    datasets = _datasets(quick)
    meta = provenance(seed, paper="Xiao, Xiong, Fan & Goryczka, DPCube", quick=quick,
                      datasets=[{"name": n, **{k: v for k, v in i.items()}} for n, _, i in datasets],
                      dims=DIMS, sampler="discrete Laplace (ppdp.kernels.noise)")
    sims = figs_9_12(out, quick, seed)
    heldout = defaults_experiment(out, quick, seed)
    f1415 = figs_14_15(out, quick, seed, datasets)
    settings = best_settings(heldout)
    meta["dpcube_settings_per_estimator"] = settings
    table = fig16(out, quick, seed, datasets, settings)
    f17 = fig17(out, quick, seed)
    f18a, f18b = fig18(out, quick, seed, settings["uniform"])
    meta["seconds"] = round(time.time() - started, 1)
    (out / "params.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    summary = out / "summary.md"
    summary.write_text(_summary(meta, sims, heldout, f1415, table, f17, f18a, f18b, datasets))
    return summary


def _summary(meta, sims, heldout, f1415, table, f17, f18a, f18b, datasets) -> str:
    L = ["# DPCube reproduction (Xiao, Xiong, Fan & Goryczka)", "",
         f"quick={meta['quick']}, seed={meta['seed']}, ppdp {meta['library_version']}, {meta['machine']['cpus']} CPUs, "
         f"{meta['seconds']} s. Data: " + "; ".join(f"{d['name']} ({d.get('rows')})" for d in meta["datasets"]) + ".", ""]
    L += ["## Accuracy table (Fig 16a): mean absolute error, Adult age × hours_per_week (1-year × 1-hour cells), "
          "2,000 random range queries", "",
          "Each DPCube estimator runs with its own best setting on the held-out data: "
          + "; ".join(f"{k}: {v}" for k, v in meta["dpcube_settings_per_estimator"].items())
          + " (dpcube-ls = the library default).", ""]
    for name in table.data.unique():
        sub = table[table.data == name]
        piv = sub.pivot(index="method", columns="epsilon", values="mean")
        L += [f"**{name}**", "", "| method | " + " | ".join(f"ε={e:g}" for e in piv.columns) + " |",
              "|---|" + "---|" * len(piv.columns)]
        for mth, row in piv.iterrows():
            L.append(f"| {mth} | " + " | ".join(f"{v:.1f}" for v in row.values) + " |")
        L.append("")
        for e in [x for x in piv.columns if x <= 0.5]:
            col = piv[e]
            others = col.drop([m for m in col.index if m.startswith("dpcube")])
            for est in ("dpcube-ls", "dpcube-ls-eb", "dpcube-uniform"):
                beats = bool(col[est] < others.min())
                L.append(f"- ε={e:g}: {est} {'beats' if beats else 'does NOT beat'} cells and both baselines "
                         f"({col[est]:.1f} vs best other {others.min():.1f}, {others.idxmin()})")
        L.append("")
    d = heldout
    best = heldout_ranking(d)
    cells_rel = d[d.estimator == "cells (CellHistogram)"].rel.mean()
    L += ["## Defaults (held-out: EDU age × major_occupation, OCC age × occupation, 48,842 rows each)", "",
          "Mean over (data, ε ∈ {0.05, 0.1, 0.5, 1}) of MAE relative to the best setting there; best five "
          f"(the cell histogram scores {cells_rel:.3f}):", ""]
    L += [f"- α1/α = {i[0]}, θ = {i[1]:g}, ξ0 = {i[2]}, estimator {i[3]}: {v:.3f}" for i, v in best.head(5).items()]
    L += ["", "## Figures 9–12 (Monte Carlo, one partition)", "",
          "See fig09–fig12 CSV/PNG. Uniform beats LS on smooth data at small γ; LS wins when γ grows (Fig 11b).", ""]
    f = f1415[f1415.data == datasets[0][0]]
    L += ["## Figures 14–15", "", "Weighted variance and query error (α = 0.5, α1/α = 0.9) vs the stopping threshold θ: "
          + ", ".join(f"θ={r.count_threshold:g}: V={r.weighted_variance:.3g}, MAE-LS={r.mae_ls:.1f}, "
                      f"MAE-uniform={r.mae_uniform:.1f}, {r.partitions:.0f} partitions"
                      for r in f[f.alpha1_fraction == 0.9].itertuples()), ""]
    L += ["## Figure 17 (classification accuracy on adult.test)", "", f17.to_markdown(index=False) if hasattr(f17, "to_markdown") and _has_tabulate() else f17.to_string(index=False), ""]
    L += ["## Figure 18 (blocking reduction ratio)", "", f18a.to_string(index=False), "", f18b.to_string(index=False), ""]
    return "\n".join(L) + "\n"


def _has_tabulate():
    try:
        import tabulate  # noqa: F401
        return True
    except ImportError:
        return False
