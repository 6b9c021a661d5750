"""The subset-selection default (`eb`) against every estimator ppdp ships for the release, per
true-count bin, paired per release: MAE on zero counts, mean relative error on 1–10, 11–100,
101–1,000 and > 1,000; "beaten" marks an alternative lower than the default by more than two
paired standard errors. With ``--parts`` the default's parts are compared too (not shipped, never
marked as beating it): `eb[table]` every predicate shrunk towards the whole table (the parents
off), `eb[no-widen]` no wider parents on ordered columns, `eb[moments]` the strength by moments, `eb[unguarded]` without the guard, `eb[no-switch]`
without the full-report MLE above 1,000, `eb[no-siblings]` without the sibling parents (:func:`ppdp.estimators.subset.eb_counts`).

    python benchmarks/bench_subset_defaults.py [--data occ] [--seeds 5] [--rho 0.1,0.3] [--parts]
    python benchmarks/bench_subset_defaults.py --data gauntlet:gss_vocab   # a public table, never tuned on

``--data``: a bundled table or ``gauntlet:<name>``, a table of tests/gauntlet read through its
reviewed schema (:func:`bench_randomized_defaults.load`). Each estimator's figure per release is
kept (``per_seed``), so more releases give the spread the paired standard errors come from.

Writes benchmarks/results/subset_defaults_<data>_<rho1>_<rho2>.json."""

from __future__ import annotations

import argparse
import time

import numpy as np

import ppdp
from _common import load_average, provenance, write_result
from bench_randomized_defaults import load
from ppdp.estimators.subset import SubsetSetup, eb_counts
from ppdp.metrics import relative_error
from ppdp.queries.workloads import point_workload

BINS = {"zero": (0, 0), "1-10": (1, 10), "11-100": (11, 100), "101-1000": (101, 1000), ">1000": (1001, np.inf)}


PARTS = {"eb[table]": dict(parents=False), "eb[no-widen]": dict(widen=()), "eb[moments]": dict(strength="moments"),
         "eb[unguarded]": dict(guard=False), "eb[no-switch]": dict(switch=False), "eb[no-siblings]": dict(siblings=False)}


def run(data: str, seeds: int, rho: tuple[float, float], parts: bool = False) -> dict:
    t = load(data)
    wl = point_workload(t, 5000, seed=0)
    true = ppdp.queries.answer_exact(t, wl)
    per: dict[str, list] = {}
    for s in range(seeds):
        rel = ppdp.publish(t, ppdp.SubsetSelection(rho1=rho[0], rho2=rho[1]), seed=s)
        S = SubsetSetup(rel, wl)
        for name in ("eb", "norm-sub", "mle", "inversion", "full-mle", *(PARTS if parts else ())):
            est = S.per_query(eb_counts(S, **PARTS[name])) if name in PARTS else rel.estimate(wl, estimator=name).estimate
            re = relative_error(true, est)
            per.setdefault(name, []).append({b: float(np.abs(est[(true == 0)]).mean()) if b == "zero" else
                                             float(re[(true >= lo) & (true <= hi)].mean()) for b, (lo, hi) in BINS.items()})
    out: dict = {}
    for name, rows in per.items():
        cell = {}
        for b in BINS:
            d = np.array([r[b] - e[b] for r, e in zip(rows, per["eb"])])
            se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")
            cell[b] = {"mean": float(np.mean([r[b] for r in rows])), "minus_default": float(d.mean()), "paired_se": se,
                       "beats_default": bool(name != "eb" and name not in PARTS and d.mean() < -2 * se),
                       "per_seed": [round(r[b], 4) for r in rows]}
        out[name] = cell
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="occ")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--rho", default="0.1,0.3")
    ap.add_argument("--parts", action="store_true")
    a = ap.parse_args()
    rho = tuple(float(x) for x in a.rho.split(","))
    load0 = load_average()
    w0, c0 = time.perf_counter(), time.process_time()
    res = run(a.data, a.seeds, rho, a.parts)  # type: ignore[arg-type]
    for name, cell in res.items():
        print(f"{name:14s}", " ".join(f"{b}={c['mean']:.4f}({c['minus_default']:+.4f}±{c['paired_se']:.4f}{'*' if c['beats_default'] else ''})"
                                      for b, c in cell.items()))
    path = write_result(f"subset_defaults_{a.data.replace('gauntlet:', '')}_{rho[0]:g}_{rho[1]:g}" + ("_parts" if a.parts else ""),
                        {"data": a.data, "rho": rho, "release_seeds": list(range(a.seeds)), "workload": "point, 5000 queries, seed 0",
                         "metric": "zero: MAE; bins: mean relative error; * / beats_default: lower than the default by > 2 paired se",
                         "estimators": res, "wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0,
                         "load_average_before": load0, "load_average_after": load_average(), **provenance(seed=0)})
    print(path)


if __name__ == "__main__":
    main()
