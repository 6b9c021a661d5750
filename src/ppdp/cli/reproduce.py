"""``ppdp reproduce <paper> [--quick]``."""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from . import reproduce
from ..experiments import EXPERIMENTS


def describe(module: str) -> str:
    """The first sentence of an experiment module's docstring, read from its source (the
    module, with its plotting libraries, is imported only when the command runs)."""
    import ast
    from importlib.util import find_spec

    spec = find_spec(module)
    doc = ""
    if spec is not None and spec.origin:
        doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    text = text.split(": ", 1)[1] if text.startswith("``ppdp reproduce") and ": " in text else text
    text = text.replace("*", "").replace("``", "")
    return text[:1].upper() + text[1:] if text else f"Reproduce the experiments of the '{module}' paper."


def _make(name: str, module: str):
    @reproduce.command(name=name, help=describe(module) + " Writes CSV, PNG and summary.md; --quick for a small version.")
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

    return _cmd


for _name, _module in EXPERIMENTS.items():
    _make(_name, _module)
