"""SDR's empirical-Bayes strength on the anatomy workload (not the point queries it was chosen on).

    python benchmarks/bench_eb_strength_anatomy.py  → benchmarks/results/eb_strength_anatomy.json

SDR (0.1, 0.3) on EDU, ADULT and OCC, release seeds 0–2; 2,000 queries of the anatomy workload
(selectivity 1%, seed 3: larger counts than the point queries of
``bench_randomized_estimators.py``); mean relative error over the queries with a positive true
count, ``EmpiricalBayes(strength="moments")`` against ``strength="adjusted"`` (SDR's default).
"""

from __future__ import annotations

import numpy as np

import ppdp
from _common import provenance, write_result
from ppdp.estimators.randomized import EmpiricalBayes
from ppdp.metrics import relative_error
from ppdp.queries import answer_exact
from ppdp.queries.workloads import anatomy_workload


def main() -> dict:
    res: dict = {"benchmark": "SDR (0.1, 0.3) eb strength on the anatomy workload", "workload": "anatomy, 2000 queries, "
                 "selectivity 0.01, seed 3", "release_seeds": [0, 1, 2], "metric": "mean relative error, true count > 0",
                 "data": {}}
    for data in ("edu", "adult", "occ"):
        t = ppdp.datasets.load(data)
        wl = anatomy_workload(t, 2000, 0.01, seed=3)
        true = answer_exact(t, wl)
        pos = true > 0
        per: dict[str, list[float]] = {"moments": [], "adjusted": []}
        for seed in range(3):
            rel = ppdp.publish(t, ppdp.SDR(0.1, 0.3), seed=seed)
            for s in per:
                est = rel.answer(wl, estimator=EmpiricalBayes(strength=s))
                per[s].append(float(relative_error(true[pos], est[pos]).mean()))
        res["data"][data] = {s: float(np.mean(v)) for s, v in per.items()} | {"median_true_count": float(np.median(true))}
        print(data, res["data"][data], flush=True)
    res.update(provenance(seed=0))
    write_result("eb_strength_anatomy", res)
    return res


if __name__ == "__main__":
    main()
