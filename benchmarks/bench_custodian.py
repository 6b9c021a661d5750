"""The custodian-side file of an F'-privacy release with fakes (θ = 8, σ = 1) at scale →
benchmarks/results/custodian_<n>_<label>.json.

Three child processes, one stage each (as ``ppdp publish`` and ``ppdp verify --custodian``
run), so that each stage's peak memory (``VmHWM``) is its own, under an address-space limit:

1. ``publish``: reads the synthetic table (:func:`bench_scale.read_table`), publishes with the
   local engine (seed 1) and saves the release with its custodian file (``Release.save``);
   reports the save time and the custodian files' sizes;
2. ``verify_files``: loads the release and verifies it from its files (the reference);
3. ``verify_custodian``: loads the release and verifies it with the custodian file
   (``ppdp.verify(release, custodian=path)``).

    python benchmarks/bench_custodian.py --data-file benchmarks/data/occ_10000000.parquet --label after
    python benchmarks/bench_custodian.py --data-file ... --label before --src /tmp/before/src
    python benchmarks/bench_custodian.py --data-file benchmarks/data/occ_100000000.parquet \
        --stages publish,verify_custodian --label after
    python benchmarks/bench_custodian.py --data-file ... --associations sex:0:0,sex:1:1 --label assoc

``--associations COLUMN:I:J,...``: given negative associations (the I-th label of COLUMN, the
J-th SA label), so that the fakes' draw, verify and the disclosure read the forbidden values
per bucket; ``--learn``: also learn them from the buckets (verify with the custodian file
learns them again from the real counts).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPR = "ppdp.FPrivacy(theta=8.0, fake_values=1)"
STAGES = ("publish", "verify_files", "verify_custodian")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(args) -> dict:
    import ppdp
    from _common import peak_rss_gib
    from bench_scale import read_table

    res: dict = {}
    out_dir = Path(args.release)
    cust = out_dir.with_name(out_dir.name + ".custodian.json")

    def step(name, fn):
        c, w = _cpu(), time.perf_counter()
        out = fn()
        res[f"{name}_cpu_s"] = round(_cpu() - c, 3)
        res[f"{name}_wall_s"] = round(time.perf_counter() - w, 3)
        return out

    if args.stage == "publish":
        table = step("read", lambda: read_table(Path(args.path)))
        mech = eval(EXPR, {"ppdp": ppdp})  # noqa: S307 - the fixed expression above
        if args.associations:
            assoc = []
            for spec in args.associations.split(","):
                col, i, j = spec.split(":")
                assoc.append([col, table.domain(col)[int(i)], table.domain(table.sensitive[0])[int(j)]])
            mech = ppdp.FPrivacy(theta=8.0, fake_values=1, negative_associations=assoc)
            res["negative_associations"] = assoc
        if args.learn:  # learned from the buckets (re-derived by verify with the custodian file)
            mech = ppdp.FPrivacy(**{**mech.get_params(), "learn_associations": True})
        rel = step("publish", lambda: ppdp.publish(table, mech, seed=args.seed))
        del table
        res["peak_before_save_gib"] = round(peak_rss_gib(), 3)
        step("save", lambda: rel.save(out_dir))
        res["custodian_files"] = {p.name: p.stat().st_size for p in sorted(out_dir.parent.iterdir())
                                  if p.name.startswith(cust.name.rsplit(".json", 1)[0])}
        res["fakes"] = len(rel.custodian.get("fake") or ())
        res["n_buckets"] = int(rel.manifest["certificate"]["n_buckets"])
        res["learned"] = len(rel.manifest["certificate"].get("negative_associations_learned") or [])
    else:
        loaded = step("load", lambda: ppdp.load_release(out_dir))
        kw = {"custodian": cust} if args.stage == "verify_custodian" else {}
        rep = step(args.stage, lambda: ppdp.verify(loaded, **kw))
        res["ok"], res["problems"] = bool(rep.ok), list(rep.problems)[:3]
        res["fake_values_fact"] = rep.facts.get("fake_values")
        res["learned_fact"] = rep.facts.get("negative_associations_learned")
    res["peak_gib"] = round(peak_rss_gib(), 3)
    return res


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-file", required=True)
    ap.add_argument("--label", default="after")
    ap.add_argument("--src", default=str(HERE.parent / "src"))
    ap.add_argument("--limit-gib", type=float, default=8.0)
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stages", default=",".join(STAGES), help="comma-separated: " + ",".join(STAGES))
    ap.add_argument("--associations", default="", help="given negative associations COLUMN:I:J,... (module doc)")
    ap.add_argument("--learn", action="store_true", help="also learn negative associations from the buckets")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--stage", choices=STAGES)
    ap.add_argument("--path")
    ap.add_argument("--release")
    args = ap.parse_args(argv)
    if args.child:
        sys.path.insert(0, str(HERE))
        print(json.dumps(child(args)))
        return {}
    sys.path.insert(0, str(HERE))
    from _common import write_result
    from ppdp.provenance import load_average

    path = Path(args.data_file).resolve()
    import pyarrow.parquet as pq

    n = pq.ParquetFile(path).metadata.num_rows
    limit = int(args.limit_gib * 2**30)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([args.src, os.environ.get("PYTHONPATH", "")])}
    out: dict = {"n": n, "expr": EXPR, "associations": args.associations, "learn": args.learn, "label": args.label, "src": args.src, "limit_gib": args.limit_gib,
                 "load_average_before": load_average(), "stages": {}}
    work = Path(tempfile.mkdtemp(prefix="ppdp-cust-", dir=args.tmp))
    try:
        for stage in [s for s in STAGES if s in args.stages.split(",")]:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--stage", stage, "--data-file", str(path),
                   "--path", str(path), "--release", str(work / "release"), "--seed", str(args.seed),
                   "--associations", args.associations] + (["--learn"] if args.learn else [])
            p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            if p.returncode != 0 or not lines:
                out["stages"][stage] = {"error": f"exit {p.returncode}: " + " | ".join(p.stderr.strip().splitlines()[-6:])}
                if stage == "publish":
                    break
                continue
            out["stages"][stage] = json.loads(lines[-1])
            print(stage, out["stages"][stage], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["load_average_after"] = load_average()
    write_result(f"custodian_{n}_{args.label}", out)  # paths made machine-independent
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
