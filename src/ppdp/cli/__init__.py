"""The ``ppdp`` command (SPEC §5). Subcommands live in sibling modules and attach here.

Bad input is reported as one line ``error: …`` on stderr with exit code 2, never a traceback.

Start-up is kept small: importing this package loads click and nothing of ppdp's numerical
stack. A subcommand's module is imported when the command runs (or its help is asked for);
``ppdp --help`` lists the commands from :data:`COMMANDS` without importing them
(``tests/test_cli_startup.py`` checks the list against the modules).
"""

from __future__ import annotations

import errno
import sys

import click

from ..errors import PpdpError

#: top-level command → (sibling module that registers it, its one-line description for ``ppdp --help``)
COMMANDS: dict[str, tuple[str, str]] = {
    "app": ("app", "Start the local web app: load a table, compare models, publish and verify, query a release."),
    "audit": ("audit", "Audit a RELEASE: best posterior per record class vs the bound (exit 1 on a violation)."),
    "datasets": ("core", "List the bundled tables with row counts and roles."),
    "demo": ("core", "The main job on bundled data: publish, verify and answer a workload."),
    "evaluate": ("evaluate", "Publish every --model on the table, answer one shared workload, write a report."),
    "export": ("core", "Copies of a release's tables for tools without Parquet or ppdp."),
    "mechanisms": ("publish", "List the registered mechanisms: name, class, release family, claim and paper."),
    "publish": ("publish", "Publish a table under a privacy model into a release directory."),
    "query": ("core", "Estimate counts on a release, with standard errors and intervals."),
    "reproduce": ("", "Re-run a seed paper's experiments (CSV + PNG + summary.md)."),
    "schema": ("schema", "Schema files: how to read a table and what each column is."),
    "verify": ("core", "Re-check a release's certificate from its files."),
}

#: modules that register ``ppdp reproduce`` subcommands (``evaluate`` first: it binds the group by name)
REPRODUCE_MODULES = ("evaluate", "reproduce")


def one_line(message: str, limit: int = 500) -> str:
    """A message as one line (newlines folded, very long ones cut)."""
    text = " ".join(str(message).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _os_message(e: OSError) -> str:
    what = e.strerror or type(e).__name__
    where = f" {e.filename!r}" if getattr(e, "filename", None) else ""
    return f"cannot use{where}: {what}"


def _load(module: str) -> None:
    import importlib

    importlib.import_module(f"{__name__}.{module}")


def load_all() -> None:
    """Import every sibling module (each registers its own subcommands); a plugin module added
    beside them is found this way."""
    import pkgutil

    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name not in ("common", "__main__"):
            _load(info.name)


def _quiet_broken_pipe() -> None:
    """The reader of our output went away (``ppdp … | head``): exit quietly, as a Unix tool does."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit must not fail again
    except (OSError, ValueError):
        pass
    sys.exit(0)


class _Main(click.Group):
    """Bad input of any kind ends in one ``error: …`` line on stderr and exit code 2.

    ppdp's own errors (:class:`PpdpError`) carry their message; operating-system errors (a
    path that cannot be written, a full disk …), undecodable bytes and input nested too deeply
    for the parsers are the same kind of failure and end the same way (the commands name the
    flag where they can; this is the net under them). A broken pipe on stdout exits quietly."""

    def list_commands(self, ctx):
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx, name):
        if name not in self.commands:
            module = COMMANDS.get(name, (None,))[0]
            if module:
                _load(module)
            elif module is None:  # not a listed command: perhaps a plugin module's
                load_all()
        return self.commands.get(name)

    def format_commands(self, ctx, formatter):
        """The command list from :data:`COMMANDS` (no module imported just to print help)."""
        rows = []
        for name in self.list_commands(ctx):
            if name in COMMANDS:
                rows.append((name, COMMANDS[name][1]))
            else:
                cmd = self.commands[name]
                rows.append((name, cmd.get_short_help_str(formatter.width - 6 - len(name))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except PpdpError as e:
            self._fail(str(e))
        except UnicodeError as e:
            self._fail(f"input is not UTF-8 text ({e})")
        except BrokenPipeError:
            _quiet_broken_pipe()
        except OSError as e:
            if e.errno == errno.EPIPE:
                _quiet_broken_pipe()
            self._fail(_os_message(e))
        except RecursionError:
            self._fail("input nested too deeply to read")
        except MemoryError:
            self._fail("out of memory: the input or the request is too large")

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """As click's, but a usage error (unknown option, bad flag value …) is one ``error:``
        line too, ending with where to find the help."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.ClickException as e:
            hint = ""
            if isinstance(e, click.UsageError) and e.ctx is not None:
                hint = f" (see '{e.ctx.command_path} --help')"
            click.echo(f"error: {one_line(e.format_message())}{hint}", err=True)
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except BrokenPipeError:
            _quiet_broken_pipe()
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)

    @staticmethod
    def _fail(message: str):
        click.echo(f"error: {one_line(message)}", err=True)
        sys.exit(2)


class _Reproduce(click.Group):
    """``ppdp reproduce``: its subcommands' modules are imported when it runs."""

    def _ensure(self):
        for m in REPRODUCE_MODULES:
            _load(m)

    def list_commands(self, ctx):
        self._ensure()
        return super().list_commands(ctx)

    def get_command(self, ctx, name):
        self._ensure()
        return super().get_command(ctx, name)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ppdp")
def cli():
    """ppdp — publish microdata under a privacy model, verify it, query it, evaluate it.

    Steps longer than about 2 s show progress on stderr when it is a terminal
    (PPDP_PROGRESS=1: always, PPDP_PROGRESS=0: never)."""
    from ..kernels.progress import enable_from_environment

    enable_from_environment()


@cli.group(cls=_Reproduce)
def reproduce():
    """Re-run a seed paper's experiments (CSV + PNG + summary.md); --quick for a small version."""


def main(argv=None) -> None:
    cli.main(args=argv, prog_name="ppdp")
