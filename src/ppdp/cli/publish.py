"""``ppdp publish <mechanism>``: one command per registered mechanism, generated.

Every command has the same input options (INPUT path or ``--dataset``, ``--quasi``,
``--sensitive``, ``--missing``, ``-n/--rows``, ``--seed``, ``--out/-o``) and one option per
mechanism parameter, derived from the parameter's constraint (:meth:`Constraint.cli`) and help
(``_parameter_help``): ``snake_case`` becomes ``--kebab-case`` unless the class spells it
otherwise in ``_cli_names``; a parameter without a default is required. A mechanism class
defined anywhere in the registry's plugin packages gets its command without an edit here.

Options that take labels (``--dims``, ``--sensitive``, ``--quasi`` …) accept several values
after one flag (``--dims age hours_per_week``), the flag repeated, or commas.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Any, Mapping

import click

from .. import registry
from ..errors import ParameterError, PpdpError
from ..validation import Labels, Optional, to_json
from . import cli
from .common import (DATASET_NAMES, FILE_OPTION_KEYS, MISSING_METAVAR, NUMERIC_HELP, check_custodian_out,
                     check_new_out, file_option_params, input_schema, load_table, parse_missing_flags)
from .engine import engine_params

#: file suffixes that make a positional argument the INPUT table
TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


# ------------------------------------------------------------------------------ flags
def option_names(cls, param: str) -> tuple[str, ...]:
    """The CLI spelling(s) of one mechanism parameter (``--kebab-case`` unless aliased)."""
    alias = getattr(cls, "_cli_names", {}).get(param)
    if alias is None:
        return ("--" + param.replace("_", "-"),)
    return (alias,) if isinstance(alias, str) else tuple(alias)


def flag_of(cls, param: str) -> str:
    """The main flag naming ``param`` in messages (``--theta``; ``--keep-fake-flag`` for a switch)."""
    return option_names(cls, param)[0].split("/")[0]


def _inner(constraint):
    return constraint.inner if isinstance(constraint, Optional) else constraint


def _greedy(constraint) -> bool:
    """Does the option take several values after one flag (a list of labels)?"""
    return isinstance(_inner(constraint), Labels)


#: click destination of a mechanism parameter (prefixed: a parameter may be called ``seed`` …)
DEST_PREFIX = "p_"


def parameter_options(cls) -> list[click.Option]:
    """One click option per parameter of ``cls``, from its constraint, default and help."""
    defaults = cls.param_defaults()
    taken = {o for p in _input_params(cls) for o in getattr(p, "opts", ())} | {"-h", "--help"}
    opts = []
    for name, con in cls._parameter_constraints.items():
        default = defaults.get(name, inspect.Parameter.empty)
        required = default is inspect.Parameter.empty
        kw: dict[str, Any] = dict(con.cli())
        help_text = cls._parameter_help.get(name, "")
        names = option_names(cls, name)
        clash = [f for n in names for f in n.split("/") if f in taken]
        if clash:
            raise TypeError(f"{cls.__name__}.{name}: CLI flag {clash[0]} is taken by the shared input options; "
                            f"give it another spelling in {cls.__name__}._cli_names")
        taken.update(f for n in names for f in n.split("/"))
        dest = DEST_PREFIX + name
        if kw.pop("flag", False):
            decl = names[0] if "/" in names[0] else f"{names[0]}/--no-{names[0][2:]}"
            opts.append(click.Option([decl, *names[1:], dest], default=bool(default) if not required else False,
                                     show_default=True, help=help_text))
            continue
        if not required and default is not None:
            help_text += f"  [default: {to_json(default)}]"
        opts.append(click.Option([*names, dest], required=required and not kw.get("multiple"), default=None,
                                 help=help_text, **kw))
    return opts


# ------------------------------------------------------------------------- input group
def _input_params(cls=None) -> list[click.Parameter]:
    declare = ([] if cls is not None and "sensitive_values" in cls._parameter_constraints else [
        click.Option(["--sensitive-value", "sensitive_value"], multiple=True,
                     help="A sensitive value that needs protecting (repeatable, several after one flag, or commas; "
                          "default: sensitive_values in the schema, else every value).")])
    return [
        click.Argument(["input_path"], metavar="[INPUT]", required=False, type=click.Path(dir_okay=False)),
        click.Option(["--dataset"], type=click.Choice(DATASET_NAMES), help="Use a bundled table instead of INPUT."),
        click.Option(["--quasi"], multiple=True,
                     help="Quasi-identifier / published column (repeatable, several after one flag, or commas; "
                          "default: the dataset's)."),
        click.Option(["--sensitive"], multiple=True,
                     help="Sensitive column (repeatable, several after one flag, or commas; default: the dataset's)."),
        click.Option(["--missing"], multiple=True, metavar=MISSING_METAVAR,
                     help="Missing values ('?' or empty): an error, an explicit category, or drop the row (counted in "
                          "the manifest); POLICY sets every column, COLUMN=POLICY one column (repeatable)  [default: "
                          "error, or the schema's per-column / file.missing; category for histogram dimensions read "
                          "from a file without a schema]."),
        click.Option(["-n", "--rows", "n_rows"], type=int, default=None,
                     help="Use a seeded sample of this many rows (as `ppdp verify -n`)."),
        click.Option(["--numeric"], multiple=True, help=NUMERIC_HELP + " Binned columns are numeric."),
        click.Option(["--seed"], type=int, default=None,
                     help="Make the run reproducible (the release is then marked not fit for publication)."),
        click.Option(["--out", "-o", "out"], required=True, type=click.Path(file_okay=False),
                     help="Release directory to write (must not exist)."),
        click.Option(["--custodian", "custodian"], type=click.Path(dir_okay=False), default=None,
                     help="Where to write the custodian-side file (the seed, which values are fake …; never "
                          "handed out) instead of beside the release (<out>.custodian.json); not inside --out."),
        click.Option(["--allow-disclosure", "--allow-full-disclosure", "allow_disclosure"], is_flag=True, default=False,
                     help="Publish even if the release discloses a sensitive value of some records with certainty "
                          "(recorded in the manifest; verify re-derives it)."),
        *declare,
        click.Option(["--allow-low-utility"], is_flag=True, default=False,
                     help="Publish an ε-DP histogram even if its noisy total is mostly noise at this --epsilon "
                          "(recorded in the manifest)."),
        click.Option(["--allow-no-quasi"], is_flag=True, default=False,
                     help="Publish a release without quasi-identifiers (only the sensitive column), or one in "
                          "which none of the protected values (--sensitive-value / sensitive_values) occurs."),
        *file_option_params(),
    ]


def _looks_like_input(token: str) -> bool:
    return token.lower().endswith(TABLE_SUFFIXES) or Path(token).is_file()


class PublishCommand(click.Command):
    """A publish command whose list options take several values after one flag."""

    def __init__(self, *a, greedy: set[str], **kw):
        super().__init__(*a, **kw)
        self.greedy = greedy

    def parse_args(self, ctx, args):
        valued = {o for p in self.params if isinstance(p, click.Option) and not p.is_flag for o in p.opts}
        out: list[str] = []
        i = 0
        while i < len(args):
            tok = args[i]
            if tok == "--":
                out += args[i:]
                break
            out.append(tok)
            i += 1
            if tok in valued and i < len(args):
                out.append(args[i])
                i += 1
                if tok in self.greedy:  # --dims a b c → --dims a --dims b --dims c
                    while i < len(args) and not args[i].startswith("-") and not _looks_like_input(args[i]):
                        out += [tok, args[i]]
                        i += 1
        return super().parse_args(ctx, out)


# ------------------------------------------------------------------------- the command
def _split(values) -> tuple[str, ...]:
    return tuple(x.strip() for v in values or () for x in str(v).split(",") if x.strip())


def _flag_error(cls, e: ParameterError) -> ParameterError:
    """Rewrite a ParameterError about a parameter so it names the CLI flag."""
    param = (e.param or "").split("[")[0]
    if param not in cls._parameter_constraints:
        return e
    flag = flag_of(cls, param)
    msg = str(e)
    msg = flag + msg[len(param):] if msg.startswith(param + " ") else f"{flag}: {msg}"
    for other in cls._parameter_constraints:  # Python spellings inside the text become flags too
        if "_" in other:
            msg = re.sub(rf"(?<![\w-]){other}(?!\w)", flag_of(cls, other), msg)
    return ParameterError(msg, param=e.param)


def build_mechanism(cls, values: dict[str, Any], extra: Mapping[str, Any] | None = None):
    """The mechanism from the click values (only what the user gave; the rest take defaults);
    ``extra``: Python values (from a schema file) for parameters the user did not give."""
    kwargs = dict(extra or {})
    for name, con in cls._parameter_constraints.items():
        v = values.get(DEST_PREFIX + name, values.get(name))
        if v is None or (isinstance(v, tuple) and not v):
            continue
        try:
            v = con.from_cli(v)
        except ParameterError as e:
            raise ParameterError(f"{flag_of(cls, name)} {e}", param=name) from None
        if v is not None:
            kwargs[name] = v
    missing = [n for n, prm in inspect.signature(cls.__init__).parameters.items()
               if n != "self" and prm.default is inspect.Parameter.empty
               and prm.kind in (prm.POSITIONAL_OR_KEYWORD, prm.KEYWORD_ONLY) and n not in kwargs]
    if missing:
        flags = ", ".join(flag_of(cls, n) for n in missing)
        raise ParameterError(f"{flags} {'is' if len(missing) == 1 else 'are'} required for "
                             f"'ppdp publish {cls.name}'", param=missing[0])
    try:
        return cls(**kwargs)
    except ParameterError as e:
        raise _flag_error(cls, e) from None


def _time_limited(mech) -> float | None:
    """Seconds of a time-limited solver run (method 'optimal' with a time_limit), for a progress bar."""
    limit = getattr(mech, "time_limit", None)
    return float(limit) if limit and getattr(mech, "method", None) == "optimal" else None


def _publish_with_progress(table, mech, seed, seconds: float, **publish_kw):
    """Run publish while a progress bar shows elapsed time against the solver's time limit."""
    import threading
    import time

    from tqdm import tqdm

    from ..api import publish as do_publish

    done = threading.Event()

    def tick():
        start = time.monotonic()
        with tqdm(total=round(seconds), desc=f"{mech.method} (time limit)", unit="s", file=sys.stderr, leave=False) as bar:
            while not done.wait(0.5):
                bar.n = min(round(time.monotonic() - start), round(seconds))
                bar.refresh()

    th = threading.Thread(target=tick, daemon=True)
    th.start()
    try:
        return do_publish(table, mech, seed=seed, **publish_kw)
    finally:
        done.set()
        th.join()


def summary_lines(release, already_shown=()) -> list[str]:
    """What to print after a publish: the release's own ``summary()`` if it has one, else the
    claim's statement and the certificate's scalar entries not ``already_shown`` (by verify)."""
    hook = getattr(release, "summary", None)
    if callable(hook):
        got = hook()
        return [got] if isinstance(got, str) else list(got)
    lines = []
    try:
        from ..claims import claim_of

        lines.append(f"  claim: {claim_of(release.manifest).statement()}")
    except (PpdpError, NotImplementedError):
        pass
    cert = release.manifest.get("certificate") or {}
    shown = []
    for k, v in cert.items():
        if k in already_shown:
            continue
        if isinstance(v, bool) or isinstance(v, (str, int)):
            shown.append(f"{k} {v}")
        elif isinstance(v, float):
            shown.append(f"{k} {v:.6g}")
        elif isinstance(v, (list, tuple)) and len(v) <= 8 and all(isinstance(x, (str, int, float)) for x in v):
            shown.append(f"{k} {list(v)}")
    if shown:
        lines.append("  certificate: " + ", ".join(shown))
    return lines


def _given(values: Mapping[str, Any], name: str) -> bool:
    v = values.get(DEST_PREFIX + name)
    return not (v is None or (isinstance(v, tuple) and not v))


def _refuse_data_dependent_bins(cls, sch, dims) -> None:
    """Quantile bins are computed from the data: a differentially private release would have to
    spend budget on them, which ppdp does not do; refuse with what to do instead."""
    if cls.family not in ("histogram", "answers"):
        return
    used = [c for c, b in sch.bins.items() if b.data_dependent and (dims is None or c in dims)]
    if used:
        c = used[0]
        raise PpdpError(f"column {c!r}: quantile bins are computed from the data, which an ε-DP release cannot do "
                        "without spending budget on them; give public edges instead (bins = [E0, E1, …] or "
                        f"bins = {{ width = …, min = …, max = … }} under [columns.{c}], or --bin {c}=E0,E1,…)")


def _schema_params(cls, mech, sch, table, values) -> dict[str, Any]:
    """Mechanism parameters a schema file supplies when their flags are not given: a
    histogram's bins (the edges of its binned dimensions) and public domains; the protected
    values (``sensitive_values``)."""
    from ..schema import bin_edges, public_domains

    cons = cls._parameter_constraints
    out: dict[str, Any] = {}
    dims = list(getattr(mech, "dims", None) or [])
    binned = {d: list(e) for d in dims if (e := bin_edges(table.domain(d))) is not None}
    if "bins" in cons and binned and not _given(values, "bins"):
        out["bins"] = binned
    if "domains" in cons and not _given(values, "domains"):
        doms = public_domains(table, sch, dims)  # a binned dimension only with its declared missing cell
        if doms:
            out["domains"] = doms
    if "sensitive_values" in cons and not _given(values, "sensitive_values") and sch.sensitive_values is not None:
        out["sensitive_values"] = list(sch.sensitive_values)
    if "domains" in cons and dims and not _given(values, "domains") and not _given(values, "bins"):
        undeclared = [d for d in dims if d not in binned and d not in out.get("domains", {})]
        if undeclared:
            d = undeclared[0]
            raise PpdpError(
                f"--dims {d}: its domain is not declared, and an ε-DP histogram must not read its cells off the rows "
                "(a value present only because of one person would reveal that person); declare every possible value "
                f"(domain = [\"…\", …] under [columns.{d}] in the schema, or --domains {d}=V1,V2,…) or bin it "
                f"(bins = … in the schema, or --bin {d}=E0,E1,…)")
    return out


def _check_protected(cls, mech, table, allow: bool) -> None:
    """A release that protects nothing is refused unless asked for: one without any
    quasi-identifier (only the sensitive column), or one where none of the protected values
    occurs in the table."""
    if allow or cls.family in ("histogram", "answers"):
        return
    if table.sensitive and not table.quasi:
        raise PpdpError("the release would hold no quasi-identifier, only the sensitive column: give --quasi COLUMN "
                        "(or role = \"quasi\" in the schema), or pass --allow-no-quasi")
    protected = getattr(mech, "sensitive_values", None)
    if protected is not None and table.sensitive:
        present = {lab for c in table.sensitive for lab, k in zip(table.domain(c), table.counts(c)) if k}
        if not set(protected) & present:
            raise PpdpError(f"none of the protected values {list(protected)} (--sensitive-value) occurs in the sensitive "
                            "column: the release would protect nothing; check the values, or pass --allow-no-quasi")


def _make_command(cls) -> click.Command:
    params = _input_params(cls) + engine_params("publish") + parameter_options(cls)
    greedy = {"--quasi", "--sensitive", "--sensitive-value"} | {o for name, con in cls._parameter_constraints.items() if _greedy(con)
                                           for o in option_names(cls, name)}
    has_dims = "dims" in cls._parameter_constraints
    doc = (inspect.getdoc(cls) or cls.__name__).strip()
    first = doc.split("\n\n")[0].replace("\n", " ")
    paper = f" ({cls.paper})" if getattr(cls, "paper", "") and cls.paper not in first else ""

    def callback(input_path, dataset, quasi, sensitive, missing, n_rows, seed, out, numeric=(), allow_disclosure=False,
                 allow_no_quasi=False, custodian=None, sensitive_value=(), allow_low_utility=False, **values):
        from ..api import publish as do_publish
        from ..releases.base import load_release
        from .common import finish_publish
        from .engine import check_engine, finish_engine_publish, publish_on_engine, spark_master

        spec = {k: values.pop(k) for k in FILE_OPTION_KEYS if k in values}
        engine, master = values.pop("engine", "local"), values.pop("spark_master", None)
        check_new_out(out)
        if engine != "local":
            check_engine(engine, custodian, master)
        check_custodian_out(custodian, out)
        if dataset is not None and "domains" in cls._parameter_constraints and not values.get(DEST_PREFIX + "domains"):
            values[DEST_PREFIX + "domains"] = (dataset,)  # a bundled table: its documented (public) domains
        quasi, sensitive = _split(quasi), _split(sensitive)
        sch = input_schema(input_path, dataset, quasi=quasi, sensitive=sensitive, missing=missing, numeric=numeric,
                           **spec)
        extra: dict[str, Any] = {}
        if has_dims and not _given(values, "dims"):
            dims = [*sch.quasi, *sch.sensitive] if sch is not None else []
            if not dims:
                raise ParameterError(f"{flag_of(cls, 'dims')} is required (the histogram's dimensions), or roles in "
                                     "a --schema file", param="dims")
            extra["dims"] = dims
        mech = build_mechanism(cls, values, extra)
        if sch is not None and has_dims:
            # a histogram reads its dimensions from the file: all of them published, none sensitive
            sch = sch.with_roles(quasi=list(mech.dims), sensitive=[])
            whole, per_column = parse_missing_flags(missing)
            if whole is None and not spec.get("schema_path"):
                sch = sch.with_missing("category", per_column)
            if isinstance(getattr(mech, "bins", None), Mapping):  # a binned column holds numbers
                sch = sch.with_columns(numeric=[c for c in mech.bins if c not in sch.bins])
        if sch is not None:
            _refuse_data_dependent_bins(cls, sch, getattr(mech, "dims", None))
        table = load_table(input_path, dataset, quasi, sensitive, missing or None, n_rows, schema=sch,
                           allow_continuous_sa=bool(spec.get("allow_continuous_sa")))
        if sch is not None:
            more = _schema_params(cls, mech, sch, table, values)
            if more:
                mech = build_mechanism(cls, values, {**extra, **more})
        _check_protected(cls, mech, table, allow_no_quasi)
        if engine != "local":
            if "sensitive_values" not in cls._parameter_constraints and (sensitive_value or (sch is not None and sch.sensitive_values)):
                raise PpdpError(f"--sensitive-value: --engine {engine} treats every sensitive value as sensitive; "
                                "declare the values with --engine local, or drop the declaration")
            try:
                publish_on_engine(engine, table, mech, out, seed, spark_master(master), allow_disclosure,
                                  allow_low_utility=allow_low_utility)
            except ParameterError as e:
                raise _flag_error(cls, e) from None
            done = load_release(out)
            if (warning := (done.manifest.get("utility") or {}).get("warning")):
                click.echo(f"warning: {warning}", err=True)
            rep = finish_engine_publish(out)
            for line in summary_lines(done, set(getattr(rep, "facts", {}) or {})):
                click.echo(line)
            return
        seconds = _time_limited(mech)
        declared = _split(sensitive_value) or (sch.sensitive_values if sch is not None else None)
        kw = {"allow_disclosure": allow_disclosure, "allow_low_utility": allow_low_utility,
              "sensitive_values": None if declared is None or cls.family in ("histogram", "answers") else list(declared)}
        try:
            release = (_publish_with_progress(table, mech, seed, seconds, **kw) if seconds
                       else do_publish(table, mech, seed=seed, **kw))
        except ParameterError as e:
            raise _flag_error(cls, e) from None
        warning = (release.manifest.get("utility") or {}).get("warning")
        if warning:
            click.echo(f"warning: {warning}", err=True)
        rep = finish_publish(release, out, custodian)
        for line in summary_lines(release, set(getattr(rep, "facts", {}) or {})):
            click.echo(line)

    return PublishCommand(cls.name, params=params, callback=callback, greedy=greedy,
                          help=f"{first}{paper}\n\nClaim: {cls.claim_model or 'none'}; writes a {cls.family} release.",
                          short_help=f"{cls.__name__}: {cls.claim_model or cls.family}"
                                     + (f" ({cls.paper})" if getattr(cls, "paper", "") else ""))


@cli.group()
def publish():
    """Publish a table under a privacy model into a release directory (one command per mechanism)."""


def _attach_mechanisms() -> None:
    for name, cls in registry.mechanisms().items():
        if name not in publish.commands:
            publish.add_command(_make_command(cls), name)


_attach_mechanisms()


@cli.command("mechanisms")
def mechanisms_cmd():
    """List the registered mechanisms: name, class, release family, claim and paper."""
    for row in registry.describe():
        click.echo(f"{row['name']:12s} {row['class']:22s} {row['family']:11s} {row['claim'] or '-'}  [{row['paper']}]")
