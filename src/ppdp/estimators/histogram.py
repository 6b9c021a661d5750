"""Estimators of the histogram family: a cell estimate from the released noisy counts, then
range queries as box sums over one summed-area table of the estimated cells.

* ``cells`` — the noisy cells as they are (a sparse cell histogram: its released cells);
* ``uniform`` — each partition's noisy count spread evenly over its cells;
* ``ls`` — *variance-weighted* least squares over both histograms, weights = inverse noise variances
  (Xiao et al.'s H⁺ is the α1 = α2 case). Partitions are disjoint, so the problem splits by
  partition and has a closed form: every cell of partition p moves by the same
  δ_p = (y_p − Σ_{c∈p} y_c)·v1/(v2 + n_p·v1);
* ``ls-unweighted`` — the paper's unweighted least squares (eq 35, H⁺y): every equation weighted
  equally; δ_p = (y_p − Σ_{c∈p} y_c)/(1 + n_p); equal to ``ls`` when α1 = α2;
* ``ls-eb`` — the same least squares plus the partitions' uniformity as a prior: penalty
  Σ(x_c − x̄_p)²/τ_p with τ_p the within-partition variance of the noisy cells beyond the
  noise variance, an empirical-Bayes estimate (docs/dpcube.md). Same partition totals as
  ``ls``; deviations from the partition mean shrunk by τ_p/(τ_p + v1).

Each is an immutable object: ``release.answer(workload, estimator="ls")`` or
``estimator=LeastSquaresEstimator()``. ``cells(release)`` gives the estimated cube and
``answer_boxes`` sums it over boxes; both are cached per release.

Uncertainty (``release.estimate``)
----------------------------------
Closed forms (exact noise variance and fourth cumulant; the interval from the error's own law):

* ``cells`` on raw noisy cells (``cells``, DPCube's phase I): the error is a sum of k iid discrete
  Laplace(ε_cells) draws, k the cells in the query: Var = k·v, integer-valued;
* ``cells`` on ``kron`` (or ``dp`` when it chose ``kron``): Var(qᵀx̂) and κ4 of the Kronecker least
  squares (:func:`_kron_noise`); the identity strategy is again a sum of whole cells;
* ``ls``, ``ls-unweighted``: per partition (see :func:`_ls_estimate`).

The error of each is a known linear combination of independent discrete Laplace variables, and
the interval is ± its ``level`` quantile (:func:`ppdp.kernels.noise_quantiles.halfwidths`), not
± z·se: a single cell's error is one discrete Laplace draw, heavy-tailed and on a lattice, and
the normal interval covers 0.921–0.930 there. Integer-valued errors get ± the smallest integer h
with P(|error| ≤ h) ≥ level from the exact pmf (so coverage ≥ the level, at the levels a lattice
attains: one cell at ε = 1 gets ±3, 0.973; ±2 would be 0.927); lumpy non-integer errors (a
least-squares cell: 0.996 × its own draw plus a small smear) the exact law of the dominant
lattice group plus a normal–Laplace rest; the others a first-order Cornish–Fisher quantile with
the excess kurtosis. The method string counts the queries per form. Not covered exactly: a rest
that is itself a coarse lattice — least squares over partitions of ≤ 5 cells with ε_partitions
≥ ε_cells: 0.944–0.949 in simulation (worst: 2 cells, ε 0.5 / 1.5), against 0.918–0.949 for
the normal interval.

Model-free bounds (valid at the level whatever the data; the estimate is the model's, the interval
is not):

* ``cells`` on a cube inferred from noisy marginals (``marginals``, ``dp`` when it chose them):
  the measured marginals the release ships bound every box count — below each marginal count of
  its projection, above a Bonferroni bound — with every noisy term one-sided at
  (1 − level)/terms (:mod:`ppdp.estimators.histogram_marginals`). A release without the
  marginals file gets no interval (kind ``none``): the model alone cannot bound its own bias.
* ``uniform`` (kd-tree, DPCube partitions): between the noisy counts of the partitions inside the
  query and of those it meets, each side one-sided at (1 − level)/2 (:func:`_uniform_estimate`).
* ``ls-eb``: its shrunk estimate with the interval of ``ls`` (unbiased, closed form above).

The rest — ``cells`` on post-processed cells of ``agrid`` (or ``dp`` choosing it) and
``consistency`` — gets a **parametric bootstrap over the mechanism's own randomness**
(:meth:`HistogramEstimator.bootstrap_errors`), with progress on stderr once it runs longer than
:data:`PROGRESS_DELAY` seconds (:data:`PROGRESS`):

1. the truth is the estimator's own cell estimate, rounded to integer counts by cumulative
   rounding in C order (each run of cells along the last dimension keeps its sum within ±1);
2. the mechanism is re-run on it (:meth:`ppdp.mechanisms.histogram.HistogramMechanism.replay`):
   the plan re-derived from the parameters and the certificate's noisy total (so the budget
   split is exactly the certificate's, and the replayed ledger is checked against it), every
   count drawn afresh through :meth:`ppdp.kernels.noise.Budget.measure`, and the same
   post-processing re-run — data-adaptive structure included (kd-tree cuts, sub-grid sizes,
   graphical-model inference);
3. the estimator is applied to each replicate; the errors of the query answers, replicate −
   truth, give se = their root mean square (the bootstrap's root-mean-squared error: the
   spread plus whatever bias the post-processing shows at the truth, e.g. the shrinkage of a
   graphical model or of the non-negative profile), and the interval is estimate ± t_R quantile
   × se (normal form; Student-t with R degrees of freedom for an R-replicate mean square about a
   known centre). Chosen over the replicate sd and over the basic (reverse-percentile) interval by
   the coverage benchmark (``benchmarks/bench_coverage_histogram.py``): on ``dp``'s adaptive-grid
   and marginals branches the sd and the basic interval under-cover.

R = :data:`BOOTSTRAP_REPLICATES` (50; :data:`BOOTSTRAP_REPLICATES_SLOW` for the graphical-model
inference), fewer when R replicate summed-area tables would exceed :data:`BOOTSTRAP_MEMORY`. The
replicates are seeded from the release's content (:func:`release_seed`), so the same release
and estimator always give the same interval, and they are cached per release and estimator: a
workload pays once, and every query is answered from the replicate summed-area tables in one
vectorised pass. What the interval covers: the mechanism's noise (and the structure it
chooses from noisy counts). What it does not: the bias of spreading a count uniformly (or by a
model) over the cells it covers, where the data are not uniform — a query that cuts a
partition, an adaptive-grid box or a marginal model's independence carries that bias, which the
bootstrap sees only as far as the released estimate itself shows it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
import weakref
from typing import Any

import numpy as np
from scipy import sparse, stats

from ..claims import claim_of
from ..errors import PpdpError, QueryError
from ..registry import mechanism as registered_mechanism
from ..kernels.grid import box_sums, paint, summed_area
from ..kernels.noise import discrete_laplace_fourth_cumulant, discrete_laplace_variance
from ..kernels.noise_quantiles import form_summary, halfwidths
from ..queries import CountIndex, as_workload
from .base import Estimates, Estimator
from .histogram_marginals import marginal_bounds, marginal_epsilons

__all__ = ["HistogramEstimator", "CellsEstimator", "UniformEstimator", "LeastSquaresEstimator",
           "UnweightedLeastSquaresEstimator",
           "EmpiricalBayesEstimator", "BOOTSTRAP_REPLICATES", "BOOTSTRAP_REPLICATES_SLOW", "BOOTSTRAP_MEMORY",
           "release_seed"]

#: replicates of the parametric bootstrap
BOOTSTRAP_REPLICATES = 50
#: replicates when every replicate runs the graphical-model inference (``marginals``, ``dp`` choosing it)
BOOTSTRAP_REPLICATES_SLOW = 50
#: at most this many bytes of replicate summed-area tables per release and estimator (R is lowered to fit)
BOOTSTRAP_MEMORY = 256 * 2**20
#: fewest replicates the bootstrap runs (beyond the memory cap it declines)
BOOTSTRAP_MIN_REPLICATES = 20

#: release → {estimator: (estimated cells, their summed-area table)}
_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class HistogramEstimator(Estimator):
    """Base of the histogram estimators: ``estimate(release)`` → dense cell estimates."""

    family = "histogram"
    #: what the estimate reads: the released cells, the partitions; whether it can read a
    #: sparse cell histogram (cubes beyond the dense limit)
    needs_cells = False
    needs_partitions = False
    reads_sparse = False

    def supports(self, release) -> bool:
        if not super().supports(release):
            return False
        if self.needs_partitions and not release.has_partitions:
            return False
        if self.needs_cells and not release.has_cells:
            return False
        return release.storage == "dense" or self.reads_sparse

    def estimate_cells(self, release) -> np.ndarray:
        raise NotImplementedError

    def _cached(self, release) -> tuple[np.ndarray, np.ndarray]:
        per = _CACHE.setdefault(release, {})
        if self not in per:
            cells = self.estimate_cells(release)
            per[self] = (cells, summed_area(cells))
        return per[self]

    def cells(self, release) -> np.ndarray:
        """Estimated count of every cell (dense float array)."""
        return self._cached(release)[0]

    def answer_boxes(self, release, lo, hi, owner=None, n_queries=None) -> np.ndarray:
        """Sums of the estimated cells over boxes (inclusive cell indices, shape (B, d)); with
        ``owner`` (query number of each box) the box sums are added per query."""
        sat = self._cached(release)[1]
        sums = box_sums(sat, lo, hi) if len(lo) else np.zeros(0)
        if owner is None:
            return sums
        return np.bincount(owner, weights=sums, minlength=n_queries).astype(np.float64)

    def answer(self, release, workload) -> np.ndarray:
        wl = as_workload(workload)
        lo, hi, owner = release.query_boxes(wl)
        return self.answer_boxes(release, lo, hi, owner, len(wl))

    # ------------------------------------------------------------------ bootstrap
    def bootstrap_errors(self, release, workload) -> np.ndarray:
        """Parametric-bootstrap errors of the query answers, (R replicates × queries): replicate
        answer − the truth's answer, with the truth the estimate itself (module docstring).
        PpdpError when the release cannot be replayed (sparse storage, too large a cube)."""
        wl = as_workload(workload)
        lo, hi, owner = release.query_boxes(wl)
        sats = _replicates(self, release)
        return _replicate_box_sums(sats, lo, hi, owner, len(wl))

    def _bootstrap_estimate(self, release, wl, level: float) -> Estimates:
        lo, hi, owner = release.query_boxes(wl)
        est = self.answer_boxes(release, lo, hi, owner, len(wl))
        try:
            sats = _replicates(self, release)
        except PpdpError as e:
            nan = np.full(est.shape, np.nan)
            return Estimates(est, nan, nan.copy(), nan.copy(), f"uncertainty not quantified: {e}", level, kind="none")
        err = _replicate_box_sums(sats, lo, hi, owner, len(wl))
        R = err.shape[0]
        se = np.sqrt(np.mean(err**2, axis=0)) if len(est) else np.zeros(0)
        t = float(stats.t.ppf(0.5 + level / 2, R))
        mech = release.manifest.get("mechanism")
        method = (f"parametric bootstrap over the mechanism's randomness: {R} replicates of {mech} re-run on this "
                  f"estimate (integer-rounded) with the certificate's budget split and noisy total, re-estimated by "
                  f"{self.name}; seeded from the release; se = root-mean-squared replicate error about the estimate, "
                  f"interval estimate ± t({R})·se. Covers the noise, not the bias of spreading counts over the cells "
                  f"a query cuts")
        return Estimates(est, se, est - t * se, est + t * se, method, level)


class CellsEstimator(HistogramEstimator):
    """The noisy cells as released (0 where a sparse histogram released nothing)."""

    name = "cells"
    needs_cells = True
    reads_sparse = True

    def estimate_cells(self, release) -> np.ndarray:
        return release.noisy_cells()

    def answer(self, release, workload) -> np.ndarray:
        if release.storage != "sparse":
            return super().answer(release, workload)
        _, masks = release.resolve(workload)
        for m in masks:
            for c in m:
                if c not in release.dims:
                    raise QueryError(f"{c!r} is not a dimension of this histogram; its dimensions are {release.dims}")
        idx, cnt = release.cell_index()
        index = CountIndex(dict(zip(release.dims, idx)), dict(zip(release.dims, release.shape)), cnt[:, None])
        return index.sums(masks)[:, 0]


class UniformEstimator(HistogramEstimator):
    """Each partition's noisy count spread evenly over its cells. Uncertainty: model-free bounds
    from the partitions (:func:`_uniform_estimate`)."""

    name = "uniform"
    needs_partitions = True

    def estimate_cells(self, release) -> np.ndarray:
        lo, hi, yp = release.partition_boxes()
        n_p = np.prod(hi - lo + 1, axis=1).astype(np.float64)
        return paint(release.shape, lo, hi, yp / n_p, dtype=np.float64)


def _least_squares_parts(release):
    """(noisy cells y, partition of each cell, partition counts, sizes, Σ_p y, δ_p, v1)."""
    lo, hi, yp = release.partition_boxes()
    n_p = np.prod(hi - lo + 1, axis=1).astype(np.float64)
    y = release.noisy_cells()
    pid = paint(release.shape, lo, hi)
    claim = claim_of(release.manifest)
    v1 = discrete_laplace_variance(claim.epsilon_cells)
    v2 = discrete_laplace_variance(claim.epsilon_partitions)
    sums = np.bincount(pid.ravel(), weights=y.ravel(), minlength=len(yp))
    delta = (yp - sums) * v1 / (v2 + n_p * v1)
    return y, pid, yp, n_p, sums, delta, v1


class LeastSquaresEstimator(HistogramEstimator):
    """Weighted least squares over the cells and the partitions (closed form per partition)."""

    name = "ls"
    needs_cells = True
    needs_partitions = True

    def estimate_cells(self, release) -> np.ndarray:
        y, pid, _, _, _, delta, _ = _least_squares_parts(release)
        return y + delta[pid]


class UnweightedLeastSquaresEstimator(HistogramEstimator):
    """The paper's least squares (Xiao et al., eq 35: x̂ = H⁺y, every equation weighted equally,
    whatever α1 and α2): per partition δ_p = (y_p − Σ_{c∈p} y_c)/(1 + n_p). ``ls`` is the
    variance-weighted one (weights 1/v1, 1/v2); the two coincide when α1 = α2."""

    name = "ls-unweighted"
    needs_cells = True
    needs_partitions = True

    def estimate_cells(self, release) -> np.ndarray:
        y, pid, yp, n_p, sums, _, _ = _least_squares_parts(release)
        return y + ((yp - sums) / (1.0 + n_p))[pid]


class EmpiricalBayesEstimator(HistogramEstimator):
    """Least squares with the partitions' uniformity as an empirical-Bayes prior. Uncertainty:
    the interval of ``ls`` (:func:`_eb_estimate`)."""

    name = "ls-eb"
    needs_cells = True
    needs_partitions = True

    def estimate_cells(self, release) -> np.ndarray:
        y, pid, yp, n_p, sums, delta, v1 = _least_squares_parts(release)
        # same partition totals as ls; deviations from the partition mean shrunk by
        # τ_p/(τ_p + v1), τ_p = max(0, within-partition variance of y − v1)
        mean_y = sums / n_p
        var_y = np.bincount(pid.ravel(), weights=(y * y).ravel(), minlength=len(yp)) / n_p - mean_y**2
        tau = np.maximum(var_y - v1, 0.0)
        shrink = tau / (tau + v1)
        total = sums + n_p * delta
        return (total / n_p)[pid] + (y - mean_y[pid]) * shrink[pid]


# ------------------------------------------------------------------------- bootstrap
def release_seed(release) -> int:
    """The bootstrap's seed: a hash of the release's published counts and certificate (the same
    release always gives the same replicates; no secret is read)."""
    h = hashlib.sha256()
    for name in ("cells", "partitions"):
        t = release.tables[name]
        for c in t.column_names:
            h.update(c.encode())
            h.update(np.ascontiguousarray(t.column(c).to_numpy(zero_copy_only=False)).tobytes())
    h.update(json.dumps(release.certificate, sort_keys=True, default=str).encode())
    return int.from_bytes(h.digest()[:8], "little")


def integer_truth(cells: np.ndarray) -> np.ndarray:
    """Integer counts near ``cells`` by cumulative rounding in C order: every prefix of the
    flattened cube keeps its sum within ±½, so every run of cells along the last dimension keeps
    its sum within ±1 (negative estimates stay negative: the noise is additive)."""
    flat = np.rint(np.cumsum(np.asarray(cells, dtype=np.float64).ravel()))
    return np.diff(flat, prepend=0.0).astype(np.int64).reshape(np.shape(cells))


class _Replica:
    """A replicate release as the estimators read it: the public model of ``release`` with the
    replayed cells and partitions."""

    storage = "dense"

    def __init__(self, release, cells, partitions):
        self.manifest = release.manifest
        self.shape = release.shape
        self._cells = None if cells is None else np.asarray(cells, dtype=np.float64)
        if partitions is None:
            d = len(self.shape)
            partitions = (np.zeros((0, d), np.int64), np.zeros((0, d), np.int64), np.zeros(0))
        lo, hi, y = partitions
        self._parts = (np.asarray(lo, np.int64), np.asarray(hi, np.int64), np.asarray(y, np.float64))

    def noisy_cells(self) -> np.ndarray:
        if self._cells is None:
            raise PpdpError("this release has no cell histogram")
        return self._cells

    def partition_boxes(self):
        return self._parts


def _replicate_count(release) -> int:
    mech = release.manifest.get("mechanism")
    slow = mech == "marginals" or (mech == "dp" and (release.certificate.get("choice") or {}).get("algorithm")
                                   == "marginals")
    want = BOOTSTRAP_REPLICATES_SLOW if slow else BOOTSTRAP_REPLICATES
    per = 4 * int(np.prod([n + 1 for n in release.shape], dtype=np.int64))  # float32 summed-area table
    fit = BOOTSTRAP_MEMORY // max(per, 1)
    if fit < BOOTSTRAP_MIN_REPLICATES:
        raise PpdpError(f"the cube's {int(np.prod(release.shape)):,} cells are too many to hold "
                        f"{BOOTSTRAP_MIN_REPLICATES} bootstrap replicates in {BOOTSTRAP_MEMORY // 2**20} MiB")
    return int(min(want, fit))


def _replicates(est: HistogramEstimator, release) -> np.ndarray:
    """The replicate errors' summed-area tables, (R, n1+1, …, nd+1) float32, cached per release
    and estimator."""
    per = _CACHE.setdefault(release, {})
    key = ("bootstrap", est)
    if key in per:
        return per[key]
    if release.storage != "dense":
        raise PpdpError("a sparse (thresholded) cell histogram cannot be replayed")
    R = _replicate_count(release)
    claim = _dp_claim(release)
    mech = registered_mechanism(release.manifest["mechanism"])(**release.manifest["params"])
    truth = integer_truth(est.cells(release))
    rng = np.random.default_rng(release_seed(release))
    sats = np.empty((R,) + tuple(n + 1 for n in truth.shape), np.float32)
    for r in _progress(range(R), f"bootstrap of {release.manifest.get('mechanism')} ({est.name})"):
        cells, parts = mech.replay(truth, claim.noisy_total, claim.ledger, rng)
        sats[r] = summed_area(est.estimate_cells(_Replica(release, cells, parts)) - truth)
    per[key] = sats
    return sats


#: progress of the bootstrap on stderr: None shows it when stderr is a terminal, True always, False never;
#: it appears only once the replicates have run for :data:`PROGRESS_DELAY` seconds
PROGRESS: bool | None = None
PROGRESS_DELAY = 2.0


def _progress(it, desc: str):
    from tqdm import tqdm

    show = PROGRESS if PROGRESS is not None else sys.stderr.isatty()
    return tqdm(it, desc=desc, unit="replicate", file=sys.stderr, disable=not show, delay=PROGRESS_DELAY, leave=False)


def _replicate_box_sums(sats: np.ndarray, lo, hi, owner, n_queries: int) -> np.ndarray:
    """(R × queries) sums of every replicate's cube over the queries' boxes (inclusion–exclusion
    on the stacked summed-area tables, all replicates and boxes at once)."""
    out = box_sums(sats, lo, hi, lead=1)
    if len(owner) == n_queries and np.array_equal(owner, np.arange(n_queries)):
        return out
    agg = sparse.csr_matrix((np.ones(len(owner)), (np.arange(len(owner)), owner)), shape=(len(owner), n_queries))
    return np.asarray((agg.T @ out.T).T)


# ------------------------------------------------------------------------- uncertainty
def _volumes_per_query(lo, hi, owner, n_queries) -> np.ndarray:
    vol = np.prod(hi - lo + 1, axis=1).astype(np.float64) if len(lo) else np.zeros(0)
    return np.bincount(owner, weights=vol, minlength=n_queries).astype(np.float64)


def _dp_claim(release) -> Any:
    """The release's ε-DP claim (a :class:`ppdp.claims.dp.DPClaim`)."""
    return claim_of(release.manifest)


#: a multi-box kron query's coefficient tensor is built when boxes × nodes of a step stay below this
KRON_TENSOR_LIMIT = 1 << 24


def _kron_noise(release, lo, hi, owner, n_queries):
    """The error of qᵀx̂ under the Kronecker weighted least squares, as the interval kernel reads it
    (:func:`ppdp.kernels.noise_quantiles.halfwidths`): per query the variance, the fourth cumulant
    and the dominant lattice group (a, m, ε), plus the number of queries on the fallback.

    The noise of node n of step s enters with coefficient a_n = Π_i w_{i,l_i}²·z_{i,n_i},
    z_i = B_{i,l_i}G_i⁻¹q_i (q a box). Single-box queries factor per dimension: Var = Σ_s v_s·Π_i
    w⁴·Σz_i², κ4 = Σ_s κ4_s·Π_i w⁸·Σz_i⁴, and the largest |a_n| of a step is Π_i w²·max|z_i|,
    shared by Π_i (nodes attaining max|z_i|) nodes (all of them on an identity dimension, whose z_i
    is the box's indicator: the identity strategy's error is a sum of whole cells, integer-valued).
    A multi-box query's coefficients are the sum over its boxes: built per step as a tensor over
    the step's nodes (≤ :data:`KRON_TENSOR_LIMIT` boxes × nodes); beyond that the variance still
    comes from the per-dimension inner products, κ4 from the bound Σa⁴ ≤ (Σa²)² (the kurtosis of
    one term; wider, not narrower) and no lattice group (Cornish–Fisher)."""
    from ..claims.dp import budget_plan
    from ..kernels.strategies import kron_strategy

    claim = _dp_claim(release)
    params = release.manifest["params"]
    probe = (release.certificate.get("choice") or {}).get("probe") if release.manifest["mechanism"] == "dp" else None
    plan = budget_plan(release.manifest["mechanism"], params, release.shape, claim.noisy_total, probe)
    strat = kron_strategy(release.shape)
    # z[i][l]: (boxes × nodes of level l of dim i) = B_{i,l} G_i⁻¹ q_{b,i}
    z: list[list[np.ndarray]] = []
    for i, s in enumerate(strat):
        gi = s.gram_inverse()
        cum = np.zeros((s.n, s.n + 1))
        cum[:, 1:] = np.cumsum(gi, axis=1)
        u = (cum[:, hi[:, i] + 1] - cum[:, lo[:, i]]).T  # boxes × n
        per = []
        for starts, _ in s.levels:
            cu = np.zeros((len(u), s.n + 1))
            cu[:, 1:] = np.cumsum(u, axis=1)
            ends = np.append(starts[1:], s.n)
            per.append(cu[:, ends] - cu[:, starts])
        z.append(per)
    combos = list(itertools.product(*[range(len(s.levels)) for s in strat]))
    steps = plan.cells
    n_boxes = np.bincount(owner, minlength=n_queries)
    single = n_boxes == 1
    var, k4 = np.zeros(n_queries), np.zeros(n_queries)
    dom_var, dom_a = np.zeros(n_queries), np.zeros(n_queries)
    dom_m, dom_eps = np.zeros(n_queries, np.int64), np.ones(n_queries)
    box_single = single[owner]
    qs = owner[box_single]
    multi = [(q, np.flatnonzero(owner == q)) for q in np.flatnonzero(n_boxes > 1)]
    fallback = np.zeros(n_queries, dtype=bool)

    def take(q, v_s, eps, a, m):  # the step's top group becomes the query's where it carries more variance
        q = np.atleast_1d(q)
        a = np.broadcast_to(np.asarray(a, np.float64), q.shape)
        m = np.broadcast_to(np.asarray(m, np.int64), q.shape)
        share = m * a * a * v_s
        better = share > dom_var[q]
        qb = q[better]
        dom_var[qb], dom_a[qb], dom_m[qb], dom_eps[qb] = share[better], a[better], m[better], eps

    for combo, step in zip(combos, steps, strict=True):
        v_s = discrete_laplace_variance(step.epsilon)
        k4_s = discrete_laplace_fourth_cumulant(step.epsilon)
        w2 = float(np.prod([strat[i].levels[k][1] ** 2 for i, k in enumerate(combo)]))
        # single-box queries: products over the dimensions
        s2, s4 = np.ones(len(qs)), np.ones(len(qs))
        top, ties = np.full(len(qs), w2), np.ones(len(qs), np.int64)
        for i, k in enumerate(combo):
            zz = z[i][k][box_single]
            s2 *= (zz**2).sum(axis=1)
            s4 *= (zz**4).sum(axis=1)
            mx = np.abs(zz).max(axis=1) if zz.shape[1] else np.zeros(len(zz))
            top *= mx
            ties *= (np.abs(zz) >= mx[:, None] * (1 - 1e-9)).sum(axis=1)
        var[qs] += v_s * w2 * w2 * s2
        k4[qs] += k4_s * w2**4 * s4
        take(qs, v_s, step.epsilon, top, ties)
        for q, bx in multi:
            zs = [z[i][k][bx] for i, k in enumerate(combo)]
            size = len(bx) * int(np.prod([zi.shape[1] for zi in zs]))
            if size > KRON_TENSOR_LIMIT:
                k_mat = np.ones((len(bx), len(bx)))
                for zi in zs:
                    k_mat *= zi @ zi.T
                var_s = v_s * w2 * w2 * k_mat.sum()
                var[q] += var_s
                k4[q] += k4_s * (var_s / v_s) ** 2
                fallback[q] = True
                continue
            letters = "abcdefghijklmnopqrstuvwxyz"[1:len(zs) + 1]
            coef = w2 * np.einsum(",".join("a" + c for c in letters) + "->" + letters, *zs)
            var[q] += v_s * float((coef**2).sum())
            k4[q] += k4_s * float((coef**4).sum())
            mx = float(np.abs(coef).max()) if coef.size else 0.0
            take(q, v_s, step.epsilon, mx, int((np.abs(coef) >= mx * (1 - 1e-9)).sum()))
    dom_m[fallback] = 0
    return var, k4, dom_a, dom_m, dom_eps, int(fallback.sum())


def _kron_release(release) -> bool:
    mech = release.manifest.get("mechanism")
    return mech == "kron" or (mech == "dp" and (release.certificate.get("choice") or {}).get("algorithm") == "kron")


def _overlaps(lo, hi, plo, phi, chunk: int = 2048) -> np.ndarray:
    """Number of cells each box shares with each partition: (boxes × partitions)."""
    out = np.zeros((len(lo), len(plo)))
    for a in range(0, len(lo), chunk):
        l, h = lo[a:a + chunk, None, :], hi[a:a + chunk, None, :]
        ext = np.minimum(h, phi[None]) - np.maximum(l, plo[None]) + 1
        out[a:a + chunk] = np.prod(np.clip(ext, 0, None), axis=2)
    return out


def _estimates(est, var, k4, a, m, eps, method, level, fallback: str = "") -> Estimates:
    """Estimates with se = √Var and the interval ± the quantile of the error's own law (a linear
    combination of independent discrete Laplace variables; :func:`ppdp.kernels.noise_quantiles.halfwidths`),
    the form used per query named in ``method``."""
    est = np.asarray(est, dtype=np.float64)
    var = np.maximum(np.asarray(var, dtype=np.float64), 0.0)
    x, form = halfwidths(var, k4, a, m, eps, level)
    method = (f"{method}; interval ± the {level:g} quantile of the error's own law, a linear combination of independent "
              f"discrete Laplace variables ({form_summary(form) or 'no noise'}): 'lattice' integer-valued error, "
              f"± the smallest integer h with P(|error| ≤ h) ≥ {level:g} from its exact pmf (coverage ≥ the level, "
              f"the levels a lattice attains; 'lattice-cc' the same by a continuity-corrected Cornish–Fisher "
              f"quantile), 'mixed' exact law of the dominant lattice group plus a normal–Laplace rest "
              f"(variance and fourth cumulant), 'cornish-fisher' first-order Cornish–Fisher with the excess "
              f"kurtosis{fallback}")
    return Estimates(est, np.sqrt(var), est - x, est + x, method, level)


def _cells_estimate(self, release, workload, level: float = 0.95) -> Estimates:
    """Closed-form uncertainty: the identity (``cells`` mechanism and DPCube's raw phase-I cells,
    dense): the error of a query is the sum of its k cells' discrete Laplace noises (Var = k·v);
    the Kronecker least squares (``kron``, or ``dp`` when it chose it): :func:`_kron_noise`.
    Intervals from the error's own law (:func:`_estimates`). Other releases (data-dependent
    partitions or models): the bootstrap; sparse: not quantified."""
    wl = as_workload(workload)
    mech = release.manifest.get("mechanism")
    raw = mech in ("cells", "dpcube", "dpcube-paper")  # the released cells are the raw noisy counts
    if release.storage == "dense" and (raw or _kron_release(release)):
        est = np.asarray(self.answer(release, wl), dtype=np.float64)
        lo, hi, owner = release.query_boxes(wl)
        if raw:
            e = _dp_claim(release).epsilon_cells
            k = _volumes_per_query(lo, hi, owner, len(wl))
            return _estimates(est, k * discrete_laplace_variance(e), k * discrete_laplace_fourth_cumulant(e), 1.0,
                              k.astype(np.int64), e, "closed form: independent discrete Laplace noise per cell, "
                              "Var = cells·v(ε_cells)", level)
        var, k4, a, m, eps, n_fb = _kron_noise(release, lo, hi, owner, len(wl))
        fb = (f"; {n_fb} multi-box quer{'y' if n_fb == 1 else 'ies'} beyond the coefficient-tensor limit: κ4 bounded "
              f"by one term's kurtosis, no lattice group") if n_fb else ""
        return _estimates(est, var, k4, a, m, eps,
                          "closed form: Var(qᵀx̂) and κ4 of the weighted least squares over the Kronecker "
                          "measurements, through the per-dimension structure (discrete Laplace noise)", level, fb)
    if release.storage != "dense":
        return _not_quantified(self, release, wl, level, "a sparse (thresholded) cell histogram drops the cells "
                               "below its threshold, a bias no noise interval covers")
    if _marginals_release(release):
        return _marginals_estimate(self, release, wl, level)
    return self._bootstrap_estimate(release, wl, level)


def _marginals_release(release) -> bool:
    mech = release.manifest.get("mechanism")
    return mech == "marginals" or (mech == "dp" and (release.certificate.get("choice") or {}).get("algorithm")
                                   == "marginals")


def _marginals_estimate(self, release, wl, level: float) -> Estimates:
    """The model's answer with the model-free interval of the measured marginals
    (:mod:`ppdp.estimators.histogram_marginals`); a release without them: not quantified (a
    replay of the mechanism on the model's own fit cannot see the model's bias)."""
    measured = release.measured_marginals()
    if measured is None:
        return _not_quantified(self, release, wl, level, "this release does not ship the marginals its cells were "
                               "inferred from (marginals.parquet; publish it again), and an interval from the model "
                               "alone would not cover the model's bias")
    per = _CACHE.setdefault(release, {})
    if "marginals" not in per:  # query-independent: the measurements and their ε, read once per release
        per["marginals"] = (measured, marginal_epsilons(_dp_claim(release).ledger, len(measured)))
    measured, eps = per["marginals"]
    est = np.asarray(self.answer(release, wl), dtype=np.float64)
    lo, hi, owner = release.query_boxes(wl)
    lower, upper, m = marginal_bounds(release.shape, measured, eps, lo, hi, owner, len(wl), level)
    z = float(stats.norm.ppf(0.5 + level / 2))
    se = (upper - lower) / (2 * z)
    method = (f"model-free bounds from the {len(measured)} measured noisy marginals: the box count lies below every "
              f"marginal count of its projection and above a Bonferroni bound (a projection's count minus the "
              f"counts outside the box on each other dimension); each of the query's noisy terms (median "
              f"{int(np.median(m)) if len(m) else 0}) one-sided at {1 - level:g}/terms by its exact discrete Laplace "
              f"quantile, so the interval holds at ≥ {level:g} whatever the data and the model; the estimate is the "
              f"graphical model's; se = width/(2·z), for reading only")
    return Estimates(est, se, lower, upper, method, level)


def _not_quantified(est_obj, release, wl, level, why: str) -> Estimates:
    est = np.asarray(est_obj.answer(release, wl), dtype=np.float64)
    nan = np.full(est.shape, np.nan)
    return Estimates(est, nan, nan.copy(), nan.copy(), f"uncertainty not quantified: {why}", level, kind="none")


def _ls_estimate(self, release, workload, level: float = 0.95) -> Estimates:
    """Closed form of the weighted least squares (partitions disjoint, so per partition): a query
    holding k_p of the n_p cells of partition p has error Σ_p [e_q,p(1 − k_p r_p) − k_p r_p·e_rest,p +
    k_p r_p f_p], r_p = v1/(v2 + n_p v1), hence Var = Σ_p k_p v1 (1−k_p r_p)² + (n_p−k_p) v1 (k_p r_p)² +
    (k_p r_p)² v2 — exact for the noise (the estimate is unbiased) — and κ4 the same with fourth
    powers and κ4(ε). Three groups per partition (the query's cells, the partition's other
    cells, its count) share a coefficient and an ε; the one carrying the most variance, joined
    by every group of the query with the same coefficient and ε, is the dominant lattice group
    of the interval (:func:`_estimates`)."""
    wl = as_workload(workload)
    est = np.asarray(self.answer(release, wl), dtype=np.float64)
    lo, hi, owner = release.query_boxes(wl)
    plo, phi, _ = release.partition_boxes()
    n_p = np.prod(phi - plo + 1, axis=1).astype(np.float64)
    claim = _dp_claim(release)
    e1, e2 = claim.epsilon_cells, claim.epsilon_partitions
    v1, v2 = discrete_laplace_variance(e1), discrete_laplace_variance(e2)
    c1, c2 = discrete_laplace_fourth_cumulant(e1), discrete_laplace_fourth_cumulant(e2)
    r = 1.0 / (1.0 + n_p) if self.name == "ls-unweighted" else v1 / (v2 + n_p * v1)
    k = _overlaps(lo, hi, plo, phi)
    kq = np.zeros((len(wl), len(plo)))
    np.add.at(kq, owner, k)
    del k
    # only the (query, partition) pairs with cells in common carry error (elsewhere every group's
    # coefficient or size is 0): three groups per pair — coefficient, size, variance, κ4
    qi, pi = np.nonzero(kq)  # in query order, partitions ascending
    kqv = kq[qi, pi]
    del kq
    krv = kqv * r[pi]
    coef = np.stack([1 - krv, krv, krv], axis=1)
    size = np.stack([kqv, n_p[pi] - kqv, np.ones_like(kqv)], axis=1)
    v = np.array([v1, v1, v2])
    c = np.array([c1, c1, c2])
    gvar = size * coef**2 * v
    nq = len(wl)
    var = np.bincount(qi, weights=gvar.sum(axis=1), minlength=nq)
    k4 = np.bincount(qi, weights=(size * coef**4 * c).sum(axis=1), minlength=nq)
    # the dominant group (the first largest variance in (partition, group) order), joined by every
    # group of the query with the same coefficient and ε (iid)
    gq = np.repeat(qi, 3)
    order = np.lexsort((-gvar.ravel(), gq))  # by query, largest first, then position (stable)
    first = order[np.r_[True, gq[order][1:] != gq[order][:-1]]] if len(order) else np.zeros(0, np.int64)
    geps = np.broadcast_to(np.array([e1, e1, e2]), coef.shape).ravel()
    a, eps = np.ones(nq), np.full(nq, e1)  # a query without cells: no noise
    a[gq[first]] = coef.ravel()[first]
    eps[gq[first]] = geps[first]
    same = (np.abs(np.abs(coef.ravel()) - np.abs(a[gq])) <= 1e-12 * np.abs(a[gq])) & (geps == eps[gq])
    m = np.rint(np.bincount(gq, weights=size.ravel() * same, minlength=nq)).astype(np.int64)
    kind = "unweighted (eq 35)" if self.name == "ls-unweighted" else "variance-weighted"
    return _estimates(est, var, k4, a, m, eps,
                      f"closed form: {kind} least squares per partition (exact noise variance and fourth cumulant, "
                      "discrete Laplace v1, v2)", level)


def _uniform_estimate(self, release, workload, level: float = 0.95) -> Estimates:
    """Model-free bounds from the partitions (disjoint boxes, each count one discrete Laplace draw
    of ε_partitions given the partitioning): the query's count lies between the counts of the
    partitions inside it and of the partitions it meets, whatever the data within a partition.
    Each side is a sum of k independent draws, bounded one-sided at (1 − level)/2 by its exact
    quantile (:func:`ppdp.kernels.noise_quantiles.halfwidths`); the lower bound is at least 0."""
    wl = as_workload(workload)
    est = np.asarray(self.answer(release, wl), dtype=np.float64)
    lo, hi, owner = release.query_boxes(wl)
    plo, phi, yp = release.partition_boxes()
    n_p = np.prod(phi - plo + 1, axis=1).astype(np.float64)
    e2 = _dp_claim(release).epsilon_partitions
    v2, c2 = discrete_laplace_variance(e2), discrete_laplace_fourth_cumulant(e2)
    nq = len(wl)
    inside_sum, out_sum = np.zeros(nq), np.zeros(nq)
    k_in, k_out = np.zeros(nq, np.int64), np.zeros(nq, np.int64)
    for a in range(0, nq, 1024):  # queries in chunks: (chunk × partitions) cells in common
        sel = (owner >= a) & (owner < a + 1024)
        kq = np.zeros((min(1024, nq - a), len(plo)))
        np.add.at(kq, owner[sel] - a, _overlaps(lo[sel], hi[sel], plo, phi))
        inside, meets = kq >= n_p[None, :] - 1e-9, kq > 0
        inside_sum[a:a + len(kq)], out_sum[a:a + len(kq)] = inside @ yp, meets @ yp
        k_in[a:a + len(kq)], k_out[a:a + len(kq)] = inside.sum(axis=1), meets.sum(axis=1)
    one_sided = 1.0 - (1.0 - level)  # two-sided level of each side's ± quantile: tail (1 − level)/2
    h_in, _ = halfwidths(k_in * v2, k_in * c2, 1.0, k_in, e2, one_sided)
    h_out, _ = halfwidths(k_out * v2, k_out * c2, 1.0, k_out, e2, one_sided)
    lower = np.maximum(inside_sum - h_in, 0.0)
    upper = np.maximum(out_sum + h_out, lower)
    z = float(stats.norm.ppf(0.5 + level / 2))
    method = (f"model-free bounds from the {len(plo)} noisy partition counts: the count lies between the partitions "
              f"inside the query and the partitions it meets (whatever the data within a partition), each side one-"
              f"sided at {(1 - level) / 2:g} by the exact quantile of its sum of discrete Laplace(ε_partitions = "
              f"{e2:g}) draws, so the interval holds at ≥ {level:g}; the estimate spreads each count uniformly; "
              f"se = width/(2·z), for reading only")
    return Estimates(est, (upper - lower) / (2 * z), lower, upper, method, level)


def _eb_estimate(self, release, workload, level: float = 0.95) -> Estimates:
    """The empirical-Bayes answer with the interval of the (unbiased) variance-weighted least
    squares: its closed form covers the true count at ``level`` whatever the data, which an interval
    about the shrunk estimate would not (the shrinkage is a bias where a partition is not uniform)."""
    wl = as_workload(workload)
    ls = _ls_estimate(LeastSquaresEstimator(), release, wl, level)
    est = np.asarray(self.answer(release, wl), dtype=np.float64)
    return Estimates(est, ls.se, ls.lower, ls.upper,
                     "estimate: the empirical-Bayes least squares; interval: the variance-weighted least squares' "
                     f"(unbiased, so valid whatever the data) — {ls.method}", level)


CellsEstimator.estimate = _cells_estimate  # type: ignore[method-assign]
UniformEstimator.estimate = _uniform_estimate  # type: ignore[method-assign]
EmpiricalBayesEstimator.estimate = _eb_estimate  # type: ignore[method-assign]
LeastSquaresEstimator.estimate = _ls_estimate  # type: ignore[method-assign]
UnweightedLeastSquaresEstimator.estimate = _ls_estimate  # type: ignore[method-assign]
