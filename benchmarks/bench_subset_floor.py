"""How low the subset channel's point-query error can go above 100, against the figures set for it:
the unbiased floor, the spread over releases, and what shrinkage towards the default's parents
can give above 1,000 at best.

    python benchmarks/bench_subset_floor.py [--data occ] [--rho 0.1,0.3] [--seeds 20]

1. **Expected, unbiased.** Per query, the inversion's exact standard deviation at the true counts
   (records report independently: Var = x·p(1 − p) + (n_P − x)·q(1 − q), over (p − q)²), turned into
   the expected relative error √(2/π)·sd/x of a normal unbiased estimate and averaged per true-count
   bin. The full-report MLE's asymptotic figure (its Fisher information, Monte Carlo) is
   ``bench_subset_information.py``'s: equal within 0.3% on these bins.
2. **Measured.** Per release seed, the mean relative error per bin of ``eb`` (the default),
   ``full-mle``, ``norm-sub`` and ``inversion``: mean, standard error, standard deviation, minimum,
   maximum over the releases, the paired difference of the default from the inversion, and the
   share of releases at or below the targets.
3. **Shrinking the large counts towards the parents, tuned on the truth.** The counts Norm-Sub puts
   above 1,000 (where the default takes the full-report MLE x̂, variance V) moved to
   x̂ + V/(V + κ·μ²)·(μ − x̂), μ = n_P·π the default's chosen parent's prediction (a multiplicative
   prior of relative variance κ), for a grid of κ scored against the true counts: the best κ is an
   upper bound on what a prior of that kind towards these parents can give above 1,000.

Writes benchmarks/results/subset_floor_<data>_<rho1>_<rho2>.json."""

from __future__ import annotations

import argparse
import time

import numpy as np

import ppdp
from _common import load_average, provenance, write_result
from bench_randomized_defaults import load
from ppdp.estimators.subset import LARGE, SubsetSetup, eb_counts, full_report_fit, norm_sub
from ppdp.estimators.subset_eb import WIDEN, PredicateLattice, lattice_fit, ordered_columns
from ppdp.metrics import relative_error
from ppdp.queries.workloads import point_workload

BINS = {"1-10": (1, 10), "11-100": (11, 100), "101-1000": (101, 1000), ">1000": (1001, np.inf)}
TARGETS = {"1-10": 5.2, "11-100": 1.42, "101-1000": 0.46, ">1000": 0.13}
ESTIMATORS = ("eb", "full-mle", "norm-sub", "inversion")
KAPPAS = (0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64)


def mre(est: np.ndarray, true: np.ndarray) -> dict:
    re = relative_error(true, est)
    return {b: float(re[(true >= lo) & (true <= hi)].mean()) for b, (lo, hi) in BINS.items()}


def expected_unbiased(S: SubsetSetup, true: np.ndarray) -> dict:
    """√(2/π)·sd/x per query at the true counts, averaged per bin (part 1)."""
    n = S.n[S.inv]
    x = true.astype(np.float64)
    sd = np.sqrt(x * S.p * (1 - S.p) + (n - x) * S.q * (1 - S.q)) / (S.p - S.q)
    e = np.sqrt(2 / np.pi) * sd / np.maximum(x, 1.0)
    return {b: float(e[(x >= lo) & (x <= hi)].mean()) for b, (lo, hi) in BINS.items()}


def chosen_priors(S: SubsetSetup) -> np.ndarray:
    """(U, m): the distribution each workload predicate is shrunk towards by the default (the whole
    table's for a predicate without a QI condition)."""
    L = PredicateLattice(S.reps, ordered_columns(S.release), WIDEN)
    pi0 = S.whole_table()
    out = np.repeat(pi0[None, :], len(S.reps), axis=0)
    if len(L.level):
        idx = S.release.support_index(sorted({c for mk in L.masks for c in mk}))
        C = np.asarray(idx.sums(L.masks), dtype=np.float64)
        P = np.zeros(C.shape)
        lattice_fit(C, C.sum(axis=1) / S.k, S.p, S.q, pi0, L, prior_out=P)
        has = L.of >= 0
        out[has] = P[L.of[has]]
    return out


def oracle_shrinkage(S: SubsetSetup, true: np.ndarray) -> dict:
    """Part 3: the default with its counts above LARGE shrunk towards the parent at each κ."""
    X = eb_counts(S)
    big = norm_sub(S.inversion(), S.n) > LARGE
    full = full_report_fit(S)[0]
    mu = chosen_priors(S) * S.n[:, None]
    x = np.clip(full, 0.0, S.n[:, None])
    V = (x * S.p * (1 - S.p) + (S.n[:, None] - x) * S.q * (1 - S.q)) / (S.p - S.q) ** 2
    out = {}
    for kappa in KAPPAS:
        shrunk = full + V / (V + kappa * mu**2) * (mu - full)
        out[str(kappa)] = mre(S.per_query(np.where(big, shrunk, X)), true)[">1000"]
    return out


def summary(v: np.ndarray) -> dict:
    return {"mean": float(v.mean()), "se": float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else float("nan"),
            "sd": float(v.std(ddof=1)) if len(v) > 1 else float("nan"), "min": float(v.min()), "max": float(v.max())}


def run(data: str, rho: tuple[float, float], seeds: int) -> dict:
    t = load(data)
    wl = point_workload(t, 5000, seed=0)
    true = ppdp.queries.answer_exact(t, wl)
    per: dict[str, list] = {e: [] for e in ESTIMATORS}
    oracle: list[dict] = []
    expected = None
    for s in range(seeds):
        rel = ppdp.publish(t, ppdp.SubsetSelection(rho1=rho[0], rho2=rho[1]), seed=s)
        for e in ESTIMATORS:
            per[e].append(mre(rel.estimate(wl, estimator=e).estimate, true))
        S = SubsetSetup(rel, wl)
        if expected is None:
            expected = expected_unbiased(S, true)
        oracle.append(oracle_shrinkage(S, true))
        print(s, {e: round(per[e][-1][">1000"], 4) for e in ESTIMATORS}, flush=True)
    measured = {}
    for e, rows in per.items():
        measured[e] = {}
        for b in BINS:
            v = np.array([r[b] for r in rows])
            cell = summary(v)
            cell["per_seed"] = [round(float(x), 4) for x in v]
            if e == "eb":
                cell["share_at_or_below_target"] = float((v <= TARGETS[b]).mean())
                d = v - np.array([r[b] for r in per["inversion"]])
                cell["minus_inversion"] = summary(d)
            measured[e][b] = cell
    base = np.array([r[">1000"] for r in per["eb"]])
    shrink = {}
    for kappa in KAPPAS:
        v = np.array([o[str(kappa)] for o in oracle])
        shrink[str(kappa)] = {"mean": float(v.mean()), "minus_default": summary(v - base)}
    return {"expected_unbiased": expected, "measured": measured, "oracle_shrinkage_gt1000": shrink,
            "bin_sizes": {b: int(((true >= lo) & (true <= hi)).sum()) for b, (lo, hi) in BINS.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="occ")
    ap.add_argument("--rho", default="0.1,0.3")
    ap.add_argument("--seeds", type=int, default=20)
    a = ap.parse_args()
    rho = tuple(float(x) for x in a.rho.split(","))
    load0 = load_average()
    w0, c0 = time.perf_counter(), time.process_time()
    res = run(a.data, rho, a.seeds)  # type: ignore[arg-type]
    print("expected (unbiased):", {b: round(v, 4) for b, v in res["expected_unbiased"].items()})
    for e, cells in res["measured"].items():
        print(f"{e:10s}", " ".join(f"{b}={c['mean']:.4f}±{c['se']:.4f} [{c['min']:.3f}, {c['max']:.3f}]" for b, c in cells.items()))
    eb = res["measured"]["eb"]
    print("eb share of releases at or below the target:", {b: eb[b]["share_at_or_below_target"] for b in BINS})
    print("eb − inversion:", {b: f"{eb[b]['minus_inversion']['mean']:+.4f}±{eb[b]['minus_inversion']['se']:.4f}" for b in BINS})
    print("> 1,000 shrunk towards the parents, κ:", {k: f"{v['mean']:.4f} ({v['minus_default']['mean']:+.4f}±{v['minus_default']['se']:.4f})"
                                                     for k, v in res["oracle_shrinkage_gt1000"].items()})
    path = write_result(f"subset_floor_{a.data.replace('gauntlet:', '')}_{rho[0]:g}_{rho[1]:g}",
                        {"data": a.data, "rho": rho, "release_seeds": list(range(a.seeds)), "workload": "point, 5000 queries, seed 0",
                         "metric": "mean relative error per true-count bin", "targets": TARGETS, **res,
                         "wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0,
                         "load_average_before": load0, "load_average_after": load_average(), **provenance(seed=0)})
    print(path)


if __name__ == "__main__":
    main()
