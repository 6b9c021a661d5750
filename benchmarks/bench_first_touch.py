"""The cost of memory a process touches for the first time, on this machine: a fresh array filled
in a new process, then the same size again in that process (the pages already backed). On a
virtual machine whose host backs guest memory lazily the first fill is dominated by system
time; every large temporary a query path keeps growing pays it (docs/scale.md).

    python benchmarks/bench_first_touch.py --gib 2 --repeats 3   # → results/first_touch.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = """
import json, resource, time
import numpy as np
n = int({gib} * 2**30 // 8)
def fill():
    r0 = resource.getrusage(resource.RUSAGE_SELF); t = time.perf_counter()
    a = np.ones(n); a[::4096] += 1.0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    del a
    return {{"wall_s": time.perf_counter() - t, "sys_s": r1.ru_stime - r0.ru_stime,
             "user_s": r1.ru_utime - r0.ru_utime, "minor_faults": r1.ru_minflt - r0.ru_minflt}}
print(json.dumps({{"first": fill(), "again": fill()}}))
"""


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=2.0, help="array size in GiB")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes")
    ap.add_argument("--out", default="first_touch")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent / "src"))
    from _common import write_result

    from ppdp.provenance import provenance

    runs = []
    for _ in range(a.repeats):
        p = subprocess.run([sys.executable, "-c", CHILD.format(gib=a.gib)], capture_output=True, text=True, check=True)
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
        print(runs[-1], file=sys.stderr)
    res = {**provenance(gib=a.gib), "runs": runs,
           "first_sys_s_per_gib": [r["first"]["sys_s"] / a.gib for r in runs],
           "again_sys_s_per_gib": [r["again"]["sys_s"] / a.gib for r in runs]}
    write_result(a.out, res)
    return res


if __name__ == "__main__":
    main()
