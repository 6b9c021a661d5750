"""Subcommands that work on every release family: query, verify, export, datasets."""

from __future__ import annotations

import json

import click
import numpy as np

from . import cli
from .common import DATASET_NAMES, file_options, load_release_and_source
from .engine import engine_options


@cli.command()
def datasets():
    """List the bundled tables with row counts and roles."""
    from .. import datasets as ds

    for name in ds.names():
        t = ds.load(name)
        spec = ds.DATASETS[name]
        click.echo(f"{name:6s} {t.n_rows:>9,d} rows  sensitive={','.join(t.sensitive)}  quasi={','.join(t.quasi)}")
        click.echo(f"       {spec['description']}")


@cli.command()
@click.argument("release", type=click.Path(exists=True, file_okay=False))
@click.argument("sql", required=False)
@click.option("--workload", type=click.Path(exists=True, dir_okay=False),
              help="Answer every statement of a file: SQL statements separated by ';' (or one per line; "
                   "lines starting with -- are comments), or JSON lines ({\"where\": \"...\"} / "
                   "{\"predicates\": [...]}, as ppdp writes workloads).")
@click.option("--estimator", default=None, help="Estimator name (default: the mechanism's default).")
@click.option("--level", type=float, default=0.95, show_default=True, help="Interval level.")
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False),
              help="Source table (CSV/Parquet): adds the exact count of every row.")
@click.option("--dataset", type=click.Choice(DATASET_NAMES), help="Source table is a bundled dataset (adds exact counts).")
@click.option("-n", "--rows", "n_rows", type=int, default=None, help="The source was a seeded sample of this many rows.")
@click.option("--out", "-o", type=click.Path(dir_okay=False),
              help="Write the table (query text, group values, estimate, se, lower, upper[, exact]) to FILE.csv or FILE.parquet.")
@file_options
@engine_options("query")
def query(release, sql, workload, estimator, level, input_path, dataset, n_rows, out, engine="local", **file_spec):
    """Estimate counts on a release, with standard errors and intervals.

    SQL is a condition, WHERE condition, or SELECT [cols,] COUNT(*) [FROM t] [WHERE condition]
    [GROUP BY cols]; conditions use =, <>, IN, BETWEEN, <, <=, >, >=, AND, OR, NOT. Example:
    ppdp query REL "SELECT sex, race, COUNT(*) FROM t WHERE age BETWEEN 30 AND 40 GROUP BY sex, race"
    """
    from ..errors import ParameterError, PpdpError, QueryError
    from ..queries.sql import load_statements, parse_statement, query_table

    if (sql is None) == (workload is None):
        raise PpdpError("give a SQL statement or --workload FILE (not both)")
    if not 0 < level < 1:
        raise PpdpError(f"--level must be in (0, 1), got {level}")
    if out is not None and not str(out).lower().endswith((".csv", ".parquet")):
        raise PpdpError(f"--out {out!r}: the file name ends in .csv or .parquet")
    if engine != "local" and (input_path is not None or dataset is not None):
        raise PpdpError(f"--input/--dataset (exact counts) need the release in memory; use --engine local, not {engine}")
    if engine != "local":
        rel = table = None
    elif input_path is not None or dataset is not None:
        rel, table = load_release_and_source(release, input_path, dataset, n_rows, **file_spec)
    else:
        from ..releases.base import load_release

        given = [k for k, v in file_spec.items() if v not in (None, (), False)]
        if given:
            raise PpdpError(f"--{given[0].replace('_path', '').replace('_', '-')} describes the source table; "
                            "give it with --input FILE")
        rel, table = load_release(release), None
    if workload is None:
        stmts = [sql]
    else:
        try:
            stmts = load_statements(workload)
            for i, s in enumerate(stmts):
                try:
                    stmts[i] = parse_statement(s) if isinstance(s, str) else s
                except QueryError as e:
                    raise QueryError(f"statement {i + 1}: {e}") from None
        except QueryError as e:
            raise QueryError(f"--workload: {e}") from None
    if engine != "local":
        _query_streamed(release, stmts, estimator, engine, out)
        return
    try:
        frame = query_table(rel, stmts, estimator=estimator, source=table, level=level)
    except ParameterError as e:
        raise ParameterError(f"--estimator: {e}", param="estimator") if e.param == "estimator" else e from None
    if out:
        _write_frame(frame, out)
        click.echo(f"answered {len(stmts)} statement(s), {len(frame)} row(s) → {out}")
        return
    show = frame.drop(columns=["query"]) if len(stmts) == 1 else frame
    kind = frame.attrs.get("kind", "confidence")
    pct = {"certain": "certain", "none": "no interval:"}.get(kind, f"{level * 100:g}%")
    show = show.rename(columns={"lower": f"{pct} lower", "upper": f"{pct} upper"})
    click.echo(show.to_string(index=False, float_format=lambda v: f"{v:.2f}", na_rep="—"))  # NaN: not a number
    click.echo(f"# interval: {kind}; {frame.attrs.get('method', '')}")


@cli.command()
@click.argument("release", type=click.Path(exists=True, file_okay=False))
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False), help="Source table (CSV/Parquet) to check row accounting against.")
@click.option("--dataset", type=click.Choice(DATASET_NAMES), help="Source table is a bundled dataset.")
@click.option("-n", "--rows", "n_rows", type=int, default=None, help="The source was a seeded sample of this many rows.")
@click.option("--custodian", "custodian", type=click.Path(dir_okay=False),
              help="The custodian-side file (<release>.custodian.json, with its Parquet sidecar) to check what "
                   "only the custodian keeps, e.g. which values are fake.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@file_options
@engine_options("verify")
def verify(release, input_path, dataset, n_rows, custodian, as_json, engine="local", **file_spec):
    """Re-check a release's certificate from its files (exit 1 if it fails or the release is
    not fit for publication, e.g. a seeded test run; exit 2 if it is malformed, or the
    custodian file cannot be read)."""
    from ..api import verify as _verify
    from ..errors import PpdpError
    from ..releases.custodian import load_custodian

    if engine != "local":
        _verify_streamed(release, input_path, dataset, n_rows, custodian, as_json, engine, file_spec)
    kept = None
    if custodian is not None:
        try:
            kept = load_custodian(custodian)
        except PpdpError as e:
            raise type(e)(f"--custodian: {e}") from None
    rel, table = load_release_and_source(release, input_path, dataset, n_rows, **file_spec)
    if kept is not None:
        rel.custodian = kept
    rep = _verify(rel, table)
    _report_verify(rep, rel.manifest.get("fit_for_publication") is True, as_json)


def _verify_streamed(release, input_path, dataset, n_rows, custodian, as_json, engine, file_spec):
    """``verify --engine spark|stream``: the streamed verifier, in bounded memory."""
    from pathlib import Path

    from ..errors import PpdpError
    from ..releases.base import VerifyReport
    from ..releases.storage import read_json
    from .common import release_source
    from .engine import verify_on_engine

    if custodian is not None:
        raise PpdpError(f"--custodian is checked in memory; use --engine local, not {engine}")
    manifest = read_json(Path(release) / "manifest.json", "manifest")
    table = release_source(manifest["schema"], input_path, dataset, n_rows,
                           missing_values=manifest.get("missing_values"), **file_spec)
    got = verify_on_engine(release, table)
    rep = VerifyReport(list(got["problems"]), list(got["checks"]), dict(got["facts"]))
    _report_verify(rep, manifest.get("fit_for_publication") is True, as_json)


def _report_verify(rep, fit: bool, as_json: bool):
    """Print a verify report (text or JSON) and exit: 0 only for a release that passes and is fit
    for publication."""
    if as_json:
        click.echo(json.dumps({"ok": rep.ok, "fit_for_publication": fit, "problems": rep.problems, "checks": rep.checks,
                               "facts": rep.facts}, indent=2, default=str))
    else:
        click.echo(str(rep))
        if not fit:
            click.echo("NOT fit for publication: a seeded test run (whoever knows the seed can undo the randomisation); "
                       "publish again without --seed")
    raise SystemExit(0 if rep.ok and fit else 1)


def _write_frame(frame, out) -> None:
    """``ppdp query --out``: the answers as CSV (by extension) or Parquet; one error line on failure."""
    from ..errors import PpdpError

    try:
        if str(out).lower().endswith(".csv"):
            frame.to_csv(out, index=False)
        else:
            frame.to_parquet(out, index=False)
    except OSError as e:
        raise PpdpError(f"--out {out!r}: cannot write ({e.strerror or e})") from None


def _query_streamed(release, stmts, estimator, engine, out):
    """``query --engine spark|stream``: WHERE counts on a randomized release, streamed."""
    import pandas as pd

    from .engine import query_on_engine

    est = query_on_engine(release, stmts, estimator)
    frame = pd.DataFrame({"query": [s if isinstance(s, str) else s.text for s in stmts], "estimate": est})
    if out:
        _write_frame(frame, out)
        click.echo(f"answered {len(stmts)} statement(s) ({engine} engine, streamed) → {out}")
        return
    click.echo(frame.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    click.echo(f"# {estimator or 'the default linear estimator'}, streamed over the release's parts "
               f"({engine} engine): estimates only, no intervals (use --engine local for them)")


#: what the demo's custodian declares as needing no protection: EDU's three commonest values
#: (children, high-school graduates, some college) are no secret worth a bucket of their own
DEMO_NOT_SENSITIVE = {"edu": ("Children", "High school graduate", "Some college but no degree")}


@cli.command()
@click.option("--dataset", type=click.Choice(DATASET_NAMES), default="edu", show_default=True)
@click.option("--theta", type=float, default=8.0, show_default=True)
@click.option("--queries", "n_queries", type=int, default=1000, show_default=True)
@click.option("--out", "-o", type=click.Path(file_okay=False), default="ppdp-demo-release", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--not-sensitive", multiple=True, metavar="VALUE",
              help="A sensitive-attribute value the custodian declares as needing no protection (repeatable; "
                   "default for edu: its three commonest values, as docs/tutorial.md declares them).")
def demo(dataset, theta, n_queries, out, seed, not_sensitive):
    """The main job on bundled data: publish a table under F'-privacy, verify it, and
    answer an anatomy workload (prints the verify result and a utility summary). Safe by
    default: the values that need protecting are declared (every value but ``--not-sensitive``),
    and a release that would disclose one of them with certainty is refused."""
    import time

    from .. import datasets as ds
    from ..api import publish, verify
    from ..mechanisms.bucketization import FPrivacy
    from ..queries import answer_exact
    from ..queries.workloads import anatomy_workload
    from ..releases.base import load_release

    t = ds.load(dataset)
    click.echo(f"{dataset}: {t.n_rows:,} rows, SA = {t.sa} ({len(t.domain(t.sa))} values)")
    common = tuple(not_sensitive) or DEMO_NOT_SENSITIVE.get(dataset, ())
    protected = [v for v in t.domain(t.sa) if v not in common]
    if common:
        click.echo(f"declared as needing no protection: {', '.join(common)}; the other {len(protected)} values are sensitive")
    t0 = time.perf_counter()
    rel = publish(t, FPrivacy(theta=theta, sensitive_values=protected if common else None), seed=seed)
    t1 = time.perf_counter()
    rel.save(out, overwrite=True)  # replaces an earlier demo release, never anything else
    rep = verify(load_release(out), t)
    click.echo(f"F'-privacy θ={theta}: published to {out}/ in {t1 - t0:.2f} s")
    click.echo(str(rep))
    wl = anatomy_workload(t, n_queries, 0.01, seed=seed)
    act = answer_exact(t, wl)
    t2 = time.perf_counter()
    est = load_release(out).answer(wl)
    t3 = time.perf_counter()
    rel_err = np.abs(act - est) / act
    click.echo(f"  anatomy workload ({n_queries} queries, selectivity 1%): mean relative error {rel_err.mean():.3f}, "
               f"median {np.median(rel_err):.3f}; estimated in {t3 - t2:.2f} s")
    raise SystemExit(0 if rep.ok else 1)


@cli.command()
@click.argument("release", type=click.Path(exists=True, file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["csv", "parquet"]), default="csv", show_default=True,
              help="File format of the copies.")
@click.option("--out", "-o", type=click.Path(file_okay=False), required=True, help="Directory for the copies (created).")
def export(release, fmt, out):
    """Copies of a release's tables for tools without Parquet or ppdp: CSV (text cells a
    spreadsheet would run as formulas get a leading ') or Parquet. Histogram cells and
    partitions get one label column per dimension (<dim>_label, <dim>_lo_label, …) beside the
    integer cell indices; a README.md whose recipes read the copies, and the manifest, are written
    beside them."""
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    from ..releases.base import load_release
    from ..releases.readme import README_NAME, render_readme
    from ..releases.storage import csv_safe_array

    rel = load_release(release)
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    written = []
    for name, t in rel.tables.items():
        cols = {c: t.column(c) for c in t.column_names}
        if rel.family == "histogram":
            for dim, labels in rel.domains.items():
                lab = pa.array(list(labels), pa.string())
                for suffix in ("", "_lo", "_hi"):
                    if dim + suffix in cols:
                        idx = pa.array(np.asarray(cols[dim + suffix].to_numpy(), dtype=np.int64))
                        cols[f"{dim}{suffix}_label"] = pc.take(lab, idx)
        if fmt == "csv":
            path = d / f"{name}.csv"
            pcsv.write_csv(pa.table({c: csv_safe_array(v) for c, v in cols.items()}), path)
        else:
            path = d / f"{name}.parquet"
            pq.write_table(pa.table(cols), path, compression="zstd")
        written.append(path)
    (d / README_NAME).write_text(render_readme(rel.manifest, fmt), encoding="utf-8")
    (d / "manifest.json").write_text(json.dumps(rel.manifest, indent=2, default=str), encoding="utf-8")
    click.echo(f"exported {len(written)} table(s) as {fmt} → {d}/: " + ", ".join(p.name for p in written)
               + f", {README_NAME}, manifest.json")
