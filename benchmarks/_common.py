"""Shared by the benchmark scripts: timing, and the provenance block (:mod:`ppdp.provenance`).

Scripts are run as ``python benchmarks/<name>.py``; this directory is then on sys.path.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from ppdp.provenance import load_average, machine, provenance

__all__ = ["times", "timed", "write_result", "machine", "load_average", "provenance"]


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


def write_result(name: str, res: dict) -> Path:
    """Write ``benchmarks/results/<name>.json``."""
    out = Path(__file__).parent / "results" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2, default=str) + "\n")
    return out
