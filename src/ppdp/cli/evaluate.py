"""``ppdp evaluate`` (models × one workload → CSV + HTML report) and ``ppdp reproduce all``."""

from __future__ import annotations

import importlib
import traceback
from pathlib import Path

import click

from . import cli, reproduce
from .common import input_options


@cli.command()
@input_options
@click.option("--model", "models", multiple=True, required=True,
              help="A model as name:key=value,… (repeatable; lists as a+b), e.g. fprivacy:theta=8, sdr:rho1=0.1,rho2=0.3, "
                   "dpcube:epsilon=1,dims=age+sex. Names and parameters are those of `ppdp publish NAME` "
                   "(see `ppdp mechanisms`; parameters in Python spelling, l_prime not --l-prime).")
@click.option("--workload", default="anatomy", show_default=True, metavar="anatomy|point|range|FILE",
              help="A generated workload (--queries of them), or FILE: count statements in `ppdp query`'s SQL, "
                   "separated by ';' or one per line (each GROUP BY group is one query).")
@click.option("--queries", "n_queries", type=int, default=5000, show_default=True, help="Number of queries.")
@click.option("--selectivity", type=float, default=0.01, show_default=True, help="Expected selectivity (anatomy workload).")
@click.option("--dims", default=None, help="Range workload dimensions, comma-separated (default: the first three QI).")
@click.option("--trials", type=int, default=3, show_default=True, help="Releases per model (each with its own seed).")
@click.option("--seed", type=int, default=0, show_default=True, help="Run seed (workload and per-trial publish seeds).")
@click.option("--epsilons", default=None,
              help="Comma-separated ε values: every model taking an ε that does not fix one runs once per value "
                   "(per-ε tables and plots in the report), e.g. --epsilons 0.05,0.1,0.5,1.")
@click.option("--domains", "domains", multiple=True,
              help="Public domains for differentially private models that declare none: a bundled table's name "
                   "(adult, occ, edu) or DIM=LABEL,LABEL,… (repeatable). Default: the --schema file's declared "
                   "domains and bins, or the bundled table's documented domains with --dataset.")
@click.option("--max-posterior", type=float, default=None,
              help="The bound you accept: recommend only a model whose audited posterior on every sensitive value is "
                   "at most this (0 < p ≤ 1).")
@click.option("--sensitive-value", "sensitive_value", multiple=True,
              help="A sensitive value that needs protecting (repeatable or commas; default: sensitive_values in the "
                   "schema, else every value). A model disclosing one of them with certainty is never recommended.")
@click.option("--level", type=float, default=0.95, show_default=True, help="Confidence level of the intervals over trials.")
@click.option("--no-verify", is_flag=True, help="Skip verifying each release against the table.")
@click.option("--attacks", "attacks", is_flag=True,
              help="Also attack every model (singling out, linkability, attribute inference, reconstruction for "
                   "histograms) on a training half of a seeded subsample against the held-back half, next to its bound.")
@click.option("--attack-rows", "attack_rows", type=int, default=2000, show_default=True,
              help="With --attacks: the most rows of the training half (the control half has as many).")
@click.option("--out", "-o", "out", required=True, type=click.Path(file_okay=False), help="Output directory.")
def evaluate(table, models, workload, n_queries, selectivity, dims, trials, seed, epsilons, domains, max_posterior, level,
             no_verify, out, schema=None, sensitive_value=(), attacks=False, attack_rows=2000):
    """Publish every --model on the table (several seeded trials), answer ONE shared workload,
    and write a report that decides: each model's guarantee (claim, largest posterior, records
    disclosed with certainty) next to its error with intervals over trials, and a recommendation.

    Differentially private histograms (dpcube, cells, kdtree, consistency) may leave out dims
    (the columns the workload queries: --dims for --workload range, else the declared
    quasi-identifiers and sensitive attribute) and epsilon (with --epsilons). Files in --out:
    report.html, models.csv, summary.csv, results.csv, runs.csv, workload.jsonl, meta.json."""
    from ..evaluate import evaluate as run, parse_model_spec

    from ..errors import PpdpError
    from .common import check_out_dir

    specs = [parse_model_spec(m, epsilon_later=True) for m in models]  # bad specs fail before any work
    if n_queries < 1 or trials < 1:
        raise PpdpError(f"--queries and --trials must be ≥ 1, got {n_queries} and {trials}")
    if not 0 < selectivity <= 1:
        raise PpdpError(f"--selectivity must be in (0, 1], got {selectivity}")
    if max_posterior is not None and not 0 < max_posterior <= 1:
        raise PpdpError(f"--max-posterior must be in (0, 1], got {max_posterior}")
    if not 0 < level < 1:
        raise PpdpError(f"--level must be in (0, 1), got {level}")
    if attack_rows < 10:
        raise PpdpError(f"--attack-rows must be at least 10, got {attack_rows}")
    eps = None
    if epsilons:
        try:
            eps = [float(x) for x in epsilons.split(",") if x.strip()]
        except ValueError:
            raise PpdpError(f"--epsilons: comma-separated numbers, got {epsilons!r}") from None
        if not eps or any(not (e > 0 and e < float("inf")) for e in eps):
            raise PpdpError(f"--epsilons: every ε must be a finite number > 0, got {epsilons!r}")
    wl: object = workload
    if workload not in ("anatomy", "point", "range"):
        from pathlib import Path

        from ..evaluate import sql_workload
        from ..queries.sql import QueryError, load_statements

        if not Path(workload).is_file():
            raise PpdpError(f"--workload {workload!r}: not anatomy, point or range, nor a file")
        try:
            stmts = load_statements(workload)
        except QueryError as e:
            raise QueryError(f"--workload: {e}") from None
        if not all(isinstance(x, str) for x in stmts):
            raise PpdpError("--workload: a file of SQL statements (JSON workloads are for `ppdp query`)")
        wl = sql_workload(table, stmts)
    public = _public_domains(domains)
    if public is None and schema is not None:  # the schema's declared domains (bins are read off the binned labels)
        from ..schema import public_domains

        public = public_domains(table, schema, table.column_names) or None
    declared = [x.strip() for v in sensitive_value for x in str(v).split(",") if x.strip()] or (
        list(schema.sensitive_values) if schema is not None and schema.sensitive_values is not None else None)
    if declared is not None:
        known = {str(v) for c in table.sensitive for v in table.domain(c)}
        bad = [v for v in declared if v not in known]
        if bad:
            raise PpdpError(f"--sensitive-value {bad[0]!r} is not a value of the sensitive column "
                            f"(values: {', '.join(sorted(known)[:12])})")
    check_out_dir(out)
    ctx = click.get_current_context()
    ds = ctx.params.get("dataset")
    info = {"dataset": ds or ctx.params.get("input_path"), "rows": table.n_rows,
            "sampling": f"seeded sample of {ctx.params['n_rows']} rows (seed 0)" if ctx.params.get("n_rows") else "full table"}
    try:
        ev = run(table, specs, workload=wl, n_queries=n_queries, trials=trials, seed=seed, out_dir=out,
                 selectivity=selectivity, dims=dims.split(",") if dims else None, verify=not no_verify,
                 dataset_info=info, epsilons=eps, public_domains=public, max_posterior=max_posterior, level=level,
                 sensitive_values=declared, attacks=attacks, attack_rows=attack_rows)
    except OSError as e:
        raise PpdpError(f"--out {str(out)!r}: cannot write the results ({e.strerror or e})") from None
    allb = ev.summary[ev.summary["bin"] == "all"].set_index("model")
    click.echo(f"{'model':34s} {'mean':>8s} {'median':>8s} {'p95':>8s} {'mae':>9s} {'max post':>8s} {'certain':>8s} {'pub s':>7s}")
    for _, r in ev.models.iterrows():
        if r["error"] and r["trials"] == 0:
            click.echo(f"{r['model']:34s} FAILED: {r['error']}")
            continue
        b = allb.loc[r["model"]]
        click.echo(f"{r['model']:34s} {b['mean_rel_err']:8.4f} {b['median_rel_err']:8.4f} {b['p95_rel_err']:8.4f} "
                   f"{r['mean_abs_err']:9.3f} {r['max_posterior']:8.3g} {r['records_certain']:8.0f} {r['publish_s']:7.2f}"
                   + (f"  ({r['error']})" if r["error"] else ""))
    if len(ev.attacks):
        click.echo("attacks (success / control / risk with 95% CI; bound; training half vs held-back half):")
        for _, a in ev.attacks.iterrows():
            if a.get("error"):
                click.echo(f"  {a['model']:34s} no attack: {a['error']}")
                continue
            bound = "none" if a["bound"] != a["bound"] else f"{a['bound']:.3f}"
            click.echo(f"  {a['model']:34s} {a['attack']:20s} {a['success']:.3f} [{a['success_lo']:.3f}, {a['success_hi']:.3f}]"
                       f" / {a['control']:.3f} / {a['risk']:.3f} [{a['risk_lo']:.3f}, {a['risk_hi']:.3f}]  bound {bound}"
                       + ("  BEATS THE BOUND" if a["beats_bound"] else ""))
    rec = ev.recommendation
    for p in rec.get("passed_over") or []:
        click.echo(f"passed over: {p['model']} — {p['why']}")
    click.echo(f"recommendation: {rec['model']} — {rec['reason']}" if rec.get("model") else f"no recommendation: {rec.get('reason')}")
    click.echo(f"wrote {out}/report.html, models.csv, summary.csv, results.csv, workload.jsonl")


def _public_domains(values):
    """--domains: one bundled table name, or DIM=LABEL,LABEL,… entries (None when not given)."""
    from ..errors import PpdpError

    if not values:
        return None
    named = [v for v in values if "=" not in v]
    if named:
        if len(values) > 1:
            raise PpdpError("--domains: give one bundled table name, or DIM=LABEL,LABEL,… entries, not both")
        return named[0].strip().lower()
    out: dict[str, list[str]] = {}
    for v in values:
        dim, _, labels = v.partition("=")
        if not dim.strip() or not labels.strip():
            raise PpdpError(f"--domains: {v!r} is not DIM=LABEL,LABEL,…")
        out[dim.strip()] = [x.strip() for x in labels.split(",") if x.strip()]
    return out


def run_all(out_dir: Path, quick: bool = True) -> Path:
    """Run every registered paper's reproduction; each summary is rendered as an HTML page with
    its figures (``summary.html``) and index.html links those pages (or lists the error)."""
    from ..experiments import EXPERIMENTS
    from ..report.pages import render_index, render_summary_page

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, str, Path | None, str]] = []
    page: Path | None  # a reproduction's HTML page (None when it failed)
    for name, module in EXPERIMENTS.items():
        target = out_dir / name
        try:
            mod = importlib.import_module(module)
            target.mkdir(parents=True, exist_ok=True)
            summary = Path(mod.run(target, quick=quick))
            page = render_summary_page(summary, f"ppdp reproduce {name}" + (" --quick" if quick else ""))
            rows.append((name, "ok", page, ""))
            click.echo(f"{name}: ok → {page}")
        except Exception as e:  # a missing or failing paper is listed with its error
            msg = f"{type(e).__name__}: {e}"
            rows.append((name, "failed", None, msg))
            (out_dir / f"{name}.error.txt").write_text(traceback.format_exc())
            click.echo(f"{name}: FAILED — {msg}", err=True)
    return render_index(out_dir, rows, "ppdp reproduce all" + (" --quick" if quick else ""),
                        {"quick": quick, "papers": list(EXPERIMENTS)})


@reproduce.command(name="all")
@click.option("--quick", is_flag=True, help="A small, fast version of every paper's figures.")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None, help="Output directory (default results/all[-quick]).")
def reproduce_all(quick, out):
    """Run every paper's reproduction and write index.html linking their summaries."""
    target = Path(out or f"results/all{'-quick' if quick else ''}")
    index = run_all(target, quick=quick)
    click.echo(f"index: {index}")
