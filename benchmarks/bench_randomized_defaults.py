"""Is each randomized mechanism's default estimator beaten by another estimator ppdp ships, in any
count bin? Point queries (every QI predicate × SA value pair of a seeded workload), every
registered estimator of the release's mechanism (at its default options), over seeded releases.

Per estimator and true-count bin (zero, 1–10, 11–100, 101–1,000, > 1,000): mean relative error
(MRE; NaN-free, the zero bin has none) and mean absolute error (MAE), each the mean over the
releases with its standard error (sd over releases / √releases). For the default, per bin, the
paired difference to every alternative (default − alternative, per release) with its standard
error; an alternative is *significantly better* where that difference exceeds 2 standard errors
(MRE for the non-zero bins, MAE for zero). Cells: uniform perturbation and SDR at (ρ1, ρ2) =
(0.1, 0.3), global randomization A (ℓ' = 5) and A' (ℓ' = 5), on the table or on a 100,000-row
sample of it (A and A').

    python benchmarks/bench_randomized_defaults.py --data occ [--releases 10] [--queries 5000]
    python benchmarks/bench_randomized_defaults.py --data gauntlet:gss_vocab   # a public table, never tuned on

Writes benchmarks/results/randomized_defaults_<data>.json (CPU and wall time, machine, load,
seeds)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import ppdp
from _common import provenance, write_result
from ppdp.estimators.randomized import EmpiricalBayes
from ppdp.metrics import relative_error
from ppdp.queries.workloads import point_workload
from ppdp.registry import estimators, mechanism

BINS = {"zero": (0, 0), "1-10": (1, 10), "11-100": (11, 100), "101-1000": (101, 1000), ">1000": (1001, np.inf)}


GAUNTLET = Path(__file__).resolve().parent.parent / "tests" / "gauntlet"


def load(data: str):
    """A bundled table by name, or ``gauntlet:<name>``: a public table of the gauntlet read through its
    reviewed schema (tests/gauntlet/README.md: source and licence), as a custodian's own file."""
    if not data.startswith("gauntlet:"):
        return ppdp.datasets.load(data)
    from ppdp.schema import read_table

    name = data.split(":", 1)[1]
    files = sorted((GAUNTLET / "data").glob(name + ".*"))
    if not files:
        raise SystemExit(f"--data: no gauntlet table {name!r} under {GAUNTLET / 'data'}")
    return read_table(files[0], GAUNTLET / "schemas" / f"{name}.toml")


def cells(data: str, sample: int) -> list:
    full = load(data)
    small = full if full.n_rows <= sample else ppdp.datasets.load(data, n=sample, seed=0)  # bundled tables only
    # A' needs every SA value at most N/ℓ' times: ℓ' = 5, or the largest feasible below it (EDU: 4)
    top = max(int(small.counts(c).max()) for c in small.sensitive)
    lp = max(2, min(5, small.n_rows // top))
    # A needs retention 1/ℓ' above 1/m: ℓ' = 5, or m − 1 on an SA of at most 5 values (Chile's vote: 4)
    m = min(len(small.domain(c)) for c in small.sensitive)
    la = max(2, min(5, m - 1))
    return [("uniform(0.1,0.3)", full, ppdp.UniformPerturbation(0.1, 0.3)),
            ("sdr(0.1,0.3)", full, ppdp.SDR(0.1, 0.3)),
            (f"global(l'={la}, n={small.n_rows})", small, ppdp.GlobalRandomization(la)),
            (f"diverted(l'={lp}, n={small.n_rows})", small, ppdp.Diverted(lp))]


def bin_errors(est: np.ndarray, true: np.ndarray) -> dict:
    re = relative_error(true, est)
    ae = np.abs(est - true)
    out = {}
    for b, (lo, hi) in BINS.items():
        m = (true >= lo) & (true <= hi)
        out[b] = {"mae": float(ae[m].mean()) if m.any() else float("nan"),
                  "mre": float(re[m].mean()) if m.any() and lo > 0 else float("nan")}
    return out


def summarise(per_rel: list[dict], default: str) -> dict:
    names = list(per_rel[0])
    R = len(per_rel)
    out: dict = {}
    for n in names:
        out[n] = {}
        for b in BINS:
            row = {}
            for k in ("mre", "mae"):
                v = np.array([r[n][b][k] for r in per_rel])
                row[k], row[k + "_se"] = float(v.mean()), float(v.std(ddof=1) / np.sqrt(R)) if R > 1 else float("nan")
            out[n][b] = row
    beaten = []
    for b in BINS:
        k = "mae" if b == "zero" else "mre"
        for n in names:
            if n == default:
                continue
            d = np.array([r[default][b][k] - r[n][b][k] for r in per_rel])
            diff, se = float(d.mean()), float(d.std(ddof=1) / np.sqrt(R)) if R > 1 else float("nan")
            out[default][b][f"vs {n}"] = {"diff": diff, "se": se, "worse_in": int((d > 0).sum())}
            if np.isfinite(diff) and diff > 2 * se and diff > 0:
                beaten.append({"bin": b, "metric": k, "by": n, "diff": diff, "se": se})
    return {"estimators": out, "beaten": beaten}


def run(data: str, releases: int, n_queries: int, workload_seed: int, sample: int, only: list[str] | None,
        default: str | None = None) -> dict:
    res: dict = {}
    for label, t, mech in cells(data, sample):
        if only and not any(label.startswith(o) for o in only):
            continue
        dflt = default or mechanism(mech.name).default_estimator
        ests = {n: c() for n, c in estimators("randomized").items() if mech.name in c.mechanisms}
        if "eb" in ests and "guard" in EmpiricalBayes._parameter_constraints:
            ests["eb(guard=off)"] = EmpiricalBayes(guard="off")  # the empirical-Bayes counts alone
        wl = point_workload(t, n_queries, seed=workload_seed)
        true = ppdp.queries.answer_exact(t, wl)
        per_rel, cpu, wall = [], {n: 0.0 for n in ests}, {n: 0.0 for n in ests}
        for s in range(releases):
            rel = ppdp.publish(t, mech, seed=s)
            row = {}
            for n, e in ests.items():
                c0, w0 = time.process_time(), time.perf_counter()
                est = rel.answer(wl, estimator=e if n != dflt else None)
                cpu[n] += time.process_time() - c0
                wall[n] += time.perf_counter() - w0
                row[n] = bin_errors(est, true)
            per_rel.append(row)
        cell = {"rows": t.n_rows, "mechanism": mech.name, "params": mech.get_params(), "default": dflt,
                "bin_sizes": {b: int(((true >= lo) & (true <= hi)).sum()) for b, (lo, hi) in BINS.items()},
                "cpu_s": cpu, "wall_s": wall, **summarise(per_rel, dflt)}
        res[label] = cell
        print(format_cell(label, cell), flush=True)
    return res


def format_cell(label: str, cell: dict) -> str:
    """A text table: estimator × bin, MRE ± se (MAE ± se on zero counts); * marks the default."""
    lines = [f"{label}  (default {cell['default']}; bins {cell['bin_sizes']})",
             f"  {'estimator':<16}" + "".join(f"{b:>18}" for b in BINS)]
    for n, row in cell["estimators"].items():
        vals = []
        for b in BINS:
            k = "mae" if b == "zero" else "mre"
            vals.append(f"{row[b][k]:.3f}±{row[b][k + '_se']:.3f}")
        lines.append(f"  {('*' if n == cell['default'] else ' ') + n:<16}" + "".join(f"{v:>18}" for v in vals))
    lines.append("  significantly better than the default: " + (", ".join(
        f"{x['by']} on {x['bin']} ({x['diff']:+.3f}±{x['se']:.3f})" for x in cell["beaten"]) or "none"))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="occ")
    ap.add_argument("--releases", type=int, default=10)
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--workload-seed", type=int, default=0)
    ap.add_argument("--sample", type=int, default=100_000, help="rows of the A and A' cells' sample")
    ap.add_argument("--only", nargs="+", default=None, help="cells whose label starts so")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    c0, w0 = time.process_time(), time.perf_counter()
    res = {"data": a.data, "workload": f"point, {a.queries} queries, seed {a.workload_seed}",
           "release_seeds": list(range(a.releases)),
           "metric": "per true-count bin: mean relative error (mre) and mean absolute error (mae), mean over "
                     "releases ± standard error; 'vs X': default − X paired over releases",
           "cells": run(a.data, a.releases, a.queries, a.workload_seed, a.sample, a.only)}
    res["cpu_s"], res["wall_s"] = time.process_time() - c0, time.perf_counter() - w0
    res.update(provenance(seed=0))
    print(write_result(a.out or f"randomized_defaults_{a.data.replace('gauntlet:', '')}", res))


if __name__ == "__main__":
    main()
