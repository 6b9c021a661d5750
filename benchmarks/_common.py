"""Shared by the benchmark scripts: timing, and the provenance block (:mod:`ppdp.provenance`).

Scripts are run as ``python benchmarks/<name>.py``; this directory is then on sys.path.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from pathlib import Path

from ppdp.provenance import load_average, machine, provenance

__all__ = ["times", "timed", "write_result", "portable", "machine", "load_average", "provenance", "peak_rss_gib", "child_env"]


def peak_rss_gib() -> float:
    """This process's peak resident memory in GiB: ``VmHWM``, the high-water mark of its own
    address space. Not ``ru_maxrss``: on Linux a process started by fork + exec keeps its
    parent's ``ru_maxrss`` (a benchmark child of a parent that held a 10^7-row table reported
    the parent's 6.4 GiB), while ``VmHWM`` starts afresh with the new program. Falls back to
    ``ru_maxrss`` where ``/proc`` is absent."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**20  # kB
    except OSError:  # pragma: no cover - not Linux
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def child_env() -> dict:
    """The environment of a benchmark's child process (``python -c``): this one's, with the
    benchmarks directory first on ``PYTHONPATH`` so that the child imports :mod:`_common`."""
    import os

    here = str(Path(__file__).resolve().parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}


def times(fn, repeat: int = 5, warmup: int = 1) -> dict:
    """Wall-clock seconds of ``fn()`` over ``repeat`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return {"min": min(ts), "median": statistics.median(ts), "repeats": repeat}


def timed(fn, repeat: int = 5) -> float:
    """Median wall-clock seconds of ``fn()`` (one warm-up run first)."""
    return times(fn, repeat)["median"]


REPO = Path(__file__).resolve().parent.parent


def portable(value):
    """``value`` with every absolute path in it made machine-independent: relative to the
    repository when inside it, else its last component (a data file's or directory's name)."""
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable(v) for v in value]
    if isinstance(value, str) and value.startswith("/") and "\n" not in value and " " not in value:
        p = Path(value)
        try:
            return str(p.resolve().relative_to(REPO))
        except ValueError:
            return p.name
    if isinstance(value, str) and "/" in value:  # paths inside a message (a child's traceback)
        return _PATH_IN_TEXT.sub(_short_path, value)
    return value


_PATH_IN_TEXT = re.compile(r"(?<![\w.])/(?:[^\s\"',:|/]+/)+[^\s\"',:|/]*")


def _short_path(m: re.Match) -> str:
    """A path in a message: from ``src/ppdp/`` or ``site-packages/`` on, else its last component."""
    text = m.group(0)
    for anchor in ("src/ppdp/", "site-packages/"):
        if anchor in text:
            return text[text.index(anchor):]
    return text.rstrip("/").rsplit("/", 1)[-1]


def write_result(name: str, res: dict) -> Path:
    """Write ``benchmarks/results/<name>.json`` (paths made portable: :func:`portable`)."""
    out = Path(__file__).parent / "results" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(portable(json.loads(json.dumps(res, default=str))), indent=2) + "\n")
    return out
