"""The ``ppdp`` command (SPEC §5). Subcommands live in sibling modules and attach here.

Bad input is reported as one line ``error: …`` on stderr with exit code 2, never a traceback.
"""

from __future__ import annotations

import sys

import click

from ..errors import PpdpError


def one_line(message: str, limit: int = 500) -> str:
    """A message as one line (newlines folded, very long ones cut)."""
    text = " ".join(str(message).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _os_message(e: OSError) -> str:
    what = e.strerror or type(e).__name__
    where = f" {e.filename!r}" if getattr(e, "filename", None) else ""
    return f"cannot use{where}: {what}"


class _Main(click.Group):
    """Bad input of any kind ends in one ``error: …`` line on stderr and exit code 2.

    ppdp's own errors (:class:`PpdpError`) carry their message; operating-system errors (a
    path that cannot be written, a full disk …), undecodable bytes and input nested too deeply
    for the parsers are the same kind of failure and end the same way (the commands name the
    flag where they can; this is the net under them)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except PpdpError as e:
            self._fail(str(e))
        except UnicodeError as e:
            self._fail(f"input is not UTF-8 text ({e})")
        except OSError as e:
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
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)

    @staticmethod
    def _fail(message: str):
        click.echo(f"error: {one_line(message)}", err=True)
        sys.exit(2)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ppdp")
def cli():
    """ppdp — publish microdata under a privacy model, verify it, query it, evaluate it."""


@cli.group()
def reproduce():
    """Re-run a seed paper's experiments (CSV + PNG + summary.md); --quick for a small version."""


def _attach() -> None:
    """Import every sibling module: each registers its own subcommands on ``cli``."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        if info.name != "common":
            importlib.import_module(f"{__name__}.{info.name}")


def main(argv=None) -> None:
    _attach()
    cli.main(args=argv, prog_name="ppdp")


_attach()
