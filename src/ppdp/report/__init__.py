"""Self-contained HTML reports (written by ``ppdp evaluate`` and ``ppdp audit``).

One file: inline CSS, plots embedded as base64 PNG, no scripts, no network fetches, so a
custodian can mail it or open it offline. Every report ends with the provenance block
(parameters, seeds, data set, machine, library versions).
"""

from __future__ import annotations

import base64
import html
import io
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..provenance import machine_info

__all__ = ["HtmlReport", "figure_png", "machine_info", "plain_label"]

_CSS = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;color:#222;line-height:1.45}
h1{font-size:1.6em;border-bottom:2px solid #345;padding-bottom:.2em}
h2{font-size:1.25em;margin-top:1.6em;color:#234}
table{border-collapse:collapse;margin:.6em 0;font-size:.88em}
th,td{border:1px solid #bbb;padding:.25em .55em;text-align:right}
th{background:#e8edf3}
td.t,th.t{text-align:left}
tr.bad td{background:#fde2e2}
.note{background:#f4f6f8;border-left:4px solid #789;padding:.5em .8em;margin:.8em 0}
.bad{color:#a00;font-weight:bold}
.ok{color:#060;font-weight:bold}
figure{margin:1em 0}
figcaption{font-size:.85em;color:#555}
img{max-width:100%}
code{background:#f0f0f0;padding:0 .2em}
"""


def plain_label(text) -> str:
    """A data label for a plot, drawn as written: ``$`` escaped, so a label such as ``$^$``
    is not read as (invalid) matplotlib mathtext."""
    return str(text).replace("$", r"\$")


def figure_png(fig, dpi: int = 110) -> bytes:
    """Render a matplotlib figure to PNG bytes and close it. Every text of the figure is drawn
    as plain text (no mathtext), so data labels cannot break the rendering."""
    import matplotlib as mpl
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    for t in fig.findobj(Text):
        if "$" in t.get_text() and "\\$" not in t.get_text():
            t.set_parse_math(False)
    buf = io.BytesIO()
    try:
        with mpl.rc_context({"text.parse_math": False}):
            fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return buf.getvalue()


def _fmt(v) -> str:
    if isinstance(v, float):
        if v != v:
            return "–"
        if v == 0 or 1e-3 <= abs(v) < 1e6:
            return f"{v:.4g}"
        return f"{v:.3e}"
    return str(v)


class HtmlReport:
    """Build a report section by section, then :meth:`write` one HTML file."""

    def __init__(self, title: str):
        self.title = title
        self._parts: list[str] = []

    def heading(self, text: str) -> None:
        self._parts.append(f"<h2>{html.escape(text)}</h2>")

    def paragraph(self, text: str, css: str | None = None) -> None:
        cls = f' class="{css}"' if css else ""
        self._parts.append(f"<p{cls}>{html.escape(text)}</p>")

    def note(self, text: str) -> None:
        self._parts.append(f'<div class="note">{html.escape(text)}</div>')

    def table(self, df, max_rows: int = 200, bad_rows: Sequence[bool] | None = None, caption: str | None = None) -> None:
        """A pandas DataFrame as an HTML table (text columns left-aligned; rows flagged bad in red)."""
        cols = list(df.columns)
        text_cols = {c for c in cols if df[c].dtype == object or str(df[c].dtype).startswith(("string", "str", "category"))}
        out = ["<table>"]
        if caption:
            out.append(f"<caption>{html.escape(caption)}</caption>")
        out.append("<tr>" + "".join(f'<th class="{"t" if c in text_cols else ""}">{html.escape(str(c))}</th>' for c in cols) + "</tr>")
        for i, row in enumerate(df.head(max_rows).itertuples(index=False)):
            cls = ' class="bad"' if bad_rows is not None and bad_rows[i] else ""
            cells = "".join(f'<td class="{"t" if c in text_cols else ""}">{html.escape(_fmt(v))}</td>' for c, v in zip(cols, row))
            out.append(f"<tr{cls}>{cells}</tr>")
        out.append("</table>")
        if len(df) > max_rows:
            out.append(f"<p>… {len(df) - max_rows} more rows in the CSV.</p>")
        self._parts.append("".join(out))

    def key_values(self, items: Mapping[str, Any]) -> None:
        rows = "".join(f'<tr><th class="t">{html.escape(str(k))}</th><td class="t">{html.escape(_fmt(v) if not isinstance(v, (dict, list)) else _json(v))}</td></tr>'
                       for k, v in items.items())
        self._parts.append(f"<table>{rows}</table>")

    def figure(self, fig_or_png, caption: str = "") -> None:
        png = fig_or_png if isinstance(fig_or_png, bytes) else figure_png(fig_or_png)
        b64 = base64.b64encode(png).decode("ascii")
        alt = html.escape(caption or "figure")
        self._parts.append(f'<figure><img alt="{alt}" src="data:image/png;base64,{b64}">'
                           f"<figcaption>{html.escape(caption)}</figcaption></figure>")

    def link(self, href: str, text: str) -> None:
        """A relative link to a file next to the report (no network)."""
        self._parts.append(f'<p><a href="{html.escape(href)}">{html.escape(text)}</a></p>')

    def provenance(self, params: Mapping[str, Any]) -> None:
        self.heading("Parameters, seeds, machine")
        self.key_values(dict(params))
        self.key_values(machine_info())

    def render(self) -> str:
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{html.escape(self.title)}</title><style>{_CSS}</style></head><body>"
                f"<h1>{html.escape(self.title)}</h1>" + "\n".join(self._parts) + "</body></html>\n")

    def write(self, path: str | os.PathLike) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(self.render(), encoding="utf-8")
        return p


def _json(v) -> str:
    import json

    return json.dumps(v, default=str)
