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
def publish():
    """Publish a table under a privacy model into a release directory."""


@cli.group()
def reproduce():
    """Re-run a seed paper's experiments (CSV + PNG + summary.md); --quick for a small version."""


def _attach() -> None:
    import importlib

    for mod in ("core", "bucketization", "randomization", "histogram", "reproduce", "evaluate"):
        try:
            importlib.import_module(f"ppdp.cli.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"ppdp.cli.{mod}":
                raise


def main(argv=None) -> None:
    _attach()
    cli.main(args=argv, prog_name="ppdp")


_attach()
