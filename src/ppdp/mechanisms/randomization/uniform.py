"""Uniform perturbation of the SA under (ρ1, ρ2)-privacy — the "uniform" baseline of SPEC §2.3 —
and global randomization A of Fu et al. 2014 (retention 1/ℓ', :class:`GlobalRandomization`).

On a domain of m values with amplification γ a record keeps its value with total probability
``retention = γ/(m−1+γ)`` and turns into each other value with ``q = 1/(m−1+γ)``. For a
value with prior π the posterior after the value is seen retained is πγ / (1 + (γ−1)π);
γ = ρ2(1−ρ1)/(ρ1(1−ρ2)) makes it exactly ρ2 at π = ρ1 (and smaller below ρ1). The formulas
and the per-row kernel live in :mod:`ppdp.kernels.transition` (shared with SDR, the claims,
the estimators and the audit); the claim is :class:`~ppdp.claims.rho.RhoClaim` for (ρ1, ρ2)
and :class:`~ppdp.claims.retention.RetentionClaim` for a retention probability.

Plan (:class:`UniformPlan`) from the SA counts alone; apply: :meth:`UniformPlan.apply`, a
per-row vectorised draw (``ppdp.engines.local.apply_randomized``); then the rows are shuffled.
Reconstruction (estimator ``"inversion"``): x̂ = (y − n q)/p, p = retention − q.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np
import pyarrow as pa

from ...claims.retention import RetentionClaim
from ...claims.rho import RhoClaim
from ...errors import InfeasibleError, ParameterError
from ...kernels.transition import (TOL, gamma_for, gamma_from_retention, perturb_local, perturbation_params,  # noqa: F401
                                   posterior_retained, sa_prime_mask)
from ...releases.base import codes_to_labels
from ...table import code_dtype
from ...releases.randomized import RandomizedRelease
from ...validation import Integer, Optional, Real
from ..base import Mechanism


#: rows perturbed per vectorised step on large tables (tables up to this size draw exactly as before)
APPLY_BLOCK = 1 << 24


def check_randomizable(sa: str, counts) -> np.ndarray:
    """The SA counts, refused when the attribute takes a single value (nothing to randomize)."""
    counts = np.asarray(counts)
    if len(counts) < 2 or np.count_nonzero(counts) < 2:
        raise InfeasibleError(f"the sensitive attribute {sa!r} takes a single value in this table; randomizing it protects nothing")
    return counts


def check_sensitive(table) -> tuple[str, np.ndarray]:
    sa = table.sa
    return sa, check_randomizable(sa, table.counts(sa))


def data_table(table, columns: dict[str, np.ndarray], order: np.ndarray) -> pa.Table:
    """data.parquet: the QI columns (unchanged) in ``columns`` order, rows permuted by ``order``.
    Dictionary indices are int16 when the domain allows (2 bytes a row, not 4: 10^8 rows of 8
    columns hold 1.6 GB less)."""
    names = list(columns)
    gathered = dict(zip(names, gather_columns([columns[c] for c in names], order)))
    arrays = []
    for c in names:
        codes = gathered.pop(c)  # free each gathered column once converted
        arrays.append(pa.array(codes.astype(np.int32)) if c == "subtable" else dictionary_column(codes, table.domain(c)))
        del codes
    return pa.Table.from_arrays(arrays, names=names)


#: rows gathered per step of :func:`gather_columns`
GATHER_BLOCK = 1 << 22


def gather_columns(columns: list[np.ndarray], order: np.ndarray) -> list[np.ndarray]:
    """``[c[order] for c in columns]`` with one random access per row instead of one per column
    when the columns hold 1-byte codes: they are interleaved into rows of k bytes, the rows
    gathered a block of ``order`` at a time and split again (the same values, ~k× fewer
    cache misses on a large table)."""
    k = len(columns)
    if k < 2 or any(np.asarray(c).dtype.itemsize != 1 for c in columns):
        return [np.take(c, order) for c in columns]
    rows = np.empty((len(columns[0]), k), dtype=np.uint8)
    for j, c in enumerate(columns):
        rows[:, j] = np.asarray(c).view(np.uint8)
    rec = rows.view(np.dtype((np.void, k))).ravel()
    outs = [np.empty(len(order), dtype=np.asarray(c).dtype) for c in columns]
    for lo in range(0, len(order), GATHER_BLOCK):
        g = rec[order[lo:lo + GATHER_BLOCK]].view(np.uint8).reshape(-1, k)
        for j, out in enumerate(outs):
            out[lo:lo + len(g)] = g[:, j].view(out.dtype)
    return outs


def dictionary_column(codes: np.ndarray, domain) -> pa.DictionaryArray:
    """One published column: the labels of ``codes`` as a dictionary array, int16 indices when
    the domain allows (int32 otherwise)."""
    if len(domain) <= 1 << 15:
        idx = np.asarray(codes).astype(np.int16, copy=False)
        return pa.DictionaryArray.from_arrays(pa.array(idx), pa.array(list(domain), pa.string()))
    return codes_to_labels(codes, domain)


def schema_of(table, sensitive: list[str] | str) -> dict:
    sens = [sensitive] if isinstance(sensitive, str) else list(sensitive)
    cols = [*table.quasi, *sens]
    numeric = {c: (None if table.numeric_values(c) is None else table.numeric_values(c).tolist()) for c in cols}
    return {"quasi": list(table.quasi), "sensitive": sens, "domains": {c: list(table.domain(c)) for c in cols}, "numeric": numeric}


@dataclass(frozen=True)
class UniformPlan:
    """Uniform perturbation on the whole domain of ``m`` values: keep with ``retention``,
    each other value with ``q``; ``claim`` is the typed claim the release will carry."""

    m: int
    gamma: float
    retention: float
    p: float
    q: float
    claim: Union[RhoClaim, RetentionClaim]

    def apply(self, sa_codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Published SA codes (per row, vectorised; beyond :data:`APPLY_BLOCK` rows a block at a
        time into narrow codes, so 10^8 rows need ~1 byte a row plus one block of temporaries)."""
        n = len(sa_codes)
        if n <= APPLY_BLOCK:
            return perturb_local(np.asarray(sa_codes, dtype=np.int64), np.full(n, self.m), np.full(n, self.retention), rng)
        out = np.empty(n, dtype=code_dtype(self.m))
        for lo in range(0, n, APPLY_BLOCK):
            x = np.asarray(sa_codes[lo:lo + APPLY_BLOCK], dtype=np.int64)
            out[lo:lo + len(x)] = perturb_local(x, np.full(len(x), self.m), np.full(len(x), self.retention), rng)
        return out


def uniform_plan(counts: np.ndarray, rho1: float | None, rho2: float | None, retention: float | None,
                 attribute: str = "the sensitive attribute") -> UniformPlan:
    """The plan from the SA counts: (ρ1, ρ2) → γ, or a retention probability."""
    counts = np.asarray(counts)
    m = len(counts)
    if retention is None:
        assert rho1 is not None and rho2 is not None  # the mechanism requires (rho1, rho2) when retention is None
        if not sa_prime_mask(counts, rho1).any():
            raise InfeasibleError(f"no value of {attribute!r} has relative frequency ≤ rho1 = {rho1} (SA' is empty): nothing to protect")
        claim = RhoClaim.uniform(rho1, rho2, m)
        assert claim.gamma is not None and claim.retention is not None and claim.p is not None and claim.q is not None
        return UniformPlan(m, claim.gamma, claim.retention, claim.p, claim.q, claim)
    if retention <= 1.0 / m:
        raise InfeasibleError(f"retention {retention} ≤ 1/m = 1/{m}: the published values would carry no information")
    rclaim = RetentionClaim.derive(m, retention)
    return UniformPlan(m, rclaim.gamma, rclaim.retention, rclaim.p, rclaim.q, rclaim)


class _UniformBase(Mechanism):
    family = "randomized"
    default_estimator = "eb"

    def plan(self, counts: np.ndarray, labels=None, attribute: str = "the sensitive attribute") -> UniformPlan:
        raise NotImplementedError

    def _publish(self, table, rng):
        sa, counts = check_sensitive(table)
        plan = self.plan(counts, table.domain(sa), sa)
        N = table.n_rows
        y = plan.apply(table.codes(sa), rng)
        # the source row order may carry information: publish shuffled (int32 below 2^31 rows:
        # the same permutation as rng.permutation(N), half the bytes)
        order = np.arange(N, dtype=np.int32 if N < 1 << 31 else np.int64)
        rng.shuffle(order)
        cols = {c: table.codes(c) for c in table.quasi}
        cols[sa] = y.astype(code_dtype(len(table.domain(sa))), copy=False)  # narrow: one gather per row
        manifest = {"schema": schema_of(table, sa), "n_input": N, "n_published": N, "dropped": 0,
                    "certificate": plan.claim.to_certificate()}
        return RandomizedRelease(manifest, {"data": data_table(table, cols, order)})


class UniformPerturbation(_UniformBase):
    """Uniform perturbation of the whole table's SA: give (rho1, rho2) or a retention probability.

    ``retention`` is the total probability that a record keeps its own value (Fu et al.'s p,
    e.g. 1/ℓ' for a comparison with A'); it must exceed 1/m for the release to carry information.
    """

    name = "uniform"
    claim_model = "(rho1, rho2)-privacy"
    paper = "Agrawal, Srikant & Thomas 2005; Chaytor & Wang 2010"
    rho1: float | None
    rho2: float | None
    retention: float | None
    _parameter_constraints = {
        "rho1": Optional(Real(0, 1, closed="neither")),
        "rho2": Optional(Real(0, 1, closed="neither")),
        "retention": Optional(Real(0, 1, closed="neither")),
    }
    _parameter_help = {
        "rho1": "Prior threshold ρ1 (with rho2).",
        "rho2": "Posterior bound ρ2 (with rho1).",
        "retention": "Or: probability that a record keeps its own SA value (e.g. 1/ℓ').",
    }

    def __init__(self, rho1: float | None = None, rho2: float | None = None, retention: float | None = None):
        self._set_params(locals())

    def _check_params(self, params):
        if params["retention"] is not None:
            if params["rho1"] is not None or params["rho2"] is not None:
                raise ParameterError("give either (rho1, rho2) or retention, not both", param="retention")
        else:
            if params["rho1"] is None or params["rho2"] is None:
                raise ParameterError("uniform perturbation needs rho1 and rho2, or retention", param="rho1")
            if params["rho1"] >= params["rho2"]:
                raise ParameterError(f"(rho1, rho2)-privacy needs rho1 < rho2, got rho1={params['rho1']}, "
                                     f"rho2={params['rho2']}", param="rho2")

    def plan(self, counts: np.ndarray, labels=None, attribute: str = "the sensitive attribute") -> UniformPlan:
        return uniform_plan(counts, self.rho1, self.rho2, self.retention, attribute)


class GlobalRandomization(_UniformBase):
    """Global randomization A (Fu, Wang, Wang & Wong 2014, §3, the baseline of §9.4): every
    record keeps its SA value with probability 1/ℓ' and otherwise takes each other value with
    equal probability; estimated by the standard inversion."""

    name = "global"
    claim_model = "retention"
    paper = "Fu, Wang, Wang, Wong 2014"
    l_prime: int
    _parameter_constraints = {"l_prime": Integer(2, None)}
    _parameter_help = {"l_prime": "ℓ' ≥ 2: records keep their SA value with probability 1/ℓ'."}

    def __init__(self, l_prime: int):
        self._set_params(locals())

    def plan(self, counts: np.ndarray, labels=None, attribute: str = "the sensitive attribute") -> UniformPlan:
        return uniform_plan(counts, None, None, 1.0 / self.l_prime, attribute)


__all__ = ["GlobalRandomization", "TOL", "UniformPerturbation", "UniformPlan", "gamma_for", "gamma_from_retention",
           "perturb_local", "perturbation_params", "posterior_retained", "sa_prime_mask", "uniform_plan"]
