"""Reproduction pages: summary.md → summary.html with its figures; the index links the pages
(not raw Markdown), shows a figure per paper, lists a failure; the pages fit 1280 px."""

import sys
import types
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ppdp.report import markdown_to_html  # noqa: E402
from ppdp.report.pages import render_summary_page  # noqa: E402

from test_layout import measure  # noqa: E402  (same directory)


def _fake_paper(out: Path, quick: bool) -> Path:
    for name in ("fig10_b.png", "fig3_a.png"):
        fig, ax = plt.subplots(figsize=(14, 4))  # wider than the page: the page must scale it down
        ax.plot([0, 1], [0, 1])
        fig.savefig(out / name, dpi=120)
        plt.close(fig)
    (out / "fig3_a.csv").write_text("x,y\n0,0\n1,1\n")
    (out / "summary.md").write_text("# Fake paper\n\nShapes agree with **Figure 3** (`fig3_a.csv`).\n\n"
                                    "| method | error |\n|---|---|\n| a <b>x</b> | 1.5 |\n\n- one\n- two\n\n"
                                    "See [the other page](other.md).\n")
    return out / "summary.md"


def test_markdown_is_escaped_and_links_point_at_html():
    html = markdown_to_html("| a <b>x</b> | 1 |\n|---|---|\n\n[p](x.md) ![f](f.png) <script>")
    assert "&lt;b&gt;" in html and "<script>" not in html
    assert 'href="x.html"' in html and 'src="f.png"' in html and "<table>" in html


def test_index_links_html_pages_with_figures(tmp_path, monkeypatch):
    from ppdp import experiments
    from ppdp.cli.evaluate import run_all

    mod = types.ModuleType("ppdp_fake_paper")
    mod.run = _fake_paper  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ppdp_fake_paper", mod)
    monkeypatch.setattr(experiments, "EXPERIMENTS", {"fake": "ppdp_fake_paper", "missing": "ppdp_no_such_module"})
    index = run_all(tmp_path / "all", quick=True)
    text = index.read_text()
    assert 'href="fake/summary.html"' in text and 'src="fake/fig3_a.png"' in text
    assert "missing" in text and "ModuleNotFoundError" in text
    page = tmp_path / "all" / "fake" / "summary.html"
    body = page.read_text()
    # figures in paper order (3 before 10), the CSV linked, the Markdown rendered
    assert body.index("fig3_a.png") < body.index("fig10_b.png") and 'href="fig3_a.csv"' in body
    assert "<strong>Figure 3</strong>" in body and "&lt;b&gt;x&lt;/b&gt;" in body and 'href="other.html"' in body
    for html in (index, page):
        rec = measure(html, tmp_path)
        assert rec["images"] >= 1 and not rec["bad"], rec


def test_summary_page_without_figures(tmp_path):
    (tmp_path / "summary.md").write_text("# Only text\n")
    page = render_summary_page(tmp_path / "summary.md")
    assert "Only text" in page.read_text() and "Figures" not in page.read_text()


def test_aligned_text_tables_stay_aligned():
    html = markdown_to_html("## Fig\n\n epsilon  a  b\n    0.05  1  2\n\nA normal  paragraph\nwith two lines.\n")
    assert "<pre> epsilon  a  b\n    0.05  1  2</pre>" in html
    assert "<p>A normal  paragraph with two lines.</p>" in html
