"""Coverage of the bucketized family's intervals on real tables' TRUE counts, before and after.

    python benchmarks/bench_coverage_bucketized.py occ    → benchmarks/results/coverage_bucketized_occ.json
    python benchmarks/bench_coverage_bucketized.py edu    → …_edu.json
    python benchmarks/bench_coverage_bucketized.py adult  → …_adult.json
    python benchmarks/bench_coverage_bucketized.py speed  → …_speed.json (5,000 queries with intervals, full OCC)

Per table: a fixed real subset of 10,000 rows (``ppdp.datasets.load(name, n=10000, seed=0)``),
100 releases (seeds 0 … 99) of each mechanism — F'-privacy θ = 8 and Anatomy ℓ = 5 (ℓ = 2 on
EDU) — and a fixed query set: the anatomy workload (200 queries, selectivity 0.05, seed 3),
point queries sex × each of the 6 most frequent SA values, and 4 age ranges × those values.
The truth is the subset's own exact counts (``answer_exact``), never a draw from an
estimator's model. Two intervals per release:

- ``before``: the uniform within-bucket assignment interval (Anatomy's estimator, closed-form
  se, normal interval at 0.95 — the default before; ``AnatomyEstimator.uniform_assignment_estimate``,
  the same numbers);
- ``after``: the default ``Release.estimate`` (the certain bounds, ``kind="certain"``).

Reported per (mechanism, interval): coverage overall and for true counts > 100, the median of
width / true count (true count ≥ 1), and the median width / count for counts > 100.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

import ppdp
from _common import provenance, write_result
from ppdp.estimators.bucketized import AnatomyEstimator
from ppdp.queries import Predicate, Query
from ppdp.queries.workload import Workload, answer_exact
from ppdp.queries.workloads import anatomy_workload

N_ROWS = 10_000
N_RELEASES = 100


def query_set(table) -> Workload:
    sa = table.sa
    dom = table.domain(sa)
    top = [dom[i] for i in np.argsort(-np.bincount(table.codes(sa), minlength=len(dom)), kind="stable")[:6]]
    queries = list(anatomy_workload(table, 200, 0.05, seed=3))
    queries += [Query((Predicate("sex", "eq", (s,)), Predicate(sa, "eq", (x,)))) for s in table.domain("sex") for x in top]
    ages = table.domain("age")
    cuts = np.linspace(0, len(ages), 5).astype(int)
    queries += [Query((Predicate("age", "in", tuple(ages[a:b])), Predicate(sa, "eq", (x,))))
                for a, b in zip(cuts[:-1], cuts[1:]) for x in top]
    return Workload(queries)


def summary(hits: list, widths: list, truth: np.ndarray, kinds: set) -> dict:
    h, w = np.asarray(hits), np.asarray(widths)
    big = truth > 100
    pos = truth >= 1
    return {"kind": sorted(kinds), "coverage": round(float(h.mean()), 4),
            "coverage_count_gt_100": round(float(h[:, big].mean()), 4) if big.any() else None,
            "median_width_over_count": round(float(np.median(w[:, pos])), 4),
            "median_width_over_count_gt_100": round(float(np.median(w[:, big])), 4) if big.any() else None}


def run_table(name: str) -> dict:
    t = ppdp.datasets.load(name, n=N_ROWS, seed=0)
    wl = query_set(t)
    truth = answer_exact(t, wl)
    out = {"benchmark": "bucketized interval coverage on the true counts", "dataset": name, "n_rows": N_ROWS,
           "sample_seed": 0, "releases": N_RELEASES, "n_queries": len(wl), "n_count_gt_100": int((truth > 100).sum()),
           "workload": "anatomy (200, selectivity 0.05, seed 3) + sex x top-6 SA + 4 age ranges x top-6 SA",
           "nominal": 0.95, "results": {}}
    mechs = {"fprivacy theta=8": ppdp.FPrivacy(theta=8),
             f"anatomy l={2 if name == 'edu' else 5}": ppdp.Anatomy(l=2 if name == "edu" else 5)}
    for label, mech in mechs.items():
        acc = {k: {"hits": [], "widths": [], "kinds": set(), "seconds": 0.0} for k in ("before", "after")}
        for seed in range(N_RELEASES):
            rel = ppdp.publish(t, mech, seed=seed)
            for k, fn in (("before", lambda r: AnatomyEstimator().uniform_assignment_estimate(r, wl)),
                          ("after", lambda r: r.estimate(wl))):
                t0 = time.process_time()
                e = fn(rel)
                acc[k]["seconds"] += time.process_time() - t0
                acc[k]["hits"].append((e.lower <= truth) & (truth <= e.upper))
                acc[k]["widths"].append((e.upper - e.lower) / np.maximum(truth, 1))
                acc[k]["kinds"].add(e.kind)
        res = {}
        for k, a in acc.items():
            res[k] = summary(a["hits"], a["widths"], truth, a["kinds"])
            res[k]["estimate_cpu_s_per_release"] = round(a["seconds"] / N_RELEASES, 4)
        out["results"][label] = res
        print(name, label, json.dumps(res), flush=True)
    out.update(provenance(seed=0))
    write_result(f"coverage_bucketized_{name}", out)
    return out


def run_speed() -> dict:
    """5,000 anatomy-workload queries (selectivity 0.01, seed 0) with intervals on full OCC and
    full EDU, F'-privacy θ = 8 (seed 1): CPU-s of the first call (indexes built) and of a
    second workload (seed 1) on the same release."""
    out: dict = {"benchmark": "bucketized certain bounds, 5,000 queries, full OCC and EDU, fprivacy theta=8"}
    for name in ("occ", "edu"):
        t = ppdp.datasets.load(name)
        rel = ppdp.publish(t, ppdp.FPrivacy(theta=8), seed=1, allow_disclosure=True)
        wl0, wl1 = anatomy_workload(t, 5000, 0.01, seed=0), anatomy_workload(t, 5000, 0.01, seed=1)
        t0 = time.process_time()
        rel.estimate(wl0)
        t1 = time.process_time()
        rel.estimate(wl1)
        t2 = time.process_time()
        rel.answer(wl1)
        t3 = time.process_time()
        out[name] = {"n_rows": t.n_rows, "n_buckets": int(rel.buckets()["n_buckets"]),
                     "first_call_cpu_s": round(t1 - t0, 2), "second_workload_cpu_s": round(t2 - t1, 2),
                     "answer_only_cpu_s": round(t3 - t2, 2)}
        print(name, json.dumps(out[name]), flush=True)
    out.update(provenance(seed=1))
    write_result("coverage_bucketized_speed", out)
    return out


if __name__ == "__main__":
    which = sys.argv[1:] or ["occ", "edu", "adult", "speed"]
    for w in which:
        run_speed() if w == "speed" else run_table(w)
