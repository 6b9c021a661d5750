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
    @click.option("--numeric", multiple=True, help=NUMERIC_HELP)
    @functools.wraps(f)
    def wrapper(*args, input_path=None, dataset=None, quasi=(), sensitive=(), missing="error", n_rows=None, numeric=(),
                **kw):
        kw["table"] = load_table(input_path, dataset, quasi, sensitive, missing, n_rows, numeric=numeric)
        return f(*args, **kw)

    return wrapper


#: help of the --numeric input option
NUMERIC_HELP = ("Column of an input file holding numbers (repeatable or commas): ordered by value, non-finite "
                "values refused. Every other column is read as text, exactly as written.")


def split_names(values) -> tuple[str, ...]:
    """Names given repeated, several after one flag, or with commas."""
    return tuple(dict.fromkeys(x.strip() for v in values or () for x in str(v).split(",") if x.strip()))


def check_new_out(out, flag: str = "--out") -> None:
    """``out`` must not exist yet (one clear error, naming the flag, for an unusable path)."""
    from pathlib import Path

    try:
        exists = Path(out).exists() or Path(out).is_symlink()
    except OSError as e:
        raise PpdpError(f"{flag} {str(out)!r}: unusable path ({e.strerror or e})") from None
    if exists:
        raise PpdpError(f"{flag} {str(out)!r} exists; choose a new directory")
    check_out_dir(out, flag)


def check_out_dir(out, flag: str = "--out") -> None:
    """An output directory (may exist) whose path is usable: not a file, no file among its parents."""
    from pathlib import Path

    p = Path(out)
    try:
        for q in (p, *p.parents):
            if q.exists():
                if not q.is_dir():
                    what = "is a file" if q == p else f"has the file {str(q)!r} as a parent"
                    raise PpdpError(f"{flag} {str(out)!r} {what}; give a directory path")
                break
    except OSError as e:
        raise PpdpError(f"{flag} {str(out)!r}: unusable path ({e.strerror or e})") from None


def load_table(input_path, dataset, quasi, sensitive, missing="error", n_rows=None, seed=0, numeric=()):
    from .. import datasets
    from ..table import Table

    if (input_path is None) == (dataset is None):
        raise PpdpError(f"give exactly one input: a CSV/Parquet path or --dataset {'|'.join(DATASET_NAMES)}")
    if n_rows is not None and n_rows <= 0:
        raise PpdpError(f"-n/--rows must be positive, got {n_rows}")
    numeric = split_names(numeric)
    if dataset is not None:
        if n_rows is not None:
            _check_sample_size(n_rows, datasets.load(dataset).n_rows)
        t = datasets.load(dataset, n=n_rows, seed=seed)
        text = [c for c in numeric if c in t.column_names and t.numeric_values(c) is None]
        if text:
            raise PpdpError(f"--numeric {text[0]}: the bundled table {dataset!r} has it as text")
        if sensitive and not quasi:  # a default quasi column named as sensitive becomes sensitive
            quasi = tuple(c for c in t.quasi if c not in sensitive)
        if quasi or sensitive:
            t = t.with_roles(list(quasi) or None, list(sensitive) or None)
        return t
    if not sensitive and not quasi:  # a histogram release has dimensions (quasi) but no SA
        raise PpdpError("--sensitive (or --quasi) is required with an input file")
    t = Table.read(input_path, quasi=list(quasi), sensitive=list(sensitive), missing=missing,
                   **({"numeric": list(numeric)} if numeric else {}))
    if n_rows is not None:
        _check_sample_size(n_rows, t.n_rows)
        t, _ = t.sample(n_rows, seed)
    return t


def _check_sample_size(n_rows: int, n_table: int) -> None:
    """-n draws without replacement: more rows than the table holds would publish the same
    person several times, each with its own randomisation (a majority vote undoes it)."""
    if n_rows > n_table:
        raise PpdpError(f"-n/--rows {n_rows} exceeds the {n_table} rows of the table; a sample draws each row at most once")


def seed_option(f):
    return click.option("--seed", type=int, default=None,
                        help="Make the run reproducible (the release is then marked not fit for publication).")(f)


def out_option(f):
    return click.option("--out", "-o", "out", required=True, type=click.Path(file_okay=False),
                        help="Release directory to write (must not exist).")(f)


def finish_publish(release, out):
    """Save atomically, verify, and print a one-screen summary; returns the verify report."""
    from ..api import verify
    from ..releases.base import custodian_path

    try:
        path = release.save(out)
    except OSError as e:
        raise PpdpError(f"--out {str(out)!r}: cannot write the release ({e.strerror or e})") from None
    except PpdpError as e:  # the storage layer's own clear errors: name the flag
        raise type(e)(str(e) if "--out" in str(e) else f"--out: {e}") from None
    rep = verify(release)
    m = release.manifest
    click.echo(f"published {m['mechanism']} release to {path}")
    click.echo(f"  rows: input {m['n_input']}, published {m['n_published']}, dropped {m['dropped']}")
    if m.get("fit_for_publication"):
        click.echo("  randomness: cryptographically secure (fit for publication)")
    else:
        click.echo(f"  seeded test run: NOT fit for publication (the seed is kept in {custodian_path(path)}, not in the release)")
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
        # the source's numeric columns are those the release records as numeric
        nums = sch.get("numeric") if isinstance(sch.get("numeric"), dict) else {}
        declared = [c for c, v in nums.items() if v is not None] if input_path else []
        table = load_table(input_path, dataset, sch.get("quasi", []), sch.get("sensitive", []), "category", n_rows,
                           numeric=declared)
    return rel, table
