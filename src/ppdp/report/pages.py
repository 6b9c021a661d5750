"""HTML pages for the reproductions (``ppdp reproduce``): each paper's ``summary.md`` rendered
with its figures, and the index of ``ppdp reproduce all`` linking those pages.

A summary page is written next to its ``summary.md`` as ``summary.html``: the Markdown
rendered (:func:`ppdp.report.markdown_to_html`), then every figure of the directory that the
text does not already show (PNG, by relative link, so the page stays small and the figures
are the files themselves), then links to the CSV files. Nothing is fetched from the network.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

from . import HtmlReport, markdown_to_html

_FIG_NUM = re.compile(r"(\d+)")


def _figure_key(p: Path):
    """Figures in their paper order: fig3 < fig10 < fig11a; other names after, alphabetically."""
    m = _FIG_NUM.search(p.stem)
    return (0 if m else 1, int(m.group(1)) if m else 0, p.stem)


def render_summary_page(summary: str | os.PathLike, title: str | None = None) -> Path:
    """``summary.md`` (and the figures beside it) → ``summary.html`` next to it; its path."""
    summary = Path(summary)
    text = summary.read_text(encoding="utf-8") if summary.exists() else ""
    folder = summary.parent
    rep = HtmlReport(title or f"ppdp reproduce — {folder.name}")
    if text:
        rep.markup(markdown_to_html(text))
    shown = set(re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text))
    figures = sorted((p for p in folder.glob("*.png") if p.name not in shown), key=_figure_key)
    if figures:
        rep.heading("Figures")
        for p in figures:
            rep.image(p.name, p.stem.replace("_", " "))
    tables = sorted(folder.glob("*.csv"))
    if tables:
        rep.heading("Data")
        rep.items([(None, f"{p.name} ({p.stat().st_size:,} bytes)") for p in tables])
        for p in tables:
            rep.link(p.name, p.name)
    return rep.write(folder / "summary.html")


def render_index(out_dir: str | os.PathLike, rows: Sequence[tuple[str, str, Path | None, str]], title: str,
                 provenance: dict) -> Path:
    """The index of ``ppdp reproduce all``: one entry per paper — a link to its HTML page and
    its first figure as a thumbnail, or its error."""
    out_dir = Path(out_dir)
    rep = HtmlReport(title)
    rep.paragraph(f"{sum(r[1] == 'ok' for r in rows)} of {len(rows)} reproductions ran.")
    for name, status, page, msg in rows:
        rep.heading(name)
        if page is not None:
            link = os.path.relpath(page.resolve(), out_dir.resolve())
            md = os.path.relpath(page.with_suffix(".md").resolve(), out_dir.resolve())
            rep.link(link, f"{name}: results with figures", after=f"(Markdown: {md})")
            figs = sorted(page.parent.glob("*.png"), key=_figure_key)
            if figs:
                rep.image(os.path.relpath(figs[0].resolve(), out_dir.resolve()),
                          f"{figs[0].stem.replace('_', ' ')} — {len(figs)} figure(s) on the page")
        else:
            rep.paragraph(f"{status} — {msg} (traceback in {name}.error.txt)", css="bad")
    rep.provenance(provenance)
    return rep.write(out_dir / "index.html")


__all__ = ["render_summary_page", "render_index"]
