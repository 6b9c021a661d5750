"""Drive the app's HTTP endpoints as the page's JavaScript does, through the whole flow, on the
gauntlet's tables (a manual check, not collected by pytest):

    python tests/app/drive_gauntlet.py DATA_DIR SCHEMA_DIR [TABLE ...] [--no-dims]

Per table: upload the file (inferred schema) → edit a role through the editor → upload the reviewed
schema → compare (one model per family) → publish every family → GROUP BY and range queries →
download the zip, verify it with the CLI, upload it back as a receiver and query it. The ε-DP
histograms get the table's three columns (dims) as the CLI gauntlet gives them, and a wide table is
compared on them (the page's "range columns"), unless --no-dims. Prints one
line per step: ``table step status detail``."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from client import AppClient  # noqa: E402

PUBLISH = {"fprivacy": "theta=8", "anatomy": "l=2", "sdr": "rho1=0.1,rho2=0.5", "uniform": "rho1=0.1,rho2=0.5",
           "global": "l_prime=2", "diverted": "l_prime=2", "dp": "epsilon=1", "dpcube": "epsilon=1"}


def params_of(cfg: dict, fam: str) -> str:
    p = cfg.get("params", {}).get(fam)
    spec = PUBLISH[fam] if not p else ",".join(f"{p[i].lstrip('-').replace('-', '_')}={p[i + 1]}"
                                                for i in range(0, len(p), 2))
    if fam in ("dp", "dpcube") and DIMS:  # as the CLI gauntlet publishes them: on the table's three columns
        spec += ",dims=" + json.dumps(cfg["dims"].split(","))
    return spec


DIMS = "--no-dims" not in sys.argv


def poll(c: AppClient, job: dict, limit: float = 900) -> dict:
    return c.follow(job, limit)


def out(table: str, step: str, ok: bool | str, detail: str = "") -> None:
    status = ok if isinstance(ok, str) else ("ok" if ok else "FAIL")
    print(f"{table:18s} {step:28s} {status:8s} {' '.join(str(detail).split())[:400]}", flush=True)


def drive(table: str, cfg: dict, data: Path, schemas: Path, workdir: Path) -> None:
    with AppClient(workdir) as c:
        f = data / cfg["file"]
        r = c.post("/api/load", files={"file": (f.name, f.read_bytes())}, data={"path": "", "dataset": "", "rows": ""})
        if r.status_code != 200:
            out(table, "load", False, f"{r.status_code} {r.text}")
            return
        body = r.json()
        rows = body["schema"]
        out(table, "load", True, f"{len(rows['columns'])} cols file={rows['file']}")
        reviewed_text = (schemas / f"{table}.toml").read_text(encoding="utf-8")
        reviewed = tomllib.loads(reviewed_text)
        sa = next(k for k, v in reviewed["columns"].items() if v.get("role") == "sensitive")
        # edit a role and a bin through the editor (as saveSchema does)
        edited = {"file": dict(rows["file"]), "columns": [dict(x) for x in rows["columns"]]}
        for col in edited["columns"]:
            if col["name"] == sa:
                col["role"] = "sensitive"
        r = c.post("/api/schema", json_body=edited)
        before = tomllib.loads(c.get("/schema.toml").text) if r.status_code == 200 else {}
        out(table, "schema-edit", r.status_code == 200, r.text[:300] if r.status_code != 200 else
            f"file kept: {before.get('file') == tomllib.loads(_inferred(workdir)).get('file')}")
        # upload the reviewed schema
        r = c.post("/api/schema/upload", files={"schema_file": (f"{table}.toml", reviewed_text.encode())})
        if r.status_code != 200:
            out(table, "schema-upload", False, f"{r.status_code} {r.text}")
            return
        up_rows = r.json()["schema"]
        # the page saves the table before compare/publish: round-trip it
        r = c.post("/api/schema", json_body={"file": up_rows["file"], "columns": up_rows["columns"]})
        saved = tomllib.loads(c.get("/schema.toml").text)
        lost_file = {k: v for k, v in reviewed.get("file", {}).items() if saved.get("file", {}).get(k) != v}
        lost_cols = {(n, k) for n, s in reviewed["columns"].items() for k, v in s.items()
                     if saved["columns"].get(n, {}).get(k) != v}
        out(table, "schema-upload+save", r.status_code == 200 and not lost_file and not lost_cols,
            r.text[:200] if r.status_code != 200 else f"lost file={lost_file} cols={sorted(lost_cols)[:5]}")
        # compare: one model per family
        models = f"fprivacy:{params_of(cfg, 'fprivacy')}\nsdr:{params_of(cfg, 'sdr')}\ndpcube:epsilon=1"
        t0 = time.time()
        wide = cfg.get("eval_dims") and DIMS  # the page's "range columns", as the CLI gauntlet's --dims
        r = c.post("/api/compare", json_body={"models": models, "workload": "range" if wide else "anatomy",
                                              "queries": "200", "trials": "1", "max_posterior": "", "sql_workload": "",
                                              "dims": cfg["dims"] if wide else ""})
        if r.status_code != 200:
            out(table, "compare", False, f"{r.status_code} {r.text}")
        else:
            job = poll(c, r.json())
            res = job.get("result") or {}
            errs = [m.get("error") for m in res.get("models", []) if m.get("error")]
            out(table, "compare", job["state"] == "done" and not errs,
                f"{time.time() - t0:.0f}s {job['state']} {job.get('error') or ''} {res.get('recommendation', '')} errs={errs}")
            if res.get("report"):
                rr = c.get(res["report"])
                out(table, "compare-report", rr.status_code == 200, rr.status_code)
        # publish every family
        refused = cfg.get("refused", {})
        for fam in PUBLISH:
            spec = f"{fam}:{params_of(cfg, fam)}"
            t0 = time.time()
            r = c.post("/api/publish", json_body={"model": spec, "seed": "", "allow_disclosure": False})
            if r.status_code != 200:
                out(table, f"publish:{fam}", "refused" if fam in refused else False, f"{r.status_code} {r.text}")
                continue
            job = poll(c, r.json())
            if job["state"] != "done":
                st = "refused" if fam in refused and job["state"] == "failed" else False
                out(table, f"publish:{fam}", st, f"{job['state']} field={job.get('field')} {job.get('error')}")
                continue
            res = job["result"]
            v, a = res["verify"], res["audit"]
            out(table, f"publish:{fam}", bool(v.get("ok")) and not a.get("error"),
                f"{time.time() - t0:.0f}s verify={v.get('ok')} {v.get('problems') or ''} audit={a.get('error') or a.get('headline')}")
            rid = res["release"]
            for label, sql in (("groupby", f"SELECT {cfg['group']}, COUNT(*) FROM t GROUP BY {cfg['group']}"),
                               ("range", f"SELECT COUNT(*) FROM t WHERE {cfg['where']}")):
                r = c.post("/api/query", json_body={"release": rid, "sql": sql, "level": "0.95"})
                b = r.json() if r.headers.get("content-type", r.headers.get("Content-Type", "")).startswith("application/json") else {}
                out(table, f"query:{fam}:{label}", r.status_code == 200,
                    f"{b.get('kind')} {b.get('rows', [])[:2]}" if r.status_code == 200 else f"{r.status_code} {r.text[:300]}")
            z = c.get(res["zip"])
            if z.status_code != 200:
                out(table, f"zip:{fam}", False, z.status_code)
                continue
            with tempfile.TemporaryDirectory() as td:
                zipfile.ZipFile(io.BytesIO(z.content)).extractall(td)
                rel = next(Path(td).iterdir())
                cmd = [sys.executable, "-m", "ppdp.cli", "verify", str(rel), "--input", str(f), "--schema",
                       str(schemas / f"{table}.toml")]
                p = subprocess.run(cmd, capture_output=True, text=True)
                out(table, f"zip-verify:{fam}", p.returncode == 0, (p.stdout + p.stderr).strip().splitlines()[-1:])
            r = c.post("/api/release", files={"release_zip": (f"{rid}.zip", z.content)})
            if r.status_code != 200:
                out(table, f"receiver:{fam}", False, f"{r.status_code} {r.text}")
                continue
            r2 = c.post("/api/query", json_body={"release": r.json()["release"], "sql":
                                            f"SELECT {cfg['group']}, COUNT(*) FROM t GROUP BY {cfg['group']}", "level": "0.9"})
            out(table, f"receiver-query:{fam}", r2.status_code == 200, r2.text[:200] if r2.status_code != 200 else "")


def _inferred(workdir: Path) -> str:
    return sorted(workdir.glob("inferred-*.toml"))[-1].read_text(encoding="utf-8")


def main() -> None:
    data, schemas = Path(sys.argv[1]), Path(sys.argv[2])
    import importlib.util

    spec = importlib.util.spec_from_file_location("gauntlet_steps_copy", data.parent / "gauntlet_steps.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)  # the table settings only
    ns = vars(mod)
    tables = [a for a in sys.argv[3:] if not a.startswith("--")] or list(ns["TABLES"])
    for t in tables:
        with tempfile.TemporaryDirectory() as wd:
            try:
                drive(t, ns["TABLES"][t], data, schemas, Path(wd))
            except Exception as e:  # noqa: BLE001
                out(t, "driver", False, f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
