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

Writes benchmarks/results/coverage_randomized.json.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ppdp
from _common import provenance, write_result
from ppdp.estimators.randomized import EB_COVARIANCES, EB_PARENTS, EB_STRENGTHS, EmpiricalBayes, FullIterative, NormSub
from ppdp.queries.workloads import point_workload

#: every combination of the empirical-Bayes options (the default is one of them)
EB_VARIANTS = {f"eb({s},{c},{p})": EmpiricalBayes(strength=s, covariance=c, parents=p)
               for s in EB_STRENGTHS for c in EB_COVARIANCES for p in EB_PARENTS}
OBJECTS = {"norm-sub/boot-basic": NormSub(replicates=200, interval="basic"),
           "full-iterative/bootstrap": FullIterative(variance="bootstrap"), **EB_VARIANTS}
MECHANISMS = {
    "uniform": (ppdp.UniformPerturbation(0.1, 0.3), ["eb", "norm-sub", "mle", "inversion", "em", "norm-sub/boot-basic"]),
    "sdr": (ppdp.SDR(0.1, 0.3), ["eb", "norm-sub", "mle", "inversion", "em", "norm-sub/boot-basic"]),
    "global": (ppdp.GlobalRandomization(4), ["eb", "norm-sub", "mle", "inversion", "em", "norm-sub/boot-basic"]),
    "diverted": (ppdp.Diverted(4), ["full-iterative", "full-closed", "iterative", "closed", "full-iterative/bootstrap"]),
}
BINS = {"0": (0, 0), "1-10": (1, 10), "11-100": (11, 100), ">100": (101, np.inf)}
BAND = (0.93, 0.97)


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
    a = ap.parse_args()
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
    for name, (mech, names) in MECHANISMS.items():
        print(name, flush=True)
        res["mechanisms"][name] = {"params": mech.get_params(), "default_estimator": mech.default_estimator,
                                   "estimators": coverage(t, mech, names, wl, true, a.releases, a.em_releases)}
    res.update(provenance(seed=0))
    print(write_result("coverage_randomized", res))


if __name__ == "__main__":
    main()
