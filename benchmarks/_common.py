"""Shared by the benchmark scripts: timing and the machine description.

Scripts are run as ``python benchmarks/<name>.py``; this directory is then on sys.path.
"""

from __future__ import annotations

import os
import platform
import statistics
import time


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


def machine() -> dict:
    """Platform, core count and load average: the 2 cores may be shared, so say how busy they were."""
    return {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
            "load_average": os.getloadavg()}
