"""A small HTTP client for the app's endpoints, as the page's JavaScript calls them (``fetch`` with
JSON or a multipart form), against the app served by uvicorn on 127.0.0.1 in a thread. Standard
library only (starlette's TestClient would need httpx)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any


class Reply:
    def __init__(self, status: int, body: bytes, headers: dict[str, str]):
        self.status_code, self.content, self.headers = status, body, headers

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class AppClient:
    """``with AppClient(workdir) as c: c.post("/api/load", files={...})``"""

    def __init__(self, workdir: str | Path):
        import uvicorn

        from ppdp.app.server import create_app, free_port

        self.app = create_app(workdir)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="error"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> AppClient:
        self.thread.start()
        t0 = time.time()
        while not self.server.started:
            if time.time() - t0 > 30:
                raise RuntimeError("the app did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)

    def _send(self, method: str, url: str, body: bytes | None = None, ctype: str | None = None) -> Reply:
        req = urllib.request.Request(self.base + url, data=body, method=method)
        if ctype:
            req.add_header("Content-Type", ctype)
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                return Reply(r.status, r.read(), dict(r.headers))
        except urllib.error.HTTPError as e:
            return Reply(e.code, e.read(), dict(e.headers))

    def get(self, url: str) -> Reply:
        return self._send("GET", url)

    def post(self, url: str, json_body: Any = None, files: dict[str, tuple[str, bytes]] | None = None,
             data: dict[str, str] | None = None) -> Reply:
        if json_body is not None:
            return self._send("POST", url, json.dumps(json_body).encode(), "application/json")
        if files is None and data is None:
            return self._send("POST", url, b"")
        boundary = uuid.uuid4().hex
        parts: list[bytes] = []
        for k, v in (data or {}).items():
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode())
        for k, (fname, content) in (files or {}).items():
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"; filename="{fname}"\r\n'
                         f"Content-Type: application/octet-stream\r\n\r\n".encode() + content + b"\r\n")
        parts.append(f"--{boundary}--\r\n".encode())
        return self._send("POST", url, b"".join(parts), f"multipart/form-data; boundary={boundary}")

    def follow(self, job: dict[str, Any], limit: float = 900) -> dict[str, Any]:
        """Poll a job as the page does until it ends (cancelled past ``limit`` seconds)."""
        t0 = time.time()
        while job["state"] == "running":
            if time.time() - t0 > limit:
                self.post(f"/api/job/{job['id']}/cancel")
                return {"state": "timeout", "error": f"> {limit} s"}
            time.sleep(0.2)
            job = self.get(f"/api/job/{job['id']}").json()
        return job
