"""``ppdp app``: the local web application (docs/app.md); its server is imported when it runs."""

from __future__ import annotations

import click

from . import cli


@cli.command("app")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (this machine only by default).")
@click.option("--port", type=int, default=0, help="Port to listen on  [default: a free one].")
@click.option("--no-browser", is_flag=True, help="Do not open a browser; print the address only.")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Directory for uploads, schemas, reports and releases  [default: a new temporary directory].")
def app(host, port, no_browser, workdir):
    """Start the local web app: load a table, compare models, publish and verify, query a release."""
    from ..app.server import serve

    if not 0 <= port < 65536:
        from ..errors import PpdpError

        raise PpdpError(f"--port must be in 0 … 65535, got {port}")
    serve(host, port, open_browser=not no_browser, workdir=workdir,
          ready=lambda url: click.echo(f"ppdp app: {url}  (Ctrl-C to stop)", err=True))
