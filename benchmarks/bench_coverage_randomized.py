"""Coverage of the randomized family's 95% intervals against real tables' true counts.

For each bundled table (OCC, EDU, Adult: a fixed subset of ``--rows`` rows, seed 0, whose own
exact counts are the truth), each randomized mechanism (uniform perturbation and SDR at
(ρ1, ρ2) = (0.1, 0.3), global randomization A and A' with ℓ' = 4) and each estimator that
applies to it (from ``ppdp.registry``): publish ``--releases`` seeded releases (seeds 0, 1, …),
answer a fixed query set (``--queries`` point queries A1=v1 ∧ … ∧ SA=s, workload seed 0) with
``release.estimate(level=0.95)`` and count how often the interval holds the true count.

Reported per (table, mechanism, estimator): coverage over release × query pairs, overall and
for true counts > 100 (and by bin 0, 1–10, 11–100), its standard error from the
between-release spread (the releases are the independent units), the median interval width /
true count over the pairs with a true count ≥ 1, the interval's kind and method, and seconds
per release. EM is run with ``replicates=0``: its default interval is the linear one whatever
its bootstrap replicates (they give only ``se``).

    python benchmarks/bench_coverage_randomized.py [--releases 100] [--rows 20000] [--queries 200]
        [--datasets occ,edu,adult] [--mechanisms uniform,sdr,global,diverted] [--estimators eb,...]
        [--interval profile] [--name coverage_randomized]

Writes benchmarks/results/<name>.json.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ppdp
from _common import provenance, write_result
from ppdp import registry
from ppdp.queries.workloads import point_workload

PARAMS = {"uniform": dict(rho1=0.1, rho2=0.3), "sdr": dict(rho1=0.1, rho2=0.3),
          "global": dict(l_prime=4), "diverted": dict(l_prime=4)}
OPTIONS = {"em": dict(replicates=0)}
BINS = {"0": (0, 0), "1-10": (1, 10), "11-100": (11, 100), ">100": (101, np.inf)}
LEVEL = 0.95


def estimators_for(mech: str) -> list[str]:
    return [n for n, c in registry.estimators("randomized").items() if not c.mechanisms or mech in c.mechanisms]


def make(name: str):
    """The estimator of a name, with ``[interval=X]`` appended for a variant's interval option."""
    base, _, opt = name.partition("[interval=")
    kw = dict(OPTIONS.get(base, {}))
    if opt:
        kw["interval"] = opt.rstrip("]")
    return registry.estimator("randomized", base)(**kw)


def run(table, mech: str, names: list[str], wl, true, releases: int) -> dict:
    m = registry.mechanism(mech)(**PARAMS[mech])
    hits: dict = {n: [] for n in names}
    ratio: dict = {n: [] for n in names}
    secs = dict.fromkeys(names, 0.0)
    info: dict = {}
    pos = true >= 1
    for s in range(releases):
        rel = ppdp.publish(table, m, seed=s)
        for n in names:
            t0 = time.perf_counter()
            E = rel.estimate(wl, estimator=make(n), level=LEVEL)
            secs[n] += time.perf_counter() - t0
            hits[n].append((E.lower <= true) & (true <= E.upper))
            ratio[n].append((E.upper - E.lower)[pos] / true[pos])
            info[n] = (getattr(E, "kind", "confidence"), E.method)
    out = {}
    for n in names:
        H = np.array(hits[n], dtype=float)
        per = H.mean(axis=1)
        big = true > 100
        out[n] = {"releases": releases, "coverage": float(H.mean()),
                  "se_between_releases": float(per.std(ddof=1) / np.sqrt(len(per))),
                  "coverage_gt100": float(H[:, big].mean()) if big.any() else None,
                  "by_true_count": {b: float(H[:, (true >= lo) & (true <= hi)].mean())
                                    if ((true >= lo) & (true <= hi)).any() else None for b, (lo, hi) in BINS.items()},
                  "median_width_over_true": float(np.median(np.concatenate(ratio[n]))),
                  "kind": info[n][0], "method": info[n][1], "s_per_release": secs[n] / releases}
        r = out[n]
        print(f"  {mech:9s} {n:24s} coverage {r['coverage']:.3f} ± {r['se_between_releases']:.3f}  >100 "
              f"{r['coverage_gt100']:.3f}  median width/true {r['median_width_over_true']:.2f}  "
              f"{r['s_per_release']:.2f} s/release", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--releases", type=int, default=100)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--datasets", default="occ,edu,adult")
    ap.add_argument("--mechanisms", default=",".join(PARAMS))
    ap.add_argument("--estimators", default="", help="comma-separated subset of the estimators (default: all)")
    ap.add_argument("--interval", default="", help="also run each estimator that has an interval option with "
                    "interval=this (e.g. profile), as the variant '<name>[interval=profile]'")
    ap.add_argument("--name", default="coverage_randomized", help="result file name (benchmarks/results/<name>.json)")
    a = ap.parse_args()
    mechs = [x for x in a.mechanisms.split(",") if x]
    unknown = sorted(set(mechs) - set(PARAMS))
    if unknown:
        ap.error(f"--mechanisms: unknown {unknown}; choose from {', '.join(PARAMS)}")
    only = {x for x in a.estimators.split(",") if x}
    res: dict = {"rows": a.rows, "workload": f"point, {a.queries} queries, seed 0", "level": LEVEL,
                 "releases": a.releases, "params": PARAMS, "tables": {}}
    for ds in [x for x in a.datasets.split(",") if x]:
        table = ppdp.datasets.load(ds, n=a.rows, seed=0)
        wl = point_workload(table, a.queries, seed=0)
        true = ppdp.queries.answer_exact(table, wl)
        print(ds, {b: int(((true >= lo) & (true <= hi)).sum()) for b, (lo, hi) in BINS.items()}, flush=True)
        res["tables"][ds] = {"bin_sizes": {b: int(((true >= lo) & (true <= hi)).sum()) for b, (lo, hi) in BINS.items()},
                             "mechanisms": {}}
        for mech in mechs:
            names = [n for n in estimators_for(mech) if not only or n in only]
            if a.interval:
                names += [f"{n}[interval={a.interval}]" for n in names
                          if "interval" in registry.estimator("randomized", n)._parameter_constraints]
            if names:
                res["tables"][ds]["mechanisms"][mech] = run(table, mech, names, wl, true, a.releases)
    res.update(provenance(seed=0))
    print(write_result(a.name, res))


if __name__ == "__main__":
    main()
