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

__all__ = ["times", "timed", "write_result", "portable", "machine", "load_average", "provenance"]


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
