"""Error and speed of the randomized family's estimators on point queries: inversion vs EM
(iterative Bayesian update) vs the exact maximum-likelihood counts (MLE, EM's limit) vs
Norm-Sub vs empirical Bayes (``eb``, the default of uniform perturbation, SDR and A; its
strength ``auto``: adjusted for SDR, moments otherwise), for uniform perturbation and SDR at (ρ1, ρ2) =
(0.1, 0.3) and (0.2, 0.5), and global randomization A (ℓ' = 5) on a 100,000-row sample.

Mean relative error by true-count bin (1–10, 11–100, 101–1,000, > 1,000; NaN-free: bins hold
positive counts only), mean absolute error on zero counts, per-query time, EM iteration
counts (median and mean over queries). ``--data`` picks the table (the evaluation uses OCC;
tuning runs use EDU or ADULT so that OCC stays held out); ``--em-tol`` adds EM variants.

    python benchmarks/bench_randomized_estimators.py [--data occ] [--seeds 5] [--em-tol 0.001]

Writes benchmarks/results/randomized_estimators[_<data>].json."""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np

import ppdp
from _common import provenance, write_result
from ppdp.estimators.randomized import EB_COVARIANCES, EB_PARENTS, EB_STRENGTHS, EM, MLE, EmpiricalBayes, Inversion, NormSub
from ppdp.metrics import relative_error
from ppdp.queries.workloads import point_workload

BINS = {"1-10": (1, 10), "11-100": (11, 100), "101-1000": (101, 1000), ">1000": (1001, np.inf)}


def errors(est, true) -> dict:
    re = relative_error(true, est)
    out = {b: float(re[(true >= lo) & (true <= hi)].mean()) for b, (lo, hi) in BINS.items()}
    out["zero_abs"] = float(np.abs(est[true == 0]).mean())
    return out


def run(data: str, seeds: int, tols: list[float], n_queries: int, workload_seed: int, eb_variants: bool = False,
        only: list[str] | None = None) -> dict:
    full = ppdp.datasets.load(data)
    a_tab = ppdp.datasets.load(data, n=100_000, seed=0)
    cells = [(f"sdr{r}", full, ppdp.SDR(*r)) for r in ((0.1, 0.3), (0.2, 0.5))]
    cells += [(f"uniform{r}", full, ppdp.UniformPerturbation(*r)) for r in ((0.1, 0.3), (0.2, 0.5))]
    cells += [("global(l'=5, n=100000)", a_tab, ppdp.GlobalRandomization(5))]
    ests = {"inversion": Inversion(), "mle": MLE(), "norm-sub": NormSub(), "eb": EmpiricalBayes(), **{f"em(tol={t:g})": EM(tol=t) for t in tols}}
    if eb_variants:
        # every combination of the empirical-Bayes options (the choice of the default reads these
        # on EDU and ADULT only)
        for s, c, pa in itertools.product(EB_STRENGTHS, EB_COVARIANCES, EB_PARENTS):
            ests[f"eb({s},{c},{pa})"] = EmpiricalBayes(strength=s, covariance=c, parents=pa)
    if only:
        ests = {k: v for k, v in ests.items() if any(k.startswith(o) for o in only)}
    res: dict = {}
    for label, t, mech in cells:
        wl = point_workload(t, n_queries, seed=workload_seed)
        true = ppdp.queries.answer_exact(t, wl)
        sizes = {b: int(((true >= lo) & (true <= hi)).sum()) for b, (lo, hi) in BINS.items()}
        sizes["zero"] = int((true == 0).sum())
        per: dict = {name: {"err": [], "s_per_query": [], "iters": []} for name in ests}
        for s in range(seeds):
            rel = ppdp.publish(t, mech, seed=s)
            for name, e in ests.items():
                t0 = time.perf_counter()
                if isinstance(e, EM):
                    est, its = e.answer_with_iterations(rel, wl)
                    per[name]["iters"].append(its)
                else:
                    est = rel.answer(wl, estimator=e)
                per[name]["s_per_query"].append((time.perf_counter() - t0) / len(wl))
                assert name == "inversion" or est.min() >= 0
                per[name]["err"].append(errors(est, true))
        cell = {"rows": t.n_rows, "mechanism": mech.name, "params": mech.get_params(), "bin_sizes": sizes}
        for name, d in per.items():
            row = {k: float(np.mean([e[k] for e in d["err"]])) for k in d["err"][0]}
            row["s_per_query"] = float(np.median(d["s_per_query"]))
            if d["iters"]:
                its = np.concatenate(d["iters"])
                row["iterations_median"], row["iterations_mean"], row["iterations_max"] = \
                    float(np.median(its)), float(its.mean()), int(its.max())
            cell[name] = row
        res[label] = cell
        print(label, json.dumps({n: {k: (f"{v * 1e6:.1f}µs" if k == "s_per_query" else round(v, 3)) if isinstance(v, float) else v for k, v in cell[n].items()}
                                 for n in ests}), flush=True)
    return res


def main() -> Path:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="occ")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--workload-seed", type=int, default=0)
    ap.add_argument("--em-tol", type=float, nargs="+", default=[1e-3])
    ap.add_argument("--eb-variants", action="store_true", help="add every combination of the eb options")
    ap.add_argument("--only", nargs="+", default=None, help="run only the estimators whose label starts so")
    ap.add_argument("--out", default=None, help="result name (default randomized_estimators[_<data>])")
    a = ap.parse_args()
    res = {"data": a.data, "workload": f"point, {a.queries} queries, seed {a.workload_seed}",
           "release_seeds": list(range(a.seeds)), "metric": "mean relative error per true-count bin; zero_abs: "
           "mean |estimate| on zero counts",
           "cells": run(a.data, a.seeds, a.em_tol, a.queries, a.workload_seed, a.eb_variants, a.only),
           **provenance(seed=0)}
    out = write_result(a.out or ("randomized_estimators" + ("" if a.data == "occ" else f"_{a.data}")), res)
    print(out)
    return out


if __name__ == "__main__":
    main()
