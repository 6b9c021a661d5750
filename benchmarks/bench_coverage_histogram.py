"""Coverage of the histogram family's 95% intervals of the TRUE counts of a real table, and the
cost of the DP default's intervals on the 4-D Adult cube.

    python benchmarks/bench_coverage_histogram.py [--releases 100] [--releases-4d 50] [--configs a,b,…]
        [--jobs 2] [--out coverage_histogram]        → benchmarks/results/<out>.json
    python benchmarks/bench_coverage_histogram.py --speed → benchmarks/results/<out>_speed.json
    python benchmarks/bench_coverage_histogram.py --speed-large → <out>_speed_large.json (every ε-DP
        mechanism on a 586,080-cell cube)

The same script measures any version of ppdp (it reads only ``ppdp.publish``, ``Release.estimate``
and the registry): run it with the previous source first on ``PYTHONPATH`` for the BEFORE
figures (``--out coverage_histogram_before``).

Coverage. Table: the bundled Adult (all rows), fixed; only the mechanism's noise changes
between releases (publish seeds 0..R−1). Cubes: ``2d`` age × hours_per_week in public bins
(12 × 11), ``3d`` the same × sex (the marginals mechanism), ``4d`` age × education_num ×
hours_per_week × sex on their declared domains (74 × 16 × 99 × 2 = 234,432 cells; the ``dp``
default chooses its 2-way marginals at ε = 0.5 and 1), ``raw`` age × hours_per_week on their
raw values at ε = 0.1 (``dp`` chooses adaptive grids). Workload: 100 random ranges on every
dimension (``range_workload``, seed 7), fixed. Truth: the exact count of the same cube over the
query's boxes. Per configuration (mechanism, cube, ε, estimator): the share of (release, query)
intervals that hold the truth, overall and over the queries whose true count is > 100, with the
standard error of the per-release coverage across releases; the median width / true count
(queries with a true count > 0; and > 100); the interval kind and method; CPU seconds.

Speed (``--speed``). The DP default on the 4-D cube above (declared domains), ε = 0.5 and 1:
per ε one release (seed 0, publish CPU-s recorded), then in a fresh process-state order: the
first call (``Release.estimate`` on 50 queries: every query-independent part computed and
cached), then 50 and 5,000 random ranges with intervals (warm), CPU-s (``time.process_time``),
wall, the process's peak RSS, the machine and its load average.
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import numpy as np

AGE = [17, 22, 27, 32, 37, 42, 47, 52, 57, 62, 67, 72, 91]
HOURS = [1, 10, 20, 30, 35, 40, 41, 45, 50, 60, 80, 100]
CUBES = {
    "2d": dict(dims=["age", "hours_per_week"], bins={"age": AGE, "hours_per_week": HOURS}),
    "3d": dict(dims=["age", "hours_per_week", "sex"], bins={"age": AGE, "hours_per_week": HOURS}, domains="adult"),
    "4d": dict(dims=["age", "education_num", "hours_per_week", "sex"], domains="adult"),
    "raw": dict(dims=["age", "hours_per_week"], domains="adult"),
}
#: name → (registry mechanism, cube, ε, estimator)
CONFIGS = {
    "cells/2d/cells": ("cells", "2d", 1.0, "cells"),
    "dpcube/2d/cells": ("dpcube", "2d", 1.0, "cells"),
    "dpcube/2d/uniform": ("dpcube", "2d", 1.0, "uniform"),
    "dpcube/2d/ls": ("dpcube", "2d", 1.0, "ls"),
    "dpcube/2d/ls-unweighted": ("dpcube", "2d", 1.0, "ls-unweighted"),
    "dpcube/2d/ls-eb": ("dpcube", "2d", 1.0, "ls-eb"),
    "kdtree/2d/uniform": ("kdtree", "2d", 1.0, "uniform"),
    "consistency/2d/cells": ("consistency", "2d", 1.0, "cells"),
    "kron/2d/cells": ("kron", "2d", 1.0, "cells"),
    "agrid/2d/cells": ("agrid", "2d", 1.0, "cells"),
    "dp(kron)/2d/cells": ("dp", "2d", 1.0, "cells"),
    "dp(agrid)/raw e0.1/cells": ("dp", "raw", 0.1, "cells"),
    "marginals/3d/cells": ("marginals", "3d", 1.0, "cells"),
    "dp(marginals)/4d e0.5/cells": ("dp", "4d", 0.5, "cells"),
    "dp(marginals)/4d e1/cells": ("dp", "4d", 1.0, "cells"),
}


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
    from ppdp.queries import as_workload
    from ppdp.queries.workloads import range_workload
    from ppdp.registry import mechanism

    mech, cube, eps, est_name = CONFIGS[name]
    kw = dict(CUBES[cube], epsilon=eps)
    table = ppdp.datasets.load("adult")
    c0, t0 = time.process_time(), time.perf_counter()
    hits, hits_big, widths, widths_big, kinds, methods, choices = [], [], [], [], set(), set(), {}
    est_cpu = 0.0
    wl = truth = None
    for s in range(n_releases):
        rel = ppdp.publish(table, mechanism(mech)(**kw), seed=s)
        ch = rel.certificate.get("choice") or {}
        key = ch.get("algorithm", mech) + (str(ch["way"]) if "way" in ch else "")
        choices[key] = choices.get(key, 0) + 1
        if wl is None:
            wl = as_workload(range_workload({d: rel.domains[d] for d in rel.dims}, rel.dims, 100, seed=7))
            truth = truth_of(rel, table, wl)
        c1 = time.process_time()
        e = rel.estimate(wl, estimator=est_name, level=0.95)
        est_cpu += time.process_time() - c1
        kinds.add(getattr(e, "kind", "confidence"))
        methods.add(e.method.split(";")[0][:160])
        h = (truth >= e.lower) & (truth <= e.upper)  # NaN bounds never cover
        hits.append(h)
        hits_big.append(h[truth > 100])
        w = (e.upper - e.lower)
        widths.append(w[truth > 0] / truth[truth > 0])
        widths_big.append(w[truth > 100] / truth[truth > 100])
    per = np.array([h.mean() for h in hits])
    per_big = np.array([h.mean() for h in hits_big if h.size])
    out = {"mechanism": mech, "cube": cube, "dims": kw["dims"], "epsilon": eps, "estimator": est_name,
           "releases": n_releases, "n_queries": len(wl), "n_queries_over_100": int((truth > 100).sum()),
           "dp_choice": choices, "kinds": sorted(kinds), "methods": sorted(methods),
           "coverage": float(np.concatenate(hits).mean()), "coverage_se": float(per.std(ddof=1) / np.sqrt(len(per))),
           "coverage_over_100": float(np.concatenate(hits_big).mean()) if per_big.size else None,
           "coverage_over_100_se": float(per_big.std(ddof=1) / np.sqrt(len(per_big))) if per_big.size > 1 else None,
           "median_width_over_count": float(np.nanmedian(np.concatenate(widths))),
           "median_width_over_count_over_100": float(np.nanmedian(np.concatenate(widths_big))) if per_big.size else None,
           "estimate_cpu_s": est_cpu, "cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0}
    print(f"{name}: cov {out['coverage']:.3f} (>100 {out['coverage_over_100']}) width {out['median_width_over_count']:.3f} "
          f"{out['cpu_s']:.0f} CPU-s", flush=True)
    return out


def speed(releases_eps=(0.5, 1.0)) -> dict:
    import warnings

    warnings.simplefilter("ignore")
    import ppdp
    from _common import peak_rss_gib
    from ppdp.queries import as_workload
    from ppdp.queries.workloads import range_workload
    from ppdp.registry import mechanism

    table = ppdp.datasets.load("adult")
    out = {}
    for eps in releases_eps:
        c0 = time.process_time()
        rel = ppdp.publish(table, mechanism("dp")(epsilon=eps, **CUBES["4d"]), seed=0)
        pub = time.process_time() - c0
        doms = {d: rel.domains[d] for d in rel.dims}
        wl5k = as_workload(range_workload(doms, rel.dims, 5000, seed=1))
        wl50 = as_workload(range_workload(doms, rel.dims, 50, seed=2))
        row = {"cells": int(np.prod(rel.shape)), "choice": rel.certificate.get("choice"), "publish_cpu_s": pub}
        for label, wl in (("first_call_50", wl50), ("warm_50", wl50), ("warm_5000", wl5k)):
            c, t = time.process_time(), time.perf_counter()
            e = rel.estimate(wl)
            row[label + "_cpu_s"], row[label + "_wall_s"] = time.process_time() - c, time.perf_counter() - t
        row["nan_intervals"] = int(np.sum(~np.isfinite(e.lower) | ~np.isfinite(e.upper)))
        row["kind"], row["method"] = getattr(e, "kind", "confidence"), e.method
        row["peak_rss_gib"], row["load_average"] = peak_rss_gib(), os.getloadavg()
        out[f"dp 4d e={eps:g}"] = row
        print(eps, {k: v for k, v in row.items() if k != "method"}, flush=True)
    return out


#: a cube of about 10^6 cells (586,080): Adult age × education_num × hours_per_week × race, declared domains
LARGE = dict(dims=["age", "education_num", "hours_per_week", "race"], domains="adult")
#: every ε-DP histogram mechanism, on the large cube (ε = 1)
LARGE_MECHANISMS = ("cells", "agrid", "consistency", "kron", "dpcube", "kdtree", "dp", "marginals")


def speed_large(names=LARGE_MECHANISMS) -> dict:
    """First call (50 queries), then 50 and 5,000 range queries with intervals, per mechanism on
    the 586,080-cell cube (targets: first call ≤ 20 s, 5,000 queries ≤ 5 s)."""
    import warnings

    warnings.simplefilter("ignore")
    import ppdp
    from _common import peak_rss_gib
    from ppdp.queries import as_workload
    from ppdp.queries.workloads import range_workload
    from ppdp.registry import mechanism

    table = ppdp.datasets.load("adult")
    out = {}
    for name in names:
        c0 = time.process_time()
        rel = ppdp.publish(table, mechanism(name)(epsilon=1.0, **LARGE), seed=0)
        row = {"cells": int(np.prod(rel.shape)), "publish_cpu_s": time.process_time() - c0}
        doms = {d: rel.domains[d] for d in rel.dims}
        wl5k = as_workload(range_workload(doms, rel.dims, 5000, seed=1))
        wl50 = as_workload(range_workload(doms, rel.dims, 50, seed=2))
        for label, wl in (("first_call_50", wl50), ("warm_50", wl50), ("warm_5000", wl5k)):
            c, t = time.process_time(), time.perf_counter()
            e = rel.estimate(wl)
            row[label + "_cpu_s"], row[label + "_wall_s"] = time.process_time() - c, time.perf_counter() - t
        row["nan_intervals"] = int(np.sum(~np.isfinite(e.lower) | ~np.isfinite(e.upper)))
        row["kind"], row["choice"] = e.kind, (rel.certificate.get("choice") or {}).get("algorithm")
        row["peak_rss_gib"], row["load_average"] = peak_rss_gib(), os.getloadavg()
        out[name] = row
        print(name, {k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    return out


def main(argv=None) -> dict:
    from _common import provenance, write_result

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--releases", type=int, default=100)
    ap.add_argument("--releases-4d", type=int, default=50, help="releases of the 4-D cube configurations")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="coverage_histogram")
    ap.add_argument("--speed", action="store_true", help="only the cost on the 4-D cube (→ <out>_speed.json)")
    ap.add_argument("--speed-large", action="store_true",
                    help="only the cost of every ε-DP mechanism on a 586,080-cell cube (→ <out>_speed_large.json)")
    a = ap.parse_args(argv)
    if a.speed_large:
        res = {"benchmark": "intervals on a 586,080-cell Adult cube, every ε-DP mechanism: first call, 50 and 5,000 "
                            "queries", "cases": speed_large(), "provenance": provenance()}
        print(write_result(a.out + "_speed_large", res))
        return res
    if a.speed:
        res = {"benchmark": "DP default intervals on the 4-D Adult cube: first call, 50 and 5,000 queries",
               "cases": speed(), "provenance": provenance()}
        print(write_result(a.out + "_speed", res))
        return res
    names = [c for c in a.configs.split(",") if c]
    counts = [a.releases_4d if CONFIGS[n][1] == "4d" else a.releases for n in names]
    t0 = time.perf_counter()
    results = {}
    with ProcessPoolExecutor(max_workers=a.jobs, mp_context=get_context("spawn")) as ex:
        for name, r in zip(names, ex.map(run_config, names, counts)):
            results[name] = r
            write_result(a.out + "_partial", {"configs": results})  # survives an interrupted run
    res = {"benchmark": "interval coverage of the true counts, histogram family", "dataset": "adult (all rows)",
           "nominal": 0.95, "workload": "100 random ranges, range_workload seed 7", "configs": results,
           "wall_seconds": time.perf_counter() - t0, "load_average": os.getloadavg(), "provenance": provenance()}
    print(write_result(a.out, res))
    return res


if __name__ == "__main__":
    main()
