"""ε-DP histograms beyond DPCube: the Kronecker least-squares strategy (matrix-mechanism family),
adaptive grids (data-adaptive partition), noisy marginals with graphical-model inference, and
the default ``dp`` that picks one of them by a documented rule on public facts.

* ``kron`` — data-independent: per-dimension two-level strategies (cells + blocks of b, weights
  from the design rule of :mod:`ppdp.kernels.strategies`), combined by Kronecker products;
  every level combination is one measurement of disjoint boxes (ε·Π weights); the cells are the
  weighted least-squares solution, computed through the Kronecker structure (one small matrix
  per dimension, no matrix over the whole domain). Error independent of the data; its expected
  value is in the certificate (``expected_error``).
* ``agrid`` — adaptive grids (Qardaji, Yang & Li 2013): a noisy total (1% of ε) sets a uniform
  first-level grid (m1 = max(10, ⌈¼√(N̂ε/c)⌉) per dimension in 2-D), each first-level box is
  cut into a sub-grid whose size follows its noisy count (m2 = ⌈√(N'(1−α)ε/(c/2))⌉ per
  dimension in 2-D; the d-th root of the squared counts in d dimensions); the two levels are
  made consistent by inverse-variance weighting and the sub-boxes spread uniformly over their
  cells. ``alpha`` (share of ε on the first level, default 0.5 as the paper) and ``c``
  (default 10).
* ``marginals`` — every ``way``-dimensional marginal measured with ε/#marginals; the cube is
  inferred with private-pgm (the maintained ``mbi`` package; McKenna, Sheldon & Miklau 2019):
  the graphical model (maximum entropy) that best fits the noisy marginals. For many cells
  and few rows per cell (high dimensions), far more accurate than any measurement of the cells.
* ``dp`` — the default: a noisy total (1% of ε) and :func:`ppdp.claims.dp.dp_choice` pick,
  with the rest of ε, the strategy with the smallest predicted mean absolute error on a
  uniformly random box (:mod:`ppdp.claims.dp_rule`): in ≥ 3 dimensions ``kron`` (closed form)
  or the 1- or 2-way ``marginals`` (noise plus the model's bias, estimated from a bias probe of 5%
  of ε when a model is in contention, and a second probe of 10%, the guard, when the 1-way model
  is chosen but not safe); in 2 dimensions ``kron``
  when N̂ε/cells ≥ 10, else ``agrid`` (α = 0.3, profile 0.1). The choice and the predictions are
  in the certificate; verify re-derives them.

Every count goes through :meth:`ppdp.kernels.noise.Budget.measure` (the hardened discrete
Laplace sampler); the ε split is :func:`ppdp.claims.dp.budget_plan`, which verify re-derives.
The released cells are the post-processed estimates (float), recorded as such.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ...claims.dp import (AGRID_ALPHA, AGRID_C, AGRID_PROFILE, POSTPROCESSING, TOTAL_FRACTION, BudgetPlan, agrid_first_grid,
                          budget_plan, dp_cell_steps, dp_guard_step, dp_probe_step, dp_replay_choice, expected_error, marginal_sets)
from ...claims.dp_rule import guard_table, probe_table
from ...errors import PpdpError
from ...kernels.noise import Budget, Step, discrete_laplace_variance
from ...kernels.strategies import kron_strategy, mode_product
from ...validation import Integer, Real
from .dpcube import HistogramMechanism

__all__ = ["KroneckerLeastSquares", "AdaptiveGrid", "MarginalsModel", "DefaultHistogram",
           "kron_measure", "agrid_measure", "marginals_measure"]


# ------------------------------------------------------------------------ the algorithms
def kron_measure(budget: Budget, rng, x: np.ndarray, steps) -> np.ndarray:
    """Measure ``x`` with the Kronecker strategy of its shape along ``steps`` (in the order of
    :func:`ppdp.claims.dp.kron_steps`) and return the weighted least-squares cells."""
    strat = kron_strategy(x.shape)
    mats = [s.matrix() for s in strat]
    y = x.astype(np.float64)
    for ax, (A, _) in enumerate(mats):
        y = mode_product(y, A, ax)
    true = np.rint(y).astype(np.int64)
    noisy = np.zeros(true.shape, np.float64)
    # row ranges of every level, per dimension (coarse first, as in DimStrategy.levels)
    ranges = []
    for s in strat:
        r, start = [], 0
        for starts, _ in s.levels:
            r.append(slice(start, start + len(starts)))
            start += len(starts)
        ranges.append(r)
    combos = np.array(np.meshgrid(*[np.arange(len(r)) for r in ranges], indexing="ij")).reshape(len(ranges), -1).T
    for combo, step in zip(combos, steps, strict=True):
        sl = tuple(ranges[i][int(k)] for i, k in enumerate(combo))
        noisy[sl] = budget.measure(rng, true[sl], step)
    for ax, (A, w) in enumerate(mats):
        gi = strat[ax].gram_inverse()
        noisy = mode_product(noisy, gi @ (A.T * (w**2)[None, :]), ax)
    return noisy


def _grid_edges(lo: int, hi: int, m: int) -> np.ndarray:
    """Start offsets of ``m`` near-equal parts of the cells lo..hi−1 (exclusive hi)."""
    m = max(1, min(int(m), hi - lo))
    return np.unique(np.round(np.linspace(lo, hi, m + 1)).astype(np.int64))[:-1]


def _block_sums(x: np.ndarray, starts: list[np.ndarray]) -> np.ndarray:
    out = x
    for ax, st in enumerate(starts):
        out = np.add.reduceat(out, st, axis=ax)
    return out


def agrid_measure(budget: Budget, rng, x: np.ndarray, n_hat: int, e_rest: float, steps, alpha: float,
                  c: float, profile: float = 0.0) -> np.ndarray:
    """Adaptive grids on ``x`` (any dimension): with ``profile`` > 0 the noisy 1-way marginals
    first (their non-negative part is the shape of the cells within a sub-box: independence
    within the box instead of uniformity); the first-level grid, a sub-grid per box sized by its
    noisy count, consistency of the two levels, the sub-box counts spread over their cells."""
    d = x.ndim
    steps = tuple(steps)
    shapes: list[np.ndarray] = []
    if profile > 0:
        for ax, step in enumerate(steps[:d]):
            other = tuple(i for i in range(d) if i != ax)
            m = budget.measure(rng, x.sum(axis=other) if other else x, step).astype(np.float64)
            shapes.append(np.maximum(m, 0.0) + 1e-9)
        steps = steps[d:]
    lvl1, lvl2 = steps
    e_grid = e_rest * (1 - profile)
    m1 = agrid_first_grid(n_hat, e_grid, x.shape, c)
    st1 = [_grid_edges(0, n, m) for n, m in zip(x.shape, m1)]
    v1 = budget.measure(rng, _block_sums(x, st1), lvl1).astype(np.float64)
    ends1 = [np.append(s[1:], n) for s, n in zip(st1, x.shape)]
    boxes = list(np.ndindex(*v1.shape))
    e2 = e_grid * (1 - alpha)
    subs, starts2 = [], []
    for b in boxes:
        lo = [int(st1[i][b[i]]) for i in range(d)]
        hi = [int(ends1[i][b[i]]) for i in range(d)]
        m2 = max(1, math.ceil((max(float(v1[b]), 0.0) * e2 / (c / 2)) ** (1.0 / d) - 1e-9))
        st = [_grid_edges(0, hi[i] - lo[i], m2) for i in range(d)]
        starts2.append(st)
        subs.append(_block_sums(x[tuple(slice(a, z) for a, z in zip(lo, hi))], st))
    noisy = budget.measure_parts(rng, subs, lvl2)
    var1, var2 = discrete_laplace_variance(lvl1.epsilon), discrete_laplace_variance(lvl2.epsilon)
    out = np.zeros(x.shape, np.float64)
    for b, st, u in zip(boxes, starts2, noisy):
        lo = [int(st1[i][b[i]]) for i in range(d)]
        hi = [int(ends1[i][b[i]]) for i in range(d)]
        u = u.astype(np.float64)
        k = u.size
        total = (v1[b] / var1 + u.sum() / (k * var2)) / (1 / var1 + 1 / (k * var2))
        u = u + (total - u.sum()) / k
        lens = [np.diff(np.append(s, hi[i] - lo[i])) for i, s in enumerate(st)]
        if shapes:  # the sub-box count spread in proportion to the product of the marginal profiles
            w = np.ones([hi[i] - lo[i] for i in range(d)])
            for ax in range(d):
                sh = [1] * d
                sh[ax] = hi[ax] - lo[ax]
                w = w * shapes[ax][lo[ax]:hi[ax]].reshape(sh)
            wsum = _block_sums(w, st)
            for ax, ln in enumerate(lens):
                u = np.repeat(u, ln, axis=ax)
                wsum = np.repeat(wsum, ln, axis=ax)
            cells = u * w / wsum
        else:
            cells = u / np.prod(np.meshgrid(*lens, indexing="ij"), axis=0)
            for ax, ln in enumerate(lens):
                cells = np.repeat(cells, ln, axis=ax)
        out[tuple(slice(a, z) for a, z in zip(lo, hi))] = cells
    return out


#: mirror-descent iterations of the graphical-model inference
MARGINAL_ITERATIONS = 500


def marginals_measure(budget: Budget, rng, x: np.ndarray, steps, way: int, measured_out: list | None = None) -> np.ndarray:
    """Measure every ``way``-dimensional marginal of ``x`` along ``steps`` and infer the cube with
    private-pgm's mirror descent (the maximum-entropy graphical model fitting them). With
    ``measured_out`` (a list) the noisy marginals themselves (integer arrays, in the order of
    :func:`ppdp.claims.dp.marginal_sets`) are appended to it: the release ships them, and the
    model-free interval of :mod:`ppdp.estimators.histogram_marginals` reads them."""
    sets = marginal_sets(x.ndim, way)
    names = [f"d{i}" for i in range(x.ndim)]
    measured = []
    for m, step in zip(sets, steps, strict=True):
        other = tuple(i for i in range(x.ndim) if i not in m)
        y = budget.measure(rng, x.sum(axis=other) if other else x, step)
        measured.append((m, y.astype(np.float64), math.sqrt(discrete_laplace_variance(step.epsilon))))
        if measured_out is not None:
            measured_out.append(np.asarray(y, dtype=np.int64))
    if len(sets) == 1 and len(sets[0]) == x.ndim:
        return measured[0][1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            from mbi import Domain, LinearMeasurement, estimation
        except ImportError as e:  # pragma: no cover - a declared dependency
            raise PpdpError(f"the marginals mechanism needs the 'mbi' package (private-pgm): {e}") from None
        dom = Domain(names, tuple(int(n) for n in x.shape))
        ms = [LinearMeasurement(y.ravel(), tuple(names[i] for i in m), stddev=sd) for m, y, sd in measured]
        model = estimation.MirrorDescent().estimate(dom, ms, iters=MARGINAL_ITERATIONS)
        cube = np.asarray(model.project(names).datavector(flatten=False), dtype=np.float64)
    return cube


# ------------------------------------------------------------------------ the mechanisms
class _PostProcessed(HistogramMechanism):
    default_estimator = "cells"

    def _finish(self, table, spec, plan: BudgetPlan, budget: Budget, cells: np.ndarray, extra=None):
        extra = {**(extra or {}), "cells_postprocessed": POSTPROCESSING[self.name]}
        marginals = extra.pop("measured_marginals", None)
        probe = (plan.choice or {}).get("probe")
        err = expected_error(self.name, self.get_params(), spec.shape, plan.noisy_total, probe=probe)
        if err is not None:
            extra["expected_error"] = err
        return self._release(table, spec, plan, budget, cells=cells, extra=extra, marginals=marginals)

    def _noisy_total(self, budget: Budget, rng, x: np.ndarray) -> int:
        step = Step(self.epsilon * TOTAL_FRACTION, "noisy total count N (read by the rule)", parts=1)
        return int(budget.measure(rng, [int(x.sum())], step)[0])

    def _publish(self, table, rng):
        """The dense cube; the noisy total first when the rule reads it; then :meth:`_measure`
        (the same measurements and post-processing a bootstrap replay runs)."""
        spec, x = self._dense_cube(table)
        budget = Budget(self.epsilon)
        n_hat = self._noisy_total(budget, rng, x) if self.reads_noisy_total else None
        plan, cells, _, extra = self._measure(budget, rng, x, n_hat)
        return self._finish(table, spec, plan, budget, cells, extra=extra)


class KroneckerLeastSquares(_PostProcessed):
    """Kronecker product of per-dimension two-level range strategies with weighted least squares
    (matrix mechanism / HDMM family; design rule in :mod:`ppdp.kernels.strategies`)."""

    name = "kron"
    paper = "Li et al. 2015 (matrix mechanism); McKenna et al. 2018 (HDMM)"
    _parameter_constraints = HistogramMechanism._common_constraints
    _parameter_help = HistogramMechanism._common_help

    def __init__(self, epsilon: float, dims, domains=None, bins=None):
        self._set_params(locals())

    def _measure(self, budget, rng, x, n_hat):
        plan = self._plan(x.shape)
        return plan, kron_measure(budget, rng, x, plan.cells), None, {}


class AdaptiveGrid(_PostProcessed):
    """Adaptive grids (Qardaji, Yang & Li 2013), any dimension; see the module docstring."""

    name = "agrid"
    paper = "Qardaji, Yang, Li 2013"
    alpha: float
    c: float
    profile: float
    _parameter_constraints = {**HistogramMechanism._common_constraints, "alpha": Real(0, 1, closed="neither"),
                              "c": Real(0, None, closed="neither"), "profile": Real(0, 1, closed="left")}
    _parameter_help = {**HistogramMechanism._common_help,
                       "alpha": "Share of ε (after the 1% noisy total) on the first-level grid.",
                       "c": "AGrid's constant c: first-level boxes ≈ N̂ε/(16c), sub-grids ≈ N'(1−α)ε/(c/2) cells.",
                       "profile": "Share of ε on the 1-way marginals that shape the cells within a sub-box "
                                  "(0: uniform within, as the paper)."}

    def __init__(self, epsilon: float, dims, alpha=0.5, c=AGRID_C, profile=0.0, domains=None, bins=None):
        self._set_params(locals())

    reads_noisy_total = True

    def _measure(self, budget, rng, x, n_hat):
        plan = self._plan(x.shape, n_hat)
        cells = agrid_measure(budget, rng, x, n_hat, plan.epsilon_cells, plan.cells, self.alpha, self.c,
                              self.profile)
        return plan, cells, None, {}


class MarginalsModel(_PostProcessed):
    """Noisy ``way``-dimensional marginals and private-pgm inference; see the module docstring."""

    name = "marginals"
    paper = "McKenna, Sheldon, Miklau 2019 (private-pgm)"
    way: int
    _parameter_constraints = {**HistogramMechanism._common_constraints, "way": Integer(1, 3)}
    _parameter_help = {**HistogramMechanism._common_help,
                       "way": "Measure every marginal of this many dimensions (1, 2 or 3)."}

    def __init__(self, epsilon: float, dims, way=2, domains=None, bins=None):
        self._set_params(locals())

    def _measure(self, budget, rng, x, n_hat):
        plan = self._plan(x.shape)
        measured: list = []
        cells = marginals_measure(budget, rng, x, plan.cells, self.way, measured)
        return plan, cells, None, {"measured_marginals": measured}


class DefaultHistogram(_PostProcessed):
    """The default ε-DP histogram: a noisy total and :func:`ppdp.claims.dp.dp_choice` choose the
    Kronecker least squares, adaptive grids or marginals by predicted error (module docstring)."""

    name = "dp"
    paper = "ppdp (rule over Li et al. 2015, Qardaji et al. 2013, McKenna et al. 2019)"
    _parameter_constraints = HistogramMechanism._common_constraints
    _parameter_help = HistogramMechanism._common_help

    def __init__(self, epsilon: float, dims, domains=None, bins=None):
        self._set_params(locals())

    reads_noisy_total = True
    def _measure(self, budget, rng, x, n_hat, ledger=None):
        params = self.get_params()
        rest = self.epsilon - self.epsilon * TOTAL_FRACTION
        pstep = dp_probe_step(rest, x.shape, int(n_hat))
        probe = None
        if pstep is not None:  # the bias probe: the coarse table's noisy counts, read by the rule
            probe = [int(v) for v in np.asarray(budget.measure(rng, probe_table(x), pstep)).ravel()]
            # the guard (a second probe, when the first leaves the 1-way model's choice unsafe); a
            # replay follows its ledger
            gstep = dp_guard_step(rest, x.shape, int(n_hat), probe, force=ledger is not None)
            if ledger is not None and gstep is not None and not any(s.what == gstep.what for s in ledger):
                gstep = None
            if gstep is not None:
                probe += [int(v) for v in np.asarray(budget.measure(rng, guard_table(x), gstep)).ravel()]
        if ledger is None:
            plan = budget_plan(self.name, params, x.shape, n_hat, probe)
            choice = dict(plan.choice or {})
        else:
            alg, way = dp_replay_choice(params, x.shape, int(n_hat), ledger)
            e_cells = rest - sum(s.epsilon for s in budget.ledger[1:])
            steps = dp_cell_steps(e_cells, x.shape, params["dims"], int(n_hat), alg, way)
            plan = BudgetPlan(self.epsilon, e_cells, 0.0, cells=steps, cells_postprocessed=True, noisy_total=n_hat)
            choice = {"algorithm": alg, **({"way": way} if way else {})}
        if choice["algorithm"] == "kron":
            cells = kron_measure(budget, rng, x, plan.cells)
        elif choice["algorithm"] == "agrid":
            cells = agrid_measure(budget, rng, x, n_hat, plan.epsilon_cells, plan.cells, AGRID_ALPHA, AGRID_C, AGRID_PROFILE)
        else:
            measured: list = []
            cells = marginals_measure(budget, rng, x, plan.cells, choice["way"], measured)
            return plan, cells, None, {"choice": choice, "measured_marginals": measured}
        return plan, cells, None, {"choice": choice}

    def replay(self, x, noisy_total, ledger, rng):
        """As :meth:`HistogramMechanism.replay`; the probe is drawn afresh (its share spent) but
        the strategy is the one the certificate's ledger records."""
        budget = Budget(self.epsilon)
        self._noisy_total(budget, rng, x)
        _, cells, partitions, _ = self._measure(budget, rng, x, noisy_total, ledger)
        got = [(round(s.epsilon, 12), s.what) for s in budget.ledger]
        want = [(round(float(s.epsilon), 12), s.what) for s in ledger]
        if got != want:
            raise PpdpError(f"internal error: the replay of {self.name} spends {got}, the certificate {want}")
        return cells, partitions
