"""The ``ppdp`` command (SPEC §5). Subcommands live in sibling modules and attach here.

Bad input is reported as one line ``error: …`` on stderr with exit code 2, never a traceback.
"""

from __future__ import annotations

import sys

import click

from ..errors import PpdpError


class _Main(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except PpdpError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except FileNotFoundError as e:
            click.echo(f"error: {e}", err=True)
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
