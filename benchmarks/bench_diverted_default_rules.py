"""Where the A' estimators lose count bins: each shipped estimator's bias and spread per bin, the
default (``full-eb``, the empirical-Bayes counts) against every other, and the per-query mixes of
the iterative and closed-form estimators that were tried before it (from public quantities).
Same cell, workload and seeds as bench_randomized_defaults.py (A' at ℓ' = 5 or the largest feasible below it, on a 100,000-row sample; point workload, 5,000
queries, seed 0; releases seeded 0…R−1).

Per estimator and true-count bin: bias (mean signed error, averaged over releases) and the
spread across releases (the mean over queries of each query's sd over releases), then candidate
rules that mix the shipped estimators per query from public quantities (the estimates, n_P),
each with the bins where a shipped estimator is significantly better (paired over releases,
difference > 2 standard errors; MRE on non-zero bins, MAE on the zero bin — the criterion of
bench_randomized_defaults.py).

    python benchmarks/bench_diverted_default_rules.py --data edu [--releases 10]

Writes benchmarks/results/diverted_default_rules_<data>.json."""

from __future__ import annotations

import argparse
import time

import numpy as np

import ppdp
from _common import provenance, write_result
from bench_randomized_defaults import BINS, cells
from ppdp.estimators.diverted import METHODS, diverted_estimates
from ppdp.queries.workloads import point_workload

SHORT = {"full-iterative": "FI", "full-closed": "FC", "iterative": "IT", "closed": "CL", "full-eb": "EB"}


def rules() -> dict:
    """Candidate per-query rules: name → f(estimates by method, n_P)."""
    def gated(a):
        return lambda e, n: np.where(e["full-iterative"] - e["iterative"] > a * np.sqrt(n + 1), e["iterative"],
                                     e["full-iterative"])
    return {"min(FI,IT)": lambda e, n: np.minimum(e["full-iterative"], e["iterative"]),
            "mean(FI,IT)": lambda e, n: (e["full-iterative"] + e["iterative"]) / 2,
            "min(FI,IT,CL+)": lambda e, n: np.minimum(np.minimum(e["full-iterative"], e["iterative"]),
                                                      np.maximum(e["closed"], 0.0)),
            "min(FI,IT) if FI<100": lambda e, n: np.where(e["full-iterative"] < 100, np.minimum(
                e["full-iterative"], e["iterative"]), e["full-iterative"]),
            "IT if FI-IT>0.3sqrt(n_P)": gated(0.3), "IT if FI-IT>sqrt(n_P)": gated(1.0)}


def score(est: np.ndarray, true: np.ndarray) -> dict:
    out = {}
    for b, (lo, hi) in BINS.items():
        m = (true >= lo) & (true <= hi)
        ae = np.abs(est[m] - true[m])
        out[b] = float(ae.mean() if lo == 0 else (ae / true[m]).mean())
    return out


def beaten(per: dict, name: str, R: int) -> list:
    out = []
    for alt in METHODS:
        if alt == name:
            continue
        for b in BINS:
            d = np.array([per[name][s][b] - per[alt][s][b] for s in range(R)])
            se = float(d.std(ddof=1) / np.sqrt(R))
            if d.mean() > 0 and d.mean() > 2 * se:
                out.append({"by": alt, "bin": b, "diff": float(d.mean()), "se": se})
    return out


def run(data: str, R: int) -> dict:
    label, t, mech = cells(data, 100_000)[3]
    wl = point_workload(t, 5000, seed=0)
    true = ppdp.queries.answer_exact(t, wl)
    E = {m: np.zeros((R, len(true))) for m in METHODS}
    nP = np.zeros(len(true))
    for s in range(R):
        rel = ppdp.publish(t, mech, seed=s)
        _, masks = rel.resolve(wl)
        for m in METHODS:
            unc: dict = {}
            E[m][s] = diverted_estimates(rel, masks, m, uncertainty=unc)[0]
        nP = unc["n"]
    bias = {}
    for m in METHODS:
        bias[m] = {}
        for b, (lo, hi) in BINS.items():
            k = (true >= lo) & (true <= hi)
            err = E[m][:, k] - true[k]
            bias[m][b] = {"bias": float(err.mean()), "sd": float(E[m][:, k].std(axis=0, ddof=1).mean()),
                          "mean_true": float(true[k].mean())}
    per = {m: [score(E[m][s], true) for s in range(R)] for m in METHODS}
    for name, f in rules().items():
        per[name] = [score(f({m: E[m][s] for m in METHODS}, nP), true) for s in range(R)]
    table = {n: {b: float(np.mean([p[b] for p in v])) for b in BINS} for n, v in per.items()}
    return {"cell": label, "bin_sizes": {b: int(((true >= lo) & (true <= hi)).sum()) for b, (lo, hi) in BINS.items()},
            "bias_sd": bias, "mre_mae": table, "beaten": {n: beaten(per, n, R) for n in per}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="edu")
    ap.add_argument("--releases", type=int, default=10)
    a = ap.parse_args()
    c0, w0 = time.process_time(), time.perf_counter()
    res = {"data": a.data, "release_seeds": list(range(a.releases)), **run(a.data, a.releases)}
    print(f"{res['cell']} bins {res['bin_sizes']}")
    print("  bias / sd over releases (counts) per bin:")
    for m, row in res["bias_sd"].items():
        print(f"    {m:<16}" + "".join(f"{row[b]['bias']:>+10.1f}/{row[b]['sd']:<7.1f}" for b in BINS))
    print("  MAE (zero) / MRE (others):")
    for n, row in res["mre_mae"].items():
        bt = ", ".join(f"{SHORT[x['by']]}@{x['bin']}({x['diff']:+.3f}±{x['se']:.3f})" for x in res["beaten"][n])
        print(f"    {n:<26}" + "".join(f"{row[b]:>10.3f}" for b in BINS) + f"   beaten by: {bt or 'none'}")
    res["cpu_s"], res["wall_s"] = time.process_time() - c0, time.perf_counter() - w0
    res.update(provenance(seed=0))
    print(write_result(f"diverted_default_rules_{a.data}", res))


if __name__ == "__main__":
    main()
