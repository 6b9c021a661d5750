"""Coverage of the randomized family's 95% intervals over many seeded releases.

For each mechanism (uniform perturbation and SDR at (ρ1, ρ2) = (0.1, 0.3), global
randomization A and A' with ℓ' = 4) and each of its estimators: publish ``--releases``
seeded releases of a fixed EDU sample (``--rows`` rows, seed 0), answer a fixed query set
(``--queries`` point queries A1=v1 ∧ … ∧ SA=s, workload seed 0) with
``release.estimate(...)``, and count how often the interval holds the true count.

Reported per estimator: pooled coverage over release × query pairs, its standard error from
the between-release spread (the queries of one release share its randomness, so the
releases are the independent units), coverage by true-count bin (0, 1–10, 11–100, > 100),
and whether the pooled coverage lies in [0.93, 0.97].

    python benchmarks/bench_coverage_randomized.py [--releases 200] [--rows 20000] [--queries 200]
        [--mechanisms uniform,sdr,global,diverted]

Writes benchmarks/results/coverage_randomized.json. With ``--mechanisms`` naming a subset, only
those mechanisms are re-run: their entries in the existing JSON are replaced (each with its own
provenance block) and the others' are kept as they are (the data and workload must match).

A' (diverted): the default ``full-iterative`` and ``full-closed`` use ``variance="rebuilt"``
(the receiver's transition rebuilt from the published counts, docs/diverted.md);
``…/fixed`` is the former closed form with the transition held fixed, for comparison.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import ppdp
from _common import provenance, write_result
from ppdp.estimators.randomized import (EB_COVARIANCES, EB_PARENTS, EB_STRENGTHS, EmpiricalBayes, FullClosed,
                                       FullIterative, NormSub)
from ppdp.queries.workloads import point_workload

#: every combination of the empirical-Bayes options (the default is one of them)
EB_VARIANTS = {f"eb({s},{c},{p})": EmpiricalBayes(strength=s, covariance=c, parents=p)
               for s in EB_STRENGTHS for c in EB_COVARIANCES for p in EB_PARENTS}
OBJECTS = {"norm-sub/boot-basic": NormSub(replicates=200, interval="basic"),
           "full-iterative/bootstrap": FullIterative(variance="bootstrap"),
           "full-iterative/fixed": FullIterative(variance="fixed"), "full-closed/fixed": FullClosed(variance="fixed"),
           **EB_VARIANTS}
MECHANISMS = {
    "uniform": (ppdp.UniformPerturbation(0.1, 0.3), ["eb", "norm-sub", "mle", "inversion", "em", "norm-sub/boot-basic"]),
    "sdr": (ppdp.SDR(0.1, 0.3), ["eb", "norm-sub", "mle", "inversion", "em", "norm-sub/boot-basic"]),
    "global": (ppdp.GlobalRandomization(4), ["eb", "norm-sub", "mle", "inversion", "em", "norm-sub/boot-basic"]),
    "diverted": (ppdp.Diverted(4), ["full-iterative", "full-closed", "full-iterative/fixed", "full-closed/fixed",
                                     "iterative", "closed", "full-iterative/bootstrap"]),
}
BINS = {"0": (0, 0), "1-10": (1, 10), "11-100": (11, 100), ">100": (101, np.inf)}
BAND = (0.93, 0.97)
RESULT = Path(__file__).parent / "results" / "coverage_randomized.json"


def coverage(table, mech, names, wl, true, releases: int, slow_releases: int) -> dict:
    hits: dict = {n: [] for n in names}
    secs: dict = {n: 0.0 for n in names}
    for s in range(releases):
        rel = ppdp.publish(table, mech, seed=s)
        for n in names:
            if n == "em" and s >= slow_releases:
                continue
            t0 = time.perf_counter()
            E = rel.estimate(wl, estimator=OBJECTS.get(n, n))
            secs[n] += time.perf_counter() - t0
            hits[n].append((E.lower <= true) & (true <= E.upper))
    out = {}
    for n, h in hits.items():
        H = np.array(h, dtype=float)  # releases × queries
        per_release = H.mean(axis=1)
        cov = float(per_release.mean())
        se = float(per_release.std(ddof=1) / np.sqrt(len(per_release)))
        out[n] = {"releases": len(per_release), "coverage": cov, "se_between_releases": se,
                  "sd_per_release": float(per_release.std(ddof=1)),
                  "in_band": BAND[0] <= cov <= BAND[1],
                  "by_true_count": {b: float(H[:, (true >= lo) & (true <= hi)].mean()) if ((true >= lo) & (true <= hi)).any()
                                    else None for b, (lo, hi) in BINS.items()},
                  "s_per_release": secs[n] / len(per_release)}
        print(f"  {n:15s} coverage {cov:.4f} ± {se:.4f} ({len(per_release)} releases) "
              + " ".join(f"{b}:{v:.3f}" for b, v in out[n]["by_true_count"].items() if v is not None), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--releases", type=int, default=200)
    ap.add_argument("--em-releases", type=int, default=50, help="releases for the (slow) EM bootstrap")
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--eb-variants", action="store_true", help="add every combination of the eb options")
    ap.add_argument("--mechanisms", default=",".join(MECHANISMS),
                    help="comma-separated subset to (re-)run; a subset replaces only its entries in the existing JSON")
    a = ap.parse_args()
    chosen = [x.strip() for x in a.mechanisms.split(",") if x.strip()]
    unknown = sorted(set(chosen) - set(MECHANISMS))
    if unknown or not chosen:
        ap.error(f"--mechanisms: unknown {unknown}; choose from {', '.join(MECHANISMS)}")
    subset = set(chosen) != set(MECHANISMS)
    if a.eb_variants:
        for key in ("uniform", "sdr", "global"):
            MECHANISMS[key][1].extend(EB_VARIANTS)
    t = ppdp.datasets.load("edu", n=a.rows, seed=0)
    wl = point_workload(t, a.queries, seed=0)
    true = ppdp.queries.answer_exact(t, wl)
    res: dict = {"data": f"edu sample, {a.rows} rows (seed 0)", "workload": f"point, {a.queries} queries, seed 0",
                 "level": 0.95, "band": list(BAND),
                 "bin_sizes": {b: int(((true >= lo) & (true <= hi)).sum()) for b, (lo, hi) in BINS.items()},
                 "mechanisms": {}}
    if subset:
        old = json.loads(RESULT.read_text())
        for key in ("data", "workload", "bin_sizes"):
            if old[key] != res[key]:
                raise SystemExit(f"{RESULT.name} holds {key} = {old[key]!r}, this run {res[key]!r}: re-run every mechanism")
        res = old
    for name in chosen:
        mech, names = MECHANISMS[name]
        print(name, flush=True)
        res["mechanisms"][name] = {"params": mech.get_params(), "default_estimator": mech.default_estimator,
                                   "estimators": coverage(t, mech, names, wl, true, a.releases, a.em_releases)}
        if subset:
            res["mechanisms"][name]["provenance"] = provenance(seed=0)
    if not subset:
        res.update(provenance(seed=0))
    print(write_result("coverage_randomized", res))


if __name__ == "__main__":
    main()
