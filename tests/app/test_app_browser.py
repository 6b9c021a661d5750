"""The local web app (``ppdp app``) driven in a real headless browser (Debian chromium through
Playwright; no browser is downloaded): a custodian's whole workflow on a public table that ships
in a PyPI package (statsmodels' ``fair``, tests/gauntlet) and on a bundled one (Adult), and bad
input through the page. What the page shows is checked against the library's own answers on the
same files: the recommendation (``ppdp.evaluate.evaluate``), the claim and the verification
(``ppdp.verify``), a query's interval (``ppdp.queries.sql.query_table``)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the app needs starlette (a dependency of ppdp)")
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]' (playwright)")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
GAUNTLET = Path(__file__).parents[1] / "gauntlet"
FAIR = GAUNTLET / "data" / "fair.tsv"
FAIR_SCHEMA = GAUNTLET / "schemas" / "fair.toml"
SHOTS = os.environ.get("PPDP_APP_SCREENSHOTS")  # a directory: keep 1280 px screenshots of each step there


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """``ppdp app`` in a child process on 127.0.0.1 and a free port; yields (url, workdir, seconds to the first page)."""
    import urllib.request

    work = tmp_path_factory.mktemp("appwork")
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "ppdp.cli", "app", "--no-browser", "--workdir", str(work)],
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    m = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
    assert m, f"no address printed: {line!r}"
    url = m.group(1)
    page = urllib.request.urlopen(url, timeout=30).read().decode()
    first_page = time.monotonic() - t0
    assert "ppdp" in page and "Load a table" in page
    print(f"ppdp app → first page: {first_page:.2f} s")
    yield url, work, first_page
    proc.terminate()
    proc.wait(20)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is required for the app's browser test: apt-get install -y chromium (scripts/setup.sh)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser, app):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.goto(app[0])
    yield pg
    ctx.close()
    assert not [e for e in errors if "400" not in e], errors  # a 400 answer to bad input is expected


def shot(pg, name: str, selector: str) -> None:
    """With PPDP_APP_SCREENSHOTS set: a 1280 px wide screenshot of one step of the page."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        box = pg.locator(selector).bounding_box()
        top = box["y"] + pg.evaluate("window.scrollY")  # the box is relative to the viewport
        pg.screenshot(path=str(Path(SHOTS) / f"app-{name}.png"), full_page=True,
                      clip={"x": 0, "y": top - 8, "width": 1280, "height": min(box["height"] + 16, 1400)})


def wait_job(pg, selector: str, timeout: float = 300_000) -> None:
    """Wait for a step's result, or fail with the error the page shows instead."""
    pg.wait_for_selector(f"{selector}:not([hidden]), .error:not(:empty)", state="visible", timeout=timeout)
    shown = [t for t in pg.locator(".error").all_inner_texts() if t.strip()]
    assert not shown, shown


def written(work: Path, stem: str) -> list[str]:
    return sorted(p.name for p in work.iterdir() if p.name.startswith(stem))


def test_workflow_on_a_public_table(page, app):
    """Load fair.tsv (statsmodels), load its reviewed schema, edit a role, compare three models,
    publish the recommended one, verify, download the zip, query it — against the library."""
    import tomllib

    import ppdp
    from ppdp.claims import claim_of
    from ppdp.evaluate import evaluate
    from ppdp.queries.sql import query_table
    from ppdp.schema import load_schema, public_domains, read_table

    url, work, _ = app
    pg = page
    # 1 load: the inferred schema, one row per column with schema infer's reasons
    pg.fill("#path", str(FAIR))
    pg.click("#load-btn")
    pg.wait_for_selector("#schema-table tbody tr", timeout=90_000)
    rows = pg.locator("#schema-table tbody tr")
    assert rows.count() == 9
    assert "guessed" in pg.locator("#schema-table tbody tr >> nth=0").inner_text()
    shot(pg, "1-inferred", "#load")
    # the reviewed schema file, then a role edited by hand: occupation_husb not published
    pg.set_input_files("#schema-file", str(FAIR_SCHEMA))
    pg.wait_for_selector("#schema-msg:has-text('schema file loaded')", timeout=60_000)
    pg.select_option("#schema-table tr[data-name='occupation_husb'] select[data-key='role']", "drop")
    pg.click("#save-schema")
    pg.wait_for_selector("#schema-msg:has-text('schema saved')")
    saved = tomllib.loads((work / "schema.toml").read_text())
    assert saved["columns"]["occupation_husb"]["role"] == "drop"
    assert saved["columns"]["affairs"]["role"] == "sensitive"
    shot(pg, "1-schema", "#load")

    # 2 compare: three models (one per family) on pasted queries (`ppdp query`'s SQL, as evaluate's
    # --workload FILE); the recommendation is the library's on the same statements
    from ppdp.evaluate import sql_workload

    stmts = ["SELECT religious, COUNT(*) FROM t WHERE affairs = '[2, 5)' GROUP BY religious",
             "SELECT age, COUNT(*) FROM t WHERE affairs = '[0, 0.5)' GROUP BY age", "SELECT COUNT(*) FROM t WHERE educ >= 16"]
    pg.fill("#sql-workload", ";\n".join(stmts))
    pg.click("#compare-btn")
    wait_job(pg, "#report-box")
    rec = pg.inner_text("#recommendation")
    sch = load_schema(work / "schema.toml")
    table = read_table(FAIR, sch)
    assert [ln.strip() for ln in next(work.glob("workload-*.sql")).read_text().split(";")] == stmts
    ev = evaluate(table, ["fprivacy:theta=8", "sdr:rho1=0.1,rho2=0.3", "cells:epsilon=1"], workload=sql_workload(table, stmts),
                  n_queries=300, trials=1, seed=0,
                  out_dir=work.parent / "check-evaluate", progress=False,
                  public_domains=public_domains(table, sch, table.column_names) or None,
                  sensitive_values=list(sch.sensitive_values) if sch.sensitive_values is not None else None)
    assert ev.recommendation.get("model"), ev.recommendation
    assert rec.startswith(f"recommendation: {ev.recommendation['model']} — ")
    assert pg.locator("#models-table tbody tr").count() == 3
    shot(pg, "2-compare", "#compare")

    # 3 publish the recommended model; verify; the claim in words is the release's own
    assert pg.input_value("#model") == ev.recommendation["model"]
    pg.click("#publish-btn")
    wait_job(pg, "#publish-box")
    assert pg.inner_text("#verify-result").startswith("verify: OK")
    rel_dir = work / pg.locator("#release").input_value()
    rel = ppdp.load_release(rel_dir)
    assert pg.inner_text("#claim") == "Claim: " + claim_of(rel.manifest).statement()
    assert ppdp.verify(rel_dir, table).ok
    # the audit after verify: its headline is the library's audit of the same release against the same table
    from ppdp.audit import audit_release

    want_audit = audit_release(rel, table)
    assert pg.inner_text("#audit-headline") == "audit: " + want_audit.headline()
    assert [n for n in pg.locator("#audit-notes li").all_inner_texts()] == list(want_audit.notes)
    page_html = pg.request.get(url.rstrip("/") + pg.get_attribute("#audit-link", "href"))
    assert page_html.ok and "posterior" in page_html.text().lower()
    with pg.expect_download() as dl:
        pg.click("#zip-link")
    names = zipfile.ZipFile(io.BytesIO(Path(dl.value.path()).read_bytes())).namelist()
    assert f"{rel_dir.name}/README.md" in names and f"{rel_dir.name}/manifest.json" in names
    assert not any("custodian" in n for n in names)  # the custodian file is never inside the release
    shot(pg, "3-publish", "#publish")

    # 4 query with GROUP BY: the page's estimates and interval are query_table's
    sql = "SELECT religious, COUNT(*) FROM t WHERE affairs = '[2, 5)' GROUP BY religious"
    pg.fill("#sql", sql)
    pg.click("#query-btn")
    wait_job(pg, "#answer-box")
    want = query_table(rel, sql)
    cells = [r.split("\t") for r in pg.locator("#answer-table tbody tr").all_inner_texts()]
    assert len(cells) == len(want)
    cols = pg.locator("#answer-table thead th").all_inner_texts()
    for got, (_, w) in zip(cells, want.iterrows()):
        row = dict(zip(cols, got))
        assert row["religious"] == str(w["religious"])
        for c in ("estimate", "lower", "upper"):
            assert float(row[c].replace(",", "")) == pytest.approx(float(w[c]), abs=0.006)
    kind = pg.inner_text("#interval-kind")
    assert want.attrs["kind"] in kind or "interval" in kind
    with pg.expect_download() as dl:
        pg.click("#answer-csv")
    assert Path(dl.value.path()).read_text().startswith("query,religious,estimate,se,lower,upper")
    shot(pg, "4-query", "#query")


def test_bad_input_through_the_page(page, app):
    """A wrong file, a role that makes publishing impossible and an ε of 0: the library's one-line
    message next to the field, and nothing written."""
    url, work, _ = app
    pg = page
    before = set(os.listdir(work))
    # a wrong file: a PNG named as a CSV
    bad = work.parent / "photo.csv"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    pg.set_input_files("#file", str(bad))
    pg.click("#load-btn")
    msg = pg.locator(".error[data-for='file']")
    msg.wait_for(state="visible", timeout=90_000)
    assert msg.inner_text() and "\n" not in msg.inner_text()
    print("wrong file:", msg.inner_text())
    assert set(os.listdir(work)) == before  # nothing kept of it

    # a Parquet version of the public table, uploaded: read by the library, its schema inferred
    import pandas as pd

    pq_file = work.parent / "fair.parquet"
    pd.read_csv(FAIR, sep="\t").to_parquet(pq_file, index=False)
    pg.set_input_files("#file", str(pq_file))
    pg.click("#load-btn")
    pg.wait_for_selector("#schema-table tbody tr", timeout=90_000)
    assert pg.locator("#schema-table tbody tr").count() == 9
    assert "Parquet file fair.parquet (6,366 rows)" in pg.inner_text("#load-msg")
    assert pg.input_value("#schema-table tr[data-name='age'] select[data-key='type']") == "numeric"
    pg.set_input_files("#file", [])
    pg.fill("#path", str(FAIR))  # the reviewed schema (a sensitive column) for the role check below
    pg.click("#load-btn")
    pg.wait_for_selector("#load-msg:has-text('fair.tsv')", timeout=90_000)
    pg.set_input_files("#schema-file", str(FAIR_SCHEMA))
    pg.wait_for_selector("#schema-msg:has-text('schema file loaded')", timeout=60_000)
    before = set(os.listdir(work))  # the Parquet file's CSV copy and the inferred schemas are kept
    # pasted queries with bad SQL: the CLI's one-line error next to the workload, nothing written
    pg.fill("#sql-workload", "SELECT sex COUNT(*) FROM t")
    pg.click("#compare-btn")
    wl_err = pg.locator(".error[data-for='workload']")
    wl_err.wait_for(state="visible", timeout=90_000)
    print("bad SQL:", wl_err.inner_text())
    assert wl_err.inner_text().startswith("--workload: statement 1: ") and "\n" not in wl_err.inner_text()
    assert set(os.listdir(work)) == before
    pg.fill("#sql-workload", "")
    # ε = 0: refused before any work, next to the models
    pg.fill("#models", "dp:epsilon=0")
    pg.click("#compare-btn")
    eps = pg.locator(".error[data-for='models']")
    eps.wait_for(state="visible", timeout=90_000)
    print("epsilon 0:", eps.inner_text())
    assert "epsilon" in eps.inner_text()
    # every column but the sensitive one dropped: publishing is impossible
    for name in pg.locator("#schema-table tbody tr").evaluate_all("rs => rs.map(r => r.dataset.name)"):
        sel = f"#schema-table tr[data-name='{name}'] select[data-key='role']"
        if pg.input_value(sel) == "quasi":
            pg.select_option(sel, "drop")
    pg.fill("#model", "fprivacy:theta=8")
    pg.click("#publish-btn")
    role = pg.locator(".error[data-for='schema']")
    role.wait_for(state="visible", timeout=120_000)
    print("no quasi-identifier:", role.inner_text())
    assert "quasi" in role.inner_text()
    assert set(written(work, "release-")) <= before and set(written(work, "evaluate-")) <= before


@pytest.mark.slow
def test_workflow_on_a_bundled_table(page, app):
    """Adult (a 2,000-row seeded sample): load, drop a role, compare three models, publish the
    recommended one, query it — the recommendation and the answers are the library's."""
    import ppdp
    from ppdp.evaluate import evaluate
    from ppdp.queries.sql import query_table

    url, work, _ = app
    pg = page
    pg.select_option("#dataset", "adult")
    pg.fill("#rows", "2000")
    pg.click("#load-btn")
    pg.wait_for_selector("#schema-table tbody tr", timeout=90_000)
    pg.select_option("#schema-table tr[data-name='native_country'] select[data-key='role']", "drop")
    pg.fill("#queries", "200")
    pg.click("#compare-btn")
    wait_job(pg, "#report-box")
    table = ppdp.datasets.load("adult", n=2000)
    quasi = [c for c in table.quasi if c != "native_country"]
    from ppdp.cli.common import load_table

    table = load_table(None, "adult", tuple(quasi), tuple(table.sensitive), "error", 2000)
    ev = evaluate(table, ["fprivacy:theta=8", "sdr:rho1=0.1,rho2=0.3", "cells:epsilon=1"], n_queries=200, trials=1, seed=0,
                  out_dir=work.parent / "check-adult", progress=False, public_domains="adult")
    rec = pg.inner_text("#recommendation")
    assert ev.recommendation.get("model") and rec.startswith(f"recommendation: {ev.recommendation['model']} — "), (rec, ev.recommendation)
    pg.fill("#seed", "7")  # a seeded test run: its custodian file is offered apart, with the warning
    pg.click("#publish-btn")
    wait_job(pg, "#publish-box")
    assert pg.inner_text("#verify-result").startswith("verify: OK")
    assert "NOT fit for publication" in pg.inner_text("#verify-result")
    # a bundled table's sample has held-back control rows: the audit runs the attacks too, as `ppdp audit --attacks`
    from click.testing import CliRunner

    from ppdp.cli import cli

    rel_dir = work / pg.locator("#release").input_value()
    direct = CliRunner().invoke(cli, ["audit", str(rel_dir), "--dataset", "adult", "-n", "2000", "--attacks",
                                      "--out", str(work.parent / "check-audit")])
    want_head = next(ln for ln in direct.output.splitlines() if ln.startswith("attacks:"))
    assert pg.inner_text("#audit-attacks").splitlines()[0] == want_head
    assert pg.locator("#custodian-box").is_visible() and "never share it" in pg.inner_text("#custodian-box")
    href = pg.get_attribute("#custodian-link", "href")
    got = pg.request.get(url.rstrip("/") + href)  # the link the page offers, fetched in the page's context
    assert got.ok and "attachment" in got.headers.get("content-disposition", "")
    assert json.loads(got.text())["seed"] == 7
    z = pg.request.get(url.rstrip("/") + pg.get_attribute("#zip-link", "href"))
    assert z.ok and not any("custodian" in n for n in zipfile.ZipFile(io.BytesIO(z.body())).namelist())
    rel_dir = work / pg.locator("#release").input_value()
    assert "native_country" not in ppdp.load_release(rel_dir).manifest["schema"].get("quasi", [])
    sql = "SELECT sex, COUNT(*) FROM t WHERE race = 'White' GROUP BY sex"
    pg.fill("#sql", sql)
    pg.click("#query-btn")
    wait_job(pg, "#answer-box")
    want = query_table(ppdp.load_release(rel_dir), sql)
    got = [r.split("\t") for r in pg.locator("#answer-table tbody tr").all_inner_texts()]
    assert [g[0] for g in got] == [str(x) for x in want["sex"]]
    for g, (_, w) in zip(got, want.iterrows()):
        assert float(g[1].replace(",", "")) == pytest.approx(float(w["estimate"]), abs=0.006)


def test_cancel_a_comparison(page, app):
    """Compare runs off the request thread: Cancel ends it and keeps nothing of it."""
    url, work, _ = app
    pg = page
    before = set(written(work, "evaluate-"))
    pg.select_option("#dataset", "adult")
    pg.click("#load-btn")
    pg.wait_for_selector("#schema-table tbody tr", timeout=90_000)
    pg.click("#compare-btn")
    pg.wait_for_selector("#cancel-btn:not([hidden])", timeout=30_000)
    pg.wait_for_selector("#compare-progress:has-text('s)')", timeout=30_000)  # progress is shown while it runs
    pg.click("#cancel-btn")
    pg.wait_for_selector("#compare-progress:has-text('cancelled')", timeout=60_000)
    assert set(written(work, "evaluate-")) == before
    assert pg.locator("#report-box").is_hidden()
