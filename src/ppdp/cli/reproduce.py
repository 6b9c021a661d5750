"""``ppdp reproduce <paper> [--quick]``."""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from . import reproduce
from ..experiments import EXPERIMENTS


def _make(name: str, module: str):
    @reproduce.command(name=name)
    @click.option("--quick", is_flag=True, help="A small, fast version of every figure.")
    @click.option("--out", "-o", type=click.Path(file_okay=False), default=None, help="Output directory (default results/<paper>).")
    def _cmd(quick, out):
        mod = importlib.import_module(module)
        target = Path(out or f"results/{name}{'-quick' if quick else ''}")
        target.mkdir(parents=True, exist_ok=True)
        summary = mod.run(target, quick=quick)
        click.echo(f"summary: {summary}")
        from ..report.pages import render_summary_page

        click.echo(f"page: {render_summary_page(summary, f'ppdp reproduce {name}' + (' --quick' if quick else ''))}")

    _cmd.__doc__ = f"Reproduce the experiments of the '{name}' paper."
    return _cmd


for _name, _module in EXPERIMENTS.items():
    _make(_name, _module)
