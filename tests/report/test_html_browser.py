"""The HTML reports render in a real headless browser (Debian chromium) with no console error.

chromium runs with ``--enable-logging=stderr --v=0``: every console message (JS errors,
failed resource loads) is logged to stderr as ``…:CONSOLE(…)] "message"…``; the test fails on
any of them. A negative control (a page with a broken image and a script error) proves the
detection works. Screenshots are kept in pytest's tmp dir (paths printed; run with -s).
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import ppdp

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
INSTALL = "chromium is required for the HTML report test: install it with `apt-get install -y chromium` (Debian)"


def render(html_file: Path, workdir: Path):
    """Screenshot ``html_file``; return (screenshot path, console lines)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(INSTALL)
    tag = f"{html_file.parent.name}-{html_file.stem}"
    shot = workdir / f"{tag}.png"
    profile = workdir / f"profile-{tag}"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--window-size=1200,1600",
           f"--screenshot={shot}", html_file.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    console = [ln for ln in proc.stderr.splitlines() if re.search(r":CONSOLE[:(]|Uncaught", ln)]
    assert shot.exists() and shot.stat().st_size > 0, f"no screenshot; chromium exit {proc.returncode}: {proc.stderr[-2000:]}"
    print(f"screenshot: {shot}")
    return shot, console


def _png_size(p: Path):
    b = p.read_bytes()
    return int.from_bytes(b[16:20], "big"), int.from_bytes(b[20:24], "big")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    from ppdp.audit import audit_release, differential_inference, write_audit, write_differential
    from ppdp.evaluate import evaluate

    d = tmp_path_factory.mktemp("reports")
    t = ppdp.datasets.load("occ", n=5000, seed=0)
    ev = evaluate(t, ["fprivacy:theta=8", "uniform:rho1=0.1,rho2=0.3", "anatomy:l=40"], n_queries=200, trials=1,
                  out_dir=d / "evaluate", progress=False)
    rel = ppdp.publish(t, ppdp.FPrivacy(theta=8), seed=0)
    write_audit(audit_release(rel, t), rel, d / "audit", "fprivacy")
    write_differential(differential_inference(0.1, xs=(100, 1000), n_samples=20000), d / "differential")
    return d, ev


@pytest.mark.parametrize("name", ["evaluate", "audit", "differential"])
def test_report_renders_without_console_error(reports, name):
    d, _ = reports
    html = d / name / "report.html"
    text = html.read_text()
    assert "<script" not in text and "http://" not in text and "https://" not in text  # self-contained
    assert text.count("data:image/png;base64,") >= 1
    # every embedded resource is inline (a missing file would not show as a console error)
    assert all(src.startswith("data:") for src in re.findall(r'src="([^"]*)"', text))
    assert not re.search(r"<link|@import|url\(", text)
    shot, console = render(html, d)
    assert not console, f"console messages: {console}"
    w, h = _png_size(shot)
    assert w >= 1000 and h >= 1000


def test_failed_model_is_reported(reports):
    _, ev = reports
    row = ev.summary[(ev.summary["model"] == "anatomy:l=40") & (ev.summary["bin"] == "all")].iloc[0]
    assert row["error"] and row["trials"] == 0
    assert "anatomy:l=40" in (reports[0] / "evaluate" / "report.html").read_text()


def test_console_errors_are_detected(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>')
    _, console = render(bad, tmp_path)
    print(console)
    assert any("undefinedFunction" in c for c in console), "a page with a script error must produce a console message"
