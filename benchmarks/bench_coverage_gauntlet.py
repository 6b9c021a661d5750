"""Coverage of every family's intervals against the TRUE counts of the gauntlet's ten real tables.

None of these tables was used to build or tune an estimator (the coverage contract and the
estimators' rules were set on OCC, EDU and Adult). Each table is read as a custodian has it: the
file under ``tests/gauntlet/data`` through ``ppdp.read_table`` with its reviewed schema under
``tests/gauntlet/schemas`` (bins, domains, missing values as the schema declares them), and
published with the parameters the gauntlet's custodian picks (``tests/gauntlet/gauntlet_steps.py``:
``PUBLISH`` with the per-table ``params``; the schema's protected values). Histograms read the
file the way ``ppdp publish dp|dpcube --schema`` does: the two quasi-identifiers and the
sensitive column of the table's ``dims`` as dimensions, the schema's bin edges and public domains.

For each (table, mechanism): ``--releases`` independent releases (``ppdp.publish`` with seeds
0, 1, …), each answered with ``release.estimate(workload, level=0.95)`` by the mechanism's DEFAULT
estimator and by every other registered estimator of the family that reports an interval. The
workload (fixed per table, built from the table's own domains; the truth is ``answer_exact`` on the
same table):

- ``groupby``: every cell of ``GROUP BY q × SA`` for each of the two dims quasi-identifiers;
- ``cell``: cells of ``GROUP BY q1 × q2 × SA`` (at most 200, seed 0);
- ``range``: ranges that follow the bins of a binned dims column (2–4 consecutive bins) × each
  sensitive value, and (binned sensitive column) ranges of 2–3 of its bins × each value of the
  first quasi-identifier (at most 100 in all, seed 0);
- ``point`` (bucketized, randomized, and histograms over every column): ``point_workload`` over
  all the quasi-identifiers × SA (120 queries, seed 0) — small counts and zeros.

Reported per (table, mechanism, estimator): the interval's kind (``confidence`` at a level, or
``certain`` bounds) and method; coverage of the true count overall and for counts 0, 1–10,
11–100, > 100 with the number of (release, query) pairs and the binomial lower tolerance
(:func:`tolerance`); a miss flag (``miss``: below that tolerance, as if the pairs were independent;
``miss_clustered``: more than 3 standard errors below 0.95, the standard error from the spread of
the per-release coverage — the releases are the independent units, the queries of one release
share its randomness and overlap — floored at the binomial one, the coverage contract's check);
the median width / true count (true count ≥ 1); CPU seconds.

    python benchmarks/bench_coverage_gauntlet.py [--tables t1,t2] [--mechanisms fprivacy,...]
        [--releases 50] [--estimators default|all] [--name coverage_gauntlet]

Each invocation MERGES its cases into benchmarks/results/<name>.json (so tables and families can
be run in separate invocations of ≤ ~5 minutes each); ``--merge other1,other2`` folds the cases of
runs made in parallel under other names into <name>.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

import ppdp
from _common import provenance, write_result
from ppdp import registry
from ppdp.queries import Predicate, Query, Workload
from ppdp.queries.workloads import point_workload

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "gauntlet"))
from gauntlet_steps import DATA, PUBLISH, SCHEMAS, TABLES  # noqa: E402

LEVEL = 0.95
BINS = {"0": (0, 0), "1-10": (1, 10), "11-100": (11, 100), ">100": (101, np.inf)}
MECHANISMS = ("fprivacy", "anatomy", "uniform", "sdr", "global", "diverted", "dp", "dpcube", "dp-all", "dpcube-all")
HISTOGRAM = ("dp", "dpcube", "dp-all", "dpcube-all")
#: options that keep a case within seconds: EM's interval is the linear one whatever its
#: bootstrap replicates (they give only ``se``)
OPTIONS: dict[str, dict] = {"em": dict(replicates=0)}
_FLAG = {"--theta": "theta", "--l": "l", "--rho1": "rho1", "--rho2": "rho2", "--l-prime": "l_prime",
         "--epsilon": "epsilon"}


def tolerance(n_pairs: int, level: float = LEVEL, alpha: float = 0.001) -> float:
    """The binomial lower tolerance: the coverage below which ``n_pairs`` independent draws at
    ``level`` fall with probability < ``alpha`` (a miss below it is not chance)."""
    if n_pairs <= 0:
        return 0.0
    return float(stats.binom.ppf(alpha, n_pairs, level)) / n_pairs


def params(table: str, mech: str) -> dict:
    mech = mech.removesuffix("-all")
    flags = TABLES[table].get("params", {}).get(mech, PUBLISH[mech])
    cast = int if mech in ("anatomy", "global", "diverted") else float
    return {_FLAG[flags[i]]: cast(flags[i + 1]) for i in range(0, len(flags), 2)}


def read(table: str, histogram: bool, every_column: bool = False):
    """The table as ``ppdp publish`` reads it with the reviewed schema (histogram: its dims as
    dimensions, none sensitive; ``every_column``: the schema's quasi-identifiers and sensitive
    column, what ``ppdp publish dp --schema`` takes without ``--dims``), and the mechanism
    parameters the schema supplies."""
    from ppdp.schema import bin_edges, public_domains

    sch = ppdp.load_schema(SCHEMAS / f"{table}.toml")
    path = DATA / TABLES[table]["file"]
    if not histogram:
        return ppdp.read_table(path, sch), sch, {}
    dims = [*sch.quasi, *sch.sensitive] if every_column else TABLES[table]["dims"].split(",")
    hs = sch.with_roles(quasi=dims, sensitive=[])
    t = ppdp.read_table(path, hs)
    extra: dict = {"dims": dims}
    binned = {d: list(e) for d in dims if (e := bin_edges(t.domain(d))) is not None}
    if binned:
        extra["bins"] = binned
    doms = public_domains(t, hs, dims)
    if doms:
        extra["domains"] = doms
    return t, sch, extra


def _eq(c: str, v: str) -> Predicate:
    return Predicate(c, "eq", (v,))


def workload(t, table: str, histogram: bool, quasi=None) -> tuple[Workload, np.ndarray]:
    """The fixed workload of a table (module doc) and each query's kind."""
    from ppdp.schema import MISSING_LABEL, bin_edges

    q1, q2, sa = TABLES[table]["dims"].split(",")
    rng = np.random.default_rng(0)
    qs: list[Query] = []
    kinds: list[str] = []
    for q in (q1, q2):
        for a in t.domain(q):
            for s in t.domain(sa):
                qs.append(Query((_eq(q, a), _eq(sa, s))))
                kinds.append("groupby")
    cells = [(a, b, s) for a in t.domain(q1) for b in t.domain(q2) for s in t.domain(sa)]
    pick = rng.choice(len(cells), size=min(200, len(cells)), replace=False)
    for i in np.sort(pick):
        a, b, s = cells[i]
        qs.append(Query((_eq(q1, a), _eq(q2, b), _eq(sa, s))))
        kinds.append("cell")
    ranges = []
    for q in (q1, q2):
        if bin_edges(t.domain(q)) is None:
            continue
        labs = [x for x in t.domain(q) if x != MISSING_LABEL]
        for k in (2, 3, 4):
            for i in range(len(labs) - k + 1):
                for s in t.domain(sa):
                    ranges.append(Query((Predicate(q, "in", tuple(labs[i:i + k])), _eq(sa, s))))
    if bin_edges(t.domain(sa)) is not None:  # a binned sensitive column: ranges of its bins × each q1 value
        labs = [x for x in t.domain(sa) if x != MISSING_LABEL]
        for k in (2, 3):
            for i in range(len(labs) - k + 1):
                for a in t.domain(q1):
                    ranges.append(Query((_eq(q1, a), Predicate(sa, "in", tuple(labs[i:i + k])))))
    if ranges:
        pick = rng.choice(len(ranges), size=min(100, len(ranges)), replace=False)
        qs += [ranges[i] for i in np.sort(pick)]
        kinds += ["range"] * len(pick)
    if not histogram or quasi:
        pw = point_workload(t, 120, seed=0, attributes=quasi, sensitive=sa)
        qs += list(pw)
        kinds += ["point"] * len(pw)
    return Workload(qs), np.array(kinds)


def estimators_for(mech: str) -> list[str]:
    mech = mech.removesuffix("-all")
    fam = registry.mechanism(mech).family
    return [n for n, c in registry.estimators(fam).items() if not c.mechanisms or mech in c.mechanisms]


def summarise(H: np.ndarray, W: np.ndarray, true: np.ndarray, kind: str) -> dict:
    """Coverage overall and by true count, its tolerance and miss flag, median width / count."""
    out: dict = {}
    target = 1.0 if kind == "certain" else LEVEL
    subsets = {"overall": np.ones(len(true), bool)} | {b: (true >= lo) & (true <= hi) for b, (lo, hi) in BINS.items()}
    miss, miss_clustered = [], []
    for b, sub in subsets.items():
        if not sub.any():
            out[b] = None
            continue
        h = H[:, sub]
        n = h.size
        cov = float(h.mean())
        tol = 1.0 if kind == "certain" else tolerance(n)
        per = h.mean(axis=1)
        out[b] = {"coverage": round(cov, 4), "pairs": int(n), "queries": int(sub.sum()), "tolerance": round(tol, 4),
                  "se_between_releases": round(float(per.std(ddof=1) / np.sqrt(len(per))) if len(per) > 1 else 0.0, 4)}
        if kind in ("confidence", "certain") and cov < tol:
            miss.append(b)
        se = max(out[b]["se_between_releases"], float(np.sqrt(LEVEL * (1 - LEVEL) / n)))
        if kind == "certain" and cov < 1.0 or kind == "confidence" and cov < LEVEL - 3 * se:
            miss_clustered.append(b)
    pos = true >= 1
    out["median_width_over_true"] = float(np.median(W[:, pos] / true[pos])) if pos.any() else None
    out["median_width_count0"] = float(np.median(W[:, ~pos])) if (~pos).any() else None
    out["miss"] = miss
    out["miss_clustered"] = miss_clustered
    out["target"] = target
    return out


def run_case(table: str, mech: str, releases: int, which: str) -> dict:
    hist = mech in HISTOGRAM
    t, sch, extra = read(table, hist, mech.endswith("-all"))
    cls = registry.mechanism(mech.removesuffix("-all"))
    m = cls(**params(table, mech), **extra)
    kw = {} if hist or sch.sensitive_values is None else {"sensitive_values": list(sch.sensitive_values)}
    wl, kinds = workload(t, table, hist, list(sch.quasi) if mech.endswith("-all") else None)
    true = ppdp.answer_exact(t, wl)
    names: list[str | None] = [None]
    if which == "all":
        default = cls.default_estimator
        names += [n for n in estimators_for(mech) if n != default]
    hits: dict = {n: [] for n in names}
    widths: dict = {n: [] for n in names}
    info: dict = {}
    cpu = dict.fromkeys(names, 0.0)
    cpu_pub = 0.0
    w0 = time.perf_counter()
    for s in range(releases):
        c0 = time.process_time()
        try:
            rel = ppdp.publish(t, m, seed=s, **kw)
        except ppdp.PpdpError as e:
            return {"refused": str(e).splitlines()[0]}
        cpu_pub += time.process_time() - c0
        if s == 0:  # the estimators that apply to this release
            names = [n for n in names if n is None or registry.estimator(rel.family, n)().supports(rel)]
        for n in names:
            c0 = time.process_time()
            est = n if n is None else registry.estimator(rel.family, n)(**OPTIONS.get(n, {}))
            try:
                E = rel.estimate(wl, estimator=est, level=LEVEL)
            except ppdp.PpdpError as e:
                info[n] = ("error", str(e).splitlines()[0])
                continue
            cpu[n] += time.process_time() - c0
            hits[n].append((E.lower <= true + 1e-9) & (true <= E.upper + 1e-9))
            widths[n].append(E.upper - E.lower)
            info[n] = (E.kind, E.method)
    out: dict = {"params": {**params(table, mech), **extra, **kw},
                 "n_rows": int(t.n_rows), "queries": int(len(true)),
                 "queries_by_kind": {k: int((kinds == k).sum()) for k in np.unique(kinds)},
                 "true_count_bins": {b: int(((true >= lo) & (true <= hi)).sum()) for b, (lo, hi) in BINS.items()},
                 "releases": releases, "cpu_publish_s": round(cpu_pub, 2),
                 "wall_s": round(time.perf_counter() - w0, 2), "estimators": {}}
    for n in names:
        label = n or f"default ({cls.default_estimator})"
        if not hits[n]:
            out["estimators"][label] = {"kind": info.get(n, ("error", "?"))[0], "method": info.get(n, ("", ""))[1]}
            continue
        H, W = np.array(hits[n]), np.array(widths[n])
        kind, method = info[n]
        r = {"kind": kind, "method": method, "cpu_s": round(cpu[n], 2)}
        if kind != "none":
            r.update(summarise(H, W, true, kind))
            r["by_query_kind"] = {k: round(float(H[:, kinds == k].mean()), 4) for k in np.unique(kinds)}
        out["estimators"][label] = r
        if kind == "none":
            line = "no interval"
        else:
            cells = "  ".join(f"{b} {r[b]['coverage']:.3f}/{r[b]['tolerance']:.3f}" if r[b] else f"{b} —"
                              for b in ("overall", *BINS))
            wr = r["median_width_over_true"]
            line = f"{cells}  w/t {wr:.2f}" + ("  MISS " + ",".join(r["miss"]) if r["miss"] else "") \
                + ("  MISS(3se) " + ",".join(r["miss_clustered"]) if r["miss_clustered"] else "")
        print(f"  {table:16s} {mech:9s} {label:28s} {kind:10s} {line}", flush=True)
    return out


def summary(res: dict) -> str:
    """Markdown: per mechanism, the default estimator's lowest coverage over the tables in each
    bin (and which table), the median width / count range; then every flagged case."""
    cols = ("overall", *BINS)
    lines = ["| mechanism | default estimator (kind) | tables | " + " | ".join(f"lowest {c}" for c in cols)
             + " | median width / count |", "|---" * (len(cols) + 4) + "|"]
    flagged, wide = [], []
    for mech in MECHANISMS:
        cases = {k.split("/")[0]: v for k, v in res["cases"].items() if k.split("/")[1] == mech and "estimators" in v}
        if not cases:
            continue
        label = kind = ""
        low: dict = {c: (2.0, "") for c in cols}
        widths = []
        for table, case in cases.items():
            for name, r in case["estimators"].items():
                if r.get("miss") or r.get("miss_clustered"):
                    flagged.append(f"- {table}/{mech} `{name}` ({r['kind']}): binomial miss {r['miss'] or '—'}, "
                                   f"clustered miss {r['miss_clustered'] or '—'}; "
                                   + ", ".join(f"{c} {r[c]['coverage']:.3f} (tolerance {r[c]['tolerance']:.3f}, "
                                               f"± {r[c]['se_between_releases']:.3f})" for c in r['miss'] + [
                                                   x for x in r['miss_clustered'] if x not in r['miss']]))
                w = r.get("median_width_over_true")
                if r.get("overall") and r["overall"]["coverage"] > 0.995 and w is not None and w > 2:
                    wide.append(f"{table}/{mech} `{name}` ({r['kind']}): coverage {r['overall']['coverage']:.3f}, "
                                f"median width / count {w:.2f}")
                if not name.startswith("default"):
                    continue
                label, kind = name, r["kind"]
                for c in cols:
                    if r.get(c) and r[c]["coverage"] < low[c][0]:
                        low[c] = (r[c]["coverage"], table)
                if r.get("median_width_over_true") is not None:
                    widths.append(r["median_width_over_true"])
        cells = [f"{v:.3f} ({t})" if t else "—" for v, t in (low[c] for c in cols)]
        lines.append(f"| {mech} | {label} ({kind}) | {len(cases)} | " + " | ".join(cells)
                     + f" | {min(widths):.2f}–{max(widths):.2f} |")
    refused = sorted(k for k, v in res["cases"].items() if "refused" in v)
    return "\n".join(lines + ["", "Flagged (any estimator):", *(flagged or ["- none"]), "",
                              "Coverage > 0.995 with a median width above twice the count:",
                              *(f"- {x}" for x in wide or ["none"]), "", "Refused (not eligible): " + ", ".join(refused)])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", default=",".join(TABLES))
    ap.add_argument("--mechanisms", default=",".join(MECHANISMS))
    ap.add_argument("--releases", type=int, default=50)
    ap.add_argument("--estimators", choices=("default", "all"), default="all")
    ap.add_argument("--name", default="coverage_gauntlet")
    ap.add_argument("--summary", action="store_true", help="print the markdown summary of <name>.json and stop")
    ap.add_argument("--merge", default="", help="comma-separated result names (run in parallel under other "
                    "--name values) whose cases and runs to merge into --name, then stop")
    a = ap.parse_args()
    if a.summary:
        print(summary(json.loads((Path(__file__).parent / "results" / f"{a.name}.json").read_text())))
        return
    if a.merge:
        path = Path(__file__).parent / "results" / f"{a.name}.json"
        res = json.loads(path.read_text()) if path.exists() else {"cases": {}}
        for other in [x for x in a.merge.split(",") if x]:
            o = json.loads((Path(__file__).parent / "results" / f"{other}.json").read_text())
            res["cases"].update(o["cases"])
            res.setdefault("runs", []).extend(o.get("runs", []))
            res.update({k: v for k, v in o.items() if k not in ("cases", "runs")})
        print(write_result(a.name, res))
        return
    tables = [x for x in a.tables.split(",") if x]
    mechs = [x for x in a.mechanisms.split(",") if x]
    bad = sorted(set(tables) - set(TABLES)) + sorted(set(mechs) - set(MECHANISMS))
    if bad:
        ap.error(f"unknown {bad}; tables: {', '.join(TABLES)}; mechanisms: {', '.join(MECHANISMS)}")
    path = Path(__file__).parent / "results" / f"{a.name}.json"
    res = json.loads(path.read_text()) if path.exists() else {}
    res.setdefault("cases", {})
    res.update({"level": LEVEL, "tolerance": "binomial: the 0.001 quantile of Bin(pairs, 0.95) / pairs; "
                "certain bounds must hold every pair", "workload": __doc__.split("workload (")[1].split("Reported")[0]})
    c0, w0 = time.process_time(), time.perf_counter()
    for table in tables:
        for mech in mechs:
            if mech in TABLES[table].get("refused", {}):
                res["cases"][f"{table}/{mech}"] = {"refused": TABLES[table]["refused"][mech]}
                continue
            res["cases"][f"{table}/{mech}"] = run_case(table, mech, a.releases, a.estimators)
    res.setdefault("runs", []).append({"tables": tables, "mechanisms": mechs, "releases": a.releases,
                                       "estimators": a.estimators, "cpu_s": round(time.process_time() - c0, 1),
                                       "wall_s": round(time.perf_counter() - w0, 1), **provenance(seed=0)})
    print(write_result(a.name, res))


if __name__ == "__main__":
    main()
