"""k-subset selection (ε-LDP, ε = ln γ(ρ1, ρ2)) against uniform perturbation at the same (ρ1, ρ2),
on OCC point queries: mean relative error per true-count bin (1–10, 11–100, 101–1,000,
> 1,000), mean |estimate| on zero counts, and the share of 95% intervals that hold the true
count, per estimator, averaged over the release seeds.

    python benchmarks/bench_subset.py [--data occ] [--seeds 5] [--queries 5000]

Writes benchmarks/results/subset[_<data>].json (with CPU and wall seconds, machine, load, and
under "cost" the CPU seconds of each subset estimator's first and second call on the workload)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import ppdp
from _common import load_average, provenance, write_result
from ppdp.metrics import relative_error
from ppdp.queries.workloads import point_workload

BINS = {"1-10": (1, 10), "11-100": (11, 100), "101-1000": (101, 1000), ">1000": (1001, np.inf)}
SETTINGS = ((0.1, 0.3), (0.2, 0.5))
SUBSET_ESTIMATORS = ("eb", "full-mle", "norm-sub", "mle", "inversion")
#: the targets for (0.1, 0.3): the best local-DP channel's figures measured before this mechanism existed
TARGETS = {"(0.1, 0.3)": {"1-10": 5.2, "11-100": 1.42, "101-1000": 0.46, ">1000": 0.13}}


def scores(E, true) -> dict:
    re = relative_error(true, E.estimate)
    out = {b: float(re[(true >= lo) & (true <= hi)].mean()) for b, (lo, hi) in BINS.items()}
    out["zero_abs"] = float(np.abs(E.estimate[true == 0]).mean())
    hit = (E.lower <= true) & (true <= E.upper)
    out["coverage"] = float(hit.mean())
    out["coverage_gt100"] = float(hit[true > 100].mean())
    return out


def run(data: str, seeds: int, n_queries: int, workload_seed: int) -> dict:
    t = ppdp.datasets.load(data)
    wl = point_workload(t, n_queries, seed=workload_seed)
    true = ppdp.queries.answer_exact(t, wl)
    sizes = {b: int(((true >= lo) & (true <= hi)).sum()) for b, (lo, hi) in BINS.items()}
    sizes["zero"] = int((true == 0).sum())
    cells: dict = {}
    for r1, r2 in SETTINGS:
        for mech, ests in ((ppdp.SubsetSelection(rho1=r1, rho2=r2), SUBSET_ESTIMATORS),
                           (ppdp.UniformPerturbation(r1, r2), (None, "norm-sub", "inversion"))):
            label = f"{mech.name}({r1}, {r2})"
            per: dict = {str(e or "default"): [] for e in ests}
            t_pub, t_est = [], {str(e or "default"): [] for e in ests}
            cert = None
            for s in range(seeds):
                t0 = time.perf_counter()
                rel = ppdp.publish(t, mech, seed=s)
                t_pub.append(time.perf_counter() - t0)
                cert = rel.certificate
                for e in ests:
                    t0 = time.perf_counter()
                    E = rel.estimate(wl, estimator=e)
                    t_est[str(e or "default")].append(time.perf_counter() - t0)
                    per[str(e or "default")].append(scores(E, true))
            cell = {"mechanism": mech.name, "params": mech.get_params(), "default_estimator": type(mech).default_estimator,
                    "certificate": {k: v for k, v in (cert or {}).items() if k in ("epsilon", "gamma", "k", "m", "p", "q")},
                    "publish_s_median": float(np.median(t_pub))}
            for name, rows in per.items():
                cell[name] = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
                cell[name]["per_seed"] = {b: [round(r[b], 4) for r in rows] for b in BINS}
                cell[name]["estimate_s_median"] = float(np.median(t_est[name]))
            cells[label] = cell
            print(label, json.dumps({n: {k: round(v, 3) for k, v in cell[n].items() if isinstance(v, float)} for n in per}),
                  flush=True)
    return {"bin_sizes": sizes, "cells": cells, "cost": cost(t, wl)}


def cost(t, wl) -> dict:
    """CPU seconds of each subset estimator's ``estimate`` on the whole workload: the first call on
    a fresh release (nothing cached) and a second call on the same release."""
    out = {}
    for e in SUBSET_ESTIMATORS:
        rel = ppdp.publish(t, ppdp.SubsetSelection(rho1=0.1, rho2=0.3), seed=0)
        row = {}
        for call in ("first_cpu_s", "second_cpu_s"):
            c0, w0 = time.process_time(), time.perf_counter()
            rel.estimate(wl, estimator=e)
            row[call] = round(time.process_time() - c0, 3)
            row[call.replace("cpu", "wall")] = round(time.perf_counter() - w0, 3)
        out[e] = row
        print("cost", e, row, flush=True)
    return out


def main() -> Path:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="occ")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--workload-seed", type=int, default=0)
    a = ap.parse_args()
    load0 = load_average()
    w0, c0 = time.perf_counter(), time.process_time()
    res = run(a.data, a.seeds, a.queries, a.workload_seed)
    out = {"data": a.data, "workload": f"point, {a.queries} queries, seed {a.workload_seed}",
           "release_seeds": list(range(a.seeds)), "metric": "mean relative error per true-count bin; zero_abs: mean "
           "|estimate| on zero counts; coverage: share of 95% intervals holding the true count",
           "targets": TARGETS, **res, "wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0,
           "load_average_before": load0, "load_average_after": load_average(), **provenance(seed=0)}
    path = write_result("subset" + ("" if a.data == "occ" else f"_{a.data}"), out)
    print(path)
    return path


if __name__ == "__main__":
    main()
