"""Work of the app that takes longer than a request: each step is one ``ppdp`` command run in a
child process (the library's own verbs and their own one-line errors), watched from a thread.

A child process can be cancelled at any point (terminated; what it was writing is removed), its
progress bars (``PPDP_PROGRESS=1``, on stderr) are read as they come, and an ``error: …`` line
is the command's own message for bad input."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_ids = itertools.count(1)
#: the job whose ``on_done`` is running in this thread: commands it runs (verify, audit) are its children,
#: ended with it when it is cancelled
_current = threading.local()
_BAR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def ppdp_command(args: Sequence[str]) -> list[str]:
    """The ``ppdp`` command line running ``args`` with this interpreter."""
    return [sys.executable, "-m", "ppdp.cli", *map(str, args)]


class Job:
    """One ``ppdp`` command in a child process.

    ``outputs``: paths the command writes (removed if it is cancelled or fails, so nothing is
    left half-written); ``on_done(job)`` runs in the watcher thread after a successful exit and
    may fill ``job.result``."""

    def __init__(self, kind: str, args: Sequence[str], cwd: Path, outputs: Sequence[Path] = (),
                 on_done: Callable[[Job], Any] | None = None, ok_codes: Sequence[int] = (0,)):
        self.id = str(next(_ids))
        self.kind = kind
        self.args = list(map(str, args))
        self.cwd = Path(cwd)
        self.outputs = [Path(p) for p in outputs]
        self.on_done = on_done
        self.ok_codes = tuple(ok_codes)
        self.state = "running"  # running | done | failed | cancelled
        self.stdout = ""
        self.stderr = ""
        self.error: str | None = None
        self.result: Any = None
        self.returncode: int | None = None
        self.started = time.monotonic()
        self.seconds: float | None = None
        self._cancelled = False
        self.children: list[Job] = []
        # the child imports the same ppdp as the app (a relative PYTHONPATH would not hold in ``cwd``)
        here = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
        env = dict(os.environ, PPDP_PROGRESS="1", PYTHONUNBUFFERED="1", COLUMNS="120", PYTHONPATH=path)
        self.proc = subprocess.Popen(ppdp_command(self.args), cwd=self.cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        parent = getattr(_current, "job", None)
        if parent is not None:
            parent.children.append(self)
            if parent.cancelled:
                self.cancel()
        self._err_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._err_thread.start()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    # -------------------------------------------------------------------------------- watching
    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while True:
            chunk = self.proc.stderr.read1(4096)  # type: ignore[attr-defined]
            if not chunk:
                break
            self.stderr += chunk.decode("utf-8", errors="replace")

    def _watch(self) -> None:
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        self.returncode = self.proc.wait()
        self._err_thread.join()
        self.stdout = out.decode("utf-8", errors="replace")
        self.seconds = time.monotonic() - self.started
        if self._cancelled:
            self._remove_outputs()
            self.state = "cancelled"
            return
        if self.returncode not in self.ok_codes:
            self._remove_outputs()
            self.error = error_line(self.stderr) or crash_line(self.kind, self.returncode, self.stderr)
            self.state = "failed"
            return
        try:
            if self.on_done is not None:
                _current.job = self
                try:
                    self.result = self.on_done(self)
                finally:
                    _current.job = None
            if self._cancelled:  # cancelled while its follow-up commands ran
                self.result = None
                self._remove_outputs()
                self.state = "cancelled"
                return
            self.state = "done"
        except Exception as e:  # reading what the command wrote failed: say so, keep nothing
            self._remove_outputs()
            if self._cancelled:
                self.result = None
                self.state = "cancelled"
                return
            self.error = str(e) or type(e).__name__
            self.state = "failed"

    def _remove_outputs(self) -> None:
        for p in self.outputs:
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            elif p.exists():
                p.unlink()

    def cancel(self) -> None:
        if self.state != "running":
            return
        self._cancelled = True  # also while ``on_done`` runs its own commands (a release's verify and audit)
        for child in list(self.children):
            child.cancel()
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    @property
    def cancelled(self) -> bool:
        """Whether the custodian cancelled it (its outputs are then removed)."""
        return self._cancelled

    def wait(self, timeout: float | None = None) -> Job:
        self._thread.join(timeout)
        return self

    # ------------------------------------------------------------------------------ reporting
    def progress(self) -> str:
        """The last progress line the command printed (its tqdm bar), or ''."""
        text = _BAR.sub("", self.stderr)
        parts = [p.strip() for p in re.split(r"[\r\n]", text) if p.strip() and not p.startswith("error:")]
        return parts[-1] if parts else ""

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "state": self.state, "progress": self.progress(),
                "error": self.error, "result": self.result, "stdout": self.stdout if self.state != "running" else "",
                "seconds": round(self.seconds if self.seconds is not None else time.monotonic() - self.started, 2)}


def error_line(stderr: str) -> str | None:
    """The command's ``error: …`` line (its one-line message for bad input), without the prefix."""
    for ln in reversed(stderr.replace("\r", "\n").splitlines()):
        if ln.startswith("error: "):
            return ln[len("error: "):].strip()
    return None


def crash_line(kind: str, returncode: int | None, stderr: str) -> str:
    """One line for a command that stopped without its own ``error:`` line: the exception a traceback ends
    with (a fault of ppdp, to report), or the exit status."""
    text = stderr.replace("\r", "\n")
    if "Traceback (most recent call last)" in text:
        last = [ln.strip() for ln in text.split("Traceback (most recent call last)")[-1].splitlines() if ln.strip()]
        if last:
            return f"ppdp {kind} failed unexpectedly: {last[-1]} (a fault in ppdp: please report it)"
    return f"ppdp {kind} stopped (exit {returncode})"


def run(kind: str, args: Sequence[str], cwd: Path, outputs: Sequence[Path] = (), ok_codes: Sequence[int] = (0,),
        timeout: float = 600) -> Job:
    """Run a short command to its end (schema infer, query, verify); past ``timeout`` seconds it is ended
    (nothing kept) and fails with a line saying so, rather than left running."""
    job = Job(kind, args, cwd, outputs, ok_codes=ok_codes).wait(timeout)
    if job.state == "running":
        job.cancel()
        job.wait(30)
        job.state, job.error = "failed", f"ppdp {kind} took more than {timeout:g} s and was stopped"
    return job


class Jobs:
    """The jobs of one app (thread-safe registry)."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def add(self, job: Job) -> Job:
        with self._lock:
            self._jobs[job.id] = job
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def cancel_all(self) -> None:
        with self._lock:
            jobs = list(self._jobs.values())
        for j in jobs:
            j.cancel()
