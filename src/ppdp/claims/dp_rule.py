"""The default ε-DP histogram's choice of strategy by predicted error (``dp``; verify re-derives it).

The target is the mean absolute error over *all* ranges of the cube: a uniformly random box
(every dimension an independent range [lo, hi], lo ≤ hi, both uniform over the declared domain).
Every candidate's error is predicted from public quantities only — ε (after the noisy total),
the declared shape — and the noisy total N̂ (1% of ε, already in the claim); the choice is the
candidate with the smallest prediction, so it is post-processing of ε-DP outputs (the noisy
total and, for the marginal models' bias, the probe, whose share of ε is in the ledger). Predictions use the normal approximation, MAE ≈ √(2/π)·sd.

* ``cells`` (the identity): every cell with ε; a box of k cells has sd √(2k)/ε. Closed form
  (continuous-Laplace variance 2/ε², like ``kron``'s; the discrete Laplace is a little below
  it at large ε). Never below ``kron`` (whose design includes
  the identity), so never chosen; recorded for information.
* ``kron`` (Kronecker least squares): sd √2/ε·Π_i √(q_iᵀG_i⁻¹q_i) for a box (G_i the Gram
  matrix of dimension i's weighted strategy, :mod:`ppdp.kernels.strategies`), averaged over the
  target's ranges. Closed form, data-independent.
* ``marginals`` with every ``way``-dimensional marginal (private-pgm inference): noise, the
  model's bias and the inference's floor, √(noise² + bias² + floor²):

  - noise: :func:`marginal_noise` (a box's answer leans on its projections on the measured
    marginals; the factors :data:`MARGINAL_NOISE` measured on Adult);
  - bias: estimated per release from the **bias probe** (:func:`probe_bias`): in three or more
    dimensions, when a model is in contention (:func:`probe_needed`), :data:`PROBE_FRACTION` of ε
    measures a coarse table of the cube; the excess of its discrepancy from the model's fit over
    what the noise alone gives (a parametric bootstrap with a fixed seed) is the squared bias of a
    random box, pooled with the prior :data:`MARGINAL_BIAS`\\[way]·Â (Â = N̂·Π E(len_i)/n_i)
    by precision. The probe is a ledger entry and its counts are in the choice: verify
    re-derives the estimate and the choice from them;
  - the guard (:func:`guard_needed`, :func:`guard_bound`): when the 1-way model is chosen after
    the probe but would lose to the runner-up with its squared bias at the probe's upper bound
    (pooled + :data:`GUARD_UPPER_Z` sd) — the probe could not tell — a second probe,
    :data:`GUARD_FRACTION` of ε, measures the 2-block table; its lower confidence bound on each
    model's squared bias (excess − :data:`GUARD_LOWER_Z` null sd) raises the bias when it is
    larger, never lowers it. A second ledger entry; its counts follow the probe's in the choice;
  - floor: :func:`inference_floor` (κ_w·√cells)·Â, the part of the error private-pgm's mirror
    descent leaves even with exact marginals (not a property of the table, so not probed).

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

from ..errors import PpdpError
from ..kernels.strategies import kron_strategy

__all__ = ["dp_choice", "predicted_errors", "box_fraction", "inference_floor", "probe_needed", "probe_edges", "probe_shape", "probe_table",
           "probe_bias", "guard_needed", "guard_edges", "guard_shape", "guard_table", "guard_bound",
           "DP_CELL_SIGNAL", "MARGINAL_NOISE", "MARGINAL_BIAS", "MARGINAL_INFERENCE_FLOOR",
           "PROBE_FRACTION", "PROBE_BLOCKS", "GUARD_FRACTION", "GUARD_BLOCKS", "GUARD_UPPER_Z", "GUARD_LOWER_Z"]

#: one or two dimensions: ``kron`` when N̂·ε/cells is at least this, else the adaptive grid
DP_CELL_SIGNAL = 10.0
#: averaging factor of the marginal model's noise term per ``way`` (fitted on Adult, see the docs)
MARGINAL_NOISE = {1: 0.29, 2: 2.0}
#: prior relative bias of the marginal model per ``way`` (share of a random box's count; Adult):
#: the bias probe's estimate is pooled with it, so it decides only when the probe cannot
MARGINAL_BIAS = {1: 0.14, 2: 0.013}
#: relative error floor of the model's inference per ``way`` over √cells: private-pgm's mirror
#: descent (500 iterations) stops short of the maximum-entropy model by φ_w = κ_w·√cells of a random
#: box's count (Adult 3-D and 4-D and their coarsenings to 1,040–234,432 cells, noise-free
#: marginals: κ₂·10⁴ = 0.88–1.36); added to the model's bias
MARGINAL_INFERENCE_FLOOR = {1: 0.0, 2: 1.2e-4}
#: share of ε (after the noisy total) the bias probe spends, when a marginal model is in contention
PROBE_FRACTION = 0.05
#: a model is in contention (the probe is spent) when its prediction with this share of its prior
#: bias is below ``kron``'s (Adult 4-D, ε = 1: no probe, ``kron``)
PROBE_CONTENTION = 1.0 / 3.0
#: the probe's coarse table: at most this many equal-width blocks per dimension
PROBE_BLOCKS = 4
#: iterations of the probe's iterative proportional fitting (deterministic, on the coarse table)
PROBE_IPF_ITERATIONS = 50
#: the probe's null replicates (parametric bootstrap of the noise, fixed seed)
PROBE_REPLICATES = 32
PROBE_SEED = 20131
#: :func:`_ipf` stops early at a fixed point: no cell moved by more than this share of the largest
IPF_TOL = 1e-12
#: the null's replicates are fitted in batches of at most this many cells (memory, not results)
PROBE_BATCH_CELLS = 1 << 20
#: the guard: a second probe, of the 2-block table, spent when the 1-way model is chosen but would
#: lose to the runner-up with its squared bias at the first probe's upper bound (see :func:`guard_needed`)
GUARD_FRACTION = 0.10
#: blocks per dimension of the guard's table (2⁴ = 16 cells in four dimensions)
GUARD_BLOCKS = 2
#: the guard is spent when the 1-way model loses with its squared bias at pooled + this many sd
GUARD_UPPER_Z = 2.0
#: the guard's lower confidence bound on a model's squared bias: excess − this many sd of the null
GUARD_LOWER_Z = 2.0
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


def marginal_noise(epsilon: float, shape: Sequence[int], way: int) -> float:
    """Predicted noise part of the ``way``-marginal model's MAE on a random box (no bias):
    ν_w·√(2/π)·√2/ε·M^p_w·mean over the M measured marginals of √(mean cells of a random box's
    projection on it); p_1 = 1 (each marginal measured with ε/M, little overlap to average over),
    p_2 = 0 (the overlapping 2-way marginals average their noise: measured on Adult, 3-D and 4-D)."""
    sets = list(itertools.combinations(range(len(shape)), min(int(way), len(shape))))
    m = len(sets)
    spread = sum(math.sqrt(math.prod(_mean_len(shape[i]) for i in s)) for s in sets) / m
    power = 1 if int(way) == 1 else 0
    return MARGINAL_NOISE[int(way)] * _MAE * math.sqrt(2.0) * m**power / float(epsilon) * spread


def inference_floor(shape: Sequence[int], way: int) -> float:
    """Relative error floor of private-pgm's inference of the ``way``-marginal model on a random box,
    κ_w·√cells (:data:`MARGINAL_INFERENCE_FLOOR`): the part of the error mirror descent leaves with
    exact marginals, growing with the cube (on the same table, coarsened: 0.004 at 1,040 cells,
    0.045 at 117,216)."""
    return MARGINAL_INFERENCE_FLOOR[int(way)] * math.sqrt(math.prod(int(n) for n in shape))


def marginals_mae(epsilon: float, shape: Sequence[int], n_hat: float, way: int,
                  bias: float | None = None) -> dict[str, float]:
    """Predicted noise, bias and MAE of the ``way``-marginal model on a random box; ``bias`` the
    probe's estimate of the model's bias (None: the prior, :data:`MARGINAL_BIAS`), to which the
    inference floor :data:`MARGINAL_INFERENCE_FLOOR` is added in quadrature."""
    a_hat = max(float(n_hat), 0.0) * box_fraction(shape)
    model = MARGINAL_BIAS[int(way)] * a_hat if bias is None else float(bias)
    floor = inference_floor(shape, way) * a_hat
    noise = marginal_noise(epsilon, shape, way)
    b = math.hypot(model, floor)
    return {"noise": noise, "bias": b, "mae": math.hypot(noise, b)}


# ------------------------------------------------------------------ the bias probe
def _block_edges(shape: Sequence[int], blocks: int) -> list[list[int]]:
    out = []
    for n in shape:
        k = max(1, min(int(n), int(blocks)))
        out.append([int(v) for v in np.unique(np.round(np.linspace(0, int(n), k + 1)).astype(np.int64))])
    return out


def _block_table(x: np.ndarray, edges: list[list[int]]) -> np.ndarray:
    y = np.asarray(x)
    for ax, e in enumerate(edges):
        y = np.add.reduceat(y, np.asarray(e[:-1], dtype=np.int64), axis=ax)
    return y


def probe_edges(shape: Sequence[int]) -> list[list[int]]:
    """Start offsets (and the end) of the probe's equal-width blocks, per dimension: at most
    :data:`PROBE_BLOCKS` blocks of a dimension (a dimension of fewer cells keeps its cells)."""
    return _block_edges(shape, PROBE_BLOCKS)


def probe_shape(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(len(e) - 1 for e in probe_edges(shape))


def probe_table(x: np.ndarray) -> np.ndarray:
    """The probe's true coarse table of the cube ``x`` (the mechanism adds the noise)."""
    return _block_table(x, probe_edges(x.shape))


def guard_edges(shape: Sequence[int]) -> list[list[int]]:
    """The guard's blocks: at most :data:`GUARD_BLOCKS` equal-width blocks per dimension."""
    return _block_edges(shape, GUARD_BLOCKS)


def guard_shape(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(len(e) - 1 for e in guard_edges(shape))


def guard_table(x: np.ndarray) -> np.ndarray:
    """The guard's true 2-block table of the cube ``x`` (the mechanism adds the noise)."""
    return _block_table(x, guard_edges(x.shape))


@lru_cache(maxsize=256)
def _coverage(n: int, edges: tuple[int, ...]) -> np.ndarray:
    """M[b, b'] = E f_b f_b' over the random ranges of a dimension of n cells, f_b the share of
    block b a range covers (a block's count spread evenly over its cells)."""
    e = np.asarray(edges, dtype=np.int64)
    lo, hi = np.triu_indices(int(n))
    w = np.where(lo == hi, 1.0, 2.0) / (n * n)
    ov = np.clip(np.minimum(hi[:, None] + 1, e[None, 1:]) - np.maximum(lo[:, None], e[None, :-1]), 0, None)
    f = ov / np.diff(e)[None, :]
    return (f * w[:, None]).T @ f


def _qform(r: np.ndarray, ms: list[np.ndarray]) -> np.ndarray:
    """Σ_c r_c·(⊗ms r)_c for each table of the batch ``r`` (B, *shape)."""
    z = r
    for ax, m in enumerate(ms):
        z = np.moveaxis(np.tensordot(m, z, axes=([1], [ax + 1])), 0, ax + 1)
    return (r * z).reshape(len(r), -1).sum(axis=1)


def _ipf(y: np.ndarray, way: int) -> np.ndarray:
    """The maximum-entropy tables with the ``way``-marginals of each table of the batch ``y``
    (B, *shape) (each marginal count clipped at 0; the cells themselves are not clipped: clipping
    noisy cells adds mass where the true counts are small, which the residual then reads as bias —
    the null replicates, drawn around the smooth fit, are clipped less, so the excess was biased
    upwards; see docs/dp-histograms.md). The batch is fitted at once: the null's replicates cost
    one pass, not one per replicate."""
    y = np.asarray(y, dtype=np.float64)
    d = y.ndim - 1
    total = np.maximum(y.reshape(len(y), -1).sum(axis=1), 1e-9) / (y.size // max(len(y), 1))
    fit = np.broadcast_to(total.reshape((-1,) + (1,) * d), y.shape).copy()
    sets = [tuple(i + 1 for i in range(d) if i not in s) for s in itertools.combinations(range(d), way)]
    targets = [np.maximum(y.sum(axis=other, keepdims=True), 0.0) for other in sets]
    for _ in range(PROBE_IPF_ITERATIONS):
        before = fit
        for other, t in zip(sets, targets):
            c = fit.sum(axis=other, keepdims=True)
            fit = fit * np.divide(t, c, out=np.zeros_like(t), where=c > 0)
        if np.max(np.abs(fit - before), initial=0.0) <= IPF_TOL * max(float(np.max(np.abs(fit), initial=0.0)), 1.0):
            break  # a fixed point (the 1-way fit is one after the first sweep)
    return fit


def _statistic(y: np.ndarray, shape: Sequence[int], edges: list[list[int]], epsilon_probe: float,
               way: int) -> tuple[float, float, float]:
    """(T, the null's mean of T, the null's variance) of a noisy block table ``y`` (ε_b per count):
    T = E_box(Σ_c f_c(box)·r_c)², r the residual of ``y`` from its maximum-entropy ``way`` fit; the
    null a parametric bootstrap under the fit (:data:`PROBE_REPLICATES`, seed :data:`PROBE_SEED`)."""
    ms = [_coverage(int(n), tuple(e)) for n, e in zip(shape, edges)]
    fit = _ipf(y[None], way)
    t = float(_qform(y[None] - fit, ms)[0])
    rng = np.random.default_rng(PROBE_SEED + way)
    base = np.maximum(fit, 0.0)
    step = max(1, PROBE_BATCH_CELLS // max(y.size, 1))  # replicates per batch (the draws are the same in any batching)
    null = np.concatenate([
        _qform(z - _ipf(z, way), ms)
        for z in (np.rint(base + rng.laplace(0.0, 1.0 / float(epsilon_probe), (min(step, PROBE_REPLICATES - s),) + y.shape))
                  for s in range(0, PROBE_REPLICATES, step))])
    noise = float(np.mean(null))
    var = float(np.var(null, ddof=1)) * (1.0 + 1.0 / PROBE_REPLICATES) + 1e-12
    return t, noise, var


def probe_bias(counts: np.ndarray, shape: Sequence[int], epsilon_probe: float, n_hat: float,
               way: int) -> dict[str, float]:
    """The ``way``-marginal model's bias on a random box, estimated from the probe's noisy coarse
    table (ε_b per count). The residual r of the table from its maximum-entropy ``way`` fit gives
    T = E_box(Σ_c f_c(box)·r_c)² (closed form, per dimension; f_c the share of coarse cell c a
    random box covers). What the noise alone gives is a parametric bootstrap under the model:
    :data:`PROBE_REPLICATES` tables drawn as the fit plus Laplace(1/ε_b) noise (fixed seed
    :data:`PROBE_SEED`, so the estimate is a deterministic function of the probe), each fitted
    and measured the same way; their mean is subtracted from T and their variance is the
    excess's. The excess is pooled with the prior (:data:`MARGINAL_BIAS`·Â, prior sd of B² equal
    to its mean) by the precision of each: the prior decides when the probe is mostly noise. The
    bias is √E max(B², 0) under the pooled estimate's normal law (mean ``pooled``, sd ``pooled_sd``)."""
    t, noise, var = _statistic(np.asarray(counts, dtype=np.float64), shape, probe_edges(shape), epsilon_probe, way)
    excess = t - noise
    prior = (MARGINAL_BIAS[int(way)] * max(float(n_hat), 0.0) * box_fraction(shape)) ** 2
    pvar = max(prior * prior, 1e-12)
    pooled = (prior / pvar + excess / var) / (1.0 / pvar + 1.0 / var)
    post_sd = math.sqrt(1.0 / (1.0 / pvar + 1.0 / var))
    # the squared bias is not negative: its expectation under the (normal) pooled estimate, E max(B², 0),
    # so that a probe whose noise drove the pooled value to 0 does not promise a model without bias
    z = pooled / post_sd
    expected = pooled * 0.5 * math.erfc(-z / math.sqrt(2.0)) + post_sd * math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return {"statistic": t, "noise": noise, "noise_sd": math.sqrt(var), "pooled": pooled, "pooled_sd": post_sd,
            "bias": math.sqrt(max(expected, 0.0)), "prior": math.sqrt(prior)}


def probe_needed(epsilon: float, shape: Sequence[int], n_hat: float) -> bool:
    """Three or more dimensions and some marginal model in contention: its prediction with
    :data:`PROBE_CONTENTION` of its prior bias (and its inference floor) below ``kron``'s error.
    Otherwise ``kron`` wins unless the model's bias is far below any seen, and no budget is
    spent on the probe."""
    if len(shape) < 3:
        return False
    k = kron_mae(epsilon, shape)
    a_hat = max(float(n_hat), 0.0) * box_fraction(shape)
    return any(marginals_mae(epsilon, shape, n_hat, w, PROBE_CONTENTION * MARGINAL_BIAS[w] * a_hat)["mae"] < k
               for w in MARGINAL_WAYS if w < len(shape))


def guard_bound(counts: np.ndarray, shape: Sequence[int], epsilon_guard: float, way: int) -> dict[str, float]:
    """The guard's lower confidence bound on the ``way``-marginal model's squared bias on a random
    box, from the noisy 2-block table (ε_g per count): the statistic T of :func:`probe_bias` on
    that table, less the null's mean and :data:`GUARD_LOWER_Z` null sd, at least 0. The 2-block
    table sees only part of the bias (on Adult 4-D 0.16 of the 1-way model's, on other tables up to
    0.7), so it is a bound from below, never an estimate; its few large cells make it precise at a
    budget where the 4-block probe is mostly noise."""
    y = np.asarray(counts, dtype=np.float64)
    t, noise, var = _statistic(y, shape, guard_edges(shape), epsilon_guard, way)
    sd = math.sqrt(var)
    return {"statistic": t, "noise": noise, "noise_sd": sd, "lower": max(t - noise - GUARD_LOWER_Z * sd, 0.0)}


_PROBE_MEMO: dict[tuple, dict[int, dict[str, float]]] = {}


def _probe_estimates(epsilon: float, shape: Sequence[int], n_hat: float, counts: np.ndarray) -> dict[int, dict[str, float]]:
    """The probe's estimates per way; a deterministic function of its arguments, so remembered for
    the last few probes (the guard's decision, the choice and verify's re-derivation read the same)."""
    c = np.ascontiguousarray(counts, dtype=np.float64)
    key = (float(epsilon), tuple(int(n) for n in shape), float(n_hat), c.shape, c.tobytes())
    if key not in _PROBE_MEMO:
        if len(_PROBE_MEMO) >= 8:
            _PROBE_MEMO.pop(next(iter(_PROBE_MEMO)))
        e_probe = epsilon * PROBE_FRACTION
        _PROBE_MEMO[key] = {w: probe_bias(c, shape, e_probe, n_hat, w) for w in MARGINAL_WAYS if w < len(shape)}
    return {w: dict(v) for w, v in _PROBE_MEMO[key].items()}


def _guard_wanted(epsilon: float, shape: Sequence[int], n_hat: float, est: dict[int, dict[str, float]]) -> bool:
    """The 1-way model is the choice after the probe, and with its squared bias at the probe's upper
    bound (pooled + :data:`GUARD_UPPER_Z` sd) it would lose to the runner-up, both with the ε left
    after the guard."""
    if 1 not in est:
        return False
    biases = {w: v["bias"] for w, v in est.items()}
    pred = predicted_errors(epsilon * (1.0 - PROBE_FRACTION), shape, n_hat, biases)
    cands = {k: v for k, v in pred.items() if k != "cells"}
    if min(cands, key=lambda k: (cands[k], k)) != "marginals1":
        return False
    up = max(est[1]["pooled"] + GUARD_UPPER_Z * est[1]["pooled_sd"], 0.0)
    pu = predicted_errors(epsilon * (1.0 - PROBE_FRACTION - GUARD_FRACTION), shape, n_hat, {**biases, 1: math.sqrt(up)})
    return pu["marginals1"] > min(v for k, v in pu.items() if k not in ("cells", "marginals1"))


def guard_needed(epsilon: float, shape: Sequence[int], n_hat: float, probe: Sequence[int]) -> bool:
    """Whether the rule spends the guard (:data:`GUARD_FRACTION` of ``epsilon``, the ε after the noisy
    total) after the probe's counts ``probe`` (the first-stage counts, flat): the 1-way model is
    chosen but is not safe against the runner-up (:func:`_guard_wanted`)."""
    if not probe_needed(epsilon, shape, n_hat):
        return False
    k1 = math.prod(probe_shape(shape))
    counts = np.asarray(probe, dtype=np.float64).ravel()[:k1]
    if counts.size != k1 or not np.all(np.isfinite(counts)):
        raise PpdpError(f"the bias probe holds {counts.size} counts, the rule wants {k1} finite counts")
    return _guard_wanted(float(epsilon), shape, n_hat, _probe_estimates(float(epsilon), shape, n_hat, counts.reshape(probe_shape(shape))))


def predicted_errors(epsilon: float, shape: Sequence[int], n_hat: float,
                     biases: dict[int, float] | None = None) -> dict[str, float]:
    """Predicted MAE on a random box of every candidate (``cells``, ``kron``, ``marginals{way}``
    for the ways below the number of dimensions), the models' biases from ``biases`` (per way)
    or the prior."""
    out = {"cells": identity_mae(epsilon, shape), "kron": kron_mae(epsilon, shape)}
    for way in MARGINAL_WAYS:
        if way < len(shape):
            b = None if biases is None else biases.get(way)
            out[f"marginals{way}"] = marginals_mae(epsilon, shape, n_hat, way, b)["mae"]
    return out


def dp_choice(epsilon: float, shape: Sequence[int], n_hat: int, probe: Sequence[int] | None = None) -> dict[str, Any]:
    """The default histogram's choice (published as the certificate's ``choice``; verify
    re-derives it) from ε (after the noisy total), the cube's shape, the noisy total N̂ and, when
    :func:`probe_needed`, the bias probe's noisy counts (``probe``, flat, C order):

    * the signal of the mean cell s = N̂·ε/cells and the predicted MAE of every candidate on a
      random box (``predicted_mae``), with the expected count of a random box;
    * one dimension → ``kron``; two → ``kron`` when s ≥ :data:`DP_CELL_SIGNAL`, else ``agrid``;
    * three or more → the candidate with the smallest predicted MAE among ``kron`` and the
      1- and 2-way ``marginals`` (the identity is never below ``kron``), with the ε left after the
      probes (``epsilon_probe``: :data:`PROBE_FRACTION` of ε when the probe is spent, plus
      :data:`GUARD_FRACTION` when the guard is, else 0) and the models' biases estimated from the
      probe (``bias``) and, with the guard, raised to its lower bound (``guard``; ``probe`` then
      holds the probe's counts followed by the guard's, ``guard_shape`` the guard's table).
    """
    e = float(epsilon)
    d = len(shape)
    need = probe_needed(e, shape, n_hat)
    e_probe = e * PROBE_FRACTION if need else 0.0
    biases: dict[int, float] | None = None
    out: dict[str, Any] = {}
    if need:
        if probe is None:
            raise PpdpError("the default histogram's rule needs the bias probe's noisy counts")
        flat = np.asarray(probe, dtype=np.float64).ravel()
        k1, k2 = math.prod(probe_shape(shape)), math.prod(guard_shape(shape))
        if flat.size < k1 or not np.all(np.isfinite(flat)):
            raise PpdpError(f"the bias probe holds {flat.size} counts, the rule wants {k1} finite counts")
        est = _probe_estimates(e, shape, n_hat, flat[:k1].reshape(probe_shape(shape)))
        biases = {w: v["bias"] for w, v in est.items()}
        guard = _guard_wanted(e, shape, n_hat, est)
        if flat.size != k1 + (k2 if guard else 0):
            raise PpdpError(f"the bias probe holds {flat.size} counts, the rule wants {k1}"
                            + (f" and the guard's {k2}" if guard else " (no guard here)"))
        out["probe"] = [int(v) for v in np.asarray(probe).ravel()]
        out["probe_shape"] = list(probe_shape(shape))
        out["bias"] = {f"marginals{w}": v for w, v in est.items()}
        if guard:  # the second probe: its lower bound raises a model's squared bias, never lowers it
            e_guard = e * GUARD_FRACTION
            e_probe += e_guard
            g = {w: guard_bound(flat[k1:].reshape(guard_shape(shape)), shape, e_guard, w) for w in est}
            biases = {w: math.sqrt(max(biases[w] ** 2, g[w]["lower"])) for w in est}
            out["guard_shape"] = list(guard_shape(shape))
            out["epsilon_guard"] = e_guard
            out["guard"] = {f"marginals{w}": {**v, "bias": biases[w]} for w, v in g.items()}
    elif probe is not None:
        raise PpdpError("the default histogram's rule spends no budget on a probe here, yet one is given")
    e_rest = e - e_probe
    pred = predicted_errors(e_rest, shape, n_hat, biases)
    answer = max(float(n_hat), 1.0) * box_fraction(shape)
    signal = max(float(n_hat), 0.0) * e / math.prod(int(n) for n in shape)
    out.update({"predicted_kron_relative_error": pred["kron"] / answer, "cell_signal": signal,
                "predicted_mae": pred, "expected_box_count": answer, "epsilon_probe": e_probe})
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
