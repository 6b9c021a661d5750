"""ε-differential privacy of the histogram family (Dwork, McSherry, Nissim & Smith 2006).

Privacy map. Every measurement adds discrete Laplace noise of parameter ε_i
(:mod:`ppdp.kernels.noise`) to sensitivity-1 counts of disjoint parts of the data (cells,
partitions, the nodes of one tree level): by parallel composition the measurement is
ε_i-DP (Xiao et al., Theorem 3.2). The measurements of one release compose sequentially,
ε = Σ ε_i (Theorem 3.1), and whatever is computed from noisy counts only — the kd-tree on the
noisy cells, least squares, consistency — is post-processing and costs nothing.

How a mechanism splits ε is a rule of its parameters and of public facts only — the cube's
shape, fixed by declared domains or bins, never read off the rows — and, where a rule needs the
input size (the hierarchical kd-tree's default depth), of a *noisy* total measured with its own
share of ε and recorded in the claim (``noisy_total``): :func:`budget_plan`, the one place the
split is written.

Public domains, no exact N. A release's cells are the labels or bins its parameters declare
(``params.domains``: labels, or a bundled table's documented schema by name; ``params.bins``);
``check`` rejects a release with a dimension declared by neither, or whose published domain
differs from the declaration. The manifest's ``n_input`` and ``n_published`` are not the exact
number of rows but :func:`published_total`, a post-processing of the released noisy counts
(their sum), which ``check`` re-derives from the files.

Goodness of fit. Given the source table, ``check`` recomputes the true counts and tests the
residuals (published − true) of every raw measurement against its declared discrete Laplace
noise (:func:`ppdp.kernels.noise.noise_fit_test`, false-alarm probability ≤ ``FIT_ALPHA`` = 1e-6
per release, Bonferroni over the measurements): noise-free counts and noise of a scale other
than the declared ε are rejected. The consistent (post-processed) cells of the hierarchy are
tested for exactness only: equal to the true counts with probability ≤ tanh(ε_level/2)^cells. At publish time
the mechanism measures along the plan (:class:`~ppdp.kernels.noise.Budget`, each step charged
and drawn in one call) and :meth:`DPClaim.derive` turns plan and ledger into the claim. At
verify time :meth:`DPClaim.check` re-derives the plan from ``manifest["params"]`` and compares
it with the claim, the claim's ledger and the files: any disagreement is a problem.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import PpdpError, ReleaseError
from ..kernels.grid import (box_counts, cube_codes, declared_domains, dense_counts, summed_area, tree_levels)
from ..kernels.strategies import expected_range_sd, kron_strategy
from ..kernels.noise import (EPSILON_FLOOR, HARDENED_SAMPLERS, SAMPLER, Budget, Spend, Step, check_epsilon,
                              discrete_laplace_variance, noise_fit_test, sampler_is_integer, sparse_threshold)
from . import Claim
from .dp_rule import (DP_CELL_SIGNAL, GUARD_FRACTION, PROBE_FRACTION, dp_choice, guard_needed, guard_shape, probe_needed,
                      probe_shape)

__all__ = ["BudgetPlan", "DPClaim", "budget_plan", "dp_choice", "DP_CELL_SIGNAL", "expected_error", "kron_steps", "agrid_steps",
           "agrid_first_grid", "marginal_sets", "dp_probe_step", "dp_guard_step", "dp_cell_steps", "dp_replay_choice", "marginal_steps", "TOTAL_FRACTION", "AGRID_ALPHA", "AGRID_C", "AGRID_PROFILE", "dpcube_alphas", "kdtree_default_depth", "kdtree_total_step",
           "dpcube_paper_split_rule", "SPLIT_RULES", "PAPER_XI0_NOISE_MULTIPLE",
           "published_total", "FIT_ALPHA", "KDTREE_TOTAL_FRACTION", "utility_check", "state_utility", "LOW_UTILITY_REFUSE",
           "LOW_UTILITY_WARN"]

#: false-alarm probability of the goodness-of-fit test of a release against its source table
FIT_ALPHA = 1e-6
#: share of ε the hierarchical kd-tree spends on a noisy total when it sets its depth by rule
KDTREE_TOTAL_FRACTION = 0.02


# ------------------------------------------------------------------------- the split rules
@dataclass(frozen=True)
class BudgetPlan:
    """The planned measurements of one release, in ledger order: ``structure`` (steps that only
    shape the partitions, e.g. noisy medians), ``cells`` (the steps whose counts are, or are
    post-processed into, the released cells), ``partitions`` (the released partition counts)."""

    epsilon: float
    epsilon_cells: float
    epsilon_partitions: float
    structure: tuple[Step, ...] = ()
    cells: tuple[Step, ...] = ()
    partitions: tuple[Step, ...] = ()
    #: the released cells are a post-processing (not raw noisy counts)
    cells_postprocessed: bool = False
    depth: int | None = None
    levels: int | None = None
    epsilon_per_level: float | None = None
    #: the noisy total a rule read (kdtree default depth), None when no rule reads the input size
    noisy_total: int | None = None
    #: the default's choice (:func:`dp_choice`), None for the other mechanisms
    choice: Mapping[str, Any] | None = None

    @property
    def epsilon_other(self) -> float:
        return self.epsilon - self.epsilon_cells - self.epsilon_partitions

    @property
    def steps(self) -> tuple[Step, ...]:
        return self.structure + self.cells + self.partitions


def _fraction(params: Mapping[str, Any], name: str) -> float:
    v = float(params[name])
    if not 0 < v < 1:
        raise PpdpError(f"{name} must be in (0, 1), got {v}")
    return v


def dpcube_alphas(epsilon: float, alpha1_fraction: float) -> tuple[float, float]:
    """DPCube's phases: α1 = α·(α1/α) for the cells, α2 = α − α1 for the partitions."""
    a1 = epsilon * alpha1_fraction
    return a1, epsilon - a1


def kdtree_default_depth(n_rows: int, eps_leaf: float, shape: Sequence[int]) -> int:
    """The hierarchical kd-tree's documented depth rule: the largest d with n·ε_leaf/2^d ≥ 10
    (leaves expected to hold ≥ 10 noise scales), capped by the halvings that reach single cells.
    ``n_rows`` is the *noisy* total of :func:`kdtree_total_step` (never the exact count)."""
    max_depth = int(sum(math.ceil(math.log2(s)) for s in shape if s > 1)) or 1
    return max(1, min(max_depth, int(math.floor(math.log2(max(n_rows * eps_leaf / 10, 2))))))


def kdtree_total_step(params: Mapping[str, Any]) -> Step | None:
    """The measurement of the noisy total N̂ the kd-tree's default depth reads
    (``KDTREE_TOTAL_FRACTION``·ε, one count), or None when ``depth`` is given."""
    if params.get("depth") is not None:
        return None
    e = check_epsilon(params["epsilon"])
    return Step(e * KDTREE_TOTAL_FRACTION, "noisy total count N (sets the default depth)", parts=1)


def _cells_plan(p, shape, noisy_total) -> BudgetPlan:
    e = check_epsilon(p["epsilon"])
    return BudgetPlan(e, e, 0.0, cells=(Step(e, "noisy count of every cell (Algorithm 1)", "cells"),))


def _dpcube_plan(p, shape, noisy_total) -> BudgetPlan:
    e = check_epsilon(p["epsilon"])
    a1, a2 = dpcube_alphas(e, _fraction(p, "alpha1_fraction"))
    return BudgetPlan(e, a1, a2, cells=(Step(a1, "phase I: noisy count of every cell", "cells"),),
                      partitions=(Step(a2, "phase II: noisy count of every kd-tree partition", "partitions"),))


def _kdtree_plan(p, shape, noisy_total) -> BudgetPlan:
    e = check_epsilon(p["epsilon"])
    mf = _fraction(p, "median_fraction")
    depth = p.get("depth")
    if depth is not None and (isinstance(depth, bool) or int(depth) != depth or depth < 1):
        raise PpdpError(f"depth must be an integer ≥ 1, got {depth!r}")
    total = kdtree_total_step(p)
    rest = e - (total.epsilon if total else 0.0)
    eps_leaf = rest * (1 - mf)
    if total is not None:
        if noisy_total is None:
            raise PpdpError("the kd-tree's default depth needs the noisy total (noisy_total)")
        depth = kdtree_default_depth(max(int(noisy_total), 0), eps_leaf, shape)
    else:
        noisy_total = None
    depth = int(depth)
    eps_level = rest * mf / depth
    levels = tuple(Step(eps_level, f"level {lv}: noisy medians", parts=1 if lv == 0 else None) for lv in range(depth))
    return BudgetPlan(e, 0.0, eps_leaf, structure=((total,) if total else ()) + levels,
                      partitions=(Step(eps_leaf, "noisy leaf counts", "partitions"),), depth=depth,
                      epsilon_per_level=eps_level, noisy_total=noisy_total)


def _hierarchy_plan(p, shape, noisy_total) -> BudgetPlan:
    e = check_epsilon(p["epsilon"])
    nodes = [len(lo) for lo, _, _ in tree_levels(shape, p["fanout"])]  # data-independent: public
    H = len(nodes)
    eps_level = e / H
    return BudgetPlan(e, e, 0.0, cells=tuple(Step(eps_level, f"tree level {i}: noisy node counts", parts=n)
                                             for i, n in enumerate(nodes)),
                      cells_postprocessed=True, levels=H, epsilon_per_level=eps_level)


#: the post-processing a mechanism applies to its noisy cells (published as ``cells_postprocessed``)
POSTPROCESSING = {"consistency": "hierarchical constrained inference (Hay et al. 2010)",
                  "kron": "weighted least squares over the Kronecker measurements",
                  "agrid": "adaptive grids: consistency of the two levels, uniform within the boxes (Qardaji et al. 2013)",
                  "marginals": "graphical-model inference over the noisy marginals (private-pgm, McKenna et al. 2019)",
                  "dp": "the chosen algorithm's inference (see choice)"}


def dpcube_split_rule(params: Mapping[str, Any]) -> dict[str, Any]:
    """DPCube's kd-tree leaf test from its parameters (published as the certificate's ``split_rule``):
    the threshold ξ0, the phase-I noise variance and the smallest partition worth splitting
    (``count_threshold`` × the phase-II noise standard deviation)."""
    a1, a2 = dpcube_alphas(check_epsilon(params["epsilon"]), _fraction(params, "alpha1_fraction"))
    return {"xi0": params.get("xi0"), "noise_var": discrete_laplace_variance(a1),
            "min_count": float(params["count_threshold"]) * math.sqrt(discrete_laplace_variance(a2))}


#: the paper-literal DPCube's default ξ0 (``dpcube-paper``): this multiple of the phase-I noise
#: variance. The paper fixes no value; the rule is ours, fixed in advance (not tuned).
PAPER_XI0_NOISE_MULTIPLE = 2.0


def dpcube_paper_split_rule(params: Mapping[str, Any]) -> dict[str, Any]:
    """The paper-literal DPCube's leaf test (Algorithm 3 as printed): split a box while the raw
    sample variance of its noisy phase-I cells exceeds ξ0 — no de-noising (``noise_var`` 0), no
    count test. ``xi0`` None resolves to ``PAPER_XI0_NOISE_MULTIPLE`` × the phase-I noise variance."""
    a1, _ = dpcube_alphas(check_epsilon(params["epsilon"]), _fraction(params, "alpha1_fraction"))
    xi0 = params.get("xi0")
    if xi0 is None:
        xi0 = PAPER_XI0_NOISE_MULTIPLE * discrete_laplace_variance(a1)
    return {"xi0": float(xi0), "noise_var": 0.0, "min_count": None}


#: mechanism → its kd-tree leaf test from params (published as the certificate's ``split_rule``)
SPLIT_RULES = {"dpcube": dpcube_split_rule, "dpcube-paper": dpcube_paper_split_rule}


# ---------------------------------------------- Kronecker least squares, adaptive grids, marginals
def kron_steps(e: float, shape: Sequence[int]) -> tuple[Step, ...]:
    """The Kronecker strategy's measurements (:mod:`ppdp.kernels.strategies`): one step per
    combination of per-dimension levels, ε·Π weights over the Π nodes of its disjoint boxes."""
    strat = kron_strategy(shape)
    steps = []
    for combo in itertools.product(*[s.levels for s in strat]):
        w = math.prod(lv[1] for lv in combo)
        names = ",".join("cells" if len(lv[0]) == s.n else f"blocks of {s.block}" for lv, s in zip(combo, strat))
        steps.append(Step(e * w, f"kronecker level ({names}): noisy box counts", parts=math.prod(len(lv[0]) for lv in combo)))
    return tuple(steps)


def _kron_plan(p, shape, noisy_total) -> BudgetPlan:
    e = check_epsilon(p["epsilon"])
    return BudgetPlan(e, e, 0.0, cells=kron_steps(e, shape), cells_postprocessed=True)


#: AGrid (Qardaji, Yang & Li 2013): share of ε on the first-level grid, and the constant c
AGRID_ALPHA = 0.3
AGRID_C = 10.0
#: share of ε the default's adaptive grid spends on the 1-way marginals that shape the cells within a box
AGRID_PROFILE = 0.1
#: share of ε the rules that read the input size (AGrid's grid, the default's choice) spend on a noisy total
TOTAL_FRACTION = 0.01


def agrid_first_grid(n_hat: int, e: float, shape: Sequence[int], c: float = AGRID_C) -> tuple[int, ...]:
    """AGrid's first-level grid: m1 = max(10, ⌈¼√(N̂ε/c)⌉) per dimension in 2-D (Qardaji et al.
    2013); in d dimensions the same number of boxes, (m1²)^{1/d} per dimension; capped by the
    dimension's size."""
    d = len(shape)
    m1_sq = max(100.0, (math.ceil(0.25 * math.sqrt(max(n_hat, 0) * e / c))) ** 2)
    per = max(1, math.ceil(m1_sq ** (1.0 / d) - 1e-9))
    return tuple(min(int(n), per) for n in shape)


def _total_step(e: float) -> Step:
    return Step(e * TOTAL_FRACTION, "noisy total count N (read by the rule)", parts=1)


def _after_total(p, noisy_total, who: str) -> tuple[float, Step, float, int]:
    """(ε, the noisy-total step, the ε left after it, N̂) of a plan whose rule reads N̂."""
    e = check_epsilon(p["epsilon"])
    if noisy_total is None:
        raise PpdpError(f"{who} needs the noisy total (noisy_total)")
    total = _total_step(e)
    return e, total, e - total.epsilon, int(noisy_total)


def agrid_steps(e_rest: float, shape, n_hat: int, alpha: float, c: float, profile: float = 0.0) -> tuple[Step, ...]:
    """AGrid's measurements with ``e_rest``: with ``profile`` > 0 first the noisy 1-way marginal of
    every dimension (``profile``·e_rest split evenly; the within-box profile), then the two grid
    levels with the rest (α, 1 − α)."""
    d = len(shape)
    prof: tuple[Step, ...] = ()
    if profile > 0:
        prof = tuple(Step(e_rest * profile / d, f"adaptive grid profile: noisy 1-way marginal of dimension {i}",
                          parts=int(n)) for i, n in enumerate(shape))
    e_grid = e_rest * (1 - profile)
    m1 = agrid_first_grid(n_hat, e_grid, shape, c)
    return prof + (Step(e_grid * alpha, f"adaptive grid level 1 (c = {c:g}, N̂ = {int(n_hat)}): noisy counts of the "
                        f"{'×'.join(str(m) for m in m1)} grid", parts=math.prod(m1)),
                   Step(e_grid * (1 - alpha), f"adaptive grid level 2 (c/2 = {c / 2:g}): noisy counts of each box's "
                        f"sub-grid"))


def _profile(p: Mapping[str, Any]) -> float:
    v = float(p.get("profile") or 0.0)
    if not 0 <= v < 1:
        raise PpdpError(f"profile must be in [0, 1), got {v}")
    return v


def _agrid_plan(p, shape, noisy_total) -> BudgetPlan:
    e, total, rest, n_hat = _after_total(p, noisy_total, "the adaptive grid")
    steps = agrid_steps(rest, shape, n_hat, _fraction(p, "alpha"), float(p["c"]), _profile(p))
    return BudgetPlan(e, rest, 0.0, structure=(total,), cells=steps, cells_postprocessed=True,
                      noisy_total=n_hat)


def marginal_sets(n_dims: int, way: int) -> list[tuple[int, ...]]:
    """The measured marginals: every set of ``min(way, d)`` dimensions."""
    return list(itertools.combinations(range(n_dims), min(int(way), n_dims)))


def marginal_steps(e: float, shape, dims, way: int) -> tuple[Step, ...]:
    sets = marginal_sets(len(shape), way)
    return tuple(Step(e / len(sets), f"marginal ({','.join(str(dims[i]) for i in m)}): noisy counts",
                      parts=math.prod(int(shape[i]) for i in m)) for m in sets)


def _marginals_plan(p, shape, noisy_total) -> BudgetPlan:
    e = check_epsilon(p["epsilon"])
    return BudgetPlan(e, e, 0.0, cells=marginal_steps(e, shape, list(p["dims"]), int(p["way"])),
                      cells_postprocessed=True)


def dp_probe_step(e_rest: float, shape: Sequence[int], n_hat: int) -> Step | None:
    """The default's bias probe (the noisy counts of the coarse table, :data:`PROBE_FRACTION` of
    the ε left after the noisy total), or None when the rule spends nothing on it."""
    if not probe_needed(e_rest, shape, n_hat):
        return None
    k = probe_shape(shape)
    return Step(e_rest * PROBE_FRACTION, f"bias probe: noisy counts of the coarse {'×'.join(str(n) for n in k)} table",
                parts=math.prod(k))


def dp_guard_step(e_rest: float, shape: Sequence[int], n_hat: int, probe: Sequence[int] | None = None,
                  force: bool = False) -> Step | None:
    """The default's second probe, the guard (the noisy counts of the 2-block table,
    :data:`GUARD_FRACTION` of the ε left after the noisy total), when the rule spends it after the
    first probe's counts ``probe`` (or ``force``: a replay that follows its ledger); else None."""
    if not force and (probe is None or not guard_needed(e_rest, shape, n_hat, probe)):
        return None
    k = guard_shape(shape)
    return Step(e_rest * GUARD_FRACTION, f"bias probe (guard): noisy counts of the coarse {'×'.join(str(n) for n in k)} table",
                parts=math.prod(k))


def dp_cell_steps(e: float, shape: Sequence[int], dims, n_hat: int, algorithm: str, way: int | None) -> tuple[Step, ...]:
    """The measurements of the strategy the default chose, with ε = ``e``."""
    if algorithm == "kron":
        return kron_steps(e, shape)
    if algorithm == "agrid":
        return agrid_steps(e, shape, n_hat, AGRID_ALPHA, AGRID_C, AGRID_PROFILE)
    return marginal_steps(e, shape, list(dims), int(way or 2))


def _dp_plan(p, shape, noisy_total, probe=None) -> BudgetPlan:
    e, total, rest, n_hat = _after_total(p, noisy_total, "the default histogram's rule")
    ch = dp_choice(rest, shape, n_hat, probe)
    pstep = dp_probe_step(rest, shape, n_hat)
    gstep = None if pstep is None else dp_guard_step(rest, shape, n_hat, probe)
    structure = tuple(s for s in (total, pstep, gstep) if s is not None)
    e_cells = rest - sum(s.epsilon for s in (pstep, gstep) if s is not None)
    steps = dp_cell_steps(e_cells, shape, p["dims"], n_hat, ch["algorithm"], ch.get("way"))
    return BudgetPlan(e, e_cells, 0.0, structure=structure, cells=steps, cells_postprocessed=True,
                      noisy_total=n_hat, choice=ch)


def dp_replay_choice(params: Mapping[str, Any], shape: Sequence[int], n_hat: int, ledger) -> tuple[str, int | None]:
    """The strategy (algorithm, way) whose measurements a default release's ``ledger`` records
    after its noisy total and probe (a replay keeps the certificate's choice)."""
    e = check_epsilon(params["epsilon"])
    rest = e - _total_step(e).epsilon
    pstep = dp_probe_step(rest, shape, n_hat)
    gstep = dp_guard_step(rest, shape, n_hat, force=True) if pstep is not None else None
    guarded = gstep is not None and any(s.what == gstep.what for s in ledger)
    e_cells = rest - sum(s.epsilon for s in (pstep, gstep if guarded else None) if s is not None)
    tail = [s.what for s in ledger][1 + (pstep is not None) + guarded:]
    for alg, way in (("kron", None), ("marginals", 1), ("marginals", 2), ("agrid", None)):
        try:
            if [s.what for s in dp_cell_steps(e_cells, shape, params["dims"], n_hat, alg, way)] == tail:
                return alg, way
        except (PpdpError, ValueError):
            continue
    raise PpdpError("the ledger records none of the default's strategies")


def expected_error(mechanism: str, params: Mapping[str, Any], shape: Sequence[int],
                   noisy_total: int | None = None, storage: str = "dense",
                   probe: Sequence[int] | None = None) -> dict[str, float] | None:
    """The expected error of a release, from its noise variances (public: ε and the shape), for
    the mechanisms whose error does not depend on the data: the identity (``cells``) and the
    Kronecker least squares (``kron``, and ``dp`` when it chooses it). ``cell_sd``: standard
    deviation of one released cell; ``random_range_mae``: predicted mean absolute error of a
    uniformly random box (normal approximation, continuous-Laplace variances). None otherwise."""
    e = check_epsilon(params["epsilon"])
    if mechanism == "dp":
        if noisy_total is None:
            return None
        e = e - _total_step(e).epsilon
        ch = dp_choice(e, shape, int(noisy_total), probe)
        if ch["algorithm"] != "kron":
            return None
        e = e - float(ch["epsilon_probe"])
        mechanism = "kron"
    if mechanism == "cells":
        if storage != "dense":  # a thresholded (sparse) histogram's error depends on the data
            return None
        mean_len = math.prod((n + 2) / 3.0 for n in shape)
        sd_range = math.sqrt(discrete_laplace_variance(e))  # per cell
        return {"cell_sd": sd_range, "random_range_mae": math.sqrt(2 / math.pi) * sd_range * math.sqrt(mean_len)}
    if mechanism == "kron":
        strat = kron_strategy(shape)
        cell_sd = math.sqrt(2.0) / e * math.prod(math.sqrt(float(np.mean(np.diag(s.gram_inverse())))) for s in strat)
        return {"cell_sd": cell_sd, "random_range_mae": math.sqrt(2 / math.pi) * expected_range_sd(strat, e)}
    return None


_RULES = {"cells": _cells_plan, "dpcube": _dpcube_plan, "dpcube-paper": _dpcube_plan, "kdtree": _kdtree_plan, "consistency": _hierarchy_plan,
          "kron": _kron_plan, "agrid": _agrid_plan, "marginals": _marginals_plan, "dp": _dp_plan}


def budget_plan(mechanism: str, params: Mapping[str, Any], shape: Sequence[int],
                noisy_total: int | None = None, probe: Sequence[int] | None = None) -> BudgetPlan:
    """The ε split of ``mechanism`` under ``params`` for a cube of ``shape`` (public) and, for
    a rule that reads the input size, the measured ``noisy_total``."""
    rule = _RULES.get(mechanism)
    if rule is None:
        raise ReleaseError(f"no ε-DP budget rule for mechanism {mechanism!r}; known: {', '.join(_RULES)}")
    if probe is not None:
        if mechanism != "dp":
            raise ReleaseError(f"the mechanism {mechanism!r} measures no bias probe")
        return _dp_plan(params, tuple(int(s) for s in shape), noisy_total, probe)
    return rule(params, tuple(int(s) for s in shape), noisy_total)


def published_total(cells: np.ndarray, partitions: np.ndarray) -> int:
    """The ``n_input`` / ``n_published`` of a histogram release: an ε-DP estimate of the number of
    rows, never the exact count — the sum of the released partition counts when there are
    partitions, else of the released cells (rounded, at least 0). A post-processing of the
    released noisy counts: it costs no budget and anyone can recompute it from the files."""
    c = np.asarray(partitions if len(partitions) else cells, dtype=np.float64)
    total = float(c.sum()) if len(c) else 0.0
    return max(0, int(round(total))) if math.isfinite(total) else 0


# ---------------------------------------------------------------------------- utility
#: refused (unless allowed) when the expected error of the noisy total is at least this share of it
LOW_UTILITY_REFUSE = 0.5
#: warned when the expected error of the noisy total is at least this share of it
LOW_UTILITY_WARN = 0.05


def utility_check(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Can a histogram release give useful answers at its ε? Judged from public quantities and
    the release's own noisy counts only — ε and its split (the certificate), the number of cells
    and partitions, and the noisy total ``n_published`` — never from the true count: the verdict
    is a post-processing of the release and discloses nothing the release does not.

    ``total_sd``: the standard deviation of the noisy total's noise — the sum of the released
    counts it adds up (√k · the discrete Laplace SD at that step's ε, k partitions or cells), or,
    for a release whose cells are post-processed (least squares, consistency, …), the SD of one
    count measured with the whole ε (a lower bound on any ε-DP total). ``cell_sd``: one released
    cell's noise SD (:func:`expected_error` where known, else the SD at the cell step's ε).
    ``verdict``: ``"refuse"`` when ``total_sd ≥ LOW_UTILITY_REFUSE × noisy total`` (the total —
    and so every answer — is mostly noise), ``"warn"`` when ``total_sd ≥ LOW_UTILITY_WARN × noisy
    total`` or a cell's noise exceeds the mean noisy cell count, else ``"ok"``; ``message``: the
    verdict in plain words (None when ok)."""
    cert = manifest.get("certificate") or {}
    params = manifest.get("params") or {}
    eps = float(cert["epsilon"])
    n_hat = max(int(manifest.get("n_published", 0)), 0)
    m = int(cert.get("n_cells") or 1)
    parts = int(cert.get("n_partitions") or 0)
    eps_cells, eps_parts = float(cert.get("epsilon_cells") or 0.0), float(cert.get("epsilon_partitions") or 0.0)
    mech = str(manifest.get("mechanism", ""))
    if parts and eps_parts > 0:
        total_sd = math.sqrt(parts * discrete_laplace_variance(eps_parts))
    elif mech == "cells" and eps_cells > 0:
        total_sd = math.sqrt(m * discrete_laplace_variance(eps_cells))
    else:
        total_sd = math.sqrt(discrete_laplace_variance(eps))
    cell_sd = None
    try:
        got = expected_error(mech, params, cert.get("shape") or [m], cert.get("noisy_total"), cert.get("storage", "dense"),
                             _probe_of(manifest))
        cell_sd = None if got is None else float(got["cell_sd"])
    except (PpdpError, KeyError, TypeError, ValueError):
        cell_sd = None
    if cell_sd is None:
        cell_sd = math.sqrt(discrete_laplace_variance(eps_cells if eps_cells > 0 else eps))
    mean_cell = n_hat / m
    share = math.inf if n_hat == 0 else total_sd / n_hat
    if share >= LOW_UTILITY_REFUSE:
        verdict = "refuse"
        message = (f"at ε = {eps:g} the noisy total's expected error (SD {total_sd:,.0f}) is {_share(share)} of the "
                   f"noisy total itself ({n_hat:,}): every answer would be mostly noise (refused at "
                   f"{LOW_UTILITY_REFUSE:.0%} and above)")
        if n_hat == 0:
            message = (f"at ε = {eps:g} the noisy total is 0 against an expected error (SD) of {total_sd:,.0f}: every "
                       f"answer would be mostly noise (refused when the SD is {LOW_UTILITY_REFUSE:.0%} of the noisy "
                       "total or more)")
    elif share >= LOW_UTILITY_WARN or cell_sd >= mean_cell:
        verdict = "warn"
        parts_txt = []
        if share >= LOW_UTILITY_WARN:
            parts_txt.append(f"the noisy total's expected error (SD {total_sd:,.0f}) is {_share(share)} of the noisy total "
                             f"({n_hat:,})")
        if cell_sd >= mean_cell:
            parts_txt.append(f"one cell's noise (SD {cell_sd:,.1f}) exceeds the average noisy cell count "
                             f"({mean_cell:,.2f} over {m:,} cells): single cells are mostly noise, ask about ranges "
                             "or marginals that cover many cells")
        message = f"low utility at ε = {eps:g}: " + "; ".join(parts_txt)
    else:
        verdict, message = "ok", None
    return {"verdict": verdict, "message": message, "epsilon": eps, "noisy_total": n_hat, "total_sd": total_sd,
            "cell_sd": cell_sd, "n_cells": m, "mean_noisy_cell": mean_cell,
            "refuse_share": LOW_UTILITY_REFUSE, "warn_share": LOW_UTILITY_WARN}


def state_utility(release, allow: bool = False) -> dict[str, Any]:
    """Refuse (InfeasibleError, unless ``allow``) or annotate an ε-DP histogram release that
    cannot give useful answers (:func:`utility_check`): a refused-but-allowed or warned release
    gets ``manifest["utility"]`` (verdict, the warning in plain words, the noise SDs, whether
    ``--allow-low-utility`` was given). Returns the check."""
    from ..errors import InfeasibleError

    u = utility_check(release.manifest)
    if u["verdict"] == "refuse" and not allow:
        raise InfeasibleError(f"{u['message']}; raise --epsilon (epsilon=…), or pass --allow-low-utility "
                              "(allow_low_utility=True) to publish it anyway")
    if u["verdict"] != "ok":
        release.manifest["utility"] = {"verdict": u["verdict"], "warning": u["message"],
                                       "noise_sd_of_total": round(u["total_sd"], 3),
                                       "noise_sd_of_cell": round(u["cell_sd"], 3),
                                       "allowed_low_utility": bool(allow and u["verdict"] == "refuse")}
    return u


def _share(x: float) -> str:
    return "more than all" if not math.isfinite(x) or x >= 10 else f"{x:.0%}"


# ------------------------------------------------------------------------------- the claim
def _integer(v: Any) -> int | None:
    """``v`` as an int when it is an integral number (a bool, a fraction or text is not)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        return None
    if not math.isfinite(float(v)) or float(v) != int(v):
        return None
    return int(v)


def _check_domains(release, report, params: Mapping[str, Any], dims: list[str]) -> bool:
    """Every dimension's cells are declared in params (bins, or labels / a bundled table's
    documented schema in ``domains``) and the published domain is exactly the declaration."""
    try:
        declared, undeclared = declared_domains(dims, params.get("bins"), params.get("domains"))
    except (PpdpError, KeyError, TypeError, ValueError) as e:
        return report.check(False, "params declare the cube's domains", f"params.domains cannot be resolved: {e}")
    if not report.check(not undeclared, "every dimension's domain is declared (params.bins / params.domains)",
                        f"the domain of {undeclared} is not declared in params (bins or domains): read off the rows, "
                        f"it would reveal which values the data hold; not a differentially private release"):
        return False
    doms = release.domains
    wrong = []
    for d in dims:
        if d in declared:
            want = declared[d]
        else:
            try:
                from ..table import Binning

                want = Binning(tuple(float(e) for e in params["bins"][d])).labels
            except (PpdpError, TypeError, ValueError):
                want = None
        if want is None or list(doms.get(d) or []) != list(want):
            wrong.append(d)
    return report.check(not wrong, "the published domains are the declared ones",
                        f"the published domains of {wrong} differ from what params declare")


def _probe_of(manifest: Mapping[str, Any]) -> list[int] | None:
    """The default's bias-probe counts as its certificate states them (None: no probe)."""
    if manifest.get("mechanism") != "dp":
        return None
    ch = (manifest.get("certificate") or {}).get("choice")
    got = ch.get("probe") if isinstance(ch, Mapping) else None
    if got is None:
        return None
    if not isinstance(got, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in got):
        raise PpdpError("the certificate's bias probe is not a list of integer counts")
    return [int(v) for v in got]


def _same_numbers(given: Any, want: Any) -> bool:
    """``given`` (from a manifest) equals ``want``: same keys, numbers close, other values equal."""
    if want is None or given is None:
        return want is None and given is None
    if not isinstance(given, Mapping) or set(given) != set(want):
        return False
    for k, w in want.items():
        g = given[k]
        if isinstance(w, (int, float)) and not isinstance(w, bool) and not isinstance(w, str):
            if isinstance(g, bool) or not isinstance(g, (int, float)) or not _close(float(g), float(w)):
                return False
            if isinstance(w, int) and g != w:
                return False
        elif isinstance(w, Mapping):
            if not _same_numbers(g, w):
                return False
        elif g != w:
            return False
    return True


def _close(a: float, b: float) -> bool:
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


@dataclass(frozen=True)
class DPClaim(Claim):
    """ε-DP: total ε, its phases (cells, partitions, other = tree structure), the noise
    sampler, the ledger of every measurement, and the per-level ε of tree mechanisms."""

    model = "epsilon-DP"

    epsilon: float
    epsilon_cells: float
    epsilon_partitions: float
    epsilon_other: float
    sampler: str
    ledger: tuple[Spend, ...]
    depth: int | None = None
    levels: int | None = None
    epsilon_per_level: float | None = None
    noisy_total: int | None = None

    # ------------------------------------------------------------------ publish time
    @classmethod
    def derive(cls, plan: BudgetPlan, budget: Budget, sampler: str = SAMPLER) -> "DPClaim":
        """The claim of a release measured along ``plan`` with ``budget`` (its ledger)."""
        claim = cls(plan.epsilon, plan.epsilon_cells, plan.epsilon_partitions, plan.epsilon_other, sampler,
                    budget.ledger, plan.depth, plan.levels, plan.epsilon_per_level, plan.noisy_total)
        wrong = claim.disagreements(plan)
        if wrong:  # the mechanism did not measure what its rule says: never publish that
            raise PpdpError("internal error: the measurements disagree with the budget plan: " + "; ".join(wrong))
        return claim

    # ------------------------------------------------------------------ manifest form
    def to_certificate(self) -> dict[str, Any]:
        cert: dict[str, Any] = {"model": self.model, "epsilon": self.epsilon, "epsilon_cells": self.epsilon_cells,
                                "epsilon_partitions": self.epsilon_partitions, "epsilon_other": self.epsilon_other,
                                "sampler": self.sampler, "ledger": [s.to_json() for s in self.ledger]}
        for k in ("depth", "levels", "epsilon_per_level", "noisy_total"):
            if getattr(self, k) is not None:
                cert[k] = getattr(self, k)
        return cert

    @classmethod
    def from_certificate(cls, cert: Mapping[str, Any]) -> "DPClaim":
        def opt(k, f):
            return None if cert.get(k) is None else f(cert[k])

        return cls(float(cert["epsilon"]), float(cert["epsilon_cells"]), float(cert["epsilon_partitions"]),
                   float(cert.get("epsilon_other", 0.0)), str(cert["sampler"]),
                   tuple(Spend.from_json(e) for e in cert["ledger"]), opt("depth", int), opt("levels", int),
                   opt("epsilon_per_level", float), opt("noisy_total", _integer))

    # ------------------------------------------------------------------ verification
    def disagreements(self, plan: BudgetPlan) -> list[str]:
        """Where this claim differs from the plan re-derived from the parameters."""
        out = []
        for k in ("epsilon", "epsilon_cells", "epsilon_partitions", "epsilon_other", "epsilon_per_level"):
            want, got = getattr(plan, k), getattr(self, k)
            if (want is None) != (got is None) or (want is not None and not _close(want, got)):
                out.append(f"params give {k} = {want}, the certificate says {got}")
        for k in ("depth", "levels", "noisy_total"):
            if getattr(plan, k) != getattr(self, k):
                out.append(f"params give {k} = {getattr(plan, k)}, the certificate says {getattr(self, k)}")
        if len(self.ledger) != len(plan.steps):
            out.append(f"the ledger has {len(self.ledger)} entries, params give {len(plan.steps)} measurements")
        for i, (s, step) in enumerate(zip(self.ledger, plan.steps)):
            if not _close(s.epsilon, step.epsilon) or s.what != step.what:
                out.append(f"ledger entry {i} spends ε = {s.epsilon} on {s.what!r}; params give ε = {step.epsilon} "
                           f"on {step.what!r}")
        return out

    def check(self, release, report, source=None) -> None:
        eps, e1, e2, eo = self.epsilon, self.epsilon_cells, self.epsilon_partitions, self.epsilon_other
        tol = 1e-9 * max(eps, 1)
        # the claim itself
        report.check(eps > 0 and e1 >= 0 and e2 >= 0 and eo >= -tol, "budgets are non-negative, ε > 0",
                     f"bad budgets: ε={eps}, α1={e1}, α2={e2}, other={eo}")
        report.check(abs(e1 + e2 + eo - eps) <= tol, "α1 + α2 (+ structure) = α",
                     f"epsilon_cells {e1} + epsilon_partitions {e2} + epsilon_other {eo} != epsilon {eps}")
        bad = [s.what for s in self.ledger if not (math.isfinite(s.epsilon) and s.epsilon > 0) or s.parallel_over < 1]
        report.check(not bad, "every ledger spend is > 0 on ≥ 1 part",
                     f"ledger entries with ε ≤ 0 or no part (a spend cannot refund budget): {bad}")
        low = [s.what for s in self.ledger if 0 < s.epsilon < EPSILON_FLOOR]
        report.check(not low, f"every measurement's ε ≥ the sampler's floor {EPSILON_FLOOR:g}",
                     f"ledger entries below the sampler's ε floor {EPSILON_FLOOR:g} (the draw would not be a faithful "
                     f"discrete Laplace): {low}")
        led = Budget.total_of(self.ledger)
        report.check(abs(led - eps) <= tol, "ledger adds up to ε (sequential composition)",
                     f"the ledger spends {led}, the certificate says epsilon = {eps}")
        report.check(self.sampler in HARDENED_SAMPLERS, "noise sampler is hardened (discrete Laplace)",
                     f"sampler {self.sampler!r} is not one of the hardened samplers {list(HARDENED_SAMPLERS)}")
        report.facts.update({"epsilon": eps, "epsilon_cells": e1, "epsilon_partitions": e2, "sampler": self.sampler})
        m = release.manifest
        params = m.get("params")
        if not isinstance(params, Mapping) or not isinstance(params.get("dims"), (list, tuple)):
            report.check(False, "params name the dimensions", "params.dims is missing or malformed")
            return
        dims = [str(d) for d in params["dims"]]
        # the cube: declared in params, never read off the rows
        if not _check_domains(release, report, params, dims):
            return
        # the claim against the parameters
        try:
            shape = tuple(len(release.domains[d]) for d in dims)
            probe = _probe_of(m)
            plan = budget_plan(m["mechanism"], params, shape, self.noisy_total, probe)
        except (PpdpError, KeyError, TypeError, ValueError) as e:
            report.check(False, "ε split re-derived from params", f"cannot re-derive the ε split from params: {e}")
            return
        wrong = self.disagreements(plan)
        report.check(not wrong, "ε, its phases and the ledger re-derived from params", "; ".join(wrong) or None)
        # the claim against the files
        cells, parts = release.tables.get("cells"), release.tables.get("partitions")
        if cells is None or parts is None or "count" not in cells.column_names or "count" not in parts.column_names:
            return  # the family's file checks report it
        n_cells, n_parts = int(np.prod(shape, dtype=np.int64)), parts.num_rows
        for s, step in zip(self.ledger, plan.steps):
            want = step.parts if step.parts is not None else {"cells": n_cells, "partitions": n_parts}.get(step.over)  # type: ignore[arg-type]  # get(None) is None
            if want is not None:
                report.check(s.parallel_over == want, f"ledger: {s.what!r} over the {want} released {step.over}",
                             f"the ledger says {s.what!r} measured {s.parallel_over} {step.over}, the files hold {want}")
        if m["mechanism"] in SPLIT_RULES:
            rule, given = SPLIT_RULES[m["mechanism"]](params), release.certificate.get("split_rule")
            same = isinstance(given, Mapping) and set(given) == set(rule) and all(
                (given[k] is None and rule[k] is None) or (rule[k] is not None and isinstance(given[k], (int, float))
                                                           and _close(float(given[k]), float(rule[k]))) for k in rule)
            report.check(same, "kd-tree split rule re-derived from params",
                         f"the certificate's split_rule {given} differs from the one params give {rule}")
        if m["mechanism"] == "dp":
            want_choice = plan.choice
            report.check(_same_numbers(release.certificate.get("choice"), want_choice),
                         "the default's choice re-derived from ε, the shape, the noisy total and the bias probe",
                         f"the certificate's choice {release.certificate.get('choice')} differs from the rule's "
                         f"{want_choice}")
        want_err = expected_error(m["mechanism"], params, shape, self.noisy_total,
                                  str(release.certificate.get("storage", "dense")), probe)
        report.check(_same_numbers(release.certificate.get("expected_error"), want_err),
                     "expected error re-derived from the noise variances",
                     f"the certificate's expected_error {release.certificate.get('expected_error')} is not "
                     f"{want_err}")
        post = POSTPROCESSING.get(m["mechanism"])
        report.check(release.certificate.get("cells_postprocessed") == post, "cell post-processing as the mechanism does it",
                     f"the certificate's cells_postprocessed {release.certificate.get('cells_postprocessed')!r} is not {post!r}")
        storage = release.certificate.get("storage", "dense")
        cc = np.asarray(cells.column("count").to_numpy(zero_copy_only=False), dtype=np.float64) if cells.num_rows else np.zeros(0)
        pc = np.asarray(parts.column("count").to_numpy(zero_copy_only=False), dtype=np.float64) if n_parts else np.zeros(0)
        if e1 > 0:
            if storage == "dense":
                report.check(cells.num_rows == n_cells, "dense storage: every cell released (no cell may be left out)",
                             f"cells.parquet has {cells.num_rows} rows, the cube has {n_cells} cells")
            else:
                tau = sparse_threshold(plan.cells[0].epsilon, n_cells) if plan.cells else None
                given_tau = release.certificate.get("threshold")
                report.check(tau is not None and given_tau == tau,
                             "sparse threshold τ re-derived from ε and the cube size (public)",
                             f"the certificate's threshold {given_tau!r} is not τ = {tau} (from ε and {n_cells} cells)")
                report.check(bool(np.all(cc >= (tau or 0))), "sparse storage: every released cell ≥ τ",
                             f"cells.parquet holds counts below the threshold τ = {tau}")
        else:
            report.check(cells.num_rows == 0, "no cell budget, no cells", "cells released without a cell budget")
        if e2 > 0:
            report.check(n_parts > 0, "a partition budget, partitions released", "partitions.parquet is empty")
        else:
            report.check(n_parts == 0, "no partition budget, no partitions", "partitions released without a partition budget")
        integral = True
        if sampler_is_integer(self.sampler):
            raw = [("partitions", pc)] + ([] if plan.cells_postprocessed else [("cells", cc)])
            for name, c in raw:
                ok = bool(np.all(np.isfinite(c) & (c == np.round(c))))
                integral &= ok
                report.check(ok, f"{name}.parquet counts are integers (integer-valued sampler)",
                             f"{name}.parquet has non-integer counts, impossible with the integer sampler {self.sampler!r}")
        finite = bool(np.all(np.isfinite(cc)) and np.all(np.isfinite(pc)))
        report.check(finite, "every released count is finite", "the files hold NaN or infinite counts")
        # the row count: an estimate from the files, never the exact N
        n_hat = published_total(cc, pc)
        for k in ("n_input", "n_published"):
            report.check(_integer(m.get(k)) == n_hat, f"{k} is the sum of the released noisy counts (not the exact N)",
                         f"the manifest's {k} {m.get(k)!r} is not the noisy total of the released counts, {n_hat}")
        report.facts["sum of the released counts (n_published)"] = n_hat
        if source is not None and finite and integral:
            self._fit(release, report, source, params, dims, plan, storage)

    def _fit(self, release, report, source, params, dims, plan: BudgetPlan, storage: str) -> None:
        """With the source table: the residuals (published − true) of every raw measurement
        against its declared noise; exact post-processed cells against their noise."""
        try:
            declared, _ = declared_domains(dims, params.get("bins"), params.get("domains"))
            spec, codes = cube_codes(source, dims, params.get("bins"), declared)
        except (PpdpError, KeyError, TypeError, ValueError) as e:
            report.check(False, "the source table fits the declared cube", f"the source table does not fit the "
                         f"declared cube: {e}")
            return
        if not report.check(spec.shape == release.shape, "the source table gives the release's cube",
                            f"the source table gives a cube of shape {spec.shape}, the release has {release.shape}"):
            return
        if storage != "dense":
            report.checks.append("goodness of fit: not tested on a sparse (thresholded) cell histogram")
            return
        x = dense_counts(codes, spec.shape, getattr(source, "row_weights", None))  # (a table of counted combinations)
        tests = []
        idx, cnt = release.cell_index()
        if len(cnt) and plan.cells:
            resid = cnt - x[tuple(idx)]
            if plan.cells_postprocessed:
                e_lv = plan.epsilon_per_level or plan.cells[-1].epsilon
                p0 = math.tanh(e_lv / 2)  # max point mass of one node's noise
                exact = bool(np.all(np.abs(resid) < 1e-6))
                log_b = len(resid) * math.log(p0)
                ok = not (exact and log_b <= math.log(FIT_ALPHA / 2))
                report.check(ok, "the consistent cells are not the exact counts",
                             f"the released cells equal the source table's exact counts (probability ≤ "
                             f"{math.exp(log_b):.3g} with noise of ε = {e_lv:g} per level): the noise was removed")
            else:
                tests.append(("cells", resid, plan.cells[0].epsilon))
        lo, hi, pcnt = release.partition_boxes()
        if len(pcnt) and plan.partitions:
            tests.append(("partitions", pcnt - box_counts(summed_area(x), lo, hi), plan.partitions[0].epsilon))
        for name, resid, eps_t in tests:
            ok, line = noise_fit_test(resid, eps_t, FIT_ALPHA / max(len(tests), 1))
            report.check(ok, f"goodness of fit: {name}.parquet − true counts ~ discrete Laplace(ε = {eps_t:g}) "
                             f"(false-alarm ≤ {FIT_ALPHA:g})",
                         f"{name}.parquet does not carry the declared noise: {line}")

    # ------------------------------------------------------------------ audit / words
    def bound(self) -> Mapping[str, Any]:
        """ε bounds the likelihood ratio of neighbouring inputs, not a posterior: no posterior bound."""
        return {"epsilon": self.epsilon, "posterior": None}

    def statement(self) -> str:
        return (f"ε-differential privacy with ε = {self.epsilon:g}: {len(self.ledger)} measurement(s) with "
                f"{self.sampler} noise on disjoint counts, composed sequentially, over declared (public) domains; "
                f"the manifest's row counts are the noisy total of the released counts, not the exact N")
