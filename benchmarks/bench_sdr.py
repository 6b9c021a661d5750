"""Speed of SDR: publish on EDU (target ≤ 2 s) and 5,000 anatomy-workload estimates (target ≤ 2 s).

Writes benchmarks/results/sdr.json. Best of 3 runs (the machine is shared)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import ppdp
from _common import provenance, write_result
from ppdp.queries.workloads import anatomy_workload


def best_of(f, k=3):
    times = []
    for _ in range(k):
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return min(times), times, out


def main() -> Path:
    t, info = ppdp.datasets.load_info("edu")
    mech = ppdp.SDR(0.1, 0.5)
    pub, pub_all, rel = best_of(lambda: ppdp.publish(t, mech, seed=0))
    wl = anatomy_workload(t, 5000, 0.01, seed=0)
    rel.answer(wl[:10])  # warm imports
    est, est_all, _ = best_of(lambda: rel.answer(wl))
    exact, exact_all, _ = best_of(lambda: ppdp.queries.answer_exact(t, wl))
    res = {
        "dataset": "edu", "rows": t.n_rows, "data_info": info, "mechanism": "sdr", "params": mech.get_params(),
        "subtables": len(rel.certificate["subtables"]),
        "publish_s": pub, "publish_runs_s": pub_all, "publish_target_s": 2.0, "publish_ok": pub <= 2.0,
        "workload": "anatomy, 5000 queries, selectivity 0.01, seed 0",
        "estimate_s": est, "estimate_runs_s": est_all, "estimate_target_s": 2.0, "estimate_ok": est <= 2.0,
        "exact_answers_same_workload_s": exact, "exact_runs_s": exact_all,
        **provenance(seed=0),
    }
    out = write_result("sdr", res)
    print(json.dumps({k: res[k] for k in ("publish_s", "estimate_s", "exact_answers_same_workload_s", "subtables")}, indent=1))
    return out


if __name__ == "__main__":
    main()
