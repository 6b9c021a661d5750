"""The app's web server (Starlette): four steps — Load, Compare, Publish, Query — each a
``ppdp`` verb run on files in the app's working directory, which never leaves the machine.

Every step that can take long runs as a ``ppdp`` command in a child process (:mod:`.jobs`), so
the page shows its progress bar and can cancel it; schema files are checked by
:func:`ppdp.schema.load_schema`, answers come from :func:`ppdp.queries.sql.query_table`. Bad
input is the library's own one-line message, returned with the name of the form field it
concerns (``{"error": …, "field": …}``, HTTP 400)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.datastructures import UploadFile

from ..errors import PpdpError
from . import schema_edit
from .jobs import Job, Jobs, run

HERE = Path(__file__).parent
#: one model per family (bucketized, randomized, ε-DP histogram): the default comparison
DEFAULT_MODELS = ("fprivacy:theta=8", "sdr:rho1=0.1,rho2=0.3", "cells:epsilon=1")
#: files that are not delimited text (spreadsheets, archives, other packages' formats): refused by name,
#: with what to do; any other file is read by ``ppdp schema infer`` as the CLI reads it (any suffix, a
#: .gz/.bz2/.zst/.lz4 one decompressed), which says why when it cannot
NOT_TABLES = {".xlsx": "a spreadsheet: save it as CSV", ".xls": "a spreadsheet: save it as CSV",
              ".ods": "a spreadsheet: save it as CSV", ".zip": "a zip archive: unpack it and load the table inside",
              ".sav": "an SPSS file: save it as CSV", ".dta": "a Stata file: save it as CSV",
              ".sas7bdat": "a SAS file: save it as CSV", ".rds": "an R file: save it as CSV",
              ".rdata": "an R file: save it as CSV", ".json": "a JSON file: give a CSV or Parquet table",
              ".pdf": "a PDF document, not a table", ".docx": "a Word document, not a table",
              ".toml": "a schema file: load the table first, then the schema below"}
PARQUET_SUFFIXES = (".parquet", ".pq")
MAX_UPLOAD = 512 << 20


class BadInput(PpdpError):
    """Bad input from the page, with the form field it concerns."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


#: words of an error message → the field of the page it concerns (first match wins)
_FIELDS = (
    (r"^--workload|^--dims|range dimension", "workload"),
    (r"--epsilon|epsilon|ε", "models"),
    (r"--model|model '|unknown model|--theta|--rho|--l-prime|--l\b|parameter", "models"),
    (r"quasi|sensitive column|--sensitive|role|--schema|columns\.|schema file|bins|domain|missing", "schema"),
    (r"--workload|--queries|--trials", "workload"),
    (r"allow-disclosure|disclos", "allow_disclosure"),
)


def field_of(message: str, default: str) -> str:
    for pattern, field in _FIELDS:
        if re.search(pattern, message):
            return field
    return default


def model_error(text: Any) -> str:
    """A model's error in ``evaluate``'s models.csv, without the exception class of a bad-input refusal
    (``ParameterError: the domain of …`` → ``the domain of …``); other faults keep their name."""
    from .. import errors

    text = "" if text is None or (isinstance(text, float) and text != text) else str(text)
    m = re.match(r"([A-Za-z]+): ", text)
    if m and isinstance(getattr(errors, m.group(1), None), type) and issubclass(getattr(errors, m.group(1)), PpdpError):
        return text[m.end():]
    return text


class Session:
    """What the custodian has loaded, compared and published (one local user)."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.source: dict[str, Any] | None = None  # {"kind": "file", "path", "name"} | {"kind": "dataset", "name", "rows"}
        self.roles: dict[str, list[str]] = {}  # a bundled table's edited roles
        self.releases: dict[str, dict[str, Any]] = {}  # id → {"dir", "custodian", "name", "model"}
        self.evaluations: dict[str, Path] = {}
        self.lock = threading.Lock()
        self._n = 0

    def new_path(self, stem: str, suffix: str = "") -> Path:
        with self.lock:
            while True:
                self._n += 1
                p = self.workdir / f"{stem}-{self._n}{suffix}"
                if not p.exists():
                    return p

    @property
    def schema_path(self) -> Path:
        return self.workdir / "schema.toml"

    def input_args(self) -> list[str]:
        """The INPUT arguments of ``ppdp evaluate`` / ``publish`` for the loaded table."""
        if self.source is None:
            raise BadInput("load a table first (a CSV file, or a bundled table)", "file")
        if self.source["kind"] == "dataset":
            args = ["--dataset", self.source["name"]]
            if self.source.get("rows"):
                args += ["-n", str(self.source["rows"])]
            for c in self.roles.get("quasi", []):
                args += ["--quasi", c]
            for c in self.roles.get("sensitive", []):
                args += ["--sensitive", c]
            return args
        return [self.source["path"], "--schema", str(self.schema_path)]

    def source_args(self) -> list[str]:
        """The source-table arguments of ``ppdp verify`` (row accounting against the source)."""
        assert self.source is not None
        if self.source["kind"] == "dataset":
            return ["--dataset", self.source["name"]] + (["-n", str(self.source["rows"])] if self.source.get("rows") else [])
        return ["--input", self.source["path"], "--schema", str(self.schema_path)]


def _error(e: Exception, default_field: str) -> JSONResponse:
    field = getattr(e, "field", None) or field_of(str(e), default_field)
    return JSONResponse({"error": " ".join(str(e).split()), "field": field}, status_code=400)


def _job_error(job: Job, field: str) -> JSONResponse:
    """A failed command's own message, next to ``field``."""
    return JSONResponse({"error": job.error or "failed", "field": field}, status_code=400)


def _safe_name(name: str) -> str:
    base = Path(name.replace("\\", "/")).name
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", base).strip("._") or "table.csv"
    return base[:120]


#: a compression (:data:`ppdp.schema.MAGIC`) → the suffix its copy is given
_SUFFIX = {"gzip": ".gz", "bz2": ".bz2", "zstd": ".zst"}


def _compressed_name(name: str, head: bytes) -> str:
    """The name of an uploaded file's copy: a compressed file keeps or gains its compression suffix in lower
    case, so that the copy's name says what it is (the reader itself decompresses by the first bytes,
    :func:`ppdp.schema.compression_of`)."""
    from ..schema import MAGIC

    for magic, kind in MAGIC:
        if head.startswith(magic):
            suffix = _SUFFIX[kind]
            return name[: -len(suffix)] + suffix if name.lower().endswith(suffix) else name + suffix
    return name


# --------------------------------------------------------------------------------- the app
def create_app(workdir: str | Path | None = None) -> Starlette:
    """The app, keeping its files in ``workdir`` (default: a new temporary directory)."""
    from ..datasets import names as dataset_names

    session = Session(Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="ppdp-app-")))
    jobs = Jobs()
    env = Environment(loader=PackageLoader("ppdp.app", "templates"), autoescape=select_autoescape(["html", "j2"]))

    async def index(request: Request) -> HTMLResponse:
        from ..registry import describe

        page = env.get_template("index.html.j2").render(
            datasets=dataset_names(), models="\n".join(DEFAULT_MODELS), mechanisms=describe(),
            workdir=str(session.workdir))
        return HTMLResponse(page)

    # ------------------------------------------------------------------------------ load
    async def load(request: Request) -> JSONResponse:
        form = await request.form(max_part_size=MAX_UPLOAD)
        try:
            upload, path, dataset = form.get("file"), str(form.get("path") or "").strip(), str(form.get("dataset") or "")
            if dataset:
                return JSONResponse(await _load_dataset(dataset, str(form.get("rows") or "")))
            uploaded = isinstance(upload, UploadFile) and bool(upload.filename)
            if isinstance(upload, UploadFile) and upload.filename:
                data = await upload.read()
                name = _compressed_name(_safe_name(upload.filename), data[:4])
                _check_table_name(name)
                target = session.new_path("input") / name
                target.parent.mkdir()
                target.write_bytes(data)
                src = target
            elif path:
                src = Path(path).expanduser()
                if src.is_dir() and not src.name.lower().endswith(PARQUET_SUFFIXES):
                    raise BadInput(f"{path!r} is a directory: give the path of a table file", "file")
                if not src.exists():
                    raise BadInput(f"{path!r}: no such file", "file")
                _check_table_name(src.name)
            else:
                raise BadInput("choose a file to upload, give its path, or pick a bundled table", "file")
            note = ""
            if src.name.lower().endswith(PARQUET_SUFFIXES):
                try:
                    src, note = await _in_thread(_parquet_as_csv, src, uploaded)
                except BaseException:
                    if uploaded:
                        shutil.rmtree(src.parent, ignore_errors=True)  # nothing kept of a file that cannot be read
                    raise
                uploaded = True  # the CSV copy is the app's own file: removed if it cannot be read
            out = session.new_path("inferred", ".toml")
            job = await _in_thread(run, "schema infer", ["schema", "infer", str(src), "--out", str(out)], session.workdir, [out])
            if job.state != "done":
                if uploaded:
                    shutil.rmtree(src.parent, ignore_errors=True)  # nothing kept of a file that cannot be read
                return _job_error(job, "file")
            text = out.read_text(encoding="utf-8")
            session.schema_path.write_text(text, encoding="utf-8")
            session.source = {"kind": "file", "path": str(src.resolve()), "name": src.name}
            rows = schema_edit.to_rows(text)
            return JSONResponse({"source": session.source, "schema": rows, "message": " ".join(filter(None, [note, job.stdout.strip()]))})
        except PpdpError as e:
            return _error(e, "file")

    def _check_table_name(name: str) -> None:
        what = NOT_TABLES.get(Path(name).suffix.lower())
        if what is not None:
            raise BadInput(f"{name}: not a table file ({what}; give a delimited text file such as .csv or .tsv, "
                           "gzipped or not, or a .parquet file)", "file")

    def _parquet_as_csv(src: Path, uploaded: bool) -> tuple[Path, str]:
        """A Parquet file read by the library (:func:`ppdp.schema.read_frame`) and written as a CSV file in the
        working directory: ``ppdp schema infer`` then guesses its schema, and every later step reads that copy
        (a null cell becomes an empty one, i.e. missing)."""
        from ..schema import FileOptions, read_frame

        df = read_frame(src, FileOptions())
        name = re.sub(r"\.(parquet|pq)$", "", src.name, flags=re.I) + ".csv"
        if uploaded:  # the upload's own directory: the CSV copy replaces it
            target = src.parent / name
            df.to_csv(target, index=False)
            src.unlink()
            return target, f"Parquet file {src.name} ({len(df):,} rows) read and kept as {name} in the working directory;"
        target = session.new_path("input") / name
        target.parent.mkdir()
        try:
            df.to_csv(target, index=False)
        except BaseException:
            shutil.rmtree(target.parent, ignore_errors=True)
            raise
        return target, f"Parquet file {src.name} ({len(df):,} rows) read and written as {target.name} in the working directory;"

    async def _load_dataset(name: str, rows: str) -> dict[str, Any]:
        from ..datasets import load as load_dataset

        n = None
        if rows.strip():
            try:
                n = int(rows)
            except ValueError:
                n = 0
            if n < 1:
                raise BadInput(f"-n {rows!r}: a whole number of rows ≥ 1 (or leave it empty for the whole table)",
                               "rows")
        t = await _in_thread(load_dataset, name, n)
        session.source = {"kind": "dataset", "name": name, "rows": n}
        session.roles = {"quasi": list(t.quasi), "sensitive": list(t.sensitive)}
        cols = []
        for c in t.column_names:
            role = "sensitive" if c in t.sensitive else "quasi" if c in t.quasi else "drop"
            dom = [str(x) for x in t.domain(c)]
            cols.append({"name": c, "role": role, "type": "", "bins": "", "missing": "", "sensitive_values": "",
                         "domain": json.dumps(dom[:40], ensure_ascii=False) + (" …" if len(dom) > 40 else ""),
                         "reasons": [f"role: the bundled table's documented role ({len(dom)} values)"]})
        return {"source": session.source, "schema": {"file": {}, "file_notes": {}, "columns": cols, "header": []},
                "message": f"bundled table {name}: {t.n_rows:,} rows"}

    async def save_schema(request: Request) -> JSONResponse:
        try:
            data = await _json_body(request)
            if session.source is None:
                raise BadInput("load a table first", "file")
            if session.source["kind"] == "dataset":
                roles: dict[str, list[str]] = {"quasi": [], "sensitive": []}
                for row in data.get("columns") or []:
                    if row.get("role") in roles:
                        roles[row["role"]].append(row["name"])
                session.roles = roles
                return JSONResponse({"ok": True, "message": f"roles: quasi {', '.join(roles['quasi']) or 'none'}; "
                                                           f"sensitive {', '.join(roles['sensitive']) or 'none'}"})
            text = schema_edit.from_rows(data)
            return JSONResponse(await _in_thread(_store_schema, text))
        except PpdpError as e:
            return _error(e, "schema")

    def _store_schema(text: str, label: str = "", field: str = "schema") -> dict[str, Any]:
        from ..schema import load_schema

        tmp = session.workdir / ".schema-check.toml"
        tmp.write_text(text, encoding="utf-8")
        try:
            load_schema(tmp)  # the library's check; the saved schema is replaced only when it passes
        except PpdpError as e:  # its message names the check's file: name what the custodian gave instead
            tmp.unlink(missing_ok=True)
            msg = str(e).replace(f"schema {tmp.name}: ", f"schema {label}: " if label else "schema: ")
            raise BadInput(msg.replace(str(tmp), label or "the schema").replace(tmp.name, label or "the schema"),
                           field) from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        tmp.replace(session.schema_path)
        return {"ok": True, "message": "schema saved", "schema": schema_edit.to_rows(text)}

    async def upload_schema(request: Request) -> JSONResponse:
        form = await request.form(max_part_size=MAX_UPLOAD)
        try:
            up = form.get("schema_file")
            if up is None or not getattr(up, "filename", ""):
                raise BadInput("choose a schema file (TOML)", "schema_file")
            if session.source is None or session.source["kind"] != "file":
                raise BadInput("load a CSV file first; a bundled table has its own roles", "schema_file")
            text = (await up.read()).decode("utf-8")  # type: ignore[union-attr]
            label = _safe_name(str(up.filename))  # type: ignore[union-attr]
            try:
                schema_edit.to_rows(text)
            except PpdpError as e:
                raise BadInput(str(e).replace("--schema: ", f"{label}: "), "schema_file") from None
            return JSONResponse(await _in_thread(_store_schema, text, label, "schema_file"))
        except UnicodeDecodeError:
            return _error(BadInput("the schema file is not UTF-8 text", "schema_file"), "schema_file")
        except PpdpError as e:
            return _error(e, "schema_file")

    async def schema_file(request: Request) -> Response:
        if not session.schema_path.exists():
            return Response("no schema yet", status_code=404)
        return FileResponse(session.schema_path, media_type="application/toml", filename="schema.toml")

    # --------------------------------------------------------------------------- compare
    async def compare(request: Request) -> JSONResponse:
        try:
            data = await _json_body(request)
            models = [m.strip() for m in str(data.get("models") or "").splitlines() if m.strip()]
            if not models:
                raise BadInput("give at least one model, e.g. fprivacy:theta=8", "models")
            args = ["evaluate", *session.input_args()]
            for m in models:
                args += ["--model", m]
            pasted = str(data.get("sql_workload") or "").strip()
            outputs: list[Path] = []
            if pasted:  # the pasted statements become evaluate's workload file (`ppdp query --workload`'s syntax)
                wl_file = session.new_path("workload", ".sql")
                wl_file.write_text(pasted + "\n", encoding="utf-8")
                outputs.append(wl_file)
                workload = str(wl_file)
            else:
                workload = str(data.get("workload") or "anatomy")
            args += ["--workload", workload, "--queries", str(data.get("queries") or 1000),
                     "--trials", str(data.get("trials") or 1)]
            dims = ",".join(d.strip() for d in re.split(r"[,\n]", str(data.get("dims") or "")) if d.strip())
            if dims:  # evaluate's --dims: the range workload's columns (and a histogram model's, when it gives none)
                args += ["--dims", dims]
            if str(data.get("max_posterior") or "").strip():
                args += ["--max-posterior", str(data["max_posterior"]).strip()]
            out = session.new_path("evaluate")
            args += ["--out", str(out)]
            job = jobs.add(Job("evaluate", args, session.workdir, [out, *outputs], on_done=lambda j: _evaluation(j, out, dims)))
            return JSONResponse(job.as_dict())
        except PpdpError as e:
            return _error(e, "models")

    def _evaluation(job: Job, out: Path, dims: str = "") -> dict[str, Any]:
        import pandas as pd

        session.evaluations[job.id] = out
        models = pd.read_csv(out / "models.csv", keep_default_na=False)
        keep = ["model", "family", "claim", "max_posterior", "records_certain", "mean_rel_err", "mean_abs_err",
                "publish_s", "verified", "error"]
        rows = models[[c for c in keep if c in models.columns]].to_dict("records")
        for r in rows:  # a model's refusal as the CLI words it: without the library's class name before it
            r["error"] = model_error(r.get("error"))
        rec = next((ln for ln in job.stdout.splitlines() if ln.startswith(("recommendation:", "no recommendation:"))), "")
        model = rec[len("recommendation: "):].split(" — ")[0] if rec.startswith("recommendation:") else None
        to_publish = model
        if model and dims:  # a histogram compared on the range columns is published on them, as compared
            filled = next((str(r.get("filled") or "") for r in models.to_dict("records") if r.get("model") == model), "")
            if "dims=" in filled and "dims=" not in model:
                to_publish = f"{model},dims={json.dumps(dims.split(','), ensure_ascii=False)}"
        passed = [ln[len("passed over: "):] for ln in job.stdout.splitlines() if ln.startswith("passed over: ")]
        return {"models": rows, "recommendation": rec, "recommended": model, "to_publish": to_publish, "passed_over": passed,
                "report": f"/work/{out.name}/report.html"}

    async def job_status(request: Request) -> JSONResponse:
        job = jobs.get(request.path_params["job_id"])
        if job is None:
            return JSONResponse({"error": "no such job"}, status_code=404)
        d = job.as_dict()
        if job.state == "failed":
            field = field_of(job.error or "", {"evaluate": "models", "publish": "model"}.get(job.kind, "file"))
            # publishing has one model field of its own: a model's refusal (its parameters, the table not eligible
            # for it) shows there, not by the comparison's list or the schema table
            eligible = re.search(r"eligib", job.error or "")
            d["field"] = "model" if job.kind == "publish" and (field == "models" or eligible) else field
        return JSONResponse(d)

    async def job_cancel(request: Request) -> JSONResponse:
        job = jobs.get(request.path_params["job_id"])
        if job is None:
            return JSONResponse({"error": "no such job"}, status_code=404)
        job.cancel()
        await _in_thread(job.wait, 30)  # off the event loop: the page's polling goes on meanwhile
        return JSONResponse(job.as_dict())

    async def work_file(request: Request) -> Response:
        """A file the app wrote (an evaluation's report), from its working directory only."""
        p = (session.workdir / request.path_params["path"]).resolve()
        if session.workdir.resolve() not in p.parents or not p.is_file() or p.suffix not in (".html", ".csv", ".png"):
            return Response("not found", status_code=404)
        return FileResponse(p)

    # --------------------------------------------------------------------------- publish
    async def publish(request: Request) -> JSONResponse:
        try:
            data = await _json_body(request)
            spec = str(data.get("model") or "").strip()
            if not spec:
                raise BadInput("choose the model to publish", "model")
            name, flags = await _in_thread(_publish_flags, spec)
            out = session.new_path("release")
            custodian = out.with_name(out.name + ".custodian.json")
            args = ["publish", name, *session.input_args(), *flags, "--out", str(out), "--custodian", str(custodian)]
            if data.get("allow_disclosure"):
                args.append("--allow-disclosure")
            seed = str(data.get("seed") or "").strip()
            if seed:
                if not re.fullmatch(r"\d{1,18}", seed):
                    raise BadInput(f"--seed {seed!r}: a whole number ≥ 0 (or leave it empty for a release fit for publication)", "seed")
                args += ["--seed", seed]
            job = jobs.add(Job("publish", args, session.workdir, [out, custodian],
                               on_done=lambda j: _published(j, spec, out, custodian)))
            return JSONResponse(job.as_dict())
        except PpdpError as e:
            field = getattr(e, "field", None) or field_of(str(e), "model")
            return _error(BadInput(str(e), "model" if field == "models" else field), "model")

    def _published(job: Job, spec: str, out: Path, custodian: Path) -> dict[str, Any]:
        args = ["verify", str(out), *session.source_args(), "--json"]
        if custodian.exists():
            args += ["--custodian", str(custodian)]
        ver = run("verify", args, session.workdir, ok_codes=(0, 1))
        if ver.state != "done":
            raise PpdpError(f"verify: {ver.error}")
        report = json.loads(ver.stdout)
        manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
        audit = _audit(out)
        if job.cancelled:  # cancelled during its verify or audit: the release is removed, not listed
            raise PpdpError("cancelled")
        rid = out.name
        session.releases[rid] = {"dir": out, "custodian": custodian if custodian.exists() else None, "model": spec}
        lines = [ln.strip() for ln in job.stdout.splitlines() if ln.strip()]
        claim = next((ln[len("claim: "):] for ln in lines if ln.startswith("claim: ")), "")
        return {"release": rid, "model": spec, "publish_output": lines, "claim": claim,
                "certificate_line": next((ln for ln in lines if ln.startswith("certificate:")), ""),
                "disclosure_line": next((ln for ln in lines if ln.startswith("disclosure:")), ""),
                "verify": report, "audit": audit, "fit_for_publication": manifest.get("fit_for_publication"),
                "files": sorted(p.name for p in out.iterdir()), "custodian": custodian.exists(),
                "zip": f"/download/{rid}.zip", "custodian_url": f"/download/{rid}.custodian.json" if custodian.exists() else None}

    def _audit(release: Path) -> dict[str, Any]:
        """``ppdp audit RELEASE`` against the source (the posterior audit: best posterior per record class
        next to the bound, records disclosed with certainty); its exit 1 (a violation or a disclosure) is a
        finding to show, not a failure. The attacks that need held-back control records are not run here."""
        out = session.new_path("audit")
        args = ["audit", str(release), *session.source_args(), "--out", str(out)]
        assert session.source is not None
        if session.source["kind"] == "dataset" and session.source.get("rows"):
            args.append("--attacks")  # a bundled table's sample: its other rows are the held-back control
        job = run("audit", args, session.workdir, [out], ok_codes=(0, 1))
        if job.state != "done":
            return {"error": job.error or "ppdp audit failed"}
        res = json.loads((out / "audit.json").read_text(encoding="utf-8"))
        lines = job.stdout.splitlines()
        start = next((i for i, ln in enumerate(lines) if ln.startswith("attacks:")), None)
        attacks = [] if start is None else [ln for ln in lines[start:] if not ln.startswith("report:")]
        return {"headline": res.get("headline", ""), "notes": list(res.get("notes") or []), "attacks": attacks,
                "violations": res.get("violations"), "exit": job.returncode, "report": f"/work/{out.name}/report.html"}

    def _publish_flags(spec: str) -> tuple[str, list[str]]:
        """A model as ``name:key=value,…`` (evaluate's spelling) → ``ppdp publish NAME`` and its flags."""
        from ..cli.publish import flag_of
        from ..evaluate import parse_model_spec
        from ..registry import mechanisms

        ms = parse_model_spec(spec)
        cls = mechanisms()[ms.name]
        flags: list[str] = []
        for key, v in ms.params.items():
            flag = flag_of(cls, key)
            if isinstance(v, bool):
                flags.append(flag if v else "--no-" + flag[2:])
            elif isinstance(v, (list, tuple)):
                flags += [flag, *map(str, v)]
            elif isinstance(v, dict):
                raise BadInput(f"{key}: give it in the schema file (the page publishes scalar and list parameters)", "model")
            else:
                flags += [flag, str(v)]
        return ms.name, flags

    async def download(request: Request) -> Response:
        name = request.path_params["name"]
        if name.endswith(".zip") and name[:-4] in session.releases:
            rel = session.releases[name[:-4]]["dir"]
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
                for p in sorted(Path(rel).rglob("*")):
                    if p.is_file():
                        z.write(p, f"{Path(rel).name}/{p.relative_to(rel)}")
            return Response(buf.getvalue(), media_type="application/zip",
                            headers={"Content-Disposition": f'attachment; filename="{name}"'})
        if name.endswith(".custodian.json") and name[: -len(".custodian.json")] in session.releases:
            c = session.releases[name[: -len(".custodian.json")]]["custodian"]
            if c is not None:
                return FileResponse(c, media_type="application/json", filename=name)
        if name.endswith(".csv"):
            p = session.workdir / name
            if re.fullmatch(r"answers-\d+\.csv", name) and p.is_file():
                return FileResponse(p, media_type="text/csv", filename=name)
        return Response("not found", status_code=404)

    # ----------------------------------------------------------------------------- query
    async def upload_release(request: Request) -> JSONResponse:
        form = await request.form(max_part_size=MAX_UPLOAD)
        try:
            up = form.get("release_zip")
            if up is None or not getattr(up, "filename", ""):
                raise BadInput("choose a release (.zip)", "release_zip")
            data = await up.read()  # type: ignore[union-attr]
            return JSONResponse(await _in_thread(_unpack_release, data, up.filename))  # type: ignore[union-attr]
        except PpdpError as e:
            return _error(e, "release_zip")

    def _unpack_release(data: bytes, filename: str) -> dict[str, Any]:
        from ..releases.base import load_release

        try:
            z = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile:
            raise BadInput(f"{filename}: not a zip file (a release is downloaded as .zip)", "release_zip") from None
        manifests = [n for n in z.namelist() if n.endswith("manifest.json")]
        if not manifests:
            raise BadInput(f"{filename}: no manifest.json inside: not a ppdp release", "release_zip")
        root = manifests[0][: -len("manifest.json")]
        out = session.new_path("uploaded")
        try:
            out.mkdir()
            for info in z.infolist():
                if info.is_dir() or not info.filename.startswith(root):
                    continue
                rel = Path(info.filename[len(root):])
                if rel.is_absolute() or ".." in rel.parts:
                    raise BadInput(f"{filename}: unsafe path {info.filename!r} in the zip", "release_zip")
                target = out / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(info))
            load_release(out)  # the library reads it, or says why not
        except PpdpError as e:  # its message names the app's copy: name the file uploaded instead
            shutil.rmtree(out, ignore_errors=True)
            raise BadInput(str(e).replace(str(out) + "/", f"{filename}: ").replace(str(out), filename),
                           "release_zip") from None
        except Exception:
            shutil.rmtree(out, ignore_errors=True)
            raise
        session.releases[out.name] = {"dir": out, "custodian": None, "model": filename}
        return {"release": out.name, "message": f"release {filename} loaded"}

    async def query(request: Request) -> JSONResponse:
        try:
            data = await _json_body(request)
            rid, sql = str(data.get("release") or ""), str(data.get("sql") or "").strip()
            if rid not in session.releases:
                raise BadInput("publish a release or upload one first", "release")
            if not sql:
                raise BadInput("write a count query, e.g. SELECT sex, COUNT(*) FROM t GROUP BY sex", "sql")
            level_text = str(data.get("level") or "0.95").strip()
            try:
                level = float(level_text)
            except ValueError:
                raise BadInput(f"--level {level_text!r}: a number in (0, 1), e.g. 0.95", "level") from None
            return JSONResponse(await _in_thread(_answer, session.releases[rid]["dir"], sql, level))
        except ValueError as e:
            return _error(e, "sql")

    def _answer(rel_dir: Path, sql: str, level: float) -> dict[str, Any]:
        import math

        from ..queries.sql import query_table
        from ..releases.base import load_release

        if not 0 < level < 1:
            raise BadInput(f"--level must be in (0, 1), got {level}", "level")
        frame = query_table(load_release(rel_dir), sql, level=level)
        out = session.new_path("answers", ".csv")
        frame.to_csv(out, index=False)  # as `ppdp query --out answers.csv`
        cols = [c for c in frame.columns if c != "query"]
        rows = [[None if isinstance(v, float) and math.isnan(v) else (v if isinstance(v, (int, float)) else str(v))
                 for v in r] for r in frame[cols].itertuples(index=False)]
        return {"columns": cols, "rows": rows, "kind": frame.attrs.get("kind", "confidence"),
                "method": frame.attrs.get("method", ""), "level": level, "csv": f"/download/{out.name}"}

    routes = [
        Route("/", index),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Route("/api/load", load, methods=["POST"]),
        Route("/api/schema", save_schema, methods=["POST"]),
        Route("/api/schema/upload", upload_schema, methods=["POST"]),
        Route("/schema.toml", schema_file),
        Route("/api/compare", compare, methods=["POST"]),
        Route("/api/job/{job_id}", job_status),
        Route("/api/job/{job_id}/cancel", job_cancel, methods=["POST"]),
        Route("/api/publish", publish, methods=["POST"]),
        Route("/api/release", upload_release, methods=["POST"]),
        Route("/api/query", query, methods=["POST"]),
        Route("/download/{name}", download),
        Route("/work/{path:path}", work_file),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        jobs.cancel_all()  # no child process outlives the app

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.session = session
    app.state.jobs = jobs
    return app


async def _json_body(request: Request) -> dict[str, Any]:
    """The JSON object the page posts, or one line saying what came instead."""
    try:
        data = json.loads(await request.body() or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise BadInput("the request is not JSON (reload the page)", "file") from None
    if not isinstance(data, dict):
        raise BadInput("the request is not a JSON object (reload the page)", "file")
    return data


async def _in_thread(fn, *args):
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(fn, *args)


def free_port(host: str = "127.0.0.1") -> int:
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def serve(host: str = "127.0.0.1", port: int = 0, open_browser: bool = True, workdir: str | Path | None = None,
          ready=None) -> None:
    """Run the app until interrupted; ``port`` 0 takes a free one. ``ready(url)`` is called once it listens."""
    import uvicorn

    app = create_app(workdir)
    port = port or free_port(host)
    url = f"http://{host}:{port}/"

    class _Server(uvicorn.Server):
        def startup_done(self) -> None:
            if ready is not None:
                ready(url)
            if open_browser:
                import webbrowser

                webbrowser.open(url)

    server = _Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    orig = server.startup

    async def startup(sockets=None):
        await orig(sockets)
        server.startup_done()

    server.startup = startup  # type: ignore[method-assign]
    server.run()
