"""A' (ℓ'-diverted privacy) end to end: the certificate's swap bound against the advantage an
adversary measures, on small tables of different group structures, through ``ppdp.publish``.

For each table: the certificate's figures (checked identical on every publish), the swap that
binds the certificate's ``swap_advantage`` (a person and its (ℓ'−1)-th best partner value), the
exact total-variation distance between the two release laws (every id draw enumerated), and the
advantage of two tests measured on the publishes after the calibration ones, each with a 95%
Clopper–Pearson interval (``ppdp.audit.swap_audit``): the most powerful test, from the exact laws
(what an adversary who knows the mechanism and every other row computes), and a blind test
chosen on the calibration publishes.

    python benchmarks/bench_diverted_swap.py [--runs 1500] [--calibration 500] [--tables xxyz,...]

Writes ``benchmarks/results/diverted_swap.json`` (tables measured by an earlier run and not
named in ``--tables`` are kept, so that the long run can be split into runs of a few minutes).
"""

from __future__ import annotations

import argparse
import json

from _common import load_average, provenance, write_result

from ppdp.audit.swap_audit import measure_swap_advantage

#: name → (SA codes, domain size, ℓ'): one person per row, distinct NSA values
TABLES = {
    "xxyz": ([0, 0, 1, 2], 3, 2),                      # x,x,y,z: no decoy-group construction is private
    "all-distinct": ([0, 1, 2, 3, 4, 5], 6, 3),        # two closed blocks: private end to end
    "one-dominant": ([0, 0, 0, 1, 2, 3], 4, 2),        # one value in every group
    "three-pairs": ([0, 0, 1, 1, 2, 2], 3, 2),         # three groups over three values, none closed
    "three-levels": ([0, 0, 0, 1, 1, 2], 3, 2),        # counts 3, 2, 1
    "l3-uneven": ([0, 0, 1, 2, 3, 4], 5, 3),           # ℓ' = 3, two groups sharing one value
}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1500)
    ap.add_argument("--calibration", type=int, default=500)
    ap.add_argument("--tables", default=",".join(TABLES))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from _common import REPO
    path = REPO / "benchmarks" / "results" / "diverted_swap.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    rows = {r["table"]: r for r in old.get("tables", []) if r.get("runs") == args.runs}
    for name in args.tables.split(","):
        sa, m, lp = TABLES[name]
        load = load_average()
        res = measure_swap_advantage(sa, m, lp, runs=args.runs, calibration=args.calibration, seed=args.seed, exact=True)
        row = {"table": name, **res.to_dict(), "load_average_before": load, "load_average_after": load_average()}
        rows[name] = row
        ex = row["exact"]
        print(f"{name:13s} ℓ'={lp} swap_advantage {row['certificate']['swap_advantage']:.4f} (stable over {2 * args.runs} "
              f"publishes: {row['stable']}); exact TV {ex['exact_tv']:.4f}; best test from the exact laws "
              f"{ex['advantage']:.3f} [{ex['advantage_lower']:.3f}, {ex['advantage_upper']:.3f}]; calibrated blind test "
              f"{row['advantage']:.3f} [{row['advantage_lower']:.3f}, {row['advantage_upper']:.3f}] ({row['view']}); "
              f"within bound {row['within_bound']}; {row['wall_s']:.0f} s wall, {row['cpu_s']:.0f} s CPU", flush=True)
    out = [rows[n] for n in TABLES if n in rows]
    res = {"benchmark": "diverted_swap", "runs_per_table": args.runs, "calibration_runs_per_table": args.calibration,
           "alpha": 0.05, "tables": out, "violations": [r["table"] for r in out if not r["within_bound"]],
           "unstable": [r["table"] for r in out if not r["stable"]],
           "provenance": provenance(seed=args.seed, table="benchmarks/bench_diverted_swap.py TABLES")}
    print("written", write_result("diverted_swap", res))
    return res


if __name__ == "__main__":
    main()
