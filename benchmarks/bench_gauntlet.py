"""The real-data gauntlet: every table of tests/gauntlet/ end to end through the CLI (schema infer,
evaluate, publish each family, verify, GROUP BY and range queries, audit, export, the export
README's recipe without ppdp), with each step's outcome and CPU seconds.

    python benchmarks/bench_gauntlet.py [TABLE ...]   # writes benchmarks/results/gauntlet.json

The same steps as tests/gauntlet/test_gauntlet.py (tests/gauntlet/gauntlet_steps.py).
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
import time
from pathlib import Path

from _common import machine, write_result

import ppdp

_STEPS = Path(__file__).resolve().parent.parent / "tests" / "gauntlet" / "gauntlet_steps.py"


def load_steps():
    spec = importlib.util.spec_from_file_location("gauntlet_steps", _STEPS)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gauntlet_steps"] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str]) -> None:
    g = load_steps()
    tables = argv or list(g.TABLES)
    results = []
    t0, c0 = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        for t in tables:
            res = g.run_table(t, Path(tmp) / t)
            results.append(res)
            for s in res.steps:
                if s.status != "pass":
                    print(f"  {t} {s.name}: {s.status} {s.detail}", flush=True)
    print(g.format_table(results))
    out = write_result("gauntlet", {
        "library_version": ppdp.__version__,
        "machine": machine(),
        "command": "python benchmarks/bench_gauntlet.py " + " ".join(argv),
        "wall_s": round(time.perf_counter() - t0, 1),
        "cpu_s": round(time.process_time() - c0, 1),
        "known_failures": {f"{t}/{s}": list(v) for (t, s), v in g.KNOWN.items()},
        "tables": [{
            "table": r.table, "file": g.TABLES[r.table]["file"], "rows": r.rows, "columns": r.columns,
            "missing_share": r.missing_share, "counts": r.counts(),
            "cpu_s_by_step": {k: round(v, 3) for k, v in r.cpu_by_kind().items()},
            "steps": [vars(s) for s in r.steps],
        } for r in results],
    })
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
