"""The app's endpoints called as the page's JavaScript calls them (no browser): files a custodian
brings as they come, and bad input answered with one line next to the field concerned.

Found by driving every gauntlet table through the whole flow (tests/app/drive_gauntlet.py)."""

from __future__ import annotations

import bz2
import gzip
import io
import os
import sys
import time
import tomllib
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the app needs starlette (a dependency of ppdp)")
pytest.importorskip("uvicorn", reason="the app needs uvicorn (a dependency of ppdp)")

from ppdp.app import jobs  # noqa: E402

from .client import AppClient  # noqa: E402

GAUNTLET = Path(__file__).parents[1] / "gauntlet"
DIABETES = GAUNTLET / "data" / "diabetes.csv"
DIABETES_SCHEMA = GAUNTLET / "schemas" / "diabetes.toml"


@pytest.fixture
def client(tmp_path):
    with AppClient(tmp_path / "work") as c:
        yield c


def _cli_file_options(path: Path, tmp_path: Path) -> dict:
    from click.testing import CliRunner

    from ppdp.cli import cli

    out = tmp_path / "cli.toml"
    res = CliRunner().invoke(cli, ["schema", "infer", str(path), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return tomllib.loads(out.read_text(encoding="utf-8"))["file"]


@pytest.mark.parametrize("name, data", [
    ("survey.psv", b"age|sex|pay\n31|f|low\n45|m|high\n52|f|low\n28|m|mid\n"),
    ("survey.dat", b"age;sex;pay\n31;f;low\n45;m;high\n52;f;low\n28;m;mid\n"),
    ("survey.csv.bz2", bz2.compress(b"age,sex,pay\n31,f,low\n45,m,high\n52,f,low\n28,m,mid\n")),
])
def test_upload_reads_what_the_cli_reads(client, tmp_path, name, data):
    """A delimited file with a suffix other than .csv/.tsv/.txt/.gz (a pipe-separated .psv, a .dat, a bz2 one) is
    read by the upload as `ppdp schema infer` reads it (it was refused as "not a table file")."""
    r = client.post("/api/load", files={"file": (name, data)}, data={"path": ""})
    assert r.status_code == 200, r.text
    local = tmp_path / name
    local.write_bytes(data)
    saved = tomllib.loads(client.get("/schema.toml").text)
    assert saved["file"] == _cli_file_options(local, tmp_path)
    assert [c["name"] for c in r.json()["schema"]["columns"]] == ["age", "sex", "pay"]


@pytest.mark.parametrize("name", ["SURVEY.CSV.GZ", "survey.csv"])
def test_a_gzip_upload_is_read_whatever_its_name(client, name):
    """A gzip file named in capitals, or sent without .gz, is decompressed (the reader goes by the suffix)."""
    data = gzip.compress(b"age,sex,pay\n31,f,low\n45,m,high\n52,f,low\n28,m,mid\n")
    r = client.post("/api/load", files={"file": (name, data)}, data={"path": ""})
    assert r.status_code == 200, r.text
    assert [c["name"] for c in r.json()["schema"]["columns"]] == ["age", "sex", "pay"]
    assert r.json()["source"]["name"].endswith(".gz")


def test_spreadsheet_refused_in_one_line_nothing_kept(client):
    work = client.app.state.session.workdir
    before = set(os.listdir(work))
    r = client.post("/api/load", files={"file": ("survey.xlsx", b"PK\x03\x04" + bytes(200))}, data={"path": ""})
    assert r.status_code == 400
    body = r.json()
    assert body["field"] == "file" and "spreadsheet" in body["error"] and "\n" not in body["error"]
    assert set(os.listdir(work)) == before


def test_path_of_a_directory_and_bad_rows(client, tmp_path):
    r = client.post("/api/load", data={"path": str(tmp_path)})
    assert r.status_code == 400 and "is a directory" in r.json()["error"] and r.json()["field"] == "file"
    r = client.post("/api/load", data={"dataset": "occ", "rows": "-5"})
    assert r.status_code == 400
    assert r.json() == {"error": "-n '-5': a whole number of rows ≥ 1 (or leave it empty for the whole table)",
                        "field": "rows"}


@pytest.mark.parametrize("url", ["/api/schema", "/api/compare", "/api/publish", "/api/query"])
@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]"])
def test_a_request_that_is_not_a_json_object_is_one_line(client, url, body):
    r = client._send("POST", url, body, "application/json")
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith("the request is not") and "JSON" in r.json()["error"]


def test_uploaded_schema_errors_name_the_file_not_the_apps_copy(client):
    client.post("/api/load", files={"file": (DIABETES.name, DIABETES.read_bytes())}, data={"path": ""})
    good = client.get("/schema.toml").text
    r = client.post("/api/schema/upload", files={"schema_file": ("mine.toml", b"[file]\nfoo = 1\n")})
    assert r.status_code == 400
    body = r.json()
    assert body["field"] == "schema_file", body
    assert body["error"].startswith("schema mine.toml: unknown key file.foo") and ".schema-check" not in body["error"]
    r = client.post("/api/schema/upload", files={"schema_file": ("mine.toml", b"[[[")})
    assert r.status_code == 400 and r.json()["field"] == "schema_file" and r.json()["error"].startswith("mine.toml: ")
    assert client.get("/schema.toml").text == good  # the schema in use is unchanged
    # the editor's own table: the message names the schema, not a temporary file
    rows = client.post("/api/schema/upload", files={"schema_file": ("d.toml", DIABETES_SCHEMA.read_bytes())}).json()
    cols = rows["schema"]["columns"]
    cols[0]["role"] = "boss"
    r = client.post("/api/schema", json_body={"file": rows["schema"]["file"], "columns": cols})
    assert r.status_code == 400 and r.json()["field"] == "schema"
    assert ".schema-check" not in r.json()["error"] and "columns.age.role" in r.json()["error"]


def test_publish_refusals_show_by_the_publish_field(client):
    """The publish form's model field, not the comparison's model list (the spec is checked before the table)."""
    for spec in ("nosuch:x=1", "fprivacy:thetaa=8", "dp:epsilon=0"):
        r = client.post("/api/publish", json_body={"model": spec, "seed": "", "allow_disclosure": False})
        assert r.status_code == 400 and r.json()["field"] == "model", (spec, r.text)


def test_release_zip_errors_name_the_upload(client):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("rel/manifest.json", "{}")
    r = client.post("/api/release", files={"release_zip": ("theirs.zip", buf.getvalue())})
    assert r.status_code == 400
    body = r.json()
    assert body["field"] == "release_zip" and body["error"].startswith("theirs.zip: ")
    assert str(client.app.state.session.workdir) not in body["error"]
    assert not [p for p in os.listdir(client.app.state.session.workdir) if p.startswith("uploaded")]


def test_query_level_not_a_number(client, tmp_path):
    """A level that is not a number: the field's one line, not Python's 'could not convert string to float'."""
    from ppdp.cli import cli
    from click.testing import CliRunner

    rel = tmp_path / "rel"
    res = CliRunner().invoke(cli, ["publish", "fprivacy", str(DIABETES), "--schema", str(DIABETES_SCHEMA),
                                    "--theta", "1.5", "--out", str(rel)])
    assert res.exit_code == 0, res.output
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in rel.rglob("*"):
            z.write(p, f"rel/{p.relative_to(rel)}")
    rid = client.post("/api/release", files={"release_zip": ("rel.zip", buf.getvalue())}).json()["release"]
    sql = "SELECT sex, COUNT(*) FROM t GROUP BY sex"
    r = client.post("/api/query", json_body={"release": rid, "sql": sql, "level": "abc"})
    assert r.status_code == 400 and r.json() == {"error": "--level 'abc': a number in (0, 1), e.g. 0.95", "field": "level"}
    r = client.post("/api/query", json_body={"release": rid, "sql": sql, "level": "0.9"})
    assert r.status_code == 200 and [row[0] for row in r.json()["rows"]] == ["1", "2"]


def test_cancel_reaches_the_commands_run_after_the_main_one(monkeypatch, tmp_path):
    """A publish job is cancellable while its verify and audit run (they were not: the job ran to its end)."""
    def command(args):
        script = "import time; time.sleep(60)" if args[0] == "sleep" else "pass"
        return [sys.executable, "-c", script]

    monkeypatch.setattr(jobs, "ppdp_command", command)
    out = tmp_path / "release"
    out.mkdir()
    children: list[jobs.Job] = []

    def follow_up(job: jobs.Job) -> str:
        child = jobs.run("verify", ["sleep"], tmp_path, timeout=60)
        children.append(child)
        if child.state != "done":
            raise RuntimeError(f"verify: {child.state}")
        return "verified"

    job = jobs.Job("publish", ["quick"], tmp_path, [out], on_done=follow_up)
    t0 = time.monotonic()
    while not job.children and time.monotonic() - t0 < 20:
        time.sleep(0.05)
    assert job.children and job.state == "running"
    job.cancel()
    job.wait(20)
    assert job.state == "cancelled" and job.result is None and job.error is None
    assert time.monotonic() - t0 < 20
    assert children and children[0].state == "cancelled" and children[0].proc.poll() is not None
    assert not out.exists()  # nothing kept


def test_a_crash_is_one_line_not_the_exit_code(monkeypatch, tmp_path):
    """A command that stops on a traceback (a fault in ppdp) gives its exception's line, not "stopped (exit 1)"."""
    script = "import sys; print('50%|##', file=sys.stderr); raise KeyError('wage')"
    monkeypatch.setattr(jobs, "ppdp_command", lambda args: [sys.executable, "-c", script])
    job = jobs.run("publish", ["x"], tmp_path, timeout=60)
    assert job.state == "failed"
    assert job.error == "ppdp publish failed unexpectedly: KeyError: 'wage' (a fault in ppdp: please report it)"


def test_a_models_refusal_without_the_class_name():
    from ppdp.app.server import model_error

    assert model_error("ParameterError: the domain of ['clinic'] is not declared") == "the domain of ['clinic'] is not declared"
    assert model_error("InfeasibleError: no bucketization") == "no bucketization"
    assert model_error("KeyError: 'x'") == "KeyError: 'x'"  # a fault, not a refusal: named
    assert model_error(float("nan")) == "" and model_error("") == ""


def test_compare_takes_the_range_columns(client, monkeypatch):
    """The range workload's columns from the page become evaluate's --dims; the command's refusal of a column
    that is not the table's shows by the workload (the command's own line, as `ppdp evaluate` words it)."""
    line = "error: unknown range dimension(s) ['nosuch']; the table has ['age', 'sex', 'bmi', 'bp', 'target']"
    script = f"import sys; print({line!r}, file=sys.stderr); sys.exit(2)"
    monkeypatch.setattr(jobs, "ppdp_command", lambda args: [sys.executable, "-c", script])
    client.app.state.session.source = {"kind": "file", "path": str(DIABETES), "name": DIABETES.name}
    r = client.post("/api/compare", json_body={"models": "dpcube:epsilon=1", "workload": "range", "queries": "20",
                                               "trials": "1", "dims": "age, nosuch"})
    assert r.status_code == 200, r.text
    job = client.follow(r.json(), limit=60)
    assert job["state"] == "failed" and job["field"] == "workload", job
    args = client.app.state.jobs.get(job["id"]).args
    assert args[args.index("--dims") + 1] == "age,nosuch"


@pytest.mark.slow  # a whole evaluate run (~5 s idle)
def test_a_histogram_compared_on_range_columns_is_published_on_them(client):
    """The recommendation of a histogram compared on the range columns goes to the publish field with those
    columns (published without them it would be the histogram over every column: another model, or refused)."""
    client.post("/api/load", files={"file": (DIABETES.name, DIABETES.read_bytes())}, data={"path": ""})
    client.post("/api/schema/upload", files={"schema_file": ("d.toml", DIABETES_SCHEMA.read_bytes())})
    r = client.post("/api/compare", json_body={"models": "dpcube:epsilon=1", "workload": "range", "queries": "30",
                                               "trials": "1", "dims": "age, sex,target"})
    job = client.follow(r.json(), limit=300)
    assert job["state"] == "done", job
    res = job["result"]
    assert res["recommended"] == "dpcube:epsilon=1"
    assert res["to_publish"] == 'dpcube:epsilon=1,dims=["age", "sex", "target"]'
    assert res["models"][0]["error"] == "" and res["models"][0]["verified"] is True


def test_a_table_not_eligible_for_the_model_is_refused_by_the_publish_field(client, monkeypatch):
    """The refusal of a model the table is not eligible for shows by the publish form's model field (it names
    "sensitive column" and went to the schema table). The command's own line, as `ppdp publish diverted` words it."""
    line = ("error: table not eligible for ℓ' = 2: dx = 'a' occurs 30 times, more than N/ℓ' = 20; protect another "
            "sensitive column, or use `ppdp publish global`")
    script = f"import sys; print({line!r}, file=sys.stderr); sys.exit(2)"
    monkeypatch.setattr(jobs, "ppdp_command", lambda args: [sys.executable, "-c", script])
    tmp = Path(client.app.state.session.workdir)
    job = client.app.state.jobs.add(jobs.Job("publish", ["publish", "diverted"], tmp))
    job.wait(60)
    body = client.get(f"/api/job/{job.id}").json()
    assert body["state"] == "failed" and body["field"] == "model", body
    assert body["error"] == line[len("error: "):]
    job = client.app.state.jobs.add(jobs.Job("evaluate", ["evaluate"], tmp))  # the comparison's: unchanged
    job.wait(60)
    assert client.get(f"/api/job/{job.id}").json()["field"] == "schema"
