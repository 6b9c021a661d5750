"""The reports fit a 1280-px screen: measured in headless Chromium, no table or figure is wider
than the viewport and no table needs a horizontal scroll bar of its own.

The measurement: a copy of the page gets a small script that, after load, records the
document's scroll width, each table's right edge and its wrapper's overflow, and each image's
right edge into the DOM; ``chromium --headless --dump-dom --window-size=1280,…`` prints the
DOM and the test reads the record. A negative control (a page with a 2,000-px table and a
2,000-px image) proves that an overflow is detected. The five-model evaluate report is built on
a CSV written by the test (a seeded sample of UCI Adult), with the command-line tool.
"""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WIDTH = 1280

_PROBE = """<script>
window.addEventListener('load', function () {
  var W = window.innerWidth, out = {viewport: W, scrollWidth: document.documentElement.scrollWidth, bad: []};
  document.querySelectorAll('table').forEach(function (t, i) {
    var r = t.getBoundingClientRect(), w = t.parentElement;
    if (r.right > W + 1) out.bad.push('table ' + i + ' ends at ' + Math.round(r.right) + ' px');
    if (w && w.scrollWidth > w.clientWidth + 1) out.bad.push('table ' + i + ' scrolls inside its box (' + w.scrollWidth + ' > ' + w.clientWidth + ')');
  });
  document.querySelectorAll('img').forEach(function (im, i) {
    var r = im.getBoundingClientRect();
    if (r.right > W + 1) out.bad.push('image ' + i + ' ends at ' + Math.round(r.right) + ' px');
    if (!im.complete || im.naturalWidth === 0) out.bad.push('image ' + i + ' did not load');
  });
  if (out.scrollWidth > W + 1) out.bad.push('page scrolls horizontally: ' + out.scrollWidth + ' px');
  out.tables = document.querySelectorAll('table').length;
  out.images = document.querySelectorAll('img').length;
  var pre = document.createElement('pre'); pre.id = 'ppdp-layout'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def measure(html_file: Path, workdir: Path) -> dict:
    """Load ``html_file`` at 1280 px in headless Chromium; the probe's record."""
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is required: install it with `apt-get install -y chromium` (scripts/setup.sh does)")
    probe = html_file.with_name(html_file.stem + ".layout-probe.html")
    probe.write_text(html_file.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={workdir / ('profile-' + html_file.parent.name)}", f"--window-size={WIDTH},1000",
           "--virtual-time-budget=5000", "--dump-dom", probe.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="ppdp-layout">(.*?)</pre>', proc.stdout, re.S)
    assert m, f"no layout record; chromium exit {proc.returncode}: {proc.stderr[-1500:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


def screenshot(html_file: Path, shot: Path, height: int = 5200) -> Path:
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={shot.parent / 'profile-shot'}", f"--window-size={WIDTH},{height}",
                    f"--screenshot={shot}", html_file.resolve().as_uri()], capture_output=True, timeout=120)
    return shot


def test_negative_control_detects_overflow(tmp_path):
    page = tmp_path / "wide" / "report.html"
    page.parent.mkdir()
    from ppdp.report import HtmlReport

    rep = HtmlReport("too wide")
    rep.markup('<table style="width:2000px"><tr><td>x</td></tr></table>'
               '<img style="width:2000px;max-width:none" alt="x" src="data:image/png;base64,'
               'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==">')
    rep.write(page)
    rec = measure(page, tmp_path)
    assert any("table 0" in b for b in rec["bad"]) and any("image 0" in b for b in rec["bad"]), rec


@pytest.fixture(scope="module")
def five_model_report(tmp_path_factory):
    d = tmp_path_factory.mktemp("layout")
    t = ppdp.datasets.load("adult", n=2500, seed=3)
    csv = d / "custodian.csv"
    t.to_csv(csv, columns=["age", "sex", "race", "education", "occupation"])
    out = d / "evaluate"
    args = ["evaluate", str(csv), "--quasi", "age", "--quasi", "sex", "--quasi", "race", "--quasi", "education",
            "--sensitive", "occupation", "--numeric", "age", "--domains", "adult",
            "--model", "fprivacy:theta=8", "--model", "anatomy:l=4", "--model", "sdr:rho1=0.1,rho2=0.3",
            "--model", "diverted:l_prime=5", "--model", "cells", "--epsilons", "0.5,2",
            "--queries", "150", "--trials", "2", "--out", str(out)]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    return d, out / "report.html", r.output


def test_five_model_report_fits_1280(five_model_report):
    d, html, output = five_model_report
    rec = measure(html, d)
    assert rec["viewport"] == WIDTH
    assert rec["tables"] >= 5 and rec["images"] >= 4, rec
    assert not rec["bad"], rec["bad"]
    shot = screenshot(html, d / "evaluate-1280.png")
    print(f"screenshot: {shot}")
    assert shot.exists() and shot.stat().st_size > 10_000


def test_five_model_report_decides(five_model_report):
    _, html, output = five_model_report
    text = html.read_text()
    assert "Recommendation:" in text and "Rule:" in text
    for col in ("guarantee (the claim)", "largest posterior (audit)", "records disclosed with certainty"):
        assert col in text
    assert "Privacy vs error" in text and "per ε" in text and "What each parameter means" in text
    assert "recommendation: " in output
    assert "<script" not in text  # the report itself stays script-free (only the probe copy has one)


@pytest.mark.parametrize("maker", ["audit", "differential"])
def test_other_reports_fit_1280(tmp_path, maker):
    from ppdp.audit import audit_release, differential_inference, write_audit, write_differential

    if maker == "audit":
        t = ppdp.datasets.load("occ", n=3000, seed=0)
        rel = ppdp.publish(t, ppdp.FPrivacy(theta=8), seed=0)
        write_audit(audit_release(rel, t), rel, tmp_path / "audit", "fprivacy")
    else:
        write_differential(differential_inference(0.1, xs=(100, 1000), n_samples=20000), tmp_path / "differential")
    rec = measure(tmp_path / maker / "report.html", tmp_path)
    assert not rec["bad"], rec["bad"]
