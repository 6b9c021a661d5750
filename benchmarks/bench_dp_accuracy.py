"""Accuracy and speed of the ε-DP histograms (issue 14) → benchmarks/results/dp_accuracy.json.

UCI Adult (bundled ``adult``, 48,842 rows), the public domains of its documented schema:

* 2-D: age (17..90) × hours_per_week (1..99), the 74 × 99 grid;
* 4-D: age × education × hours_per_week × sex, 234,432 cells.

Per trial t = 0..T−1 a *fresh* seeded workload of 2,000 uniformly random ranges
(:func:`ppdp.queries.workloads.range_workload`, seed 1000 + t) and a fresh publish seed t: the
figures are averages over several workloads, none of which any default was chosen on. Reported
per method and ε: the mean over trials of the mean absolute error per query, and its standard
error over the trials (sd/√T).

Speed: median publish time of the default (``dp``) on both cubes at ε = 0.1 and 1 (after one
warm-up, which includes the inference library's compilation), and 100,000 random range
queries answered from a 2-D release (end to end from Query objects).

Run: ``PYTHONPATH=src python benchmarks/bench_dp_accuracy.py [--trials 10] [--cubes 2d,4d] [--methods dp]
[--no-speed]`` (results: ``dp_accuracy[_<cubes>][_<methods>].json``).
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

import ppdp
from _common import provenance, timed, write_result
from ppdp.mechanisms.histogram import (AdaptiveGrid, CellHistogram, DefaultHistogram, DPCube, KroneckerLeastSquares,
                                       MarginalsModel)
from ppdp.queries.workload import answer_exact
from ppdp.queries.workloads import range_workload

EPSILONS = (0.05, 0.1, 0.5, 1.0)
CUBES = {"2d": ["age", "hours_per_week"], "4d": ["age", "education", "hours_per_week", "sex"]}
REQUIRED = {"2d": {"dp": [318, 196, 49.8, 24.7]}}
TARGET = {"2d": [300, 179, 41, 20.5], "4d": [1.5 * v for v in (283, 269, 89, 57)]}


def methods(cube: str):
    """(label, mechanism factory of ε, estimator or None)."""
    dims = CUBES[cube]
    out = [("dp (default)", lambda e: DefaultHistogram(e, dims, domains="adult"), None),
           ("dpcube (default)", lambda e: DPCube(e, dims, domains="adult"), None),
           ("dpcube (α1/α 0.7, θ 10, ls-eb)",
            lambda e: DPCube(e, dims, alpha1_fraction=0.7, count_threshold=10, domains="adult"), "ls-eb"),
           ("identity (cells)", lambda e: CellHistogram(e, dims, domains="adult"), None),
           ("kron", lambda e: KroneckerLeastSquares(e, dims, domains="adult"), None),
           ("agrid", lambda e: AdaptiveGrid(e, dims, domains="adult"), None),
           ("agrid (α 0.3, profile 0.1: as in dp)",
            lambda e: AdaptiveGrid(e, dims, alpha=0.3, profile=0.1, domains="adult"), None),
           ("marginals way=1", lambda e: MarginalsModel(e, dims, way=1, domains="adult"), None)]
    if len(dims) > 2:
        out.append(("marginals way=2", lambda e: MarginalsModel(e, dims, way=2, domains="adult"), None))
    return out


def accuracy(table, cube: str, trials: int, only: str | None = None) -> dict:
    dims = CUBES[cube]
    wls = [range_workload(table.domains, dims, 2000, seed=1000 + t) for t in range(trials)]
    truth = [answer_exact(table, wl) for wl in wls]
    res: dict = {}
    for label, make, est in methods(cube):
        if only and not any(label.startswith(o) for o in only.split(",")):
            continue
        rows = {}
        for e in EPSILONS:
            errs, secs = [], []
            for t in range(trials):
                t0 = time.perf_counter()
                rel = ppdp.publish(table, make(e), seed=t)
                secs.append(time.perf_counter() - t0)
                errs.append(float(np.abs(rel.answer(wls[t], estimator=est) - truth[t]).mean()))
            rows[str(e)] = {"mae": float(np.mean(errs)), "se": float(np.std(errs, ddof=1) / math.sqrt(trials)),
                            "publish_seconds_median": float(np.median(secs)),
                            "choice": rel.certificate.get("choice"),
                            "expected_error": rel.certificate.get("expected_error")}
            print(cube, label, e, f"{rows[str(e)]['mae']:.1f} ± {rows[str(e)]['se']:.1f}", flush=True)
        res[label] = rows
    return res


def speed(table) -> dict:
    out = {}
    for cube, limit in (("2d", 0.5), ("4d", 10.0)):
        for e in (0.1, 1.0):
            s = timed(lambda: ppdp.publish(table, DefaultHistogram(e, CUBES[cube], domains="adult"), seed=0), repeat=3)
            out[f"publish_{cube}_eps{e}"] = {"seconds": s, "target": limit, "ok": s <= limit}
    rel = ppdp.publish(table, DefaultHistogram(1.0, CUBES["2d"], domains="adult"), seed=0)
    wl = range_workload(table.domains, CUBES["2d"], 100_000, seed=7)
    rel.answer(wl[:10])
    t0 = time.perf_counter()
    rel.answer(wl)
    s = time.perf_counter() - t0
    out["answer_100k_queries_2d"] = {"seconds": s, "target": 1.0, "ok": s <= 1.0}
    return out


def table_md(res: dict, cube: str) -> str:
    lines = [f"| method ({cube}) | " + " | ".join(f"ε = {e}" for e in EPSILONS) + " |",
             "|---|" + "---|" * len(EPSILONS)]
    for label, rows in res.items():
        lines.append(f"| {label} | " + " | ".join(f"{rows[str(e)]['mae']:.1f} ± {rows[str(e)]['se']:.1f}"
                                                  for e in EPSILONS) + " |")
    return "\n".join(lines)


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--cubes", default="2d,4d")
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--methods", default=None, help="comma-separated label prefixes (default: all)")
    a = ap.parse_args()
    table = ppdp.datasets.load("adult")
    res = {**provenance(seed=0), "data": "adult (48,842 rows, bundled), public domains",
           "workloads": "2,000 uniformly random ranges per trial, fresh seed per trial (1000 + t)",
           "trials": a.trials, "epsilons": list(EPSILONS), "required": REQUIRED, "target": TARGET, "accuracy": {}}
    for cube in a.cubes.split(","):
        res["accuracy"][cube] = accuracy(table, cube, a.trials, a.methods)
        print(table_md(res["accuracy"][cube], cube), flush=True)
    if not a.no_speed:
        res["speed"] = speed(table)
    name = "dp_accuracy" if a.cubes == "2d,4d" else f"dp_accuracy_{a.cubes.replace(',', '_')}"
    if a.methods:
        name += "_" + "_".join(m.split(" ")[0].strip("(") for m in a.methods.split(","))
    write_result(name, res)
    return res


if __name__ == "__main__":
    print(json.dumps(main().get("speed", {}), indent=2))
