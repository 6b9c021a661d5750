"""GROUP BY and large-workload speed on a 10^7-row release, per family, with intervals.

    python benchmarks/bench_groupby.py [--rows 10000000]  → benchmarks/results/groupby_<rows>.json

A synthetic table (:func:`ppdp.datasets.synthetic.synthetic`, EDU's marginals, seed 7) of
``--rows`` rows is published once per family (bucketized: F'-privacy θ = 8; answers: the
Laplace baseline over the GROUP BY's own point queries, ε = 1; randomized: SDR
(0.1, 0.3); histogram: cell histogram over the two GROUP BY attributes and the SA), then:

- ``SELECT age, <col>, COUNT(*) FROM t GROUP BY age, <col>`` (≥ 500 groups) through
  :func:`ppdp.query`, timed cold (first query on a freshly loaded release: index building
  included) and warm;
- bucketized only: 5,000 anatomy-workload queries with intervals (``release.estimate``),
  cold and warm.

Publishing time is reported but not part of the targets (≤ 2 s per GROUP BY; ≤ 5 s for the
5,000 queries). Timings are wall-clock on the shared 2-core machine: see ``load_average``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np

import ppdp
from _common import provenance, write_result
from ppdp.datasets.synthetic import synthetic
from ppdp.queries.workloads import anatomy_workload
from ppdp.releases.base import load_release


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main(rows: int = 10_000_000, families=("bucketized", "answers", "randomized", "histogram"),
         bucketized_release: str | None = None) -> dict:
    edu = ppdp.datasets.load("edu")
    sa = edu.sa
    res: dict = {"benchmark": "GROUP BY over two attributes and 5,000 queries with intervals on a large release",
                 "rows": rows, "families": {}}
    big = None  # the synthetic table, made only when a family is published here
    groupby = {"bucketized": ("age", sa), "answers": ("age", "marital_status"), "randomized": ("age", sa),
               "histogram": ("age", "marital_status")}
    for fam in families:
        a, b = groupby[fam]
        sql = f"SELECT {a}, {b}, COUNT(*) FROM t GROUP BY {a}, {b}"
        if big is None and not (fam == "bucketized" and bucketized_release):
            t_syn, big = _timed(lambda: synthetic(edu, rows, seed=7))
            res["synthetic_seconds"] = round(t_syn, 2)
        if fam == "bucketized":
            mech = ppdp.FPrivacy(theta=8)
        elif fam == "answers":
            qs = [f"{a} = '{x}' AND {b} = '{y}'" for x in edu.domain(a) for y in edu.domain(b)]
            mech = ppdp.LaplaceBaseline(epsilon=1.0, queries=qs)
        elif fam == "randomized":
            mech = ppdp.SDR(rho1=0.1, rho2=0.3)
        else:
            mech = ppdp.CellHistogram(1.0, [a, b, sa], domains="edu")
        entry: dict = {"groupby": sql}
        try:
            with tempfile.TemporaryDirectory() as d:
                if fam == "bucketized" and bucketized_release:
                    entry["release"] = bucketized_release
                    rel_path = bucketized_release
                else:
                    t_pub, rel = _timed(lambda: ppdp.publish(big, mech, seed=1))
                    if fam == families[-1]:
                        big = None  # the last family: free the synthetic table before querying (memory)
                    entry["publish_seconds"] = round(t_pub, 2)
                    rel_path = d + "/r"
                    rel.save(rel_path)
                    del rel
                t_load, rel = _timed(lambda: load_release(rel_path))
                entry["load_seconds"] = round(t_load, 2)
                cold, frame = _timed(lambda: ppdp.query(rel, sql))
                warm, frame = _timed(lambda: ppdp.query(rel, sql))
                entry.update(groups=len(frame), groupby_cold_seconds=round(cold, 3), groupby_warm_seconds=round(warm, 3),
                             meets_2s_cold=cold <= 2.0, se_finite=bool(np.isfinite(frame["se"]).all()),
                             method=frame.attrs.get("method"))
                if fam == "bucketized":
                    wl = anatomy_workload(edu, 5000, 0.01, seed=1)
                    rel = frame = None  # free the first release's indexes before loading afresh (memory)
                    rel2 = load_release(rel_path)
                    c5, e = _timed(lambda: rel2.estimate(wl))
                    w5, e = _timed(lambda: rel2.estimate(wl))
                    entry.update(queries_5000_cold_seconds=round(c5, 3), queries_5000_warm_seconds=round(w5, 3),
                                 meets_5s_cold=c5 <= 5.0)
        except Exception as exc:  # report what happened; a family failing must not hide the others
            entry["error"] = f"{type(exc).__name__}: {exc}"[:300]
        res["families"][fam] = entry
        print(fam, json.dumps(entry), flush=True)
    res.update(provenance(seed=7))
    write_result(f"groupby_{rows}", res)
    return res


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--families", default="bucketized,answers,randomized,histogram")
    ap.add_argument("--bucketized-release", default=None,
                    help="an F'-privacy release of the same synthetic table, saved earlier (skips its 10^7-row publish)")
    args = ap.parse_args()
    main(args.rows, tuple(args.families.split(",")), args.bucketized_release)
