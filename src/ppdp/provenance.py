"""Where a number came from: library version, git commit, machine, load, seed and time.

Every result file (evaluate, audit, the paper reproductions, the benchmarks) writes its
parameters next to :func:`provenance`; the HTML reports show :func:`machine_info`.

    >>> p = provenance(seed=7, dataset="occ")
    >>> p["library_version"] == VERSION, p["seed"], p["dataset"]
    (True, 7, 'occ')
    >>> sorted(machine())
    ['cpu', 'cpus', 'load_average', 'platform', 'python']
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

VERSION = "0.1.0"
"""The library version (``ppdp.__version__``; written into every manifest)."""


def load_average() -> tuple[float, float, float] | None:
    """1-, 5- and 15-minute load averages (None where the OS has none): a shared machine's
    timings mean little without them."""
    try:
        return os.getloadavg()
    except (AttributeError, OSError):
        return None


@lru_cache(maxsize=1)
def cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo`` on Linux), or what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """Platform, Python, CPU model, core count and the current load average."""
    return {"platform": platform.platform(), "python": platform.python_version(), "cpu": cpu_model(),
            "cpus": os.cpu_count(), "load_average": load_average()}


def versions() -> dict[str, str]:
    """Versions of ppdp, Python and the numeric libraries the results depend on."""
    import matplotlib
    import numpy
    import pandas
    import pyarrow
    import scipy

    return {"ppdp": VERSION, "python": sys.version.split()[0], "numpy": numpy.__version__, "scipy": scipy.__version__,
            "pandas": pandas.__version__, "pyarrow": pyarrow.__version__, "matplotlib": matplotlib.__version__}


@lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The commit of the source checkout ppdp runs from (with ``-dirty`` when it has local
    changes), or None outside a git checkout or without git."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
        return head.stdout.strip() + ("-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def timestamp() -> str:
    """Now, in UTC (``2024-05-01 12:00:00 UTC``)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def provenance(seed: Any = None, **params: Any) -> dict[str, Any]:
    """The provenance block of a result file: ``params`` (data set, settings …) plus seed,
    library version, git commit, time, machine and library versions."""
    return {**params, "seed": seed, "library_version": VERSION, "git_commit": git_commit(), "generated": timestamp(),
            "machine": machine(), "versions": versions()}


def machine_info() -> dict[str, Any]:
    """One flat mapping (library versions, machine, commit, time) for a report's key-value table."""
    m = machine()
    return {**versions(), "platform": m["platform"], "cpu": m["cpu"], "cpu_count": m["cpus"],
            "load_average": m["load_average"], "git_commit": git_commit(), "generated": timestamp()}


def describe() -> str:
    """One line for a Markdown summary: ``ppdp 0.1.0 (git 1a2b3c4); 2 cores, Linux-…; load 0.52``."""
    commit = git_commit()
    load = load_average()
    return (f"ppdp {VERSION}" + (f" (git {commit[:7]}{'-dirty' if commit.endswith('-dirty') else ''})" if commit else "")
            + f"; {os.cpu_count()} cores, {platform.platform()}" + (f"; load {load[0]:.2f}" if load else ""))
