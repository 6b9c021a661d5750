"""Error metrics of estimated counts, shared by evaluate, the experiments and the benchmarks.

One zero policy: the relative error of a query whose true count is 0 is undefined, so it is
NaN, and every mean, median or percentile of relative errors here leaves NaN out. (A
floor such as ``max(true, 1)`` would mix an absolute error into a relative one; the papers
reproduced here draw their workloads so that true counts are positive, and evaluate counts
the queries of every bin, NaN or not.)

    >>> relative_error([10, 0, 4], [12, 3, 4])
    array([0.2, nan, 0. ])
    >>> float(mean_relative_error([10, 0, 4], [12, 3, 4]))
    0.1
    >>> list(selectivity_bin([5, 50, 500], 1000, [0, 0.01, 0.1, 1]))
    ['0%–1%', '1%–10%', '10%–100%']
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def relative_error(true, estimate) -> np.ndarray:
    """``|estimate − true| / true`` per query; NaN where ``true`` is not positive."""
    true = np.asarray(true, dtype=float)
    estimate = np.asarray(estimate, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(true > 0, np.abs(true - estimate) / true, np.nan)


def absolute_error(true, estimate) -> np.ndarray:
    """``|estimate − true|`` per query."""
    return np.abs(np.asarray(true, dtype=float) - np.asarray(estimate, dtype=float))


def mean_squared_error(true, estimate) -> float:
    """Mean of ``(estimate − true)²`` over the queries (NaN for an empty workload)."""
    d = np.asarray(estimate, dtype=float) - np.asarray(true, dtype=float)
    return float(np.mean(d * d)) if d.size else float("nan")


def defined(errors) -> np.ndarray:
    """The relative errors that are defined (NaN left out), in their order."""
    e = np.asarray(errors, dtype=float)
    return e[~np.isnan(e)]


def mean_relative_error(true, estimate) -> float:
    """Mean relative error over the queries with a positive true count (NaN if none)."""
    e = defined(relative_error(true, estimate))
    return float(e.mean()) if e.size else float("nan")


def percent(x: float) -> str:
    """``0.01`` → ``'1%'`` (the label of a selectivity edge)."""
    return f"{x * 100:g}%"


def selectivity_bin(true, n_rows: int, edges: Sequence[float]) -> np.ndarray:
    """Label (``'lo%–hi%'``) of each query's selectivity ``true / n_rows`` among the bins
    ``[edges[i], edges[i+1])``; values below the first edge fall in the first bin and values
    at or above the last in the last."""
    sel = np.asarray(true, float) / max(n_rows, 1)
    e = np.asarray(edges, dtype=float)
    idx = np.clip(np.searchsorted(e, sel, side="right") - 1, 0, len(e) - 2)
    labels = np.array([f"{percent(e[i])}–{percent(e[i + 1])}" for i in range(len(e) - 1)], dtype=object)
    return labels[idx]
