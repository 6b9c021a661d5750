"""``ppdp reproduce privacy-laws``: §7 of Wang, Wang, Fu, Wong, *Inferential or Differential:
Privacy Laws Dictate* (seed 002), on the bundled OCC and EDU tables.

F'-privacy f'_i = min(1, θ·f_i + 0.02), θ ∈ {2, 4, 8, 16, 32}, M = min_i ⌈1/f'_i⌉, M' = 50:

- Figure 3: ℓ = ⌈1/min_i f'_i⌉ (the ℓ-diversity needed to model F') vs θ, with Anatomy's
  eligibility max_i f_i ≤ 1/ℓ;
- Figure 4: MSE vs θ for Anatomy (sizes ℓ / ℓ+1, eligibility ignored — as the paper does),
  TwoSize, MultiSize and Optimal (exact multi-size MILP);
- Figure 5: mean relative error of an anatomy workload (selectivity 1%) vs θ, through
  ``ppdp.publish(table, FPrivacy(theta, method), seed)`` and ``release.answer``, exact
  answers by ``answer_exact``;
- Figure 6: plan run time vs |T| (OCC-n / EDU-n, n = 100K … 500K) of No-pruning, Loss-pruning,
  Full-pruning and Optimal;
- Figure 7: the same vs the |SA| scale-up γ (each SA value x split into γ·x + r, r uniform in
  [0, γ), on OCC-500K and EDU-500K).

Each figure is written as CSV + PNG; ``summary.md`` compares the shapes with the paper's text.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
import time
from pathlib import Path

import numpy as np

from ..metrics import relative_error
from ..provenance import describe, provenance

DATASETS = ("occ", "edu")
FLOOR = 0.02
MAX_BUCKET = 50

FULL: dict = {"thetas": (2, 4, 8, 16, 32), "fig5_thetas": (2, 4, 8, 16, 32), "fig5_methods": ("two-size", "multi-size", "optimal"),
        "n_queries": 5000, "release_seeds": (1000, 1001), "sizes": (100_000, 200_000, 300_000, 400_000, 500_000),
        "gammas": (2, 4, 8, 16, 32, 64), "repeats_full": 20, "repeats_scan": 3, "time_limit": 60.0,
        "runtime_optimal": True}
QUICK = {"thetas": (2, 8, 32), "fig5_thetas": (2, 8, 32), "fig5_methods": ("two-size", "multi-size"),
         "n_queries": 500, "release_seeds": (1000,), "sizes": (100_000, 500_000), "gammas": (2, 16),
         "repeats_full": 5, "repeats_scan": 1, "time_limit": 10.0, "runtime_optimal": False}

LABEL = {"anatomy": "Anatomy (sizes ℓ/ℓ+1)", "two-size": "TwoSize", "multi-size": "MultiSize", "optimal": "Optimal",
         "none": "No-pruning", "loss": "Loss-pruning", "full": "Full-pruning",
         "independence": "one bucket (reference)"}


# ---------------------------------------------------------------- helpers
def thresholds(o: np.ndarray, theta: float) -> np.ndarray:
    """f'_i = min(1, θ f_i + 0.02) (§7.1)."""
    return np.minimum(1.0, theta * o / o.sum() + FLOOR)


def split_sa_counts(o: np.ndarray, gamma: int, rng: np.random.Generator) -> np.ndarray:
    """§7.3.2: every record's SA value x becomes γ·x + r with r uniform in [0, γ − 1]; on counts this
    is a multinomial split of each o_x into γ equal-probability parts (new value γ·x + r)."""
    o = np.asarray(o, dtype=np.int64)
    parts = np.stack([rng.multinomial(int(c), np.full(gamma, 1.0 / gamma)) for c in o])
    return parts.reshape(-1).astype(np.int64)


def _re_stats(act: np.ndarray, est: np.ndarray) -> dict:
    """Relative error |act − est| / act over the queries (all have act > 0): the mean (the paper's
    metric), the median, and the mean over queries with act ≥ 100 (the mean is dominated by a few
    queries with tiny true counts)."""
    re = relative_error(act, est)
    big = act >= 100
    return {"mean_relative_error": float(re.mean()), "median_relative_error": float(np.median(re)),
            "mean_relative_error_act_ge_100": float(re[big].mean()) if big.any() else float("nan"),
            "max_relative_error": float(re.max())}


def _timed(fn, repeat: int, warmup: bool = True):
    out = fn() if warmup else None   # warm-up (imports, caches); not timed
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return out, statistics.median(ts), min(ts)


def _write_csv(path: Path, rows: list[dict]) -> None:
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _two_panel(path: Path, rows: list[dict], x: str, y: str, series: str, xlabel: str, ylabel: str, title: str,
               logy: bool = False, logx: bool = False, order=None, bar: bool = False) -> None:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, d in zip(axes, DATASETS):
        sub = [r for r in rows if r["dataset"] == d and r.get(y) not in (None, "")]
        names = order or sorted({r[series] for r in sub})
        xs_all = sorted({r[x] for r in sub})
        for k, s in enumerate(names):
            pts = sorted((r[x], float(r[y])) for r in sub if r[series] == s)
            if not pts:
                continue
            if bar:
                pos = np.arange(len(xs_all)) + (k - (len(names) - 1) / 2) * 0.8 / len(names)
                ax.bar(pos, [dict(pts).get(v, np.nan) for v in xs_all], width=0.8 / len(names), label=LABEL.get(s, s))
            else:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=LABEL.get(s, s))
        if bar:
            ax.set_xticks(np.arange(len(xs_all)), [str(v) for v in xs_all])
        if logy:
            ax.set_yscale("log")
        if logx:
            ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{d.upper()}: {title}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------- figures
def figure3(tables: dict, cfg: dict, out: Path) -> list[dict]:
    from ..mechanisms.bucketization.anatomy_plan import anatomy_eligible

    rows = []
    for d, (t, o, info) in tables.items():
        f = o / o.sum()
        for theta in FULL["thetas"]:
            fp = thresholds(o, theta)
            l = math.ceil(1 / fp.min())  # noqa: E741
            rows.append({"dataset": d, "theta": theta, "l": l, "min_f": float(f[o > 0].min()), "max_f": float(f.max()),
                         "one_over_l": 1 / l, "anatomy_eligible": anatomy_eligible(o, l)})
    _write_csv(out / "fig3_l_vs_theta.csv", rows)
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, d in zip(axes, DATASETS):
        sub = [r for r in rows if r["dataset"] == d]
        ax.bar([str(r["theta"]) for r in sub], [r["l"] for r in sub], label="ℓ = ⌈1/min f'⌉")
        lmax = math.floor(1 / sub[0]["max_f"])
        ax.axhline(lmax, color="red", ls="--", label=f"largest eligible ℓ = ⌊1/max f⌋ = {lmax}")
        ax.set_xlabel("privacy coefficient θ")
        ax.set_ylabel("ℓ")
        ax.set_title(f"{d.upper()}: ℓ needed to model F' (Figure 3)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "fig3_l_vs_theta.png", dpi=120)
    plt.close(fig)
    return rows


def figure4(tables: dict, cfg: dict, out: Path, progress) -> list[dict]:
    from ..mechanisms.bucketization.anatomy_plan import anatomy_eligible, anatomy_mse_from_sizes
    from ..mechanisms.bucketization.multi_size import multi_size_bucketing
    from ..mechanisms.bucketization.optimal import optimal_bucketing
    from ..mechanisms.bucketization.plan import check_setting
    from ..mechanisms.bucketization.two_size import two_size_bucketing

    rows = []
    jobs = [(d, th) for d in tables for th in cfg["thetas"]]
    for d, theta in progress(jobs, desc="figure 4 (MSE)"):
        t, o, info = tables[d]
        n = int(o.sum())
        fp = thresholds(o, theta)
        l = math.ceil(1 / fp.min())  # noqa: E741
        rows.append({"dataset": d, "theta": theta, "method": "anatomy", "mse": anatomy_mse_from_sizes(n, l),
                     "loss": "", "n_buckets": "", "sizes": f"{l}/{l + 1}", "seconds": "", "proven_optimal": "",
                     "note": "sizes ℓ/ℓ+1 only; " + ("eligible" if anatomy_eligible(o, l) else
                                                      "NOT eligible (max f > 1/ℓ): no ℓ-diverse release exists")})
        for method, fn in (("two-size", lambda: two_size_bucketing(o, fp, MAX_BUCKET)),
                           ("multi-size", lambda: multi_size_bucketing(o, fp, MAX_BUCKET)),
                           ("optimal", lambda: optimal_bucketing(o, fp, MAX_BUCKET, cfg["time_limit"]))):
            t0 = time.perf_counter()
            s = fn()
            dt = time.perf_counter() - t0
            problems = check_setting(s.counts, o, fp)
            if problems:
                raise AssertionError(f"{method} on {d} θ={theta}: {problems}")
            note = ""
            if method == "optimal":
                note = "proven optimal" if s.proven_optimal else (
                    f"NOT proven optimal within {cfg['time_limit']:.0f} s (gap {s.info.get('mip_gap')}); {s.info['returned']}")
            rows.append({"dataset": d, "theta": theta, "method": method, "mse": s.mse(n), "loss": s.loss,
                         "n_buckets": s.n_buckets, "sizes": " ".join(f"{k}x{v}" for k, v in s.size_histogram().items()),
                         "seconds": dt, "proven_optimal": s.proven_optimal if method == "optimal" else "", "note": note})
    _write_csv(out / "fig4_mse_vs_theta.csv", rows)
    _two_panel(out / "fig4_mse_vs_theta.png", rows, "theta", "mse", "method", "privacy coefficient θ", "MSE",
               "MSE vs θ (Figure 4)", logy=True, order=["anatomy", "two-size", "multi-size", "optimal"], bar=True)
    return rows


def figure5(tables: dict, cfg: dict, out: Path, progress) -> list[dict]:
    import ppdp
    from ..queries import answer_exact
    from ..queries.model import Query
    from ..queries.workloads import anatomy_workload

    rows = []
    work = {}
    for d, (t, o, info) in tables.items():
        wl = anatomy_workload(t, cfg["n_queries"], 0.01, seed=0)
        act = answer_exact(t, wl)
        work[d] = (wl, act)
        # reference: one bucket holding the whole table (QI and SA independent): est = n(P_QI)·n(P_SA)/|T|
        qi = answer_exact(t, [Query(tuple(p for p in q.predicates if p.column != t.sa)) for q in wl])
        sa = answer_exact(t, [Query(tuple(p for p in q.predicates if p.column == t.sa)) for q in wl])
        est = qi * sa / t.n_rows
        ref = _re_stats(act, est)
        for theta in cfg["fig5_thetas"]:
            rows.append({"dataset": d, "theta": theta, "method": "independence", **ref, "per_release": "",
                         "release_seeds": "", "n_queries": len(wl), "publish_seconds": "", "proven_optimal": "",
                         "note": "reference, not in the paper: a single bucket (no QI-SA association kept)"})
    jobs = [(d, th, m) for d in tables for th in cfg["fig5_thetas"] for m in cfg["fig5_methods"]]
    for d, theta, method in progress(jobs, desc="figure 5 (relative error)"):
        t, o, info = tables[d]
        wl, act = work[d]
        mech = ppdp.FPrivacy(theta=theta, floor=FLOOR, method=method, max_bucket=MAX_BUCKET, time_limit=cfg["time_limit"])
        stats, secs, proven = [], [], []
        for seed in cfg["release_seeds"]:
            t0 = time.perf_counter()
            rel = ppdp.publish(t, mech, seed=seed, allow_disclosure=True)  # the paper's setting, measured, never handed out
            secs.append(time.perf_counter() - t0)
            stats.append(_re_stats(act, rel.answer(wl)))
            proven.append(rel.certificate.get("proven_optimal", ""))
        rows.append({"dataset": d, "theta": theta, "method": method,
                     **{k: float(np.mean([x[k] for x in stats])) for k in stats[0]},
                     "per_release": " ".join(f"{x['mean_relative_error']:.5f}" for x in stats),
                     "release_seeds": " ".join(map(str, cfg["release_seeds"])),
                     "n_queries": len(wl), "publish_seconds": float(np.mean(secs)),
                     "proven_optimal": proven[0] if method == "optimal" else ""})
    _write_csv(out / "fig5_relative_error_vs_theta.csv", rows)
    for r in rows:
        r["re_percent"] = 100 * r["mean_relative_error"]
    _two_panel(out / "fig5_relative_error_vs_theta.png", rows, "theta", "re_percent", "method", "privacy coefficient θ",
               "mean relative error (%)", f"anatomy workload, {cfg['n_queries']} queries, s = 1% (Figure 5)",
               order=[m for m in ("two-size", "multi-size", "optimal") if m in cfg["fig5_methods"]] + ["independence"],
               bar=True)
    for r in rows:
        r.pop("re_percent")
    return rows


def _runtime_row(d: str, x_name: str, x, o: np.ndarray, cfg: dict, extra: dict) -> list[dict]:
    from ..mechanisms.bucketization.optimal import optimal_classes
    from ..mechanisms.bucketization.two_size import two_size_search

    fp = thresholds(o, 8.0)
    rows = []
    settings = {}
    for p in ("none", "loss", "full"):
        reps = cfg["repeats_full"] if p == "full" else cfg["repeats_scan"]
        res, med, mn = _timed(lambda: two_size_search(o, fp, MAX_BUCKET, p), reps, warmup=p == "full")
        settings[p] = (res.S1, res.b1, res.S2, res.b2)
        rows.append({"dataset": d, x_name: x, "method": p, "seconds": med, "seconds_min": mn, "repeats": reps,
                     "M": res.M, "m": int((o > 0).sum()), "setting": f"({res.S1},{res.b1}),({res.S2},{res.b2})",
                     "pairs_tested": res.stats["pairs_tested"], **extra})
    if len(set(settings.values())) != 1:
        raise AssertionError(f"pruning variants disagree on {d} {x_name}={x}: {settings}")
    if cfg["runtime_optimal"]:
        t0 = time.perf_counter()
        classes, proven, info = optimal_classes(o, fp, MAX_BUCKET, cfg["time_limit"])
        rows.append({"dataset": d, x_name: x, "method": "optimal", "seconds": time.perf_counter() - t0,
                     "seconds_min": info["milp_seconds"], "repeats": 1, "M": info["M"], "m": int((o > 0).sum()),
                     "setting": " ".join(f"{c.S}x{c.b}" for c in classes), "pairs_tested": "",
                     "proven_optimal": proven, **extra})
    return rows


def figure6(cfg: dict, out: Path, progress) -> tuple[list[dict], dict]:
    import ppdp

    rows, sampling = [], {}
    jobs = [(d, n) for d in DATASETS for n in cfg["sizes"]]
    for d, n in progress(jobs, desc="figure 6 (runtime vs |T|)"):
        t, info = ppdp.datasets.load_info(d, n=n, seed=0)
        o = t.counts(t.sa)
        sampling[f"{d}-{n}"] = info["sampling"]
        rows += _runtime_row(d, "n", n, o, cfg, {"sampling": info["sampling"]})
    _write_csv(out / "fig6_runtime_vs_size.csv", rows)
    _two_panel(out / "fig6_runtime_vs_size.png", rows, "n", "seconds", "method", "|T|", "plan run time (s, median)",
               "θ = 8, run time vs |T| (Figure 6)", logy=True,
               order=[m for m in ("none", "loss", "full", "optimal") if any(r["method"] == m for r in rows)])
    return rows, sampling


def figure7(cfg: dict, out: Path, progress) -> list[dict]:
    import ppdp

    rows = []
    jobs = [(d, g) for d in DATASETS for g in cfg["gammas"]]
    base = {}
    for d in DATASETS:
        t, info = ppdp.datasets.load_info(d, n=500_000, seed=0)
        base[d] = (t.counts(t.sa), info["sampling"])
    for d, g in progress(jobs, desc="figure 7 (runtime vs γ)"):
        o0, sampling = base[d]
        o = split_sa_counts(o0, g, np.random.default_rng(g))
        rows += _runtime_row(d, "gamma", g, o, cfg, {"sampling": sampling, "split_seed": g})
    _write_csv(out / "fig7_runtime_vs_gamma.csv", rows)
    _two_panel(out / "fig7_runtime_vs_gamma.png", rows, "gamma", "seconds", "method", "scale-up factor γ of |SA|",
               "plan run time (s, median)", "θ = 8, |T| = 500K, run time vs γ (Figure 7)", logy=True, logx=True,
               order=[m for m in ("none", "loss", "full", "optimal") if any(r["method"] == m for r in rows)])
    return rows


# ---------------------------------------------------------------- summary
def _get(rows, **kw):
    for r in rows:
        if all(r.get(k) == v for k, v in kw.items()):
            return r
    return None


def _summary(out: Path, cfg: dict, quick: bool, meta: dict, f3, f4, f5, f6, f7, elapsed: float) -> Path:

    L = ["# Reproduction of §7 of *Inferential or Differential: Privacy Laws Dictate* (Wang, Wang, Fu, Wong)", "",
         f"Mode: **{'quick' if quick else 'full'}**. {describe()}; "
         f"run time {elapsed:.0f} s. f'_i = min(1, θ f_i + {FLOOR}), M = min_i ⌈1/f'_i⌉, M' = {MAX_BUCKET}.", "",
         "**Data.** The paper used a 500K-row IPUMS CENSUS extract (OCC-300K / EDU-300K by default). That extract is not "
         "public; ppdp uses its closest public twin, UCI Census-Income (KDD): " +
         "; ".join(f"{d.upper()} = {v['n']:,} rows ({v['sampling']}), {v['m']} SA values" for d, v in meta["tables"].items()) +
         ". Figures 3–5 use these full tables (not 300K samples). Figures 6–7 use OCC-n / EDU-n drawn with seed 0: "
         + ", ".join(f"{k} {v}" for k, v in meta["runtime_sampling"].items()) +
         " — OCC has 148,318 rows, so OCC-n for n > 148,318 (and EDU-n for n > 299,285) repeats rows (drawn with replacement).",
         ""]
    # Figure 3
    L += ["## Figure 3 — ℓ vs θ", "", "| θ | " + " | ".join(f"{d.upper()} ℓ (eligible?)" for d in DATASETS) + " |",
          "|---|" + "---|" * len(DATASETS)]
    for th in FULL["thetas"]:
        cells = []
        for d in DATASETS:
            r = _get(f3, dataset=d, theta=th)
            cells.append(f"{r['l']} ({'yes' if r['anatomy_eligible'] else 'no'})")
        L.append(f"| {th} | " + " | ".join(cells) + " |")
    lines3 = []
    for d in DATASETS:
        r = _get(f3, dataset=d, theta=2)
        lmax = int(math.floor(1 / r["max_f"]))
        lines3.append(f"{d.upper()}: min f = {100 * r['min_f']:.2f}%, max f = {100 * r['max_f']:.2f}%, so ℓ-diversity is "
                      f"ineligible for every ℓ ≥ {lmax + 1}")
    L += ["", "Paper: except for θ = 32 a large ℓ is needed, and ℓ-diversity is ineligible for ℓ ≥ 14 (OCC) and ℓ ≥ 4 (EDU), "
          "i.e. for most θ. Here: " + "; ".join(lines3) + ". Eligible cells: " +
          (", ".join(f"{r['dataset'].upper()} θ={r['theta']}" for r in f3 if r["anatomy_eligible"]) or "none") +
          ". Same shape: ℓ falls with θ and stays far above what the most frequent values allow, so Anatomy's "
          "ℓ-diversity cannot model F' on either table for most θ.", ""]
    # Figure 4
    L += ["## Figure 4 — MSE vs θ", "", "| data | θ | Anatomy (sizes ℓ/ℓ+1) | TwoSize | MultiSize | Optimal | TwoSize / MultiSize | MultiSize / Optimal |",
          "|---|---|---|---|---|---|---|---|"]
    order_ok, ratios_tm, ratios_mo, unproven = True, [], [], []
    for d in DATASETS:
        for th in cfg["thetas"]:
            v = {m: _get(f4, dataset=d, theta=th, method=m) for m in ("anatomy", "two-size", "multi-size", "optimal")}
            a, t2, mu, op = (v[m]["mse"] for m in ("anatomy", "two-size", "multi-size", "optimal"))
            order_ok &= a > t2 >= mu >= op
            ratios_tm.append(t2 / mu)
            ratios_mo.append(mu / op)
            if not v["optimal"]["proven_optimal"]:
                unproven.append(f"{d.upper()} θ={th}")
            L.append(f"| {d.upper()} | {th} | {a:.3f} | {t2:.3f} | {mu:.3f} | {op:.3f}{'' if v['optimal']['proven_optimal'] else ' *'} | "
                     f"{t2 / mu:.2f} | {mu / op:.3f} |")
    L += ["", ("\\* not proven optimal within the time limit: " + ", ".join(unproven)) if unproven else
          "Every Optimal value is proven optimal by HiGHS (gap 0).", "",
          f"Paper: Anatomy is far above all others; TwoSize is only slightly above MultiSize, which is only slightly "
          f"above Optimal. Here: the order Anatomy > TwoSize ≥ MultiSize ≥ Optimal holds in "
          f"{'every' if order_ok else 'NOT every'} cell. MultiSize is close to Optimal (MultiSize/Optimal "
          f"{min(ratios_mo):.3f}–{max(ratios_mo):.3f}), as in the paper. The TwoSize–MultiSize gap is larger than the "
          f"paper's \"slightly\" (TwoSize/MultiSize {min(ratios_tm):.2f}–{max(ratios_tm):.2f}): with M' = 50 and values "
          "whose f'_i differ a lot, two sizes cannot fit both the rare values (large buckets) and the frequent values "
          "with f' = 1 or close to it (buckets of 1–4). The paper's figure is not given numerically, so only the order "
          "and rough sizes can be compared.", ""]
    # Figure 5
    if f5:
        meths = list(cfg["fig5_methods"]) + ["independence"]
        L += ["## Figure 5 — mean relative error vs θ", "",
              f"{cfg['n_queries']} anatomy-workload queries (selectivity 1%, workload seed 0), exact answers from the table, "
              f"estimates from `ppdp.publish(table, FPrivacy(theta, method=…), seed)` + `release.answer` (Anatomy's "
              f"estimator), release seeds {', '.join(map(str, cfg['release_seeds']))} averaged. The last column is a "
              "reference that is not in the paper: the error of one bucket holding the whole table (QI and SA treated as "
              "independent, est = n(P_QI)·n(P_SA)/|T|). Cells: mean relative error (the paper's metric) / median / "
              "mean over the queries with a true count ≥ 100.", "",
              "| data | θ | " + " | ".join(LABEL[m] for m in meths) + " |", "|---|---|" + "---|" * len(meths)]
        for d in DATASETS:
            for th in cfg["fig5_thetas"]:
                cells = []
                for m in meths:
                    r = _get(f5, dataset=d, theta=th, method=m)
                    cells.append(f"{100 * r['mean_relative_error']:.1f}% / {100 * r['median_relative_error']:.1f}% / "
                                 f"{100 * r['mean_relative_error_act_ge_100']:.1f}%")
                L.append(f"| {d.upper()} | {th} | " + " | ".join(cells) + " |")
        worst = max(f5, key=lambda r: r["max_relative_error"])
        L += ["", f"The mean is dominated by a few queries with tiny true counts: the largest single relative error is "
              f"{worst['max_relative_error']:,.0f} ({worst['dataset'].upper()}, {LABEL[worst['method']]}, θ = {worst['theta']}), "
              f"which alone adds {worst['max_relative_error'] / cfg['n_queries']:.2f} to a {cfg['n_queries']}-query mean; "
              "the median and the mean over true counts ≥ 100 are the stable summaries."]
        pub = [r for r in f5 if r["method"] != "independence"]
        mx = {d: max(r["mean_relative_error"] for r in pub if r["dataset"] == d) for d in DATASETS}
        md = {d: max(r["median_relative_error"] for r in pub if r["dataset"] == d) for d in DATASETS}

        def diff(a, b):
            return [100 * (_get(f5, dataset=d, theta=th, method=a)["mean_relative_error"]
                           - _get(f5, dataset=d, theta=th, method=b)["mean_relative_error"])
                    for d in DATASETS for th in cfg["fig5_thetas"]]

        tm = diff("two-size", "multi-size")
        one = []
        for d in DATASETS:
            r = _get(f3, dataset=d, theta=2)
            th1 = [th for th in FULL["thetas"] if th * r["max_f"] + FLOOR >= 1]
            if th1:
                one.append(f"{d.upper()}'s most frequent value ({100 * r['max_f']:.1f}% of rows) from θ = {th1[0]} on")
        one_text = (", e.g. " + " and ".join(one)) if one else ""
        txt = (f"Paper: OCC's maximum RE is slightly over 10%; EDU's REs are all ≤ 10%; TwoSize, MultiSize and Optimal are "
               f"close, MultiSize improving on TwoSize by about 2 points and Optimal on MultiSize by about 2 points on EDU. "
               f"Here: largest mean RE {100 * mx['occ']:.1f}% (OCC) and {100 * mx['edu']:.1f}% (EDU), largest median RE "
               f"{100 * md['occ']:.1f}% and {100 * md['edu']:.1f}%; in mean RE, TwoSize − MultiSize "
               f"{min(tm):+.2f} to {max(tm):+.2f} points (MultiSize at least as good in {sum(x >= 0 for x in tm)} of {len(tm)} cells)")
        ok_cells, n_cells = sum(x >= 0 for x in tm), len(tm)
        if "optimal" in cfg["fig5_methods"]:
            mo = diff("multi-size", "optimal")
            txt += (f"; MultiSize − Optimal {min(mo):+.2f} to {max(mo):+.2f} points (Optimal at least as good in "
                    f"{sum(x >= 0 for x in mo)} of {len(mo)} cells)")
            ok_cells += sum(x >= 0 for x in mo)
            n_cells += len(mo)
        order_text = ("The paper's ordering (lower loss, lower error) holds in every cell." if ok_cells == n_cells else
                      f"The paper's ordering (lower loss, lower error) holds in {ok_cells} of {n_cells} pairwise comparisons; "
                      "where it fails the differences are small — a lower MSE does not guarantee a lower error on a "
                      "particular workload.")
        near = [f"{r['dataset'].upper()} {LABEL[r['method']]} θ={r['theta']}" for r in pub
                if r["median_relative_error"] >= 0.8 * _get(f5, dataset=r["dataset"], theta=r["theta"],
                                                            method="independence")["median_relative_error"]]
        txt += (". The errors are higher than the paper's, and the TwoSize–MultiSize gap is much wider. " +
                (f"In {len(near)} cell(s) ({', '.join(near)}) the median error is within 20% of the one-bucket reference's: "
                 "for these queries the buckets keep almost no QI–SA association. " if near else "") +
                "The two-size setting must use one small size for all values, while MultiSize gives buckets of size 1 "
                "(no loss at all) to the frequent values whose f' reaches 1" + one_text + " (see the sizes in "
                "fig4_mse_vs_theta.csv). The exact values do not match the paper's (its private CENSUS extract and "
                "its workload draw differ from ours). " + order_text)
        L += ["", txt, ""]
    else:
        L += ["## Figure 5 — skipped", "", "`ppdp.FPrivacy` is not available in this build.", ""]
    # Figures 6–7
    for title, rows, x, xl in (("Figure 6 — plan run time vs |T| (θ = 8)", f6, "n", "|T|"),
                               ("Figure 7 — plan run time vs the |SA| scale-up γ (θ = 8, |T| = 500K)", f7, "gamma", "γ")):
        methods = [m for m in ("none", "loss", "full", "optimal") if any(r["method"] == m for r in rows)]
        xs = sorted({r[x] for r in rows})
        L += [f"## {title}", "", f"Median seconds of the search (the setting, not the record assignment); full pruning "
              f"median of {cfg['repeats_full']} runs, the others {cfg['repeats_scan']}. The paper averaged 100 runs of a C++ "
              "implementation; these are NumPy timings on a shared machine.", "",
              f"| data | {xl} | M | m | " + " | ".join(LABEL[m] for m in methods) + " |", "|---|---|---|---|" + "---|" * len(methods)]
        for d in DATASETS:
            for xv in xs:
                cells = []
                for m in methods:
                    r = _get(rows, dataset=d, method=m, **{x: xv})
                    cells.append("" if r is None else f"{r['seconds']:.4f}" + ("" if r.get("proven_optimal", True) else " *"))
                r0 = _get(rows, dataset=d, method="full", **{x: xv})
                L.append(f"| {d.upper()} | {xv:,} | {r0['M']} | {r0['m']} | " + " | ".join(cells) + " |")
        L.append("")
    if not cfg["runtime_optimal"]:
        L += ["(Quick mode: Optimal is not timed in Figures 6–7; the full run times it.)", ""]

    def ratio(rows, x, method, d):
        xs = sorted({r[x] for r in rows})
        a, b = _get(rows, dataset=d, method=method, **{x: xs[0]}), _get(rows, dataset=d, method=method, **{x: xs[-1]})
        return None if a is None or b is None else b["seconds"] / a["seconds"]

    g6 = {(m, d): ratio(f6, "n", m, d) for m in ("none", "loss", "full") for d in DATASETS}
    fastest = all(_get(f6, dataset=d, n=n, method="full")["seconds"] <= min(_get(f6, dataset=d, n=n, method=m)["seconds"]
                                                                           for m in ("none", "loss"))
                  for d in DATASETS for n in cfg["sizes"])
    L += ["**Shapes.** Paper (Figure 6): Full-pruning is fastest and hardly affected by |T|; Loss-pruning is much faster "
          "than No-pruning but grows with |T| (sequential search of Γ′); Optimal is faster than No-pruning at this small |SA|. "
          f"Here: Full-pruning is the fastest in {'every' if fastest else 'NOT every'} case; from the smallest to the largest "
          "|T| the run time changes by " + ", ".join(
              f"{LABEL[m]} ×{g6[(m, d)]:.2f} ({d.upper()})" for m in ("full", "loss", "none") for d in DATASETS) +
          ". Loss-pruning and No-pruning both grow about linearly with |T| here, and Loss-pruning is only moderately "
          "faster than No-pruning: our No-pruning already stops at the first valid pair of each Γ(S1, S2) (Lemma 5), "
          "and both evaluate Theorem 3 on vectorised chunks of Γ, so the gap the paper shows for its sequential C++ "
          "scan is smaller. Full-pruning is independent of |T| (closed-form interval ends, no scan)."]
    if cfg["runtime_optimal"]:
        opt_vs_none = [(d, n) for d in DATASETS for n in cfg["sizes"]
                       if _get(f6, dataset=d, n=n, method="optimal")["seconds"] < _get(f6, dataset=d, n=n, method="none")["seconds"]]
        L[-1] += (f" Optimal (our exact multi-size MILP; the paper's Figure 6–7 \"Optimal\" is an ILP for the two-size "
                  f"problem) beats No-pruning in {len(opt_vs_none)} of {len(DATASETS) * len(cfg['sizes'])} cases.")
    g7 = {(m, d): ratio(f7, "gamma", m, d) for m in ("none", "loss", "full", "optimal") for d in DATASETS}
    gs = sorted({r["gamma"] for r in f7})
    pairs = {d: (_get(f7, dataset=d, method="none", gamma=gs[0]), _get(f7, dataset=d, method="none", gamma=gs[-1]))
             for d in DATASETS}
    L += ["", "Paper (Figure 7): Optimal's run time grows quickly with γ (exponential in |SA|); the others change little; "
          "No-pruning even gets faster because M grows and Γ gets shorter. Here, from the smallest to the largest γ: " +
          ", ".join(f"{LABEL[m]} ×{g7[(m, d)]:.2f} ({d.upper()})" for m in ("none", "loss", "full", "optimal") for d in DATASETS
                    if g7[(m, d)] is not None) + ". " +
          ("".join(f"Optimal on {d.upper()} stops at the {cfg['time_limit']:.0f} s time limit without a proof from "
                   f"γ = {min(r['gamma'] for r in f7 if r['dataset'] == d and r['method'] == 'optimal' and not r['proven_optimal'])} "
                   "on, so its growth there is a lower bound. "
                   for d in DATASETS if any(r["dataset"] == d and r["method"] == "optimal" and not r["proven_optimal"] for r in f7))
           if cfg["runtime_optimal"] else "") +
          "The mechanism the paper describes is there — M grows and No-pruning tests fewer pairs of Γ (" +
          ", ".join(f"{d.upper()}: M {a['M']} → {b['M']}, {a['pairs_tested']:,} → {b['pairs_tested']:,} pairs"
                    for d, (a, b) in pairs.items()) +
          ") — but each test costs O(|SA|) and |SA| grows γ-fold, so on this implementation the run time of the scanning "
          "variants does not fall. Full-pruning is O(|SA|) per size pair and grows about linearly with γ, from milliseconds. "
          + ("Optimal is exact only while HiGHS proves it within the time limit; unproven cells are starred above."
             if cfg["runtime_optimal"] else ""), ""]
    L += ["Files: " + ", ".join(f"`{p.name}`" for p in sorted(out.glob("fig*.csv"))) + " (and a PNG for each); "
          "`params.json` (parameters, data sampling, versions).", ""]
    path = out / "summary.md"
    path.write_text("\n".join(L))
    return path


# ---------------------------------------------------------------- entry point
def run(out_dir: Path, quick: bool = False) -> Path:
    """Reproduce Figures 3–7 into ``out_dir`` (CSV + PNG per figure, ``summary.md``); returns the summary path."""
    from tqdm import tqdm

    import ppdp

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = QUICK if quick else FULL
    t_start = time.time()

    def progress(it, desc):
        return tqdm(it, desc=desc, leave=False)

    tables, meta = {}, {"tables": {}, **provenance(config={k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()},
                                                   quick=quick, floor=FLOOR, max_bucket=MAX_BUCKET, workload_seed=0,
                                                   sampling_seed=0)}
    for d in DATASETS:
        t, info = ppdp.datasets.load_info(d)
        o = t.counts(t.sa)
        tables[d] = (t, o, info)
        meta["tables"][d] = {"n": int(t.n_rows), "m": int((o > 0).sum()), "sampling": info["sampling"]}
    f3 = figure3(tables, cfg, out)
    f4 = figure4(tables, cfg, out, progress)
    f5 = figure5(tables, cfg, out, progress) if hasattr(ppdp, "FPrivacy") else []
    f6, meta["runtime_sampling"] = figure6(cfg, out, progress)
    f7 = figure7(cfg, out, progress)
    meta["elapsed_seconds"] = time.time() - t_start
    (out / "params.json").write_text(json.dumps(meta, indent=2))
    return _summary(out, cfg, quick, meta, f3, f4, f5, f6, f7, time.time() - t_start)
