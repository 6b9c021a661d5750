"""The A' default's guard (``estimators/diverted_eb.py``, :func:`~ppdp.estimators.diverted_eb.guarded`)
against its variants: the empirical-Bayes counts unguarded, guarded where the inversion's
variance is at least c·n²π(1 − π) for several c, with the count moved ½ or all the way down to
the maximum-likelihood count, and guarded everywhere. Same cell, workload and seeds as
bench_randomized_defaults.py (A' at ℓ' = 5 or the largest feasible below it, on a 100,000-row
sample; point workload, 5,000 queries, seed 0; releases seeded 0…R−1).

Per variant and true-count bin: MAE (zero) or MRE, and the bins where a shipped A' estimator is
lower by more than 2 paired standard errors (the criterion of bench_randomized_defaults.py).

    python benchmarks/bench_diverted_guard_rules.py --data edu [--releases 10]

Writes benchmarks/results/diverted_guard_rules_<data>.json."""

from __future__ import annotations

import argparse
import time

import numpy as np

import ppdp
import ppdp.estimators.diverted_eb as deb
from _common import provenance, write_result
from bench_randomized_defaults import BINS, bin_errors, cells
from ppdp.queries.workloads import point_workload
from ppdp.registry import estimators

#: (label, GUARD_IDENT, GUARD_PULL); the first guarded row is the default
VARIANTS = [("unguarded", 0.0, 0.0), ("default: c = 0.3, pull 1/2", 0.3, 0.5), ("c = 0.1, pull 1/2", 0.1, 0.5),
            ("c = 1, pull 1/2", 1.0, 0.5), ("c = 3, pull 1/2", 3.0, 0.5), ("c = 0.3, pull 1", 0.3, 1.0),
            ("c = 1, pull 1", 1.0, 1.0), ("everywhere, pull 1/2", 0.0, 0.5)]


def run(data: str, releases: int, n_queries: int, sample: int) -> dict:
    label, t, mech = next(c for c in cells(data, sample) if c[0].startswith("diverted"))
    wl = point_workload(t, n_queries, seed=0)
    true = ppdp.queries.answer_exact(t, wl)
    alts = {n: c() for n, c in estimators("randomized").items() if mech.name in c.mechanisms and n != "full-eb"}
    per: dict = {}
    cpu: dict = {}
    saved = deb.GUARD_IDENT, deb.GUARD_PULL
    try:
        for s in range(releases):
            rel = ppdp.publish(t, mech, seed=s)
            for n, e in alts.items():
                per.setdefault(n, []).append(bin_errors(rel.answer(wl, estimator=e), true))
            for v, c, pull in VARIANTS:
                deb.GUARD_IDENT, deb.GUARD_PULL = c, pull
                c0 = time.process_time()
                est = rel.answer(wl)
                cpu[v] = cpu.get(v, 0.0) + time.process_time() - c0
                per.setdefault(v, []).append(bin_errors(est, true))
    finally:
        deb.GUARD_IDENT, deb.GUARD_PULL = saved
    out: dict = {"cell": label, "cpu_s": cpu, "variants": {}}
    for v, _, _ in VARIANTS:
        row: dict = {}
        for b in BINS:
            k = "mae" if b == "zero" else "mre"
            x = np.array([r[b][k] for r in per[v]])
            beaten = []
            for n in alts:
                d = x - np.array([r[b][k] for r in per[n]])
                se = d.std(ddof=1) / np.sqrt(len(d))
                if d.mean() > 2 * se and d.mean() > 0:
                    beaten.append(f"{n} {d.mean():+.3f}±{se:.3f}")
            row[b] = {k: float(x.mean()), "beaten_by": beaten}
        out["variants"][v] = row
        print(f"{data:6s} {v:28s}" + "".join(f"{row[b]['mae' if b == 'zero' else 'mre']:10.3f}" for b in BINS)
              + "  beaten: " + ("; ".join(f"{b}: {', '.join(row[b]['beaten_by'])}" for b in BINS if row[b]["beaten_by"]) or "none"),
              flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="occ")
    ap.add_argument("--releases", type=int, default=10)
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--sample", type=int, default=100_000)
    a = ap.parse_args()
    c0, w0 = time.process_time(), time.perf_counter()
    res = {"data": a.data, "workload": f"point, {a.queries} queries, seed 0", "release_seeds": list(range(a.releases)),
           "metric": "per true-count bin: MAE on zero, MRE otherwise, mean over releases; beaten_by: a shipped A' "
                     "estimator lower by > 2 paired standard errors",
           **run(a.data, a.releases, a.queries, a.sample)}
    res["cpu_s_total"], res["wall_s"] = time.process_time() - c0, time.perf_counter() - w0
    res.update(provenance(seed=0))
    print(write_result(f"diverted_guard_rules_{a.data}", res))


if __name__ == "__main__":
    main()
