"""Exact answering speed: a 5,000-query anatomy workload (selectivity 1%) on EDU.

    python benchmarks/bench_queries.py  → benchmarks/results/queries.json

Target (issue 2): ≥ 5,000 queries/s on the 2-core machine. Reports the best of several
repetitions (wall and CPU), the workload seed and the machine.
"""

from __future__ import annotations

import json
import time

import numpy as np

import ppdp
from _common import provenance, write_result
from ppdp.queries import answer_exact
from ppdp.queries.workloads import anatomy_workload


def main(repeats: int = 5) -> dict:
    t = ppdp.datasets.load("edu")
    t0 = time.perf_counter()
    wl = anatomy_workload(t, 5000, 0.01, seed=1)
    gen = time.perf_counter() - t0
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        ans = answer_exact(t, wl)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    res = {
        "benchmark": "exact answers, anatomy workload on EDU",
        "dataset": "edu", "n_rows": t.n_rows, "n_queries": len(wl), "workload_seed": 1, "selectivity": 0.01,
        "workload_generation_s": round(gen, 3),
        "best_wall_s": round(min(walls), 4), "best_cpu_s": round(min(cpus), 4),
        "queries_per_s_wall": round(len(wl) / min(walls), 1),
        "target_queries_per_s": 5000, "meets_target": len(wl) / min(walls) >= 5000,
        "mean_true_count": float(np.mean(ans)),
        **provenance(seed=1),
    }
    write_result("queries", res)
    print(json.dumps(res, indent=2))
    return res


if __name__ == "__main__":
    main()
