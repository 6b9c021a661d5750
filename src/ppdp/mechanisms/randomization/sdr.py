"""Small-domain randomization (SDR) under (ρ1, ρ2)-privacy (Chaytor & Wang 2010; SPEC §2.3).

Plan on SA counts (:class:`SDRPlan`): Phase 1 balancing (:mod:`.balancing`), Phase 2 merging
(:mod:`.merging`); each sub-table T_j is then perturbed uniformly on its own domain D_j
(m_j = |D_j|) with γ_j = ρ2(1−ρ1j)/(ρ1j(1−ρ2)), ρ1j the largest relative frequency of an SA'
value in T_j — the adversary who knows a record's sub-table has that prior, and its posterior
after seeing the value retained is exactly ρ2 at ρ1j (lower for rarer values).

Apply (:meth:`SDRPlan.apply`, per row): rows are assigned to sub-tables (random order within
each SA value) and perturbed inside their sub-table's domain.

Release (family "randomized"): data.parquet = QI columns + ``subtable`` + randomized SA, rows
grouped by sub-table in random order; the claim is :class:`~ppdp.claims.rho.RhoClaim` with
``subtables`` = [{id, domain, m, rho1, gamma, retention, p, q, n}] (its ``check`` documents
what verify re-derives, from the files alone and with the source table).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...claims.rho import RhoClaim
from ...errors import ParameterError, PpdpError
from ...kernels.transition import perturb_local, random_grouped_order, sa_prime_mask
from ...releases.randomized import RandomizedRelease
from ...table import code_dtype
from ...validation import Integer, Options, Real
from ..base import Mechanism
from .balancing import BalancePlan, assign_rows, balance
from .merging import STRATEGIES, counts_error, merge, subtable_stats
from .uniform import APPLY_BLOCK, check_sensitive, data_table, schema_of


@dataclass(frozen=True, eq=False)
class SDRPlan:
    """The SDR plan: ``counts`` (J × |SA|) true SA counts of every sub-table, the SA' mask,
    the Phase 1 plan and the typed claim (per sub-table domain, ρ1j, γ_j, p_j, q_j, n_j)."""

    counts: np.ndarray
    sa_prime: np.ndarray
    balance: BalancePlan
    claim: RhoClaim

    @property
    def domains(self) -> list[np.ndarray]:
        return [np.flatnonzero(row) for row in self.counts]

    def apply(self, sa_codes: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(sub-table of every row, published SA codes), per row and vectorised."""
        codes = np.asarray(sa_codes)  # narrow: no int64 copy of N
        C = self.counts
        sts = self.claim.subtables
        m_j = np.array([st["m"] for st in sts], dtype=np.int64)
        ret_j = np.array([st["retention"] for st in sts], dtype=float)
        domains = self.domains
        sub = assign_rows(codes, C, rng)
        J, m_sa = C.shape
        lut = np.full((J, m_sa), -1, dtype=np.int64)
        for j, d in enumerate(domains):
            lut[j, d] = np.arange(len(d))
        flat = np.concatenate(domains)
        off = np.concatenate([[0], np.cumsum(m_j)[:-1]])
        n = len(codes)
        if n <= APPLY_BLOCK:
            local = perturb_local(lut[sub, codes], m_j[sub], ret_j[sub], rng)
            return sub, flat[off[sub] + local]
        out = np.empty(n, dtype=code_dtype(m_sa))  # a block at a time (see uniform.APPLY_BLOCK)
        for lo in range(0, n, APPLY_BLOCK):
            s, c = sub[lo:lo + APPLY_BLOCK], codes[lo:lo + APPLY_BLOCK]
            out[lo:lo + len(s)] = flat[off[s] + perturb_local(lut[s, c], m_j[s], ret_j[s], rng)]
        return sub, out


class SDR(Mechanism):
    """Small-domain randomization: SDR(rho1, rho2, merge="objective"|"none"|"min-size", min_size=1000)."""

    name = "sdr"
    family = "randomized"
    default_estimator = "eb"
    claim_model = "(rho1, rho2)-privacy"
    paper = "Chaytor & Wang 2010"
    rho1: float
    rho2: float
    merge: str
    min_size: int
    _parameter_constraints = {
        "rho1": Real(0, 1, closed="neither"),
        "rho2": Real(0, 1, closed="neither"),
        "merge": Options(*STRATEGIES),
        "min_size": Integer(1, None),
    }
    _parameter_help = {
        "rho1": "Prior threshold ρ1: values with relative frequency ≤ ρ1 are protected (SA').",
        "rho2": "Posterior bound ρ2 > ρ1.",
        "merge": "Phase 2: merge initial groups while the expected squared count error falls, not at all, or to min-size.",
        "min_size": "Smallest sub-table for merge min-size.",
    }

    def __init__(self, rho1: float, rho2: float, merge: str = "objective", min_size: int = 1000):
        self._set_params(locals())

    def _check_params(self, params):
        if params["rho1"] >= params["rho2"]:
            raise ParameterError(f"(rho1, rho2)-privacy needs rho1 < rho2, got rho1={params['rho1']}, rho2={params['rho2']}",
                                 param="rho2")

    def plan(self, counts: np.ndarray, labels=None, attribute: str = "the sensitive attribute") -> SDRPlan:
        """The plan from the SA counts alone (``labels``: the SA domain, for the claim)."""
        counts = np.asarray(counts, dtype=np.int64)
        labels = [str(i) for i in range(len(counts))] if labels is None else list(labels)
        sap = sa_prime_mask(counts, self.rho1)
        if not sap.any():
            raise PpdpError(f"no value of {attribute!r} has relative frequency ≤ rho1 = {self.rho1} (SA' is empty): nothing to protect")
        p1 = balance(counts, sap)
        C = merge(p1.groups, sap, self.rho2, self.merge, self.min_size)
        n_j, m_j, rho_j = subtable_stats(C, sap)
        stats = {"lambda": p1.lam, "lambda_prime": p1.lam_prime, "f_max": p1.f_max, "initial_groups": int(len(p1.groups)),
                 "merge": self.merge, "objective_initial": float(counts_error(p1.groups, sap, self.rho2).sum()),
                 "objective": float(counts_error(C, sap, self.rho2).sum())}
        claim = RhoClaim.sdr(self.rho1, self.rho2, [[labels[x] for x in np.flatnonzero(row)] for row in C], rho_j, n_j,
                             [labels[x] for x in np.flatnonzero(sap)], stats)
        C = np.array(C)
        C.setflags(write=False)
        sap.setflags(write=False)
        return SDRPlan(C, sap, p1, claim)

    def _publish(self, table, rng):
        sa, counts = check_sensitive(table)
        plan = self.plan(counts, table.domain(sa), sa)
        sub, y = plan.apply(table.codes(sa), rng)
        order = random_grouped_order(sub, len(plan.counts), rng)  # by sub-table, random within each
        cols = {c: table.codes(c) for c in table.quasi}
        cols["subtable"] = sub
        cols[sa] = y.astype(code_dtype(len(table.domain(sa))), copy=False)  # narrow: one gather per row
        N = table.n_rows
        manifest = {"schema": schema_of(table, sa), "n_input": N, "n_published": N, "dropped": 0,
                    "certificate": plan.claim.to_certificate()}
        return RandomizedRelease(manifest, {"data": data_table(table, cols, order)})


__all__ = ["SDR", "SDRPlan"]
