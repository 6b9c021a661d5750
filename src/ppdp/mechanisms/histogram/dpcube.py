"""Cell histogram (Algorithm 1) and DPCube two-phase partitioning (Algorithms 2–3) of
Xiao, Xiong, Fan & Goryczka (DPCube).

Privacy: every noisy count is a sensitivity-1 count of a disjoint part of the data plus
discrete Laplace noise (:mod:`ppdp.kernels.noise`), so each phase is ε_i-DP by parallel
composition and the two phases compose sequentially: α = α1 + α2 (Theorem 4.3). The
kd-tree (phase II's partitioning) reads only the phase-I noisy cells, never the data.

Defaults (documented rule, chosen by the experiment in ``docs/dpcube.md`` on data other
than the evaluation workload):

* ``alpha1_fraction`` = α1/α = ``DEFAULT_ALPHA1_FRACTION``;
* the kd-tree works on the noisy phase-I cells and knows their noise
  (:mod:`ppdp.mechanisms.histogram.kdtree`). A box stops splitting when its noisy total is
  ≤ θ·σ2, σ2 the standard deviation of a phase-II partition count (``count_threshold`` θ,
  ``DEFAULT_COUNT_THRESHOLD``): smaller partitions would release counts that are mostly
  noise. The paper's variance threshold ξ0 is available on the *de-noised* variance
  (s² − v1 ≤ ξ0, v1 the phase-I noise variance) and is off by default (``DEFAULT_XI0`` =
  None) because the held-out experiment found that it only hurts: the heterogeneity that
  matters for range queries is mostly not detectable through phase-I noise at small α1.
  Thresholding the *raw* variance of the noisy cells (a literal reading of Algorithm 3)
  degenerates at small α1: the noise alone exceeds any fixed ξ0 and the tree splits down
  to (near) single cells whatever the data.

Public domains, no exact N: every dimension's cells are declared — ``bins`` (numeric edges) or
``domains`` (labels, or ``domains="adult"``: a bundled table's documented schema,
:func:`ppdp.datasets.public_domains`) — and never read off the rows; a row outside its declared
domain is an error. The release publishes no exact row count (``n_input``/``n_published`` are
the noisy total of the released counts, :func:`ppdp.claims.dp.published_total`), and the only
rule that reads the input size (the kd-tree's default depth) reads a noisy total charged to
the budget.

Every ``_publish`` is a short plan of the shared operators (:mod:`.operators`): select the
cube, measure (charge and draw in one call), partition, measure again; the ε split comes
from the one rule :func:`ppdp.claims.dp.budget_plan`, which ``verify`` re-derives.
"""

from __future__ import annotations



import numbers
from collections.abc import Mapping
from typing import Any

from ...claims.dp import (PAPER_XI0_NOISE_MULTIPLE, BudgetPlan, DPClaim, budget_plan, dpcube_alphas,
                          dpcube_paper_split_rule, dpcube_split_rule, expected_error)
from ...errors import ParameterError, PpdpError, SchemaError
from ...kernels.grid import (box_counts, check_bins, cube_codes, declared_domains, dense_counts, sparse_counts,
                             summed_area)
from ...kernels.noise import EPSILON_FLOOR, Budget
from ...releases.histogram import HistogramRelease
from ...table import MISSING_LABEL, Binning
from ...validation import Edges, FrozenDict, LabelMap, Labels, Optional, Real
from ..base import Mechanism
from .kdtree import vopt_kdtree
from .operators import dense_cube

DEFAULT_ALPHA1_FRACTION = 0.9
DEFAULT_XI0 = None
DEFAULT_COUNT_THRESHOLD = 100.0
#: the paper's phase-I share (``dpcube-paper``): α1 = 0.05 of α = 0.2 in its Table II
PAPER_ALPHA1_FRACTION = 0.25


class Domains(LabelMap):
    """The public cell domains of the histogram's dimensions: a mapping dimension → labels, or the
    name of a bundled table whose documented schema gives them. CLI: ``--domains adult`` or
    repeatable ``--domains DIM=LABEL,LABEL,…``."""

    def __init__(self) -> None:
        super().__init__(Labels(), metavar="DATASET|DIM=LABEL,LABEL,…")

    def describe(self) -> str:
        from ...datasets import names

        return f"a mapping of dimensions to lists of distinct labels, or a bundled table's name ({', '.join(names())})"

    def check(self, name: str, value: Any) -> Any:
        from ...datasets import names

        if isinstance(value, str):
            if value.lower() not in names():
                raise ParameterError(f"{name}: {value!r} is not a bundled table ({', '.join(names())}); give a "
                                     f"mapping of dimensions to labels", param=name)
            return value.lower()
        if not isinstance(value, Mapping):
            raise self._fail(name, value)
        out = {}
        for k, labels in value.items():
            if not isinstance(k, str) or not k:
                raise self._fail(name, value)
            if isinstance(labels, (str, bytes)) or isinstance(labels, numbers.Number):
                raise ParameterError(f"{name}[{k!r}] must be a list of labels, got {labels!r}", param=name)
            out[k] = Labels().check(f"{name}[{k!r}]", labels)
        return FrozenDict(out)

    def cli(self) -> dict[str, Any]:
        return {"type": str, "multiple": True, "metavar": "DATASET|DIM=LABEL,LABEL,…"}

    def from_cli(self, value: Any) -> Any:
        items = [str(v) for v in value or ()]
        if len(items) == 1 and "=" not in items[0]:
            return items[0].strip()
        out: dict[str, Any] = {}
        for item in items:
            dim, sep, text = item.partition("=")
            if not sep or not dim.strip():
                raise ParameterError(f"takes a bundled table's name or DIM=LABEL,LABEL,…, got {item!r}")
            out[dim.strip()] = [x.strip() for x in text.split(",") if x.strip()]
        return out or None


class HistogramMechanism(Mechanism):
    """Base of the histogram mechanisms (not registered): the cube, the ε plan, the release."""

    family = "histogram"
    default_estimator = "cells"
    _cli_names = {"epsilon": ("--epsilon", "-e")}

    claim_model = "epsilon-DP"
    paper = "Xiao, Xiong, Fan, Goryczka 2010"
    epsilon: float
    dims: tuple[str, ...]
    bins: Any
    domains: Any
    _common_constraints = {
        "epsilon": Real(EPSILON_FLOOR, None),
        "dims": Labels(),
        "domains": Optional(Domains()),
        "bins": Optional(Edges()),
    }
    _common_help = {
        "epsilon": f"Total privacy budget ε (≥ the noise sampler's floor {EPSILON_FLOOR:g}).",
        "dims": "Histogram dimension (repeatable, or several after one --dims, or comma-separated).",
        "domains": "Public cell labels of each dimension not binned: DIM=LABEL,LABEL,… (repeatable), or a bundled "
                   "table's name for its documented schema (e.g. adult). Never read off the rows.",
        "bins": "Explicit bin edges for a numeric dimension (repeatable).",
    }

    def _check_params(self, params):
        dims = list(params["dims"])
        check_bins(params.get("bins"), dims)
        if params.get("bins") is not None:
            unknown = [d for d in params["bins"] if d not in dims]
            if unknown:
                raise ParameterError(f"bins given for {unknown[0]!r}, which is not one of the dims {dims}",
                                     param="bins")
        doms = params.get("domains")
        if isinstance(doms, Mapping):  # entries for other columns are allowed (a schema-wide mapping) and unused
            b = params.get("bins") or {}
            twice = [d for d in doms if d in dims and d in b  # bins + the missing cell is one declaration
                     and list(doms[d]) != [*Binning(tuple(float(e) for e in b[d])).labels, MISSING_LABEL]]
            if twice:
                raise ParameterError(f"{twice[0]!r} is declared twice (bins and domains): keep one", param="domains")

    def _declared(self) -> dict:
        """The declared label domains (dimension → labels); ParameterError for a dimension
        declared by neither ``domains`` nor ``bins``."""
        try:
            declared, undeclared = declared_domains(self.dims, self.bins, self.domains)
        except PpdpError as e:
            raise ParameterError(str(e), param="domains") from None
        if undeclared:
            raise ParameterError(
                f"the domain of {undeclared} is not declared: a differentially private histogram must not read its "
                f"cells off the rows (a value present only because of one person would reveal that person). Pass "
                f"domains={{{undeclared[0]!r}: [labels…]}} or bins={{{undeclared[0]!r}: [edges…]}}, or "
                f"domains='adult'|'occ'|'edu' for a bundled table's documented schema", param="domains")
        return declared

    def _cube(self, table):
        return cube_codes(table, self.dims, self.bins, self._declared_for(table))

    def _dense_cube(self, table):
        return dense_cube(table, self.dims, self.bins, type(self).__name__, self._declared_for(table))

    def _declared_for(self, table) -> dict:
        known = set(table.column_names)
        for d in self.dims:
            if d not in known:
                raise SchemaError(f"unknown dimension {d!r}; the table has {sorted(known)}")
        return self._declared()

    def _plan(self, shape, noisy_total=None) -> BudgetPlan:
        """The ε split (:func:`ppdp.claims.dp.budget_plan`: the rule ``verify`` re-derives)."""
        return budget_plan(self.name, self.get_params(), shape, noisy_total)

    def _release(self, table, spec, plan: BudgetPlan, budget: Budget, cells=None, partitions=None, extra=None,
                 marginals=None):
        return HistogramRelease.build(spec, DPClaim.derive(plan, budget), cells=cells, partitions=partitions,
                                      extra=extra, marginals=marginals)

    # ------------------------------------------------------------------ replay (bootstrap)
    #: the mechanism measures a noisy total first (its rule reads N̂); a replay draws it again but
    #: keeps the certificate's N̂, so the plan is exactly the certificate's
    reads_noisy_total = False

    def _measure(self, budget: Budget, rng, x, n_hat):
        """The measurements and post-processing after the noisy total: (plan, cells, partitions,
        extra) from the dense integer cube ``x`` — shared by ``_publish`` and :meth:`replay`."""
        raise NotImplementedError

    def _noisy_total(self, budget: Budget, rng, x) -> int:
        raise NotImplementedError

    def replay(self, x, noisy_total, ledger, rng):
        """The mechanism run again on the integer cube ``x`` (a parametric bootstrap's truth) with
        the release's own budget split: the plan re-derived from the parameters and the
        certificate's ``noisy_total`` (a noisy total is drawn as at publish time, spending its
        share, but the rule reads the certificate's N̂), every later measurement drawn afresh by
        :meth:`~ppdp.kernels.noise.Budget.measure` and post-processed as at publish time
        (data-adaptive structure included: kd-tree cuts, sub-grid sizes). Returns (cells,
        partitions) as the release files would hold them; PpdpError when the replayed ledger is
        not ``ledger`` (the certificate's: ε and purpose of every step)."""
        budget = Budget(self.epsilon)
        if self.reads_noisy_total:
            self._noisy_total(budget, rng, x)
        _, cells, partitions, _ = self._measure(budget, rng, x, noisy_total)
        got = [(round(s.epsilon, 12), s.what) for s in budget.ledger]
        want = [(round(float(s.epsilon), 12), s.what) for s in ledger]
        if got != want:
            raise PpdpError(f"internal error: the replay of {self.name} spends {got}, the certificate {want}")
        return cells, partitions


class CellHistogram(HistogramMechanism):
    """Algorithm 1: a noisy count for every cell of the cube (the identity strategy).

    Cubes of more than 2^24 cells are released sparsely (Cormode, Procopiuc, Srivastava &
    Tran 2012): only cells whose noisy count is ≥ a threshold τ appear; the empty cells that
    pass are drawn directly (their number from the binomial tail, their values from the
    memoryless geometric tail) — the same distribution as noising every cell and then
    filtering, so still ε-DP. τ is the smallest integer ≥ 1 for which the expected number of
    empty cells passing is ≤ the number of rows.
    """

    name = "cells"
    default_estimator = "cells"

    _parameter_constraints = HistogramMechanism._common_constraints
    _parameter_help = HistogramMechanism._common_help

    def __init__(self, epsilon: float, dims, domains=None, bins=None):
        self._set_params(locals())

    def _measure(self, budget, rng, x, n_hat):
        plan = self._plan(x.shape)
        (every_cell,) = plan.cells
        return plan, budget.measure(rng, x, every_cell), None, {}

    def _publish(self, table, rng):
        spec, codes = self._cube(table)
        plan = self._plan(spec.shape)
        budget = Budget(plan.epsilon)
        (every_cell,) = plan.cells
        if spec.dense:
            _, y, _, _ = self._measure(budget, rng, dense_counts(codes, spec.shape, getattr(table, "row_weights", None)), None)
            err = expected_error(self.name, self.get_params(), spec.shape)
            return self._release(table, spec, plan, budget, cells=y, extra={"expected_error": err})
        idx, cnt = sparse_counts(codes, spec.shape, getattr(table, "row_weights", None))
        idx, y, tau = budget.measure_sparse(rng, idx, cnt, spec.n_cells, every_cell)
        return self._release(table, spec, plan, budget, cells=(idx, y), extra={"storage": "sparse", "threshold": tau})


class DPCube(HistogramMechanism):
    """Algorithms 2–3: noisy cells with α1, kd-tree on them (variance threshold ξ0, SSE
    split on the widest dimension), noisy partition counts with α2 = α − α1 on the true data.

    ``alpha1_fraction`` = α1/α (default :data:`DEFAULT_ALPHA1_FRACTION`); ``xi0`` the threshold
    on the de-noised within-box variance (default :data:`DEFAULT_XI0`: no variance test);
    ``count_threshold`` θ: boxes whose noisy total is ≤ θ × the standard deviation of a
    partition count are not split (default :data:`DEFAULT_COUNT_THRESHOLD`). See the module
    docstring.

    Differences from the paper, stated: the library defaults (α1/α = 0.9, θ = 100, ξ0 off) were
    chosen by the held-out experiment of ``docs/dpcube.md``, not taken from the paper; the
    paper's leaf test is its variance threshold ξ0 on the phase-I cells (pass ``xi0``; here it
    is applied to the de-noised variance s² − v1) and it has no count threshold θ. The default
    estimator ``ls`` is the *variance-weighted* least squares (weights 1/v1, 1/v2); the paper's
    eq 35 is the unweighted H⁺y, available as ``estimator="ls-unweighted"`` (equal to ``ls``
    when α1 = α2). The most accurate ε-DP histogram of the library is the default ``dp``
    (:class:`~ppdp.mechanisms.histogram.DefaultHistogram`), not DPCube.
    """

    name = "dpcube"
    default_estimator = "ls"
    alpha1_fraction: float

    _parameter_constraints = {
        **HistogramMechanism._common_constraints,
        "alpha1_fraction": Optional(Real(0, 1, closed="neither")),
        "xi0": Optional(Real(0, None)),
        "count_threshold": Optional(Real(0, None)),
    }
    _parameter_help = {
        **HistogramMechanism._common_help,
        "alpha1_fraction": "α1/α for phase I (default: the documented rule).",
        "xi0": "kd-tree threshold ξ0 on the de-noised variance of a box's cells (default: off).",
        "count_threshold": "θ: boxes whose noisy total is ≤ θ·sd(partition noise) are not split (default: the documented rule).",
    }

    def __init__(self, epsilon: float, dims, alpha1_fraction=None, xi0=None, count_threshold=None, domains=None,
                 bins=None):
        self._set_params(locals())

    def _check_params(self, params):
        super()._check_params(params)
        if params["alpha1_fraction"] is None:  # documented defaults, stored resolved
            params["alpha1_fraction"] = DEFAULT_ALPHA1_FRACTION
        if params["xi0"] is None:
            params["xi0"] = DEFAULT_XI0
        if params["count_threshold"] is None:
            params["count_threshold"] = DEFAULT_COUNT_THRESHOLD

    @property
    def alphas(self) -> tuple[float, float]:
        return dpcube_alphas(self.epsilon, self.alpha1_fraction)

    def split_rule(self) -> dict:
        """Parameters of the kd-tree's leaf test (:func:`ppdp.claims.dp.dpcube_split_rule`)."""
        return dpcube_split_rule(self.get_params())

    def _measure(self, budget, rng, x, n_hat):
        plan = self._plan(x.shape)
        (phase1,), (phase2,) = plan.cells, plan.partitions
        y1 = budget.measure(rng, x, phase1)                            # measure every cell with α1
        rule = self.split_rule()
        lo, hi = vopt_kdtree(y1, **rule)                               # partition the noisy cells
        y2 = budget.measure(rng, box_counts(summed_area(x), lo, hi), phase2)  # measure every partition with α2
        return plan, y1, (lo, hi, y2), {"split_rule": rule}

    def _publish(self, table, rng):
        spec, x = self._dense_cube(table)                              # select: the cube
        plan = self._plan(spec.shape)
        budget = Budget(plan.epsilon)
        _, y1, parts, extra = self._measure(budget, rng, x, None)     # measure, partition, measure
        return self._release(table, spec, plan, budget, cells=y1, partitions=parts,
                             extra=extra)                             # infer: the release's estimators


class DPCubePaper(DPCube):
    """DPCube exactly as the paper prints it (Xiao, Xiong, Fan & Goryczka, Algorithms 2–3, eq 35).

    Phase I: a noisy count of every cell with α1 = ``alpha1_fraction``·α (default
    :data:`PAPER_ALPHA1_FRACTION` = 0.25, the paper's α1 = 0.05 of α = 0.2). Algorithm 3 on the
    noisy phase-I cells: a box is split (widest dimension, cut minimising the summed squared
    error of the halves) while the raw sample variance of its noisy cells exceeds ``xi0`` — no
    de-noising, no count test (Algorithm 3 as printed; the paper's prose states the test the
    other way round). Phase II: a noisy count of every partition with α2 = α − α1.
    Default estimator: the paper's unweighted least squares (eq 35, ``ls-unweighted``).

    The paper gives no value of ξ0; the default here (``xi0`` None) is the rule fixed in advance
    of the reproduction experiments: :data:`ppdp.claims.dp.PAPER_XI0_NOISE_MULTIPLE` (2) × the
    phase-I noise variance (discrete Laplace), resolved in the certificate's ``split_rule``.
    The noise is the library's hardened discrete Laplace sampler, not the paper's continuous
    Laplace. As the module docstring says, the raw-variance test splits down to (near) single
    cells at small α1; :class:`DPCube` (``dpcube``) is the library's tuned variant.
    """

    name = "dpcube-paper"
    default_estimator = "ls-unweighted"

    _parameter_constraints = {
        **HistogramMechanism._common_constraints,
        "alpha1_fraction": Optional(Real(0, 1, closed="neither")),
        "xi0": Optional(Real(0, None)),
    }
    _parameter_help = {
        **HistogramMechanism._common_help,
        "alpha1_fraction": f"α1/α for phase I (default {PAPER_ALPHA1_FRACTION:g}, the paper's 0.05 of 0.2).",
        "xi0": f"ξ0: a box is split while the raw variance of its noisy phase-I cells exceeds it (default "
               f"{PAPER_XI0_NOISE_MULTIPLE:g} × the phase-I noise variance).",
    }

    def __init__(self, epsilon: float, dims, alpha1_fraction=None, xi0=None, domains=None, bins=None):
        self._set_params(locals())

    def _check_params(self, params):
        HistogramMechanism._check_params(self, params)
        if params["alpha1_fraction"] is None:
            params["alpha1_fraction"] = PAPER_ALPHA1_FRACTION

    def split_rule(self) -> dict:
        """Algorithm 3's leaf test (:func:`ppdp.claims.dp.dpcube_paper_split_rule`)."""
        return dpcube_paper_split_rule(self.get_params())
