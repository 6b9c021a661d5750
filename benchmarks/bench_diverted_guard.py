"""The randomized family's guard tried on A''s default ``full-eb``: each point query's answer moved a
share (½, ¼) of the way down to ``full-iterative``'s where that is lower, against every A' estimator
ppdp ships, per true-count bin (zero: MAE; others: MRE), over seeded releases; an estimator *beats*
a variant where it is lower by more than 2 paired standard errors (bench_randomized_defaults.py's
criterion). Not the default: docs/sdr.md says why (GSS's 11–100 bin and mixed workloads).

    python benchmarks/bench_diverted_guard.py --data occ|edu|adult|gauntlet:<name> [--releases 10]

Writes benchmarks/results/diverted_guard_<data>.json."""

from __future__ import annotations

import argparse
import time

import numpy as np

import ppdp
from _common import provenance, write_result
from bench_randomized_defaults import BINS, bin_errors, cells
from ppdp.queries.workloads import point_workload
from ppdp.registry import estimators

PULLS = {"guard 1/2": 0.5, "guard 1/4": 0.25}


def errors(est: np.ndarray, true: np.ndarray) -> dict:
    """Per bin the benchmark's criterion metric: MAE on zero counts, MRE elsewhere."""
    return {b: v["mae" if b == "zero" else "mre"] for b, v in bin_errors(est, true).items()}


def run(data: str, releases: int) -> dict:
    label, t, mech = [c for c in cells(data, 100_000) if c[0].startswith("diverted")][0]
    ests = {n: c() for n, c in estimators("randomized").items() if mech.name in c.mechanisms}
    wl = point_workload(t, 5000, seed=0)
    true = ppdp.queries.answer_exact(t, wl)
    rows = []
    for s in range(releases):
        rel = ppdp.publish(t, mech, seed=s)
        a = {n: rel.answer(wl, estimator=e) for n, e in ests.items()}
        for g, pull in PULLS.items():
            a[g] = a["full-eb"] - pull * np.maximum(a["full-eb"] - a["full-iterative"], 0.0)
        rows.append({n: errors(v, true) for n, v in a.items()})
    names = list(rows[0])
    out: dict = {"cell": label, "mean": {n: {b: float(np.mean([r[n][b] for r in rows])) for b in BINS} for n in names}}
    out["beaten"] = {}
    for g in ("full-eb", *PULLS):
        beat = []
        for b in BINS:
            for n in ests:
                if n == "full-eb":
                    continue
                d = np.array([r[g][b] - r[n][b] for r in rows])
                if np.isfinite(d).all() and d.mean() > 0 and d.mean() > 2 * d.std(ddof=1) / np.sqrt(len(d)):
                    beat.append({"bin": b, "by": n, "diff": float(d.mean())})
        out["beaten"][g] = beat
    for n in names:
        print(f"  {n:<16}" + "".join(f"{out['mean'][n][b]:>10.3f}" for b in BINS))
    for g, beat in out["beaten"].items():
        print(f"  {g}: beaten by " + (", ".join(f"{x['by']} on {x['bin']} (+{x['diff']:.3f})" for x in beat) or "none"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="occ")
    ap.add_argument("--releases", type=int, default=10)
    a = ap.parse_args()
    c0, w0 = time.process_time(), time.perf_counter()
    res = {"data": a.data, "workload": "point, 5000 queries, seed 0", "release_seeds": list(range(a.releases)),
           **run(a.data, a.releases)}
    res["cpu_s"], res["wall_s"] = time.process_time() - c0, time.perf_counter() - w0
    res.update(provenance(seed=0))
    print(write_result(f"diverted_guard_{a.data.replace('gauntlet:', '')}", res))


if __name__ == "__main__":
    main()
