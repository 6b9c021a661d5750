"""The DPCube reproduction with the library's mechanisms on Adult age × hours: Figures 9–12,
14–15, 16–18 and the held-out experiment behind the defaults."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd


if TYPE_CHECKING:
    pass
from .common import DIMS, DOMAINS, EPS_TABLE, declared_cube, mae, plot, weighted_variance


# ------------------------------------------------------------ Figures 9–12
def _partition_errors(n_p, s, a1, a2, x, trials, rng):
    """Monte-Carlo mean |error| of the estimates of the first s cells of one partition:
    (uniform, weighted LS — the library's ``ls`` —, unweighted LS — the paper's H⁺, eq 35 —),
    all three from the same noise draws."""
    from ...kernels.noise import discrete_laplace, discrete_laplace_variance

    x = np.asarray(x, float)
    y1 = x[None, :] + discrete_laplace(rng, a1, (trials, n_p))
    yp = x.sum() + discrete_laplace(rng, a2, trials)
    truth = x[:s].sum()
    uni = s / n_p * yp
    v1, v2 = discrete_laplace_variance(a1), discrete_laplace_variance(a2)
    gap = yp - y1.sum(1)
    ls = y1[:, :s].sum(1) + s * gap * v1 / (v2 + n_p * v1)
    ls_u = y1[:, :s].sum(1) + s * gap / (n_p + 1)
    return float(np.abs(uni - truth).mean()), float(np.abs(ls - truth).mean()), float(np.abs(ls_u - truth).mean())


def _smooth_x(n_p, s, gamma):
    """γ-smooth data that is worst for the uniform estimate of the first s cells."""
    return np.where(np.arange(n_p) < s, 50.0 + gamma, 50.0)


def figs_9_12(out: Path, quick: bool, seed: int) -> dict:
    """Monte Carlo inside one partition with the library's sampler (discrete Laplace), beside
    the paper's closed forms for continuous Laplace noise where it has one (eq 33 bound, eq 34
    exact via :mod:`ppdp.kernels.usefulness`). Both least-squares estimates: ``ls`` (weighted by
    the two noise variances, what the library ships) and ``ls_unweighted`` (the paper's H⁺)."""
    from ...kernels.noise import discrete_laplace
    from ...kernels.usefulness import eq33_uniform_error_bound, eq34_uniform_error, eq35_ls_error

    def exact_ls(a1_, a2_, n_, s_):
        """eq 35 for continuous noise: (paper's unweighted, variance-weighted)."""
        return eq35_ls_error(a1_, a2_, n_, s_), eq35_ls_error(a1_, a2_, n_, s_, (2 / a1_**2, 2 / a2_**2))

    rng = np.random.default_rng(seed)
    T = 2000 if quick else 40000
    n_p, a1, a2, gamma, eta = 11, 0.05, 0.15, 5, 5
    rows = []
    for s in range(1, n_p + 1):
        u, l, lu = _partition_errors(n_p, s, a1, a2, _smooth_x(n_p, s, gamma), T, rng)
        # "any distribution": the uniform error given an observed inconsistency η (eq 34)
        z = discrete_laplace(rng, a1, (T, s)).sum(1)
        e35u, e35w = exact_ls(a1, a2, n_p, s)
        rows.append({"s": s, "uniform_smooth": u, "ls": l, "ls_unweighted": lu, "ls_unweighted_eq35": e35u,
                     "ls_weighted_eq35": e35w, "uniform_smooth_bound_eq33": float(eq33_uniform_error_bound(gamma, s, n_p, a2)),
                     "uniform_any_eta5": float(np.abs(eta + z).mean()),
                     "uniform_any_eta5_eq34": float(eq34_uniform_error(eta, s, a1))})
    f9 = pd.DataFrame(rows)
    f9.to_csv(out / "fig09_error_vs_query_size.csv", index=False)
    plot(f9, "s", ["uniform_smooth", "ls", "ls_unweighted", "uniform_any_eta5"], out / "fig09_error_vs_query_size.png",
          f"Fig 9: n_p={n_p}, α1={a1}, α2={a2}, γ={gamma}")
    rows = []
    for a1_ in np.round(np.arange(0.02, 0.2, 0.02), 3):
        s = 5
        u, l, lu = _partition_errors(n_p, s, a1_, 0.2 - a1_, _smooth_x(n_p, s, gamma), T, rng)
        z = discrete_laplace(rng, a1_, (T, s)).sum(1)
        e35u, e35w = exact_ls(a1_, 0.2 - a1_, n_p, s)
        rows.append({"alpha1": a1_, "uniform_smooth": u, "ls": l, "ls_unweighted": lu, "ls_unweighted_eq35": e35u,
                     "ls_weighted_eq35": e35w, "uniform_smooth_bound_eq33": float(eq33_uniform_error_bound(gamma, s, n_p, 0.2 - a1_)),
                     "uniform_any_eta5": float(np.abs(eta + z).mean()),
                     "uniform_any_eta5_eq34": float(eq34_uniform_error(eta, s, a1_))})
    f10 = pd.DataFrame(rows)
    f10.to_csv(out / "fig10_error_vs_alpha1.csv", index=False)
    plot(f10, "alpha1", ["uniform_smooth", "ls", "ls_unweighted", "ls_unweighted_eq35", "uniform_any_eta5"],
          out / "fig10_error_vs_alpha1.png",
          "Fig 10: α = 0.2, s = 5, n_p = 11 (ls weighted, ls_unweighted = paper's H⁺)")
    rows = []
    for n in [3, 5, 7, 11, 15, 21, 31]:
        s = (n + 1) // 2
        u, l, lu = _partition_errors(n, s, a1, a2, _smooth_x(n, s, gamma), T, rng)
        rows.append({"n_p": n, "uniform_smooth": u, "ls": l, "ls_unweighted": lu})
    f11a = pd.DataFrame(rows)
    f11a.to_csv(out / "fig11a_error_vs_partition_size.csv", index=False)
    plot(f11a, "n_p", ["uniform_smooth", "ls", "ls_unweighted"], out / "fig11a_error_vs_partition_size.png",
          "Fig 11a: s ≈ n_p/2, γ = 5")
    rows = []
    for g in [0, 1, 2, 5, 10, 20]:
        u, l, lu = _partition_errors(n_p, 5, a1, a2, _smooth_x(n_p, 5, g), T, rng)
        rows.append({"gamma": g, "uniform_smooth": u, "ls": l, "ls_unweighted": lu,
                     "uniform_bound_eq33": float(eq33_uniform_error_bound(g, 5, n_p, a2))})
    f11b = pd.DataFrame(rows)
    f11b.to_csv(out / "fig11b_error_vs_smoothness.csv", index=False)
    plot(f11b, "gamma", ["uniform_smooth", "ls", "ls_unweighted", "uniform_bound_eq33"], out / "fig11b_error_vs_smoothness.png", "Fig 11b")
    rows = []
    for e in [0, 2, 5, 10, 20, 40]:
        z = discrete_laplace(rng, a1, (T, 5)).sum(1)
        rows.append({"eta": e, "uniform_any": float(np.abs(e + z).mean()), "uniform_any_eq34": float(eq34_uniform_error(e, 5, a1))})
    f12 = pd.DataFrame(rows)
    f12.to_csv(out / "fig12_error_vs_inconsistency.csv", index=False)
    plot(f12, "eta", ["uniform_any", "uniform_any_eq34"], out / "fig12_error_vs_inconsistency.png", "Fig 12: s = 5, α1 = 0.05")
    return {"fig9": f9, "fig10": f10, "fig11a": f11a, "fig11b": f11b, "fig12": f12}



def figs_14_15(out, quick, seed, datasets) -> pd.DataFrame:
    import ppdp
    from ...mechanisms.histogram import DPCube
    from ...kernels.grid import dense_counts
    from ...queries import answer_exact
    from ...queries.workloads import range_workload

    trials = 1 if quick else 10
    eps = 0.5
    rows = []
    for name, t, _ in datasets:
        spec, codes = declared_cube(t, DIMS)
        x = dense_counts(codes, spec.shape)
        wl = range_workload(t.domains, DIMS, 500 if quick else 2000, seed=seed)
        truth = answer_exact(t, wl)
        for f in ([0.3, 0.9] if quick else [0.3, 0.5, 0.7, 0.9]):
            for k in ([1.0, 100.0] if quick else [1.0, 3.0, 10.0, 30.0, 100.0]):
                wv, mu, ml, npart = [], [], [], []
                for tr in range(trials):
                    r = ppdp.publish(t, DPCube(eps, DIMS, alpha1_fraction=f, count_threshold=k, domains=DOMAINS), seed=seed + tr)
                    wv.append(weighted_variance(r, x))
                    mu.append(mae(r, wl, truth, "uniform"))
                    ml.append(mae(r, wl, truth, "ls"))
                    npart.append(r.certificate["n_partitions"])
                rows.append({"data": name, "epsilon": eps, "alpha1_fraction": f, "count_threshold": k,
                             "weighted_variance": np.mean(wv), "mae_uniform": np.mean(mu), "mae_ls": np.mean(ml),
                             "partitions": np.mean(npart)})
    df = pd.DataFrame(rows)
    df.to_csv(out / "fig14_15_variance_and_error_vs_threshold_alpha1.csv", index=False)
    d0 = df[df.data == datasets[0][0]]
    a = d0[d0.alpha1_fraction == 0.9]
    b = d0[d0.count_threshold == 100.0]
    plot(a, "count_threshold", ["weighted_variance"], out / "fig14a_variance_vs_threshold.png",
          "Fig 14a: weighted variance vs stopping threshold θ (α=0.5, α1/α=0.9)", logx=True, logy=True,
          ylabel="weighted variance")
    plot(b, "alpha1_fraction", ["weighted_variance"], out / "fig14b_variance_vs_alpha1.png",
          "Fig 14b: weighted variance vs α1/α (θ = 100)", logy=True, ylabel="weighted variance")
    plot(a, "count_threshold", ["mae_uniform", "mae_ls"], out / "fig15a_error_vs_threshold.png",
          "Fig 15a: query error vs θ (α=0.5, α1/α=0.9)", logx=True, logy=True)
    plot(b, "alpha1_fraction", ["mae_uniform", "mae_ls"], out / "fig15b_error_vs_alpha1.png",
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
    from ...mechanisms.histogram import CellHistogram, ConsistentHierarchy, DPCube, HierarchicalKDTree

    dp = [(f"dpcube-{est}", DPCube(eps, DIMS, **settings[est], domains=DOMAINS), est) for est in ("uniform", "ls", "ls-eb")]
    return [("cells", CellHistogram(eps, DIMS, domains=DOMAINS), "cells"), *dp,
            ("kdtree", HierarchicalKDTree(eps, DIMS, domains=DOMAINS), "uniform"),
            ("consistency", ConsistentHierarchy(eps, DIMS, domains=DOMAINS), "cells")]


def fig16(out, quick, seed, datasets, settings) -> pd.DataFrame:
    from tqdm import tqdm

    import ppdp
    from ...queries import answer_exact
    from ...queries.workloads import range_workload

    trials = 1 if quick else 10
    rows, size_rows = [], []
    for name, t, _ in datasets:
        wl = range_workload(t.domains, DIMS, 2000, seed=seed)
        truth = answer_exact(t, wl)
        shape = list(declared_cube(t, DIMS)[0].shape)
        for eps in tqdm([0.1, 1.0] if quick else EPS_TABLE, desc=f"fig16 {name}"):
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
    plot(t0.rename(columns={"mean": "mae"}), "epsilon", ["mae"], out / "fig16a_error_vs_epsilon.png",
          f"Fig 16a: {datasets[0][0]}, 2000 random ranges, {trials} trials", logx=True, logy=True, group="method")
    sz = pd.DataFrame(size_rows).groupby(["data", "method", "bin", "size_bin"]).mae.mean().reset_index()
    sz.to_csv(out / "fig16b_error_vs_query_size.csv", index=False)
    plot(sz[sz.data == datasets[0][0]], "bin", ["mae"], out / "fig16b_error_vs_query_size.png",
          "Fig 16b: ε = 0.1; query volume bins 0:<1% 1:1–5% 2:5–10% 3:10–25% 4:>25%", logy=True, group="method")
    return table


def id3_fit(X, y, sizes, n_classes, weights=None):
    """ID3 (Quinlan 1986) on categorical features, as the paper's Weka Id3: one branch per value
    of the attribute with the largest information gain, no pruning, a leaf when the node is
    pure, no attribute is left or the best gain is 0; records may be weighted (a histogram's
    cells with their estimated counts). Unlike Weka, a value no training record reaches gets
    its parent's majority class (Weka leaves it unclassified). Returns predict(X)."""
    X = np.asarray(X, np.int64)
    y = np.asarray(y, np.int64)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, float)

    def entropy(c):
        tot = c.sum(-1, keepdims=True)
        p = np.divide(c, tot, out=np.zeros_like(c), where=tot > 0)
        return -(np.where(p > 0, p * np.log2(np.where(p > 0, p, 1)), 0.0)).sum(-1)

    def build(rows, attrs, fallback):
        cc = np.bincount(y[rows], weights=w[rows], minlength=n_classes)
        if cc.sum() <= 0:
            return ("leaf", fallback)
        major = int(np.argmax(cc))
        if not attrs or np.count_nonzero(cc) <= 1:
            return ("leaf", major)
        h0, gains = float(entropy(cc)), []
        for a in attrs:
            t = np.bincount(X[rows, a] * n_classes + y[rows], weights=w[rows],
                            minlength=sizes[a] * n_classes).reshape(sizes[a], n_classes)
            gains.append(h0 - float((t.sum(1) / cc.sum()) @ entropy(t)))
        best = int(np.argmax(gains))
        if gains[best] <= 1e-12:
            return ("leaf", major)
        a = attrs[best]
        rest = [b for b in attrs if b != a]
        return ("split", a, {v: build(rows[X[rows, a] == v], rest, major) for v in range(sizes[a])})

    from ...mechanisms.histogram.applications import predict_multiway

    tree = build(np.arange(len(y)), list(range(X.shape[1])), 0)
    return lambda Xq: predict_multiway(tree, Xq)


def fig17(out, quick, seed) -> pd.DataFrame:
    """Classification (§6.4): the paper's split — adult.data / adult.test without the records
    with a missing value (30,162 / 15,060) — features workclass, marital_status, race, sex,
    class income. Trees: ID3 (multiway, as the paper's Weka Id3) and, beside it, scikit-learn's
    CART with the entropy criterion (binary splits on the integer codes, i.e. an order the
    categories do not have) — each on the true training data and on the records synthesised
    from a DPCube release; and the private interactive ID3 (Friedman & Schuster 2010)."""
    import ppdp
    from ...mechanisms.histogram import DPCube
    from ...mechanisms.histogram.applications import private_id3, synthesize, tree_accuracy

    t = ppdp.datasets.load("adult")
    complete = np.ones(t.n_rows, bool)
    for c in ("workclass", "occupation", "native_country"):
        complete &= t.labels(c) != "(missing)"
    train_idx = np.flatnonzero(complete & (np.arange(t.n_rows) < 32561))  # adult.data
    test_idx = np.flatnonzero(complete & (np.arange(t.n_rows) >= 32561))  # adult.test
    feats = ["workclass", "marital_status", "race", "sex"]
    cls = "income"
    X = np.stack([t.codes(f) for f in feats], axis=1).astype(np.int64)
    y = t.codes(cls).astype(np.int64)
    sizes = [len(t.domain(f)) for f in feats]
    Xte, yte = X[test_idx], y[test_idx]
    id3_true = float(np.mean(id3_fit(X[train_idx], y[train_idx], sizes, 2)(Xte) == yte))
    cart_true = tree_accuracy(X[train_idx], y[train_idx], Xte, yte)
    train = t.take(train_idx)
    from ...datasets import public_domains

    for c, dom in public_domains(DOMAINS, feats + [cls]).items():  # release cells index the declared domains
        if list(dom) != list(t.domain(c)):
            raise AssertionError(f"declared and table domains of {c!r} differ in order")
    trials = 1 if quick else 10
    rows = []
    for eps in ([0.1, 1.0] if quick else [0.05, 0.1, 0.25, 0.5, 1.0]):
        for tr in range(trials):
            r = ppdp.publish(train, DPCube(eps, feats + [cls], domains=DOMAINS), seed=seed + tr)
            idx, w = synthesize(r)
            acc_id3 = float(np.mean(id3_fit(idx[:, :-1], idx[:, -1], sizes, 2, weights=w)(Xte) == yte))
            acc_cart = tree_accuracy(idx[:, :-1], idx[:, -1], Xte, yte, weights=w)
            pred = private_id3(X[train_idx], y[train_idx], sizes, 2, eps, np.random.default_rng(seed + tr))
            rows.append({"epsilon": eps, "trial": tr, "dpcube_id3": acc_id3, "dpcube_cart_entropy": acc_cart,
                         "private_interactive_id3": float(np.mean(pred(Xte) == yte)),
                         "true_data_id3": id3_true, "true_data_cart_entropy": cart_true})
    df = pd.DataFrame(rows)
    df.to_csv(out / "fig17_classification_trials.csv", index=False)
    cols = ["dpcube_id3", "dpcube_cart_entropy", "private_interactive_id3", "true_data_id3", "true_data_cart_entropy"]
    agg = df.groupby("epsilon")[cols].mean().reset_index()
    agg.attrs["split"] = (len(train_idx), len(test_idx))
    agg.to_csv(out / "fig17_classification_vs_epsilon.csv", index=False)
    plot(agg, "epsilon", cols, out / "fig17_classification_vs_epsilon.png",
          f"Fig 17: Adult {len(train_idx)}/{len(test_idx)}, workclass/marital/race/sex → income", logx=True, ylabel="test accuracy")
    return agg


BLOCK_ATTRS = ["age", "education", "hours_per_week", "marital_status", "race", "sex"]
BLOCK_BINS = {"age": list(range(15, 95, 10)) + [95], "hours_per_week": list(range(0, 100, 10)) + [100]}


def fig18(out, quick, seed, partition_setting) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Blocking uses only the partitions, so DPCube runs with the held-out best setting for the
    partitions-only (uniform) estimator, not the least-squares default."""
    import ppdp
    from ...mechanisms.histogram import DPCube, HierarchicalKDTree
    from ...mechanisms.histogram.applications import blocks_of, reduction_ratio

    t = ppdp.datasets.load("adult")
    perm = np.random.default_rng(seed).permutation(t.n_rows)
    d1, d2 = t.take(np.sort(perm[: t.n_rows // 2])), t.take(np.sort(perm[t.n_rows // 2:]))
    trials = 1 if quick else 5

    def rr(mech, attrs, tr):
        bins = {a: b for a, b in BLOCK_BINS.items() if a in attrs}
        r = ppdp.publish(d1, mech, seed=seed + tr)
        _, c1 = declared_cube(d1, attrs, bins)
        _, c2 = declared_cube(d2, attrs, bins)
        b1, nb = blocks_of(r, c1)
        b2, _ = blocks_of(r, c2)
        return reduction_ratio(b1, b2, nb)

    rows = []
    attrs2 = BLOCK_ATTRS[:2]
    bins2 = {a: b for a, b in BLOCK_BINS.items() if a in attrs2}
    for eps in ([0.1, 1.0] if quick else [0.05, 0.1, 0.25, 0.5, 1.0]):
        for tr in range(trials):
            rows.append({"epsilon": eps, "trial": tr,
                         "dpcube": rr(DPCube(eps, attrs2, bins=bins2, domains=DOMAINS, **partition_setting), attrs2, tr),
                         "kdtree": rr(HierarchicalKDTree(eps, attrs2, bins=bins2, domains=DOMAINS), attrs2, tr)})
    a = pd.DataFrame(rows).groupby("epsilon")[["dpcube", "kdtree"]].mean().reset_index()
    a.to_csv(out / "fig18a_reduction_ratio_vs_epsilon.csv", index=False)
    plot(a, "epsilon", ["dpcube", "kdtree"], out / "fig18a_reduction_ratio_vs_epsilon.png",
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
    plot(b, "n_attributes", ["dpcube", "kdtree"], out / "fig18b_reduction_ratio_vs_attributes.png",
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
    from ...mechanisms.histogram import CellHistogram, DPCube
    from ...queries import answer_exact
    from ...queries.workloads import range_workload
    from ...releases.histogram import HistogramRelease

    trials = 1 if quick else 3
    # --quick: a small grid around the full run's choices (a smoke test of the procedure, not a choice)
    fractions, thetas, xi0s = ([0.2, 0.9], [1.0, 10.0, 100.0], [None]) if quick else \
        ([0.2, 0.3, 0.5, 0.7, 0.8, 0.9], [1.0, 3.0, 10.0, 30.0, 100.0], [None, 0.0])
    rows = []
    for name, dims in (HELDOUT[:1] if quick else HELDOUT):
        t = ppdp.datasets.load(name, n=48842, seed=0)
        wl = range_workload(t.domains, dims, 500 if quick else 1000, seed=seed + 99)
        truth = answer_exact(t, wl)
        for eps in ([0.1, 1.0] if quick else EPS_TABLE):
            r0 = cast(HistogramRelease, ppdp.publish(t, CellHistogram(eps, dims, domains=name), seed=0))
            qlo, qhi, owner = r0.query_boxes(wl)

            def mae(r, est):
                return float(np.abs(r.estimator(est).answer_boxes(r, qlo, qhi, owner, len(wl)) - truth).mean())
            cells = np.mean([mae(ppdp.publish(t, CellHistogram(eps, dims, domains=name), seed=s), "cells") for s in range(trials)])
            rows.append({"data": name, "epsilon": eps, "alpha1_fraction": np.nan, "count_threshold": np.nan,
                         "xi0": "", "estimator": "cells (CellHistogram)", "mae": cells, "partitions": np.nan})
            for f, th, xi0 in itertools.product(fractions, thetas, xi0s):
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


