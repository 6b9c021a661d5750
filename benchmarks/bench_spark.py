"""Spark engine (local mode) against the local engine, every family, on a synthetic OCC table.

    python benchmarks/bench_spark.py --n 10000000 [--mechanisms uniform,sdr,...] [--driver-memory 2g]

For each mechanism: the Spark publish (this process is the driver; local[cores] runs the
executors inside the driver JVM, whose heap is capped by ``--driver-memory``), then, in a
separate process, the local engine's ``ppdp.publish`` on the same Parquet file (``Table``
in memory) and ``ppdp.verify`` of the Spark release against the source table, and the
comparison of the two certificates. Writes benchmarks/results/spark_<n>.json (after every
mechanism) with wall times, CPU seconds of the whole Spark process tree (driver, JVM,
Python workers; from /proc) against the local process's CPU seconds and their ratio (on a
shared machine the CPU ratio is the meaningful one), the Spark/local wall-time ratio, the driver's Python peak RSS (``ru_maxrss``: what
the driver holds — counts and plans — not the JVM), the local process's peak RSS, verify's
verdict and the certificate fields that differ (A''s swap advantage depends on the draws).

The local figures: ``read_table_cpu_s`` (Parquet → ``Table``), ``local_cpu_s`` (``ppdp.publish``
on the Table), ``local_save_cpu_s`` (``Release.save``); ``spark_over_local_cpu`` compares the
Spark run (file → release directory) with the publish step alone, and
``spark_over_local_file_to_release_cpu`` with the local engine's read + publish + save.

A direct read runs with ``spark.DIRECT_READ_JVM_OPTIONS`` (the driver JVM's quick JIT tier and
serial collector) unless ``--jvm-defaults``; ``--sql-read`` keeps the JVM's defaults.

``--no-local`` skips the local engine and the in-memory verify; the randomized release is then
checked with the streamed verify (``ppdp.engines.stream.verify_stream``) against the source
file (``--stream-verify`` adds it to the in-memory verify). ``--data`` names the input file
(else ``<PPDP_BENCH_DATA>/occ_<n>.parquet``, generated if missing), ``--out-dir`` where the
releases go, ``--merge`` keeps the other mechanisms' rows of an existing result file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _common import child_env, peak_rss_gib, provenance, write_result

DATA = Path(os.environ.get("PPDP_BENCH_DATA", Path(__file__).resolve().parent / "data"))  # large generated tables (git-ignored)
DIMS = "dims=['age', 'sex', 'education'], domains='occ'"
MECHS = {
    "fprivacy": "ppdp.FPrivacy(theta=8, fake_values=1)",
    "anatomy": "ppdp.Anatomy(3)",
    "uniform": "ppdp.UniformPerturbation(rho1=0.05, rho2=0.3)",
    "sdr": "ppdp.SDR(rho1=0.05, rho2=0.3)",
    "global": "ppdp.GlobalRandomization(4)",
    "diverted": "ppdp.Diverted(3)",
    "cells": f"ppdp.CellHistogram(epsilon=1.0, {DIMS})",
    "dpcube": f"ppdp.DPCube(epsilon=1.0, {DIMS})",
    "kdtree": f"ppdp.HierarchicalKDTree(epsilon=1.0, {DIMS})",
    "consistency": f"ppdp.ConsistentHierarchy(epsilon=1.0, {DIMS})",
    "dp": f"ppdp.DefaultHistogram(epsilon=1.0, {DIMS})",
}

LOCAL = r"""
import json, os, resource, sys, time, ppdp
from _common import peak_rss_gib
src, rel_dir, expr, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
mech = eval(expr)
t0 = time.perf_counter(); c0 = time.process_time(); table = ppdp.Table.from_parquet(src)
t_read, c_read = time.perf_counter() - t0, time.process_time() - c0
t0 = time.perf_counter(); c0 = time.process_time()
local = ppdp.publish(table, mech, seed=seed)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
import shutil, tempfile
d = tempfile.mkdtemp(dir=os.path.dirname(rel_dir))
t0 = time.perf_counter(); c0 = time.process_time(); local.save(os.path.join(d, "rel"))
t_save, c_save = time.perf_counter() - t0, time.process_time() - c0
shutil.rmtree(d)
rel = ppdp.load_release(rel_dir)
t0 = time.perf_counter(); rep = ppdp.verify(rel, table); t_verify = time.perf_counter() - t0
def flat(m, pre=""):
    out = {}
    for k, v in m.items():
        out.update(flat(v, pre + k + ".") if isinstance(v, dict) and v else {pre + k: v})
    return out
a, b = flat(rel.manifest), flat(local.manifest)
diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k) and k.split(".")[0] not in ("engine", "files"))
print(json.dumps({"local_wall_s": wall, "local_cpu_s": cpu, "read_table_s": t_read, "read_table_cpu_s": c_read,
                  "local_save_wall_s": t_save, "local_save_cpu_s": c_save, "verify_s": t_verify,
                  "verify_ok": rep.ok, "verify_problems": rep.problems[:3],
                  "certificate_equal": rel.manifest["certificate"] == local.manifest["certificate"],
                  "manifest_fields_differing": diff,
                  "disclosure_spark": rel.manifest.get("disclosure"), "disclosure_local": local.manifest.get("disclosure"),
                  "local_peak_gib": peak_rss_gib()}, default=str))
"""


def jvm_peak_gib(root: int) -> float:
    """Peak resident memory (VmHWM) of the driver JVM (the child java process of ``root``)."""
    best = 0.0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != root:
                continue
            with open(f"/proc/{d}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        best = max(best, int(line.split()[1]) / 2**20)
        except (OSError, ValueError, IndexError):
            continue
    return best


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds (user + system, children reaped included) of the live process tree under
    ``root`` — the Spark JVM and its Python workers — read from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    kids: dict[int, list[int]] = {}
    stats: dict[int, float] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(parts[1]), []).append(int(d))
        stats[int(d)] = sum(int(x) for x in parts[11:15]) / tick
    total, todo = 0.0, [root]
    while todo:
        p = todo.pop()
        total += stats.get(p, 0.0)
        todo.extend(kids.get(p, []))
    return total


def ensure_data(n: int) -> Path:
    path = DATA / f"occ_{n}.parquet"
    if not path.exists():
        import ppdp
        from ppdp.datasets.synthetic import write_synthetic

        DATA.mkdir(parents=True, exist_ok=True)
        write_synthetic(ppdp.datasets.load("occ"), n, path, seed=1, chunk_rows=1_000_000)
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--mechanisms", default=",".join(MECHS))
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--driver-memory", default="2g")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--no-local", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the releases")
    ap.add_argument("--tag", default="", help="suffix of the result file: results/spark_<n><tag>.json")
    ap.add_argument("--data", default=None, help="the input Parquet file (default: <PPDP_BENCH_DATA>/occ_<n>.parquet, "
                    "generated if missing)")
    ap.add_argument("--out-dir", default=None, help="where the releases are written (default: beside the data)")
    ap.add_argument("--sql-read", action="store_true", help="read the input through Spark SQL (direct=False), "
                    "not by the executors' direct read")
    ap.add_argument("--warmup", action="store_true", help="start the executors' Python workers before the first "
                    "measured publication (one tiny mapInArrow job)")
    ap.add_argument("--jvm-defaults", action="store_true", help="the driver JVM's default options (else, for a direct "
                    "read, spark.DIRECT_READ_JVM_OPTIONS)")
    ap.add_argument("--merge", action="store_true", help="keep the rows of other mechanisms already in the result file")
    ap.add_argument("--stream-verify", action="store_true",
                    help="also verify randomized releases with the streamed verify against the source file")
    args = ap.parse_args()

    import ppdp
    from ppdp.engines import spark as S
    from ppdp.engines.blocks import LAST_PHASES
    from ppdp.engines.stream import verify_stream

    src = Path(args.data) if args.data else ensure_data(args.n)
    out_dir = Path(args.out_dir) if args.out_dir else src.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    jvm = None if args.jvm_defaults or args.sql_read else S.DIRECT_READ_JVM_OPTIONS
    spark = S.local_session(args.cores, "ppdp-bench", memory=args.driver_memory, jvm_options=jvm)
    spark.sparkContext.setLogLevel("ERROR")
    sdf, schema = S.read_dataset(spark, src)
    if args.warmup:  # start the Python workers (imports) and the JVM's reader: per-application costs
        for mech_w, frame_w in ((ppdp.UniformPerturbation(rho1=0.05, rho2=0.3), sdf.limit(20_000)), (eval(MECHS["cells"]), sdf)):
            warm = out_dir / "spark_warmup"
            shutil.rmtree(warm, ignore_errors=True)
            S.publish(frame_w, mech_w, warm, schema)  # no seed: no custodian file
            shutil.rmtree(warm, ignore_errors=True)
    rows: list[dict] = []
    names = args.mechanisms.split(",")
    result = Path(__file__).parent / "results" / f"spark_{args.n}{args.tag}.json"
    kept = [r for r in json.loads(result.read_text())["rows"] if r["mechanism"] not in names] if (
        args.merge and result.exists()) else []
    for name in names:
        mech = eval(MECHS[name])
        out = out_dir / f"spark_{name}_{args.n}"
        shutil.rmtree(out, ignore_errors=True)
        cust = Path(f"{out}.custodian.json")
        for old in [cust, *out_dir.glob(f"{out.name}.custodian.fake-*.parquet")]:  # the JSON and its sidecar
            if old.exists():
                old.unlink()
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        c0 = time.process_time()
        j0 = tree_cpu_seconds(os.getpid())
        S.publish(sdf, mech, out, schema, seed=args.seed, direct=False if args.sql_read else None)
        row = {"mechanism": name, "n": args.n, "load_average_before": load0, "spark_wall_s": time.perf_counter() - t0,
               "driver_python_cpu_s": time.process_time() - c0,
               "spark_cpu_s": tree_cpu_seconds(os.getpid()) - j0 - 0.0,
               "driver_python_peak_gib": peak_rss_gib(),
               "driver_jvm_heap_cap": args.driver_memory,
               "driver_jvm_peak_rss_gib_so_far": jvm_peak_gib(os.getpid()),
               "load_average_after": os.getloadavg()[0], "spark_phases_wall_s": dict(LAST_PHASES),
               "data": src.name, "run": {k: v for k, v in vars(args).items() if k != "mechanisms"}}
        if not args.no_local:
            res = subprocess.run([sys.executable, "-c", LOCAL, str(src), str(out), MECHS[name], str(args.seed)],
                                 capture_output=True, text=True, env=child_env())
            if res.returncode == 0:
                row.update(json.loads(res.stdout.strip().splitlines()[-1]))
                row["spark_over_local_wall"] = row["spark_wall_s"] / max(row["local_wall_s"], 1e-9)
                row["spark_over_local_cpu"] = row["spark_cpu_s"] / max(row["local_cpu_s"], 1e-9)
                # file to release on both sides: the local engine reads the Parquet file into a Table and saves
                e2e_cpu = row["read_table_cpu_s"] + row["local_cpu_s"] + row["local_save_cpu_s"]
                e2e_wall = row["read_table_s"] + row["local_wall_s"] + row["local_save_wall_s"]
                row["local_file_to_release_cpu_s"] = e2e_cpu
                row["spark_over_local_file_to_release_cpu"] = row["spark_cpu_s"] / max(e2e_cpu, 1e-9)
                row["spark_over_local_file_to_release_wall"] = row["spark_wall_s"] / max(e2e_wall, 1e-9)
            else:
                row["local_error"] = res.stderr.strip().splitlines()[-1:]
        if mech.family == "randomized" and (args.no_local or args.stream_verify):
            t0 = time.perf_counter()
            v = verify_stream(out, src)
            row.update({"stream_verify_s": time.perf_counter() - t0, "stream_verify_ok": v["ok"],
                        "stream_verify_problems": v["problems"][:3],
                        "stream_verify_mode": "ppdp.engines.stream.verify_stream, against the source file"})
            if args.no_local:
                row.update({"verify_ok": v["ok"], "verify_problems": v["problems"][:3], "verify_mode": row["stream_verify_mode"]})
        elif args.no_local:
            t0 = time.perf_counter()
            rep = ppdp.verify(ppdp.load_release(out))
            row.update({"verify_s": time.perf_counter() - t0, "verify_ok": rep.ok, "verify_problems": rep.problems[:3],
                        "verify_mode": "files only"})
        if "verify_ok" in row and "verify_mode" not in row:
            row["verify_mode"] = "in memory, against the source Table (ppdp.verify)"
        print(json.dumps(row), flush=True)
        rows.append(row)
        write_result(f"spark_{args.n}{args.tag}", {"rows": kept + rows, "args": vars(args), "provenance": provenance()})
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
            if cust.exists():
                cust.unlink()
    spark.stop()
    path = write_result(f"spark_{args.n}{args.tag}", {"rows": kept + rows, "args": vars(args), "provenance": provenance()})
    print(path)


if __name__ == "__main__":
    main()
