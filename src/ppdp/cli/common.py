"""Options shared by subcommands: the input table, roles, seed and output directory."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import click

from ..datasets import names as _dataset_names
from ..errors import PpdpError
from ..schema import CONTINUOUS_SA_VALUES

#: the bundled tables (``--dataset``)
DATASET_NAMES = tuple(_dataset_names())


#: help of the --numeric input option
NUMERIC_HELP = ("Column of an input file holding numbers (repeatable or commas): ordered by value, non-finite "
                "values refused. Every other column is read as text, exactly as written.")


def file_option_params() -> list[click.Option]:
    """How to read an input file, as flags; each also exists as a key of a schema file
    (``--schema``, see docs/schema.md) and the flag wins over the file."""
    return [
        click.Option(["--schema", "schema_path"], type=click.Path(dir_okay=False),
                     help="Schema file (TOML): how to read INPUT and what each column is (roles, domains, bins, "
                          "sensitive values); the flags below override it. Start one with `ppdp schema infer INPUT`."),
        click.Option(["--sep"], default=None, metavar="SEP",
                     help="Field separator: ',', ', ' (comma and spaces), ';', '|', 'tab' …  [default: ,]"),
        click.Option(["--header/--no-header", "header"], default=None,
                     help="Whether the first row holds the column names  [default: header]."),
        click.Option(["--names"], default=None, metavar="A,B,…",
                     help="Column names, comma-separated (required with --no-header; with a header, replaces it)."),
        click.Option(["--na"], multiple=True, metavar="MARKER",
                     help="A missing-value marker besides the empty cell (repeatable: --na '?' --na NA)  "
                          "[default: ?]."),
        click.Option(["--encoding"], default=None, help="Text encoding of INPUT  [default: utf-8]."),
        click.Option(["--strip/--no-strip", "strip"], default=None,
                     help="Strip spaces around values (always done with --sep ', ')  [default: no-strip]."),
        click.Option(["--thousands"], default=None, metavar="SEP",
                     help="Thousands separator of numbers written \"1,018.52\" (',', '.', ' ', \"'\", '_'): removed "
                          "from every column holding only numbers  [default: none]."),
        click.Option(["--skip"], default=None, type=int, metavar="N",
                     help="Lines above the header to skip (a title, a date, a blank line)  [default: 0]."),
        click.Option(["--decimal"], default=None, type=click.Choice([".", ","]),
                     help="Decimal mark of numbers (',': \"12,5\" is twelve and a half)  [default: .]."),
        click.Option(["--lowercase/--no-lowercase", "lowercase"], default=None,
                     help="Read every text value in lower case ('WHITE', 'White' and 'white' are one label)  "
                          "[default: no-lowercase]."),
        click.Option(["--bin", "bin_specs"], multiple=True, metavar="COL=E0,E1,…",
                     help="Bin a numeric column with these edges: [E0, E1), [E1, E2), …, the last closed "
                          "(repeatable; a schema file also takes equal-width bins)."),
        click.Option(["--allow-continuous-sa"], is_flag=True, default=False,
                     help=f"Publish a numeric sensitive attribute with more than {CONTINUOUS_SA_VALUES} distinct "
                          "values unbinned (each value its own category)."),
    ]


#: the keyword names of :func:`file_option_params` (what :func:`input_spec` takes)
FILE_OPTION_KEYS = ("schema_path", "sep", "header", "names", "na", "encoding", "strip", "thousands", "decimal", "lowercase", "skip",
                    "bin_specs", "allow_continuous_sa")


def file_options(f):
    """The file flags (:func:`file_option_params`) on a command that reads a source table
    with --input (verify, audit); they arrive as keywords (:data:`FILE_OPTION_KEYS`)."""
    params = [p for p in file_option_params() if p.name not in ("bin_specs", "allow_continuous_sa")]
    f.__click_params__ = list(getattr(f, "__click_params__", [])) + list(reversed(params))  # type: ignore[attr-defined]
    return f


def input_options(f):
    """INPUT (CSV/Parquet path) or --dataset, --schema and the file flags, --quasi /
    --sensitive / --missing / -n."""

    @functools.wraps(f)
    def wrapper(*args, input_path=None, dataset=None, quasi=(), sensitive=(), missing=None, n_rows=None, numeric=(),
                **kw):
        spec = {k: kw.pop(k) for k in FILE_OPTION_KEYS if k in kw}
        sch = input_schema(input_path, dataset, quasi=quasi, sensitive=sensitive, missing=missing, numeric=numeric,
                           **spec)
        kw["table"] = load_table(input_path, dataset, quasi, sensitive, missing or None, n_rows, schema=sch,
                                 allow_continuous_sa=spec.get("allow_continuous_sa", False))
        kw["schema"] = sch
        return f(*args, **kw)

    params = [
        click.Argument(["input_path"], metavar="[INPUT]", required=False, type=click.Path(dir_okay=False)),
        click.Option(["--dataset"], type=click.Choice(DATASET_NAMES), help="Use a bundled table instead of INPUT."),
        click.Option(["--quasi"], multiple=True, help="Quasi-identifier column (repeatable; default: the dataset's "
                                                       "or the schema's)."),
        click.Option(["--sensitive"], multiple=True, help="Sensitive column (repeatable; default: the dataset's or "
                                                           "the schema's)."),
        click.Option(["--missing"], multiple=True, metavar=MISSING_METAVAR,
                     help="Missing values (empty or a --na marker): an error, an explicit category, or drop the row; "
                          "POLICY sets every column, COLUMN=POLICY one column (repeatable)  [default: error, or the "
                          "schema's per-column / file.missing]."),
        click.Option(["-n", "--rows", "n_rows"], type=int, default=None,
                     help="Use a seeded sample of this many rows (OCC-n / EDU-n)."),
        click.Option(["--numeric"], multiple=True, help=NUMERIC_HELP),
        *file_option_params(),
    ]
    wrapper.__click_params__ = list(getattr(wrapper, "__click_params__", [])) + list(reversed(params))  # type: ignore[attr-defined]
    return wrapper


def parse_bin_flags(values) -> dict[str, tuple[float, ...]]:
    """``--bin age=17,30,50,91`` → {"age": (17.0, 30.0, 50.0, 91.0)}."""
    out: dict[str, tuple[float, ...]] = {}
    for v in values or ():
        col, eq, edges = str(v).partition("=")
        if not eq or not col.strip():
            raise PpdpError(f"--bin {v!r}: write COLUMN=E0,E1,… (e.g. --bin age=17,30,50,91)")
        try:
            nums = tuple(float(x) for x in edges.split(",") if x.strip())
        except ValueError:
            raise PpdpError(f"--bin {v!r}: the edges must be numbers") from None
        if len(nums) < 2 or any(b <= a for a, b in zip(nums, nums[1:])) or not all(math.isfinite(x) for x in nums):
            raise PpdpError(f"--bin {v!r}: give at least two finite, strictly increasing edges")
        out[col.strip()] = nums
    return out


MISSING_METAVAR = "[COLUMN=]POLICY"


def parse_missing_flags(values) -> tuple[str | None, dict[str, str]]:
    """``--missing drop --missing income=category`` → ("drop", {"income": "category"}): at most
    one policy for every column, and one per named column (a string is one flag's value)."""
    from ..schema import MISSING_POLICIES

    if values is None:
        return None, {}
    if isinstance(values, str):
        values = (values,)
    whole: str | None = None
    per: dict[str, str] = {}
    choices = ", ".join(MISSING_POLICIES)
    for v in values:
        col, eq, pol = str(v).rpartition("=")
        col, pol = col.strip(), pol.strip()
        if pol not in MISSING_POLICIES:
            raise PpdpError(f"--missing {v!r}: the policy must be one of {choices} (write POLICY for every column, "
                            f"or COLUMN=POLICY for one)")
        if eq and not col:
            raise PpdpError(f"--missing {v!r}: name the column before '=' (COLUMN=POLICY)")
        if not eq:
            if whole is not None and whole != pol:
                raise PpdpError(f"--missing given twice for every column ({whole} and {pol}); name a column for "
                                f"the second (COLUMN={pol})")
            whole = pol
        elif per.get(col, pol) != pol:
            raise PpdpError(f"--missing given twice for column {col!r} ({per[col]} and {pol})")
        else:
            per[col] = pol
    return whole, per


def input_schema(input_path, dataset, schema_path=None, sep=None, header=None, names=None, na=(), encoding=None,
                 strip=None, bin_specs=(), quasi=(), sensitive=(), missing=None, numeric=(), thousands=None,
                 decimal=None, lowercase=None, skip=None, **_):
    """The schema of an input file: the ``--schema`` file (if any) with the flags applied on
    top; None for a bundled ``--dataset`` (file flags are then an error)."""
    from ..schema import THOUSANDS, Schema, check_encoding, load_schema, parse_sep

    file_flags = {"--schema": schema_path, "--sep": sep, "--header/--no-header": header, "--names": names,
                  "--na": na or None, "--encoding": encoding, "--strip/--no-strip": strip, "--thousands": thousands,
                  "--decimal": decimal, "--lowercase/--no-lowercase": lowercase, "--skip": skip}
    if dataset is not None:
        given = [k for k, v in file_flags.items() if v is not None]
        if given:
            raise PpdpError(f"{given[0]} describes an input file; --dataset {dataset} is a bundled table")
        return None
    sch = load_schema(schema_path) if schema_path is not None else Schema()
    if skip is not None and skip < 0:
        raise PpdpError(f"--skip: a number of lines ≥ 0, got {skip}")
    if thousands is not None and thousands not in THOUSANDS:
        raise PpdpError(f"--thousands: must be one of {', '.join(map(repr, THOUSANDS))}, got {thousands!r}")
    names_t = tuple(x.strip() for x in names.split(",")) if names is not None else None
    if names_t is not None and (not all(names_t) or len(set(names_t)) != len(names_t)):
        raise PpdpError(f"--names {names!r}: give distinct, non-empty names separated by commas")
    whole, per_column = parse_missing_flags(missing)
    sch = sch.with_file(sep=parse_sep(sep) if sep is not None else None, header=header, names=names_t,
                        na=tuple(na) if na else None, encoding=check_encoding(encoding) if encoding else None,
                        strip=strip, thousands=thousands, decimal=decimal,
                        lowercase=lowercase, skip=skip).with_missing(whole, per_column)
    if not sch.file.header and sch.file.names is None:
        raise PpdpError("--no-header needs --names A,B,… (or file.names in the schema): the file has no row of names")
    return sch.with_columns(split_names(quasi), split_names(sensitive), split_names(numeric),
                            parse_bin_flags(bin_specs))


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


def check_custodian_out(custodian, out) -> None:
    """``--custodian FILE``, when given: a new file, not inside ``--out`` (one clear error)."""
    from ..releases.storage import lies_within

    if custodian is None:
        return
    c = Path(custodian)
    try:
        exists = c.exists() or c.is_symlink()
        inside = lies_within(c, out)
    except OSError as e:
        raise PpdpError(f"--custodian {str(custodian)!r}: unusable path ({e.strerror or e})") from None
    if exists:
        raise PpdpError(f"--custodian {str(custodian)!r} exists; choose a new file")
    if inside:
        raise PpdpError(f"--custodian {str(custodian)!r} lies inside --out {str(out)!r}, which is handed out; "
                        "keep it elsewhere")
    check_out_dir(c.parent, "--custodian")


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


def load_table(input_path, dataset, quasi, sensitive, missing=None, n_rows=None, seed=0, numeric=(), schema=None,
               allow_continuous_sa=False):
    """The input table: a bundled ``dataset`` (roles from the flags) or ``input_path`` read as
    ``schema`` says (see :func:`input_schema`; built from the flags when not given)."""
    from .. import datasets
    from ..schema import continuous_sensitive, read_table

    if (input_path is None) == (dataset is None):
        raise PpdpError(f"give exactly one input: a CSV/Parquet path or --dataset {'|'.join(DATASET_NAMES)}")
    if n_rows is not None and n_rows <= 0:
        raise PpdpError(f"-n/--rows must be positive, got {n_rows}")
    numeric = split_names(numeric)
    quasi, sensitive = split_names(quasi), split_names(sensitive)
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
    if schema is None:
        schema = input_schema(input_path, None, quasi=quasi, sensitive=sensitive, missing=missing, numeric=numeric)
    if not schema.sensitive and not schema.quasi:  # a histogram release has dimensions (quasi) but no SA
        raise PpdpError("--sensitive (or --quasi) is required with an input file, or roles in a --schema file "
                        "(`ppdp schema infer INPUT` writes a starting one)")
    t = read_table(input_path, schema)
    if not allow_continuous_sa:
        cont = continuous_sensitive(t)
        if cont:
            c, k = cont[0]
            raise PpdpError(
                f"the sensitive attribute {c!r} is numeric with {k} distinct values: as categories, each value would "
                f"be its own class; bin it (--bin {c}=E0,E1,… or bins = {{ width = …, min = …, max = … }} under "
                f"[columns.{c}] in the schema), or pass --allow-continuous-sa")
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


def finish_publish(release, out, custodian=None):
    """Save atomically (``custodian``: where the custodian-side file goes, else beside the
    release), verify, and print a one-screen summary; returns the verify report."""
    from ..releases.base import custodian_path

    try:
        path = release.save(out, custodian_file=custodian)
    except OSError as e:
        raise PpdpError(f"--out {str(out)!r}: cannot write the release ({e.strerror or e})") from None
    except PpdpError as e:  # the storage layer's own clear errors: name the flag
        flag = "--custodian" if custodian is not None and "custodian file" in str(e) else "--out"
        raise type(e)(str(e) if flag in str(e) else f"{flag}: {e}") from None
    cpath = custodian_path(path) if custodian is None else Path(custodian)
    return report_release(release, path, cpath)


def report_release(release, path, cpath):
    """Verify a saved release and print the one-screen summary (any engine); returns the
    verify report."""
    from ..api import verify

    rep = verify(release)
    m = release.manifest
    click.echo(f"published {m['mechanism']} release to {path}")
    if getattr(release, "n_is_estimate", False):  # ε-DP: the exact row count is never published
        click.echo(f"  rows: the released counts sum to {m['n_published']} (an ε-DP estimate, not the input's row count; "
                   "the certificate's noisy_total, when there is one, is the rule's own noisy count, drawn apart)")
    else:
        click.echo(f"  rows: input {m['n_input']}, published {m['n_published']}, dropped {m['dropped']}")
    mv = m.get("missing_values")
    if isinstance(mv, dict) and "rows_read" in mv:
        click.echo(f"  missing values: {mv['rows_dropped']} of {mv['rows_read']} rows read left out (a missing value "
                   f"in {', '.join(mv['columns'])})")
    if m.get("fit_for_publication"):
        click.echo("  randomness: cryptographically secure (fit for publication)")
    else:
        click.echo(f"  seeded test run: NOT fit for publication (the seed is kept in {cpath}, not in the release)")
    if release.custodian:
        click.echo(f"  custodian file: {cpath} (keep it; never hand it out)")
    if "disclosure" in m:
        from ..claims import disclosure_statement

        click.echo(f"  {disclosure_statement(m['disclosure'])}")
    click.echo(str(rep))
    return rep


def load_release_and_source(release, input_path=None, dataset=None, n_rows=None, **file_spec):
    """A release directory and, when --input/--dataset is given, its source table: read as
    ``--schema`` and the file flags say, with the roles, numeric columns and bins the release
    records (missing values kept as a category)."""
    from ..releases.base import load_release

    rel = load_release(release)
    return rel, release_source(rel.schema, input_path, dataset, n_rows, missing_values=rel.manifest.get("missing_values"),
                               **file_spec)


def release_source(sch, input_path=None, dataset=None, n_rows=None, missing_values=None, **file_spec):
    """The source table of a release whose manifest schema is ``sch``, read as the release
    records it (see :func:`load_release_and_source`; ``missing_values``: the manifest's entry,
    whose columns left out their rows with a missing value); None without --input/--dataset."""
    from ..schema import ColumnSpec, bin_edges
    from ..table import MISSING_LABEL

    table = None
    if input_path or dataset:
        quasi, sensitive = list(sch.get("quasi", [])), list(sch.get("sensitive", []))
        spec = None
        if input_path:
            spec = input_schema(input_path, None, missing="category", **file_spec)
            # roles, numeric columns and bins are the release's: the source is read as it was published
            nums = sch.get("numeric") if isinstance(sch.get("numeric"), dict) else {}
            cols = {}
            mv = missing_values  # columns whose missing values left their rows out
            drop = set(mv.get("columns", [])) if isinstance(mv, dict) and mv.get("policy") == "drop" else set()
            for c in dict.fromkeys([*quasi, *sensitive]):
                dom = (sch.get("domains") or {}).get(c) or []
                edges = bin_edges(dom)
                was = spec.columns.get(c, ColumnSpec())
                role = "sensitive" if c in sensitive else "quasi"
                if edges is not None:
                    cols[c] = ColumnSpec(role, "numeric", None, _edges_spec(edges), None)
                else:
                    typ = "numeric" if nums.get(c) is not None else "text"
                    # a domain the schema declares: the release's (the public domain it was published in)
                    declared = tuple(x for x in dom if x != MISSING_LABEL) if was.domain is not None else None
                    cols[c] = ColumnSpec(role, typ, declared, None, was.sensitive_values)
            from dataclasses import replace

            cols = {c: replace(s, missing="drop") if c in drop else s for c, s in cols.items()}
            spec = replace(spec, columns=cols)
        if dataset is not None and not sensitive:  # a histogram: its dimensions, the dataset's SA among them
            return load_table(None, dataset, (), (), "category", n_rows).with_roles(quasi, [])
        table = load_table(input_path, dataset, quasi, sensitive, "category", n_rows, schema=spec,
                           allow_continuous_sa=True)
    return table


def _edges_spec(edges):
    from ..schema import BinSpec

    return BinSpec(edges=tuple(edges))
