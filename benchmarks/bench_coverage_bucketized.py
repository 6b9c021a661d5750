"""Coverage of the nominal 95% intervals of the bucketized (Anatomy's estimator) and answers
(Laplace lookup) families over ≥ 200 seeded releases.

    python benchmarks/bench_coverage_bucketized.py  → benchmarks/results/coverage_bucketized.json

Bucketized: EDU subset of 3,000 rows (seed 0), F'-privacy θ = 8 with σ = 0 and σ = 2 fakes,
200 seeded releases each; per release one table drawn from the interval's model
(:func:`ppdp.estimators.bucketized.draw_assignment`: buckets as published, real values
assigned to rows by a random permutation; saturated buckets' real count-1 values
exchangeable), a fixed anatomy workload of 200 queries (selectivity 5%, seed 3). With σ = 0
the release is the same for every seed (the buckets are a function of the table), so the
randomness is the table's assignment only; with σ = 2 it is the fake draw and the assignment.
Answers: 14 point queries (sex × race), ε = 2, 400 seeded releases; the noise is the only
randomness. Per-release coverages are independent; ``sd_mean`` = sd/√R.
"""

from __future__ import annotations

import json
import time

import numpy as np

import ppdp
from _common import provenance, write_result
from ppdp.estimators.answers import laplace_halfwidth
from ppdp.estimators.bucketized import draw_assignment, query_row_masks
from ppdp.queries.workloads import anatomy_workload


def coverage_one(rel, wl, rng):
    e = rel.estimate(wl)
    rows, sel = query_row_masks(rel, wl)
    truth = (rows & sel[:, draw_assignment(rel, rng)]).sum(axis=1)
    inside = (truth >= e.lower) & (truth <= e.upper)
    return float(inside.mean()), float(np.mean(e.se)), truth, e


def main(n_releases: int = 200, n_rows: int = 3000) -> dict:
    t = ppdp.datasets.load("edu", n=n_rows, seed=0)
    wl = anatomy_workload(t, 200, 0.05, seed=3)
    out = {"benchmark": "interval coverage, bucketized (anatomy) and answers (lookup)", "dataset": "edu",
           "n_rows": n_rows, "n_queries": len(wl), "workload": "anatomy, selectivity 0.05, seed 3", "nominal": 0.95}
    for sigma in (0, 2):
        rng = np.random.default_rng(100 + sigma)
        t0 = time.perf_counter()
        covs, by_bin = [], {"1-10": [], "11-100": [], ">100": []}
        for s in range(n_releases):
            rel = ppdp.publish(t, ppdp.FPrivacy(theta=8, fake_values=sigma), seed=s)
            c, _, truth, e = coverage_one(rel, wl, rng)
            covs.append(c)
            inside = (truth >= e.lower) & (truth <= e.upper)
            for name, lo, hi in (("1-10", 1, 10), ("11-100", 11, 100), (">100", 101, np.inf)):
                sel = (truth >= lo) & (truth <= hi)
                by_bin[name].extend(inside[sel].tolist())
        cv = np.asarray(covs)
        out[f"anatomy_sigma{sigma}"] = {
            "releases": n_releases, "coverage": round(float(cv.mean()), 4),
            "sd_mean": round(float(cv.std(ddof=1) / np.sqrt(len(cv))), 5),
            "in_band_0.93_0.97": bool(0.93 <= cv.mean() <= 0.97),
            "coverage_by_true_count": {k: (round(float(np.mean(v)), 4) if v else None) for k, v in by_bin.items()},
            "n_by_true_count": {k: len(v) for k, v in by_bin.items()},
            "seconds": round(time.perf_counter() - t0, 1)}
        print(json.dumps(out[f"anatomy_sigma{sigma}"]))
    qs = [f"sex = '{s}' AND race = '{r}'" for s in t.domain("sex") for r in t.domain("race")]
    truth = ppdp.query(ppdp.publish(t, ppdp.LaplaceBaseline(epsilon=2.0, queries=qs), seed=0), qs, source=t)["exact"].to_numpy()
    hits = []
    for s in range(2 * n_releases):
        e = ppdp.publish(t, ppdp.LaplaceBaseline(epsilon=2.0, queries=qs), seed=s).estimate(qs)
        hits.append((truth >= e.lower) & (truth <= e.upper))
    alpha = float(np.exp(-2.0 / len(qs)))
    k = laplace_halfwidth(alpha, 0.95)
    per = np.mean(hits, axis=1)
    out["laplace_lookup"] = {"releases": 2 * n_releases, "queries": len(qs), "coverage": round(float(np.mean(hits)), 4),
                             "sd_mean": round(float(per.std(ddof=1) / np.sqrt(len(per))), 5),
                             "exact_coverage": round(1 - 2 * alpha ** (k + 1) / (1 + alpha), 5), "halfwidth": k,
                             "in_band_0.93_0.97": bool(0.93 <= np.mean(hits) <= 0.97)}
    print(json.dumps(out["laplace_lookup"]))
    out.update(provenance(seed=0))
    write_result("coverage_bucketized", out)
    return out


if __name__ == "__main__":
    main()
