"""Coverage of the nominal 95% intervals of the histogram family (ε-DP cubes) over ≥ 200 seeded
releases per mechanism, with each mechanism's default estimator (and DPCube's other estimators).

    python benchmarks/bench_coverage_histogram.py [--releases 200] [--configs a,b,…] [--jobs 2]
      → benchmarks/results/coverage_histogram.json
    python benchmarks/bench_coverage_histogram.py --speed → benchmarks/results/coverage_histogram_speed.json
    python benchmarks/bench_coverage_histogram.py --speed-closed → benchmarks/results/coverage_histogram_speed_closed.json

Table: a 4,000-row sample of ADULT (seed 1), fixed for every release; only the mechanism's
noise changes between releases (publish seeds 0..R−1). The truth of a query is the exact count
of the same cube (declared domains / bins), summed over the query's boxes.

Configurations (the default ``dp`` in each branch its rule can take, then every other mechanism):

* ``dp-kron``: age × hours_per_week in 12 × 11 public bins, ε = 1 (cell signal N̂ε/cells ≈ 30 → kron);
* ``dp-agrid``: age × hours_per_week on their raw values (74 × 99), ε = 1 (signal 0.55 → agrid);
* ``dp-marginals2``: sex × race × education (2 × 5 × 16), ε = 0.1 (signal 2.5 → 2-way marginals);
* ``dp-marginals1``: the same cube at ε = 0.01 (marginal SNR < 0.25 → 1-way marginals);
* ``cells``, ``dpcube`` (ls), ``dpcube-uniform``, ``dpcube-ls-eb``, ``dpcube-paper`` (ls-unweighted),
  ``kdtree`` (uniform), ``consistency`` (cells), ``kron``, ``agrid`` (the paper's α = 0.5):
  age × hours_per_week raw, ε = 1; ``marginals``: age × sex × race, 2-way, ε = 1.

Query sets, fixed (seeded) per configuration, built on the release's public domains:

* ``ranges``: 200 uniformly random ranges on every dimension (public grid order; they cut the
  mechanism's partitions, grid boxes and model structure anywhere);
* ``cells``: 100 random single cells (the finest public grid: the largest uniform-within-box bias);
* ``marginals``: every 1-way marginal cell (one value of one dimension, the others whole).

Per release the share of queries whose interval holds the truth; reported: the mean over
releases (``coverage``) with its standard error (sd/√R, releases independent), and for the
bootstrap estimators the same coverage with two alternative intervals computed from the same
replicates (``basic``: the basic bootstrap interval [θ̂ − q_{0.975}, θ̂ − q_{0.025}] of the
replicate errors; ``sd``: θ̂ ± t(R−1)·(replicate sd), without the bootstrap's bias; the shipped
interval is θ̂ ± t(R)·√(mean squared replicate error)), and the mean squared standardised error E[(θ̂ − θ)²/se²] (1 when se is right).
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import numpy as np

AGE = {"age": [17, 22, 27, 32, 37, 42, 47, 52, 57, 62, 67, 72, 91]}
HOURS = {"hours_per_week": [1, 10, 20, 30, 35, 40, 41, 45, 50, 60, 80, 100]}
RAW = ["age", "hours_per_week"]
CAT3 = ["sex", "race", "education"]

#: name → (mechanism class name, kwargs, estimator or None)
CONFIGS = {
    "dp-kron": ("DefaultHistogram", dict(epsilon=1.0, dims=RAW, bins={**AGE, **HOURS}), None),
    "dp-agrid": ("DefaultHistogram", dict(epsilon=1.0, dims=RAW, domains="adult"), None),
    "dp-marginals2": ("DefaultHistogram", dict(epsilon=0.1, dims=CAT3, domains="adult"), None),
    "dp-marginals1": ("DefaultHistogram", dict(epsilon=0.01, dims=CAT3, domains="adult"), None),
    "cells": ("CellHistogram", dict(epsilon=1.0, dims=RAW, domains="adult"), None),
    "dpcube": ("DPCube", dict(epsilon=1.0, dims=RAW, domains="adult"), None),
    "dpcube-uniform": ("DPCube", dict(epsilon=1.0, dims=RAW, domains="adult"), "uniform"),
    "dpcube-ls-eb": ("DPCube", dict(epsilon=1.0, dims=RAW, domains="adult"), "ls-eb"),
    "dpcube-paper": ("DPCubePaper", dict(epsilon=1.0, dims=RAW, domains="adult"), None),
    "kdtree": ("HierarchicalKDTree", dict(epsilon=1.0, dims=RAW, domains="adult"), None),
    "consistency": ("ConsistentHierarchy", dict(epsilon=1.0, dims=RAW, domains="adult"), None),
    "kron": ("KroneckerLeastSquares", dict(epsilon=1.0, dims=RAW, domains="adult"), None),
    "agrid": ("AdaptiveGrid", dict(epsilon=1.0, dims=RAW, domains="adult"), None),
    "marginals": ("MarginalsModel", dict(epsilon=1.0, dims=["age", "sex", "race"], way=2, domains="adult"), None),
}
N_ROWS = 4000


def query_sets(rel, seed: int = 7):
    from ppdp.queries.model import Predicate, Query
    from ppdp.queries.workloads import range_workload

    dims = rel.dims
    doms = {d: rel.domains[d] for d in dims}
    rng = np.random.default_rng(seed)
    cells = []
    for _ in range(100):
        cells.append(Query(tuple(Predicate(d, "eq", values=(doms[d][int(rng.integers(len(doms[d])))],)) for d in dims)))
    marg = [Query((Predicate(d, "eq", values=(lab,)),)) for d in dims for lab in doms[d]]
    return {"ranges": list(range_workload(doms, dims, 200, seed=seed)), "cells": cells, "marginals": marg}


def truth_of(rel, table, wl):
    from ppdp.kernels.grid import box_sums, cube_codes, declared_domains, dense_counts, summed_area

    p = rel.manifest["params"]
    declared, _ = declared_domains(p["dims"], p.get("bins"), p.get("domains"))
    spec, codes = cube_codes(table, p["dims"], p.get("bins"), declared)
    sat = summed_area(dense_counts(codes, spec.shape))
    lo, hi, owner = rel.query_boxes(wl)
    return np.bincount(owner, weights=box_sums(sat, lo, hi), minlength=len(wl))


def run_config(name: str, n_releases: int) -> dict:
    import warnings

    warnings.simplefilter("ignore")
    import ppdp
    import ppdp.mechanisms.histogram as H
    from ppdp.queries import as_workload
    from scipy import stats

    cls, kw, est_name = CONFIGS[name]
    table = ppdp.datasets.load("adult", n=N_ROWS, seed=1)
    sets = truths = None
    res: dict = {}
    choices: dict = {}
    t0 = time.perf_counter()
    t_est = 0.0
    for s in range(n_releases):
        rel = ppdp.publish(table, getattr(H, cls)(**kw), seed=s)
        ch = (rel.certificate.get("choice") or {})
        key = ch.get("algorithm", "") + (str(ch["way"]) if "way" in ch else "")
        choices[key] = choices.get(key, 0) + 1
        if sets is None:
            sets = {k: as_workload(v) for k, v in query_sets(rel).items()}
            truths = {k: truth_of(rel, table, wl) for k, wl in sets.items()}
        est = rel.estimator(est_name)
        for k, wl in sets.items():
            t1 = time.perf_counter()
            e = rel.estimate(wl, estimator=est)
            t_est += time.perf_counter() - t1
            truth = truths[k]
            r = res.setdefault(k, {"coverage": [], "z2": [], "basic": [], "sd": [], "se": [], "abs_err": []})
            r["coverage"].append(float(np.mean((truth >= e.lower) & (truth <= e.upper))))
            ok = e.se > 0
            r["z2"].append(float(np.mean(((e.estimate - truth)[ok] / e.se[ok]) ** 2)) if ok.any() else float("nan"))
            r["se"].append(float(np.mean(e.se)))
            r["abs_err"].append(float(np.mean(np.abs(e.estimate - truth))))
            r.setdefault("method", e.method)
            if e.method.startswith("parametric bootstrap"):
                err = est.bootstrap_errors(rel, wl)
                R = err.shape[0]
                ql, qh = np.quantile(err, [0.025, 0.975], axis=0)
                r["basic"].append(float(np.mean((truth >= e.estimate - qh) & (truth <= e.estimate - ql))))
                t = stats.t.ppf(0.975, R - 1)
                sd = err.std(axis=0, ddof=1)
                r["sd"].append(float(np.mean(np.abs(truth - e.estimate) <= t * sd)))
    out = {"mechanism": cls, "params": {k: v for k, v in kw.items() if k != "bins"}, "binned": "bins" in kw,
           "estimator": est_name or "default", "releases": n_releases, "dp_choice": choices,
           "seconds": time.perf_counter() - t0, "estimate_seconds": t_est, "sets": {}}
    for k, r in res.items():
        row = {"n_queries": len(sets[k]), "method": r["method"]}
        for m in ("coverage", "basic", "sd"):
            if r[m]:
                a = np.asarray(r[m])
                row[m] = float(a.mean())
                row[m + "_sd_mean"] = float(a.std(ddof=1) / np.sqrt(len(a)))
        row["mean_z2"] = float(np.nanmean(r["z2"]))
        row["mean_se"] = float(np.mean(r["se"]))
        row["mean_abs_error"] = float(np.mean(r["abs_err"]))
        out["sets"][k] = row
    print(f"{name}: {out['seconds']:.0f} s " + "  ".join(f"{k} {v['coverage']:.3f}" for k, v in out["sets"].items()),
          flush=True)
    return out


def speed() -> dict:
    """Cost of the bootstrap on full ADULT: 5,000 random ranges with intervals, first call (the
    replicates) and warm (cached), wall and CPU seconds."""
    import warnings

    warnings.simplefilter("ignore")
    import ppdp
    import ppdp.mechanisms.histogram as H
    from ppdp.queries import as_workload
    from ppdp.queries.workloads import range_workload

    table = ppdp.datasets.load("adult")
    cases = {"dp->agrid age x hours e=0.1": H.DefaultHistogram(0.1, RAW, domains="adult"),
             "marginals age x sex x race e=1": H.MarginalsModel(1.0, ["age", "sex", "race"], domains="adult"),
             "dp->marginals age x education x hours e=1": H.DefaultHistogram(1.0, ["age", "education", "hours_per_week"],
                                                                               domains="adult"),
             "consistency age x hours e=1": H.ConsistentHierarchy(1.0, RAW, domains="adult"),
             "kdtree age x hours e=1": H.HierarchicalKDTree(1.0, RAW, domains="adult")}
    out = {}
    for name, mech in cases.items():
        rel = ppdp.publish(table, mech, seed=0)
        wl = as_workload(range_workload({d: rel.domains[d] for d in rel.dims}, rel.dims, 5000, seed=1))
        c0, t0 = time.process_time(), time.perf_counter()
        e = rel.estimate(wl)
        c1, t1 = time.process_time(), time.perf_counter()
        rel.estimate(wl)
        t2 = time.perf_counter()
        out[name] = {"cells": int(np.prod(rel.shape)), "choice": (rel.certificate.get("choice") or {}).get("algorithm"),
                     "first_wall_s": t1 - t0, "first_cpu_s": c1 - c0, "warm_wall_s": t2 - t1,
                     "warm_queries_per_s": 5000 / (t2 - t1), "method": e.method, "load_average": os.getloadavg()}
        print(name, {k: v for k, v in out[name].items() if k != "method"}, flush=True)
    return out


def speed_closed() -> dict:
    """Cost of the closed-form intervals on full ADULT (age × hours_per_week): 5,000 random
    ranges and 5,000 random single cells, ``estimate`` (answers, se and interval) against
    ``answer`` alone, best of 3 warm calls (the query boxes are translated once, then cached)."""
    import warnings

    warnings.simplefilter("ignore")
    import ppdp
    import ppdp.mechanisms.histogram as H
    from ppdp.queries import as_workload
    from ppdp.queries.model import Predicate, Query
    from ppdp.queries.workloads import range_workload

    table = ppdp.datasets.load("adult")
    cases = {"cells": H.CellHistogram(1.0, RAW, domains="adult"), "dpcube (ls)": H.DPCube(1.0, RAW, domains="adult"),
             "dpcube-paper (ls-unweighted)": H.DPCubePaper(1.0, RAW, domains="adult"),
             "kron": H.KroneckerLeastSquares(1.0, RAW, domains="adult"),
             "dp->kron 12 x 11": H.DefaultHistogram(1.0, RAW, bins={**AGE, **HOURS})}
    out = {}
    for name, mech in cases.items():
        rel = ppdp.publish(table, mech, seed=0)
        doms = {d: rel.domains[d] for d in rel.dims}
        rng = np.random.default_rng(1)
        cells = [Query(tuple(Predicate(d, "eq", values=(doms[d][int(rng.integers(len(doms[d])))],)) for d in rel.dims))
                 for _ in range(5000)]
        for wname, wl in (("ranges", as_workload(range_workload(doms, rel.dims, 5000, seed=1))), ("cells", as_workload(cells))):
            rel.estimate(wl)
            ts = []
            for _ in range(3):
                t0 = time.perf_counter()
                e = rel.estimate(wl)
                ts.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            rel.answer(wl)
            ta = time.perf_counter() - t0
            out[f"{name} / {wname}"] = {"estimate_s": min(ts), "answer_only_s": ta, "method": e.method,
                                        "load_average": os.getloadavg()}
            print(f"{name} / {wname}: estimate {min(ts):.3f} s, answer only {ta:.3f} s", flush=True)
    return out


def main(argv=None) -> dict:
    from _common import provenance, write_result

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--releases", type=int, default=200)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="coverage_histogram")
    ap.add_argument("--speed", action="store_true", help="only the cost benchmark (→ <out>_speed.json)")
    ap.add_argument("--speed-closed", action="store_true",
                    help="only the cost of the closed-form intervals, 5,000 queries (→ <out>_speed_closed.json)")
    a = ap.parse_args(argv)
    if a.speed_closed:
        res = {"benchmark": "closed-form intervals, histogram family, 5,000 queries on full adult", "cases": speed_closed(),
               "provenance": provenance()}
        print(write_result(a.out + "_speed_closed", res))
        return res
    if a.speed:
        res = {"benchmark": "bootstrap cost, histogram family, 5,000 ranges on full adult", "cases": speed(),
               "provenance": provenance()}
        print(write_result(a.out + "_speed", res))
        return res
    names = [c for c in a.configs.split(",") if c]
    t0 = time.perf_counter()
    results = {}
    with ProcessPoolExecutor(max_workers=a.jobs, mp_context=get_context("spawn")) as ex:
        for name, r in zip(names, ex.map(run_config, names, [a.releases] * len(names))):
            results[name] = r
            write_result(a.out + "_partial", {"configs": results})  # survives an interrupted run
    res = {"benchmark": "interval coverage, histogram family", "dataset": "adult", "n_rows": N_ROWS,
           "table_seed": 1, "nominal": 0.95, "configs": results, "wall_seconds": time.perf_counter() - t0,
           "load_average": os.getloadavg(), "provenance": provenance()}
    print(write_result(a.out, res))
    return res


if __name__ == "__main__":
    main()
