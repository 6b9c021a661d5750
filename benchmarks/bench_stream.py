"""The streaming engine beyond memory: publish, streamed verify (with the source) and streamed
queries of a randomized-family, bucketization or histogram release of a synthetic OCC
Parquet file (bucketization: verify reads the source as an in-memory Table of narrow codes,
and the queries are bench_scale's 5,000 with intervals on the partitioned release).

    python benchmarks/bench_stream.py --n 100000000 [--mechanism uniform] [--chunk-rows 2000000]

A stage's ``cpu_s`` is its whole child process after the imports (for the queries: making the
workload and loading the release too; ``estimate_cpu_s`` is the answers alone, what
bench_scale reports as its queries figure). Each stage runs in its own process so that its
peak RSS (``VmHWM``) is its own; run it
under ``prlimit --as=…`` to enforce a cap. Writes benchmarks/results/stream_<mechanism>_<n>.json
with wall and CPU seconds, peak GiB, the read floor (one streamed pass reading every column
and counting the SA) and the ratio to it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from _common import child_env, provenance, write_result

DATA = Path(os.environ.get("PPDP_BENCH_DATA", Path(__file__).resolve().parent / "data"))  # large generated tables (git-ignored)
MECHS = {"uniform": "ppdp.UniformPerturbation(rho1=0.05, rho2=0.3)", "sdr": "ppdp.SDR(rho1=0.05, rho2=0.3)",
         "diverted": "ppdp.Diverted(3)", "global": "ppdp.GlobalRandomization(4)",
         # the histogram family: one streamed pass counts the cube, the mechanism runs on the counts
         "cells": "ppdp.CellHistogram(1.0, ['age', 'education'], domains='occ')",
         "dpcube": "ppdp.DPCube(1.0, ['age', 'education'], domains='occ')",
         "kdtree": "ppdp.HierarchicalKDTree(1.0, ['age', 'education'], domains='occ')",
         # bucketization: the Spark engine's stages run in this process (spill files beside the release)
         "fprivacy": "ppdp.FPrivacy(theta=8.0, fake_values=1)", "anatomy": "ppdp.Anatomy(4)"}

STAGE = r"""
import json, resource, sys, time
import numpy as np, ppdp
from ppdp.engines import stream
from _common import peak_rss_gib
stage, src, out, expr, chunk = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
t0, c0 = time.perf_counter(), time.process_time()
res = {}
if stage == "floor":
    schema = stream.dataset_schema(src)
    cols = [*schema.quasi, *schema.sensitive]
    import pyarrow.dataset as pads
    acc = np.zeros(len(schema.domains[schema.sensitive[0]]), dtype=np.int64)
    for b in pads.dataset(src, format="parquet").to_batches(columns=cols, batch_size=chunk, batch_readahead=0,
                                                            fragment_readahead=0):
        for c in cols:
            codes = stream.label_codes(b.column(c), schema.domains[c], c)
        acc += np.bincount(stream.label_codes(b.column(schema.sensitive[0]), schema.domains[schema.sensitive[0]], ""),
                           minlength=len(acc))
    res["rows"] = int(acc.sum())
elif stage == "publish":
    m = stream.publish_stream(src, eval(expr), out, seed=3, chunk_rows=chunk)
    res["n_published"] = m["n_published"]
elif stage == "verify":
    v = stream.verify_stream(out, src, chunk_rows=chunk)
    res.update(ok=v["ok"], problems=v["problems"][:3], facts={k: str(x) for k, x in v["facts"].items()})
elif stage == "queries" and eval(expr).family in ("histogram", "bucketized"):  # bench_scale's 5,000 queries
    from bench_scale import query_workload
    wl = query_workload("occ", eval(expr).name)
    rel = ppdp.load_release(out)
    c1 = time.process_time()
    est = rel.estimate(wl)
    res["n_queries"] = len(est.estimate)
    res["estimate_cpu_s"] = time.process_time() - c1  # the answers alone (bench_scale's queries figure)
elif stage == "queries":
    schema = stream.dataset_schema(src)
    sa = schema.sensitive[0]
    est = stream.answer_stream(out, list(schema.domains[sa]), chunk_rows=chunk)
    res["n_queries"] = len(est)
res.update(wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0,
           peak_gib=peak_rss_gib())
print(json.dumps(res))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--mechanism", default="uniform", choices=sorted(MECHS))
    ap.add_argument("--chunk-rows", type=int, default=2_000_000)
    ap.add_argument("--stages", default="floor,publish,verify,queries")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    src = DATA / f"occ_{args.n}.parquet"
    if not src.exists():
        import ppdp
        from ppdp.datasets.synthetic import write_synthetic

        DATA.mkdir(parents=True, exist_ok=True)  # a fresh clone has no data directory
        write_synthetic(ppdp.datasets.load("occ"), args.n, src, seed=1, chunk_rows=1_000_000)
    out = DATA / f"stream_{args.mechanism}_{args.n}"
    if "publish" in args.stages:
        shutil.rmtree(out, ignore_errors=True)
        cust = Path(f"{out}.custodian.json")
        if cust.exists():
            cust.unlink()
    result: dict = {"n": args.n, "mechanism": args.mechanism, "chunk_rows": args.chunk_rows, "source_bytes": src.stat().st_size}
    for stage in args.stages.split(","):
        r = subprocess.run([sys.executable, "-c", STAGE, stage, str(src), str(out), MECHS[args.mechanism], str(args.chunk_rows)],
                           capture_output=True, text=True, env=child_env())
        if r.returncode != 0:
            result[stage] = {"error": r.stderr.strip().splitlines()[-3:], "returncode": r.returncode}
            print(stage, result[stage], flush=True)
            break
        result[stage] = json.loads(r.stdout.strip().splitlines()[-1])
        print(stage, result[stage], flush=True)
    floor = result.get("floor", {}).get("cpu_s")
    for stage in ("publish", "verify", "queries"):
        if floor and "cpu_s" in result.get(stage, {}):
            result[stage]["multiple_of_read_floor_cpu"] = result[stage]["cpu_s"] / floor
    if "publish" in result and "cpu_s" in result["publish"]:
        result["publish"]["us_per_row_cpu"] = result["publish"]["cpu_s"] / args.n * 1e6
    if out.exists():
        result["release_bytes"] = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    path = write_result(f"stream_{args.mechanism}_{args.n}", {**result, "provenance": provenance()})
    print(path)


if __name__ == "__main__":
    main()
