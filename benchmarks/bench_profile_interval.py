"""The profile-likelihood interval of uniform-channel releases against the inversion's Wald interval
cut to [0, n_P]: exact coverage under the channel, coverage on small
predicates of a real table, and cost.

1. Exact coverage for one sub-table of n predicate rows, for every true count x ∈ [0, n], under
   the exact law of the published count (Bin(x, a) + Bin(n − x, b)), summed over every possible
   published count — no simulation: mean and minimum over x, and the mean width.
   (a, b) = (p + q, q) of uniform perturbation (OCC, (ρ1, ρ2) = (0.1, 0.3)), of A (ℓ' = 4) and
   of an SDR sub-table.
2. Real table, small predicates: OCC (20,000 rows, seed 0), ``--queries`` point queries with up to
   ``--max-dims`` attributes (workload seed 1), ``--releases`` seeded releases per mechanism,
   ``eb`` with ``interval`` = linear (the former default), auto (the default) and profile;
   coverage of the table's true counts overall, for predicates with n_P < 100 and < 30, and for
   true counts > 100; median width / true count.
3. CPU-s of ``release.estimate`` for 5,000 point queries on the full OCC table (seed 0), first and
   second call, each interval option. In 1., "linear" is the Wald interval cut to [0, n]
   (``interval="linear"``); ``"auto"`` takes the profile where n·b < 5.

    python benchmarks/bench_profile_interval.py [--releases 30] [--queries 2000] [--max-dims 6]

Writes benchmarks/results/profile_interval.json.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

import ppdp
from _common import provenance, write_result
from ppdp.estimators.randomized import EmpiricalBayes, UniformSetup
from ppdp.estimators.randomized_profile import profile_interval
from ppdp.queries.workloads import point_workload

PARAMS = {"uniform": dict(rho1=0.1, rho2=0.3), "sdr": dict(rho1=0.1, rho2=0.3), "global": dict(l_prime=4)}
#: (label, a, b): a = p + q, b = q, as published by the releases of PARAMS on OCC
CHANNELS = [("uniform", 0.0585 + 0.0205, 0.0205), ("global", 0.2333 + 0.0167, 0.0167), ("sdr sub-table", 0.30, 0.07)]
SIZES = (5, 10, 20, 50, 200, 1000)
#: the eb interval options compared: "linear" (the former default: the inversion's Wald interval
#: cut to [0, n_P]), "auto" (the default), "profile"
VARIANTS = {"linear": "linear", "auto": "auto", "profile": "profile"}


def wald_cut(y: np.ndarray, n: int, a: float, b: float, z: float) -> tuple[np.ndarray, np.ndarray]:
    """The linear interval for one sub-table: the inversion ± z·se at the MLE, cut to [0, n],
    widened to hold the MLE."""
    p = a - b
    inv = (y - n * b) / p
    xh = np.clip(inv, 0, n)
    se = np.sqrt((xh * a * (1 - a) + (n - xh) * b * (1 - b)) / p**2)
    return np.minimum(np.clip(inv - z * se, 0, n), xh), np.maximum(np.clip(inv + z * se, 0, n), xh)


def exact(n: int, a: float, b: float) -> dict:
    y = np.arange(n + 1, dtype=float)
    _, plo, phi = profile_interval(y[:, None], np.full((n + 1, 1), float(n)), a, b)
    wlo, whi = wald_cut(y, n, a, b, float(stats.norm.ppf(0.975)))
    out = {}
    for name, lo, hi in (("profile", plo, phi), ("linear", wlo, whi)):
        cov, wid = [], []
        for x in range(n + 1):
            pmf = np.convolve(stats.binom.pmf(np.arange(x + 1), x, a), stats.binom.pmf(np.arange(n - x + 1), n - x, b))
            cov.append(float(pmf[(lo <= x) & (x <= hi)].sum()))
            wid.append(float(pmf @ (hi - lo)))
        out[name] = {"mean": float(np.mean(cov)), "min": float(np.min(cov)), "mean_width": float(np.mean(wid))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--releases", type=int, default=30)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--max-dims", type=int, default=6)
    a = ap.parse_args()
    res: dict = {"exact": {}, "small_predicates": {}, "cost": {}}
    for label, pa, pb in CHANNELS:
        for n in SIZES:
            r = exact(n, pa, pb)
            res["exact"][f"{label} n={n}"] = r
            print(f"exact {label:14s} n={n:5d}  " + "  ".join(f"{k} mean {v['mean']:.3f} min {v['min']:.3f} "
                                                            f"width {v['mean_width']:.1f}" for k, v in r.items()), flush=True)
    table = ppdp.datasets.load("occ", n=20000, seed=0)
    wl = point_workload(table, a.queries, max_dims=a.max_dims, seed=1)
    true = ppdp.queries.answer_exact(table, wl)
    pos = true >= 1
    for mech, kw in PARAMS.items():
        H: dict = {k: [] for k in VARIANTS}
        W: dict = {k: [] for k in VARIANTS}
        nP = None
        for s in range(a.releases):
            rel = ppdp.publish(table, ppdp.registry.mechanism(mech)(**kw), seed=s)
            if nP is None:
                _, masks = rel.resolve(wl)
                nP = UniformSetup(rel, masks, rel.transition_models()[0]).n_per_query().sum(axis=1)
            for name, opt in VARIANTS.items():
                E = rel.estimate(wl, estimator=EmpiricalBayes(interval=opt))
                H[name].append((E.lower <= true) & (true <= E.upper))
                W[name].append((E.upper - E.lower)[pos] / true[pos])
        assert nP is not None
        res["small_predicates"][mech] = {}
        for name in H:
            h = np.array(H[name])
            r = {"coverage": float(h.mean()), "coverage_nP_lt100": float(h[:, nP < 100].mean()),
                 "coverage_nP_lt30": float(h[:, nP < 30].mean()), "coverage_gt100": float(h[:, true > 100].mean()),
                 "median_width_over_true": float(np.median(np.concatenate(W[name]))),
                 "queries_nP_lt100": int((nP < 100).sum()), "queries_nP_lt30": int((nP < 30).sum())}
            res["small_predicates"][mech][name] = r
            print(f"occ small predicates {mech:8s} {name:8s} coverage {r['coverage']:.3f}  n_P<100 "
                  f"{r['coverage_nP_lt100']:.3f}  n_P<30 {r['coverage_nP_lt30']:.3f}  >100 {r['coverage_gt100']:.3f}  "
                  f"median width/true {r['median_width_over_true']:.2f}", flush=True)
    full = ppdp.datasets.load("occ")
    wl5 = point_workload(full, 5000, seed=0)
    for mech, kw in PARAMS.items():
        rel = ppdp.publish(full, ppdp.registry.mechanism(mech)(**kw), seed=0)
        r = {}
        for name, opt in VARIANTS.items():
            for call in ("first", "second"):
                t0 = time.process_time()
                rel.estimate(wl5, estimator=EmpiricalBayes(interval=opt))
                r[f"{name}_{call}_cpu_s"] = time.process_time() - t0
        res["cost"][mech] = r
        print(f"cost occ {len(full)} rows, 5,000 queries, {mech}: " + ", ".join(f"{k} {v:.2f}" for k, v in r.items()), flush=True)
    res.update(provenance(seed=0))
    print(write_result("profile_interval", res))


if __name__ == "__main__":
    main()
