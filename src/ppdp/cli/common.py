"""Options shared by subcommands: the input table, roles, seed and output directory."""

from __future__ import annotations

import functools

import click

from ..datasets import names as _dataset_names
from ..errors import PpdpError

#: the bundled tables (``--dataset``)
DATASET_NAMES = tuple(_dataset_names())


def input_options(f):
    """INPUT (CSV/Parquet path) or --dataset, plus --quasi / --sensitive / --missing / -n."""

    @click.argument("input_path", metavar="[INPUT]", required=False, type=click.Path(dir_okay=False))
    @click.option("--dataset", type=click.Choice(DATASET_NAMES), help="Use a bundled table instead of INPUT.")
    @click.option("--quasi", multiple=True, help="Quasi-identifier column (repeatable; default: the dataset's).")
    @click.option("--sensitive", multiple=True, help="Sensitive column (repeatable; default: the dataset's).")
    @click.option("--missing", type=click.Choice(["error", "category"]), default="error", show_default=True,
                  help="Missing values ('?' or empty): an error, or an explicit category.")
    @click.option("-n", "--rows", "n_rows", type=int, default=None, help="Use a seeded sample of this many rows (OCC-n / EDU-n).")
    @functools.wraps(f)
    def wrapper(*args, input_path=None, dataset=None, quasi=(), sensitive=(), missing="error", n_rows=None, **kw):
        kw["table"] = load_table(input_path, dataset, quasi, sensitive, missing, n_rows)
        return f(*args, **kw)

    return wrapper


def load_table(input_path, dataset, quasi, sensitive, missing="error", n_rows=None, seed=0):
    from .. import datasets
    from ..table import Table

    if (input_path is None) == (dataset is None):
        raise PpdpError(f"give exactly one input: a CSV/Parquet path or --dataset {'|'.join(DATASET_NAMES)}")
    if n_rows is not None and n_rows <= 0:
        raise PpdpError(f"-n/--rows must be positive, got {n_rows}")
    if dataset is not None:
        t = datasets.load(dataset, n=n_rows, seed=seed)
        if sensitive and not quasi:  # a default quasi column named as sensitive becomes sensitive
            quasi = tuple(c for c in t.quasi if c not in sensitive)
        if quasi or sensitive:
            t = t.with_roles(list(quasi) or None, list(sensitive) or None)
        return t
    if not sensitive and not quasi:  # a histogram release has dimensions (quasi) but no SA
        raise PpdpError("--sensitive (or --quasi) is required with an input file")
    t = Table.read(input_path, quasi=list(quasi), sensitive=list(sensitive), missing=missing)
    if n_rows is not None:
        t, _ = t.sample(n_rows, seed)
    return t


def seed_option(f):
    return click.option("--seed", type=int, default=None,
                        help="Make the run reproducible (the release is then marked not fit for publication).")(f)


def out_option(f):
    return click.option("--out", "-o", "out", required=True, type=click.Path(file_okay=False),
                        help="Release directory to write (must not exist).")(f)


def finish_publish(release, out):
    """Save atomically, verify, and print a one-screen summary; returns the verify report."""
    from ..api import verify

    path = release.save(out)
    rep = verify(release)
    m = release.manifest
    click.echo(f"published {m['mechanism']} release to {path}")
    click.echo(f"  rows: input {m['n_input']}, published {m['n_published']}, dropped {m['dropped']}")
    click.echo(f"  seed: {m['seed']}" + ("" if m.get("fit_for_publication") else "  (seeded: NOT fit for publication)"))
    if "disclosure" in m:
        from ..claims import disclosure_statement

        click.echo(f"  {disclosure_statement(m['disclosure'])}")
    click.echo(str(rep))
    return rep


def load_release_and_source(release, input_path=None, dataset=None, n_rows=None):
    """A release directory and, when --input/--dataset is given, its source table (roles
    from the release's schema; missing values kept as a category)."""
    from ..releases.base import load_release

    rel = load_release(release)
    table = None
    if input_path or dataset:
        sch = rel.schema
        table = load_table(input_path, dataset, sch.get("quasi", []), sch.get("sensitive", []), "category", n_rows)
    return rel, table
