"""Empirical DP audit of every registered ε-DP mechanism, the long version of
``tests/attacks/test_dp_audit.py``: more runs per table, so the lower bounds are tighter.

For each mechanism: the most revealing event found on calibration runs, its hit counts on fresh
runs of the two neighbouring tables, and the 99% Clopper–Pearson lower bound on the privacy loss
against the claimed ε; then the power control (the mechanism run at 5× the claimed ε).

    python benchmarks/bench_dp_audit.py [--runs 2000] [--calibration 1000] [--epsilon 1]
    python benchmarks/bench_dp_audit.py --table diabetes --mechanisms dpcube --runs 600 --calibration 300 --out dp_audit_diabetes_dpcube

Writes ``benchmarks/results/dp_audit.json``. With ``--table`` (a gauntlet table: its file read
through its reviewed schema, the histogram over the gauntlet's dimensions with their public
bins and domains, as ``ppdp publish`` is run on it) the neighbouring tables are the real table
and the same table without one record — the first record of the table's rarest non-empty cell —
and the events read that record's cell, its margins and the noisy total; writes
``benchmarks/results/dp_audit_<table>.json``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _common import peak_rss_gib, provenance, write_result

from ppdp.audit.empirical_dp import AUDIT_FEATURES, audit_mechanism, dp_mechanisms, empirical_epsilon, neighbouring_tables, release_features

GAUNTLET = Path(__file__).resolve().parent.parent / "tests" / "gauntlet"


def gauntlet_setup(name: str):
    """(table, neighbour without one record, histogram parameters, the queries the events read)."""
    import sys

    import numpy as np

    from ppdp.schema import MISSING_LABEL, bin_edges, load_schema, public_domains, read_table

    sys.path.insert(0, str(GAUNTLET))
    from gauntlet_steps import TABLES

    cfg = TABLES[name]
    sch = load_schema(GAUNTLET / "schemas" / f"{name}.toml")
    t = read_table(GAUNTLET / "data" / cfg["file"], sch)
    dims = cfg["dims"].split(",")
    dom = public_domains(t, sch, t.column_names)
    edges = {d: list(e) for d in dims if (e := bin_edges(t.domain(d))) is not None}
    domains = {d: dom[d] for d in dims if d in dom and (d not in edges or MISSING_LABEL in dom[d])}
    codes = np.stack([t.codes(d) for d in dims], axis=1)
    cells, inv, counts = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
    rare = int(np.argmin(counts))
    row = int(np.flatnonzero(inv.ravel() == rare)[0])
    keep = np.setdiff1d(np.arange(t.n_rows), [row])
    conds = []
    for d, c in zip(dims, cells[rare]):
        lab = str(t.domain(d)[c])
        if d in edges and lab != MISSING_LABEL:
            lo, hi = edges[d][c], edges[d][c + 1]
            conds.append(f"{d} >= {lo:g} AND {d} {'<=' if c + 2 == len(edges[d]) else '<'} {hi:g}")
        else:
            conds.append(f"{d} = '{lab}'")
    target = " AND ".join(conds)
    queries = (target, conds[0], conds[-1])
    return t, t.take(keep), {"dims": dims, "bins": edges or None, "domains": domains or None}, queries, int(counts[rare])


def audit_gauntlet(name: str, mech: str, epsilon: float, claimed: float, runs: int, calibration: int, seed: int):
    import numpy as np

    import ppdp
    from ppdp import registry

    t, t_minus, params, queries, k = gauntlet_setup(name)
    m = registry.mechanism(mech)(epsilon=epsilon, **params)

    def publish_once(table, s):
        rel = ppdp.publish(table, m, seed=s, allow_low_utility=True)
        x, st = release_features(rel, queries, ("cells", "uniform"))
        return [v if np.isfinite(v) else np.nan for v in x], st

    res = empirical_epsilon(publish_once, t, t_minus, mechanism=mech, epsilon_claimed=claimed, n_runs=runs,
                            n_calibration=calibration, seed=seed, feature_names=AUDIT_FEATURES)
    return res, {"removed_record_cell": queries[0], "cell_count": k, "n_rows": t.n_rows, **{k2: v for k2, v in params.items() if v}}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--calibration", type=int, default=1000)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--power-factor", type=float, default=5.0)
    ap.add_argument("--table", help="a gauntlet table (tests/gauntlet/data) instead of the 40-row audit table")
    ap.add_argument("--mechanisms", help="comma-separated mechanisms (default: every ε-DP one; with --table: dp,dpcube)")
    ap.add_argument("--out", help="result name under benchmarks/results (default: dp_audit, or dp_audit_<table>)")
    args = ap.parse_args(argv)
    if args.table:
        return main_gauntlet(args)
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


def main_gauntlet(args) -> dict:
    rows = []
    names = args.mechanisms.split(",") if args.mechanisms else ["dp", "dpcube"]
    for name in names:
        row: dict = {"mechanism": name}
        for key, published, seed in (("audit", args.epsilon, 11), ("power_control", args.power_factor * args.epsilon, 12)):
            t0, c0 = time.perf_counter(), time.process_time()
            res, setup = audit_gauntlet(args.table, name, published, args.epsilon, args.runs, args.calibration, seed)
            row[key] = {**res.to_dict(), "epsilon_published": published, "wall_s": time.perf_counter() - t0,
                        "cpu_s": time.process_time() - c0}
            row["setup"] = setup
        rows.append(row)
        a, p = row["audit"], row["power_control"]
        print(f"{args.table} {name:8s} lower {a['epsilon_lower']:6.3f} vs eps {args.epsilon:g} ({a['event']}; {a['hits_likelier']}/"
              f"{a['hits_other']} of {args.runs}) | at {args.power_factor:g}x: lower {p['epsilon_lower']:6.3f} "
              f"{'FLAGGED' if p['violates'] else 'missed'} ({p['event']}) | {a['wall_s'] + p['wall_s']:.0f} s", flush=True)
    res = {"benchmark": f"dp_audit_{args.table}", "table": args.table, "runs_per_table": args.runs,
           "calibration_runs_per_table": args.calibration, "alpha": 0.01, "epsilon": args.epsilon,
           "power_factor": args.power_factor, "mechanisms": rows,
           "neighbours": "the gauntlet table read through its schema, and the same table without the first record of its rarest "
                         "non-empty cell (the histogram's dimensions, public bins and domains as ppdp publish uses them)",
           "violations": [r["mechanism"] for r in rows if r["audit"]["violates"]],
           "power_misses": [r["mechanism"] for r in rows if not r["power_control"]["violates"]],
           "peak_rss_gib": peak_rss_gib(), "provenance": provenance(seed=[11, 12], table=args.table)}
    print("written", write_result(args.out or f"dp_audit_{args.table}", res))
    return res


if __name__ == "__main__":
    main()
