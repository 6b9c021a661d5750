"""Empirical DP audit of every registered ε-DP mechanism, the long version of
``tests/attacks/test_dp_audit.py``: more runs per table, so the lower bounds are tighter.

For each mechanism: the most revealing event found on calibration runs, its hit counts on fresh
runs of the two neighbouring tables, and the 99% Clopper–Pearson lower bound on the privacy loss
against the claimed ε; then the power control (the mechanism run at 5× the claimed ε).

    python benchmarks/bench_dp_audit.py [--runs 2000] [--calibration 1000] [--epsilon 1]

Writes ``benchmarks/results/dp_audit.json``.
"""

from __future__ import annotations

import argparse
import time

from _common import peak_rss_gib, provenance, write_result

from ppdp.audit.empirical_dp import audit_mechanism, dp_mechanisms, neighbouring_tables


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--calibration", type=int, default=1000)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--power-factor", type=float, default=5.0)
    args = ap.parse_args(argv)
    tables = neighbouring_tables()
    rows = []
    for name in dp_mechanisms():
        row = {"mechanism": name}
        for key, published, seed in (("audit", args.epsilon, 11), ("power_control", args.power_factor * args.epsilon, 12)):
            t0, c0 = time.perf_counter(), time.process_time()
            res = audit_mechanism(name, published, args.epsilon, n_runs=args.runs, n_calibration=args.calibration, seed=seed, tables=tables)
            row[key] = {**res.to_dict(), "epsilon_published": published, "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
        rows.append(row)
        a, p = row["audit"], row["power_control"]
        print(f"{name:13s} lower {a['epsilon_lower']:6.3f} vs eps {args.epsilon:g} ({a['event']}; {a['hits_likelier']}/{a['hits_other']} of {args.runs})"
              f" | at {args.power_factor:g}x: lower {p['epsilon_lower']:6.3f} {'FLAGGED' if p['violates'] else 'missed'}", flush=True)
    res = {"benchmark": "dp_audit", "runs_per_table": args.runs, "calibration_runs_per_table": args.calibration, "alpha": 0.01,
           "epsilon": args.epsilon, "power_factor": args.power_factor, "mechanisms": rows,
           "violations": [r["mechanism"] for r in rows if r["audit"]["violates"]],
           "power_misses": [r["mechanism"] for r in rows if not r["power_control"]["violates"]],
           "peak_rss_gib": peak_rss_gib(), "provenance": provenance(seed=[11, 12], table="neighbouring_tables(n=40, seed=20261128)")}
    print("written", write_result("dp_audit", res))
    return res


if __name__ == "__main__":
    main()
