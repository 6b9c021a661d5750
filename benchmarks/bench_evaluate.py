"""Wall time of one `ppdp evaluate` run on OCC with the anatomy workload (issue 5's "must show"):
F'-privacy (θ = 8), Anatomy (ℓ = 5), SDR (0.1, 0.3), uniform (0.1, 0.3) and A' (ℓ' = 5).

    python benchmarks/bench_evaluate.py [--queries 5000] [--trials 3]

Writes benchmarks/results/evaluate.json: wall and CPU seconds, the machine's load average
(the 2 cores are shared), per-model publish/query seconds and mean relative error.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

MODELS = ["fprivacy:theta=8", "anatomy:l=5", "sdr:rho1=0.1,rho2=0.3", "uniform:rho1=0.1,rho2=0.3", "diverted:l_prime=5"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/evaluate.json")
    args = ap.parse_args()

    import tempfile

    import ppdp
    from ppdp.evaluate import evaluate
    from ppdp.provenance import load_average, provenance

    t = ppdp.datasets.load("occ")
    load0 = load_average()
    w0, c0 = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as d:
        ev = evaluate(t, MODELS, workload="anatomy", n_queries=args.queries, trials=args.trials, seed=0, out_dir=d,
                      progress=False, dataset_info={"dataset": "occ"})
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    allb = ev.summary[ev.summary["bin"] == "all"]
    result = {
        "benchmark": "evaluate OCC anatomy workload",
        "queries": args.queries, "trials": args.trials, "models": MODELS,
        "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "within_2_minutes": wall <= 120,
        "loadavg_start": load0, "loadavg_end": load_average(),
        "per_model": [{k: (None if v != v else v) for k, v in r.items()}
                      for r in allb[["model", "mean_rel_err", "median_rel_err", "p95_rel_err", "mse", "publish_s", "query_s",
                                     "trials", "error"]].to_dict("records")],
        **provenance(seed=0),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    runs = json.loads(out.read_text()) if out.exists() else []
    runs = [r for r in (runs if isinstance(runs, list) else [runs])
            if (r.get("queries"), r.get("trials")) != (args.queries, args.trials)] + [result]
    out.write_text(json.dumps(runs, indent=2, default=str) + "\n")
    print(json.dumps({k: result[k] for k in ("queries", "trials", "wall_s", "cpu_s", "within_2_minutes", "loadavg_start")}))


if __name__ == "__main__":
    main()
