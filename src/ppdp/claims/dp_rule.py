"""The default ε-DP histogram's choice of strategy by predicted error (``dp``; verify re-derives it).

The target is the mean absolute error over *all* ranges of the cube: a uniformly random box
(every dimension an independent range [lo, hi], lo ≤ hi, both uniform over the declared domain).
Every candidate's error is predicted from public quantities only — ε (after the noisy total),
the declared shape — and the noisy total N̂ (1% of ε, already in the claim); the choice is the
candidate with the smallest prediction, so it is post-processing of ε-DP outputs and costs no
further budget. Predictions use the normal approximation, MAE ≈ √(2/π)·sd.

* ``cells`` (the identity): every cell with ε; a box of k cells has sd √(2k)/ε. Closed form
  (continuous-Laplace variance 2/ε², like ``kron``'s; the discrete Laplace is a little below
  it at large ε). Never below ``kron`` (whose design includes
  the identity), so never chosen; recorded for information.
* ``kron`` (Kronecker least squares): sd √2/ε·Π_i √(q_iᵀG_i⁻¹q_i) for a box (G_i the Gram
  matrix of dimension i's weighted strategy, :mod:`ppdp.kernels.strategies`), averaged over the
  target's ranges. Closed form, data-independent.
* ``marginals`` with every ``way``-dimensional marginal (private-pgm inference): noise plus model
  bias, √(noise² + bias²):

  - noise = :data:`MARGINAL_NOISE` · √(2/π)·√2·M/ε · mean over the M measured marginals of
    √(mean cells of a random box's projection on it): each marginal gets ε/M, and a box's
    answer leans on its projections (the factor, < 1, is the averaging the model does over
    overlapping marginals);
  - bias = :data:`MARGINAL_BIAS`\\[way] · Â, with Â = N̂·Π E(len_i)/n_i the expected count of a
    random box if the rows were spread evenly. The model's bias is a bound set on data, not measured per release: the share of
    a random box's count that the maximum-entropy model of the ``way``-marginals misplaces.
    It cannot be read off the marginals the model is fitted to (they are matched, not tested);
    the constants are the largest relative bias seen on the tuning cubes (UCI Adult), so the rule
    errs towards the data-independent ``kron`` when the model's floor approaches kron's error.

* In one or two dimensions the rule is unchanged: ``kron`` when the mean cell holds at least
  :data:`DP_CELL_SIGNAL` noise scales (s = N̂ε/cells), else the profiled adaptive grid (whose
  error has no closed form; the crossover was measured on the 74 × 99 Adult grid).

Constants and the experiment that set them: docs/dp-histograms.md, "The default's rule".
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from ..kernels.strategies import kron_strategy

__all__ = ["dp_choice", "predicted_errors", "box_fraction", "DP_CELL_SIGNAL", "MARGINAL_NOISE", "MARGINAL_BIAS"]

#: one or two dimensions: ``kron`` when N̂·ε/cells is at least this, else the adaptive grid
DP_CELL_SIGNAL = 10.0
#: averaging factor of the marginal model's noise term (fitted on Adult, see the docs)
MARGINAL_NOISE = 0.5
#: relative bias bound of the marginal model per ``way`` (share of a random box's count; Adult)
MARGINAL_BIAS = {1: 0.14, 2: 0.045}
#: ways the rule considers in three or more dimensions
MARGINAL_WAYS = (1, 2)

_MAE = math.sqrt(2.0 / math.pi)


def box_fraction(shape: Sequence[int]) -> float:
    """Expected share of the cube a uniformly random box covers: Π E(len_i)/n_i."""
    return math.prod(_mean_len(n) / int(n) for n in shape)


def _mean_len(n: int) -> float:
    """Mean length of a random range of n cells (two uniform ends, sorted): (n² + 3n − 1)/(3n)."""
    n = int(n)
    return (n * n + 3 * n - 1) / (3.0 * n)


def _mean_sqrt_len(n: int) -> float:
    """E√len of a random range of n cells (len 1 with probability 1/n, k ≥ 2 with 2(n − k + 1)/n²)."""
    n = int(n)
    k = np.arange(2, n + 1, dtype=np.float64)
    return float(1.0 / n + (2.0 * (n - k + 1) / (n * n) * np.sqrt(k)).sum())


def identity_mae(epsilon: float, shape: Sequence[int]) -> float:
    """Predicted MAE of the identity on a random box: √(2/π)·√2/ε·Π E√len_i (continuous-Laplace
    variance, as for ``kron``, so that the two compare on the same footing)."""
    return _MAE * math.sqrt(2.0) / float(epsilon) * math.prod(_mean_sqrt_len(n) for n in shape)


@lru_cache(maxsize=256)
def _kron_range_factor(n: int) -> float:
    """E√(qᵀG⁻¹q) of ``kron``'s strategy for a dimension of n cells, over the random ranges of the
    target (two uniform ends, sorted): every range's qᵀG⁻¹q from the 2-D prefix sums of G⁻¹."""
    g = kron_strategy((int(n),))[0].gram_inverse()
    s = np.zeros((n + 1, n + 1))
    s[1:, 1:] = g.cumsum(0).cumsum(1)
    lo, hi = np.triu_indices(n)
    v = s[hi + 1, hi + 1] - s[lo, hi + 1] - s[hi + 1, lo] + s[lo, lo]
    w = np.where(lo == hi, 1.0, 2.0) / (n * n)
    return float((w * np.sqrt(np.maximum(v, 0.0))).sum())


def kron_mae(epsilon: float, shape: Sequence[int]) -> float:
    """Predicted MAE of ``kron`` on a random box (closed form, data-independent): √(2/π)·√2/ε·Π
    E√(q_iᵀG_i⁻¹q_i), the Kronecker structure making the box's variance a product over dimensions."""
    return _MAE * math.sqrt(2.0) / float(epsilon) * math.prod(_kron_range_factor(int(n)) for n in shape)


def marginals_mae(epsilon: float, shape: Sequence[int], n_hat: float, way: int) -> dict[str, float]:
    """Predicted noise, bias and MAE of the ``way``-marginal model on a random box."""
    sets = list(itertools.combinations(range(len(shape)), min(int(way), len(shape))))
    m = len(sets)
    spread = sum(math.sqrt(math.prod(_mean_len(shape[i]) for i in s)) for s in sets) / m
    noise = MARGINAL_NOISE * _MAE * math.sqrt(2.0) * m / float(epsilon) * spread
    bias = MARGINAL_BIAS[int(way)] * max(float(n_hat), 0.0) * box_fraction(shape)
    return {"noise": noise, "bias": bias, "mae": math.sqrt(noise * noise + bias * bias)}


def predicted_errors(epsilon: float, shape: Sequence[int], n_hat: float) -> dict[str, float]:
    """Predicted MAE on a random box of every candidate (``cells``, ``kron``, ``marginals{way}``
    for the ways below the number of dimensions)."""
    out = {"cells": identity_mae(epsilon, shape), "kron": kron_mae(epsilon, shape)}
    for way in MARGINAL_WAYS:
        if way < len(shape):
            out[f"marginals{way}"] = marginals_mae(epsilon, shape, n_hat, way)["mae"]
    return out


def dp_choice(epsilon: float, shape: Sequence[int], n_hat: int) -> dict[str, Any]:
    """The default histogram's choice (published as the certificate's ``choice``; verify
    re-derives it) from ε (after the noisy total), the cube's shape and the noisy total N̂:

    * the signal of the mean cell s = N̂·ε/cells and the predicted MAE of every candidate on a
      random box (``predicted_mae``), with the expected count of a random box;
    * one dimension → ``kron``; two → ``kron`` when s ≥ :data:`DP_CELL_SIGNAL`, else ``agrid``;
    * three or more → the candidate with the smallest predicted MAE among ``kron`` and the
      1- and 2-way ``marginals`` (the identity is never below ``kron``).
    """
    e = float(epsilon)
    d = len(shape)
    pred = predicted_errors(e, shape, n_hat)
    answer = max(float(n_hat), 1.0) * box_fraction(shape)
    signal = max(float(n_hat), 0.0) * e / math.prod(int(n) for n in shape)
    out: dict[str, Any] = {"predicted_kron_relative_error": pred["kron"] / answer, "cell_signal": signal,
                           "predicted_mae": pred, "expected_box_count": answer}
    if d == 1 or (d == 2 and signal >= DP_CELL_SIGNAL):
        out["algorithm"] = "kron"
    elif d == 2:
        out["algorithm"] = "agrid"
    else:
        cands = {k: v for k, v in pred.items() if k != "cells"}
        best = min(cands, key=lambda k: (cands[k], k))
        if best == "kron":
            out["algorithm"] = "kron"
        else:
            out.update({"algorithm": "marginals", "way": int(best[len("marginals"):])})
    return out
