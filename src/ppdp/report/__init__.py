"""Self-contained HTML reports (written by ``ppdp evaluate``, ``ppdp audit`` and ``ppdp reproduce``).

One file: inline CSS, plots embedded as base64 PNG, no scripts, no network fetches, so a
custodian can mail it or open it offline. Every report ends with the provenance block
(parameters, seeds, data set, machine, library versions).

The page is rendered by Jinja2 templates (``templates/page.html.j2`` and the part macros in
``templates/parts.html.j2``) with autoescaping on: a report is a list of typed parts
(heading, paragraph, table, figure, …) that the template lays out, never concatenated HTML
strings, so a data label such as ``<b>`` is shown as written. The layout fits a 1280-px screen:
tables sit in a full-width wrapper and their text cells wrap, figures are drawn at most
1200 px wide and scale down with the page (``tests/report/test_layout.py`` checks it in
headless Chromium).
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..provenance import machine_info

__all__ = ["HtmlReport", "figure_png", "machine_info", "plain_label", "FIGURE_MAX_PX", "markdown_to_html"]

#: the widest a figure is drawn (px); figures scale down with the page
FIGURE_MAX_PX = 1150


@lru_cache(maxsize=1)
def _environment():
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("ppdp.report", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"], default_for_string=True, default=True),
                             trim_blocks=False, lstrip_blocks=False, undefined=jinja2.StrictUndefined)
    env.globals["zip"] = zip
    return env


def plain_label(text) -> str:
    """A data label for a plot, drawn as written: ``$`` escaped, so a label such as ``$^$``
    is not read as (invalid) matplotlib mathtext."""
    return str(text).replace("$", r"\$")


def figure_png(fig, dpi: int = 110) -> bytes:
    """Render a matplotlib figure to PNG bytes and close it. Every text of the figure is drawn
    as plain text (no mathtext), so data labels cannot break the rendering. A figure wider
    than :data:`FIGURE_MAX_PX` at ``dpi`` is drawn at a lower dpi."""
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    for t in fig.findobj(Text):  # data labels: plain text; tick labels (drawn later, "$\\mathdefault…$") keep mathtext
        if "$" in t.get_text() and "\\$" not in t.get_text() and not t.get_text().startswith("$\\mathdefault"):
            t.set_parse_math(False)
    width_in = float(fig.get_size_inches()[0])
    dpi = min(dpi, int(FIGURE_MAX_PX / max(width_in, 1e-6) / 1.08))  # bbox_inches='tight' may add legend width
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return buf.getvalue()


def _fmt(v) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if v != v:
            return "–"
        if v == 0 or 1e-3 <= abs(v) < 1e6:
            return f"{v:.4g}"
        return f"{v:.3e}"
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, default=str)
    return str(v)


def _is_text(series) -> bool:
    return series.dtype == object or str(series.dtype).startswith(("string", "str", "category", "bool"))


def _anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "section"


class HtmlReport:
    """Build a report part by part, then :meth:`write` one HTML file."""

    def __init__(self, title: str):
        self.title = title
        self._parts: list[dict[str, Any]] = []

    def heading(self, text: str) -> None:
        self._parts.append({"kind": "heading", "text": text, "anchor": _anchor(text)})

    def paragraph(self, text: str, css: str | None = None) -> None:
        self._parts.append({"kind": "paragraph", "text": text, "css": css})

    def note(self, text: str) -> None:
        self._parts.append({"kind": "note", "text": text})

    def decision(self, title: str, text: str, rule: str | None = None) -> None:
        """A highlighted conclusion (the report's recommendation) with the rule that chose it."""
        self._parts.append({"kind": "decision", "title": title, "text": text, "rule": rule})

    def items(self, items: Sequence[tuple[str | None, str]]) -> None:
        """A bulleted list of (key, text) pairs (key shown as code; None for none)."""
        self._parts.append({"kind": "list", "entries": [{"key": k, "text": t} for k, t in items]})

    def preformatted(self, text: str) -> None:
        self._parts.append({"kind": "pre", "text": text})

    def table(self, df, max_rows: int = 200, bad_rows: Sequence[bool] | None = None, caption: str | None = None,
              best_rows: Sequence[bool] | None = None, compact: bool = False) -> None:
        """A pandas DataFrame as an HTML table (text columns left-aligned and wrapping; rows
        flagged bad in red, best in green)."""
        cols = [{"name": str(c), "text": _is_text(df[c])} for c in df.columns]
        rows = []
        for i, row in enumerate(df.head(max_rows).itertuples(index=False)):
            rows.append({"cells": [_fmt(v) for v in row], "bad": bool(bad_rows[i]) if bad_rows is not None else False,
                         "best": bool(best_rows[i]) if best_rows is not None else False})
        self._parts.append({"kind": "table", "columns": cols, "rows": rows, "caption": caption, "compact": compact,
                            "more": max(len(df) - max_rows, 0)})

    def key_values(self, items: Mapping[str, Any]) -> None:
        self._parts.append({"kind": "kv", "entries": [(str(k), _fmt(v)) for k, v in items.items()]})

    def figure(self, fig_or_png, caption: str = "") -> None:
        png = fig_or_png if isinstance(fig_or_png, bytes) else figure_png(fig_or_png)
        self._parts.append({"kind": "figure", "b64": base64.b64encode(png).decode("ascii"), "caption": caption,
                            "width": None})

    def image(self, href: str, caption: str = "") -> None:
        """A figure stored next to the report (relative link; no network)."""
        self._parts.append({"kind": "image", "href": href, "caption": caption})

    def link(self, href: str, text: str, after: str | None = None) -> None:
        """A relative link to a file next to the report (no network)."""
        self._parts.append({"kind": "link", "href": href, "text": text, "after": after})

    def markup(self, html_text: str) -> None:
        """Trusted HTML produced by :func:`markdown_to_html` (already escaped there)."""
        from markupsafe import Markup

        self._parts.append({"kind": "html", "markup": Markup(html_text)})  # noqa: S704 — escaped by markdown_to_html

    def provenance(self, params: Mapping[str, Any]) -> None:
        self.heading("Parameters, seeds, machine")
        self.key_values(dict(params))
        self.key_values(machine_info())

    def render(self) -> str:
        return _environment().get_template("page.html.j2").render(title=self.title, parts=self._parts) + "\n"

    def write(self, path: str | os.PathLike) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(self.render(), encoding="utf-8")
        return p


# ------------------------------------------------------------------ Markdown summaries → HTML
_IMG = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def _inline(text: str) -> str:
    """Escape a line of Markdown and turn its code spans, bold, images and links into HTML."""
    from markupsafe import escape

    out = str(escape(text))
    out = _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", out)
    out = _BOLD.sub(lambda m: f"<strong>{m.group(1)}</strong>", out)
    out = _IMG.sub(lambda m: f'<img alt="{m.group(1)}" src="{_href(m.group(2))}">', out)
    out = _LINK.sub(lambda m: f'<a href="{_href(m.group(2))}">{m.group(1)}</a>', out)
    return out


def _href(target: str) -> str:
    """A relative link to a Markdown page points at its HTML rendering."""
    if target.endswith(".md") and "://" not in target:
        return target[:-3] + ".html"
    return target


def markdown_to_html(text: str) -> str:
    """The Markdown subset the reproduction summaries use — headings, paragraphs, bullet lists,
    pipe tables, fenced code, images, links, code spans, bold — as escaped HTML. Images and
    tables are wrapped so they fit the page (``img{max-width:100%}``, ``.tw`` wrappers)."""
    from markupsafe import escape

    lines = text.splitlines()
    out: list[str] = []
    i = 0
    para: list[str] = []

    def flush():
        if para:
            if all(re.search(r"\S {2,}\S", x) or x.startswith("    ") for x in para):  # an aligned text table
                out.append("<pre>" + str(escape("\n".join(para))) + "</pre>")
            else:
                out.append("<p>" + " ".join(_inline(x.strip()) for x in para) + "</p>")
            para.clear()

    while i < len(lines):
        ln = lines[i]
        s = ln.strip()
        if s.startswith("```"):
            flush()
            block = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                block.append(lines[i])
                i += 1
            out.append("<pre>" + str(escape("\n".join(block))) + "</pre>")
            i += 1
            continue
        m = re.match(r"(#{1,6})\s+(.*)", s)
        if m:
            flush()
            level = min(len(m.group(1)) + 1, 4)  # the page's <h1> is the title
            out.append(f"<h{level}>{_inline(m.group(2))}</h{level}>")
        elif s.startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            body = [r for r in rows if not all(re.fullmatch(r":?-{2,}:?", c or "--") for c in r)]
            html_rows = []
            for k, r in enumerate(body):
                tag = "th" if k == 0 and len(rows) > 1 and all(re.fullmatch(r":?-{2,}:?", c) for c in rows[1]) else "td"
                html_rows.append("<tr>" + "".join(f'<{tag} class="t">{_inline(c)}</{tag}>' for c in r) + "</tr>")
            out.append('<div class="tw"><table>' + "".join(html_rows) + "</table></div>")
            continue
        elif re.match(r"[-*]\s+", s):
            flush()
            items = []
            while i < len(lines) and re.match(r"\s*[-*]\s+", lines[i]):
                item = re.sub(r"^\s*[-*]\s+", "", lines[i])
                i += 1
                while i < len(lines) and lines[i].startswith("  ") and lines[i].strip() and not re.match(r"\s*[-*]\s+", lines[i]):
                    item += " " + lines[i].strip()
                    i += 1
                items.append(f"<li>{_inline(item)}</li>")
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        elif not s:
            flush()
        else:
            para.append(ln.rstrip())
        i += 1
    flush()
    return "\n".join(out)
