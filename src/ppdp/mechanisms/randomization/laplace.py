"""The Laplace answer baseline of Fu et al. §9.4: answer a batch of m count queries with
ε-differential privacy by adding noise of scale m/ε to each (sensitivity 1 per count,
sequential composition over the m queries, Dwork 2008).

As a mechanism (``LaplaceBaseline(epsilon, queries=None)``, name "laplace") the release is the
batch of noisy answers itself (family "answers", :mod:`ppdp.releases.answers`): the given
workload (WHERE clauses), or by default one query per SA value; the claim is
:class:`~ppdp.claims.laplace.LaplaceAnswersClaim` with its ledger. Only that workload can be
answered (estimator ``"lookup"``).

The noise is the hardened discrete Laplace of :mod:`ppdp.kernels.noise` with parameter
ε/m (pmf ∝ exp(−(ε/m)|k|), the integer analogue of Lap(m/ε)); floating-point Laplace draws
are never released (Mironov 2012). A custom ``sampler(rng, epsilon, size)`` may be passed,
e.g. for experiments that compare samplers.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...claims.laplace import LaplaceAnswersClaim
from ...errors import PpdpError
from ...queries import Predicate, Query, Workload, answer_exact, as_workload
from ...releases.answers import AnswersRelease, query_key
from ...validation import Labels, Optional, Real
from ..base import Mechanism
from ...kernels.noise import discrete_laplace
from .uniform import schema_of

__all__ = ["LaplaceBaseline", "laplace_answers", "laplace_scale"]


def laplace_scale(epsilon: float, m: int) -> float:
    """b = m/ε, the Laplace scale per query for a batch of m queries."""
    if not (isinstance(m, (int, np.integer)) and m >= 1):
        raise PpdpError(f"the batch size m must be an integer ≥ 1, got {m!r}")
    if not epsilon > 0:
        raise PpdpError(f"ε must be > 0, got {epsilon!r}")
    return m / float(epsilon)


def laplace_answers(true_counts, epsilon: float, m: int | None = None, rng=None, sampler=None) -> np.ndarray:
    """Noisy answers to the batch ``true_counts`` (m = its length unless given: the number of
    queries the budget ε is split over). Returns float64 (the noisy integers)."""
    c = np.asarray(true_counts)
    m = int(len(c)) if m is None else m
    laplace_scale(epsilon, m)
    rng = np.random.default_rng(rng)
    sampler = sampler or discrete_laplace
    noise = np.asarray(sampler(rng, float(epsilon) / m, c.shape))
    return c.astype(np.float64) + noise


class LaplaceBaseline(Mechanism):
    """Noisy answers to a fixed workload: discrete Laplace of scale m/ε on each of m counts."""

    name = "laplace"
    family = "answers"
    default_estimator = "lookup"
    claim_model = "epsilon-differential privacy (Laplace answers)"
    paper = "Dwork 2008; Fu, Wang, Wang, Wong 2014 (§9.4 baseline)"
    epsilon: float
    queries: tuple[str, ...] | None
    _parameter_constraints = {"epsilon": Real(0, None, closed="neither"), "queries": Optional(Labels(min_len=1))}
    _parameter_help = {"epsilon": "Total budget ε, split evenly over the m queries (noise scale m/ε each).",
                       "queries": "WHERE clauses of the workload to answer (default: one query per SA value)."}

    def __init__(self, epsilon: float, queries: list[str] | None = None):
        self._set_params(locals())

    def workload(self, table) -> Workload:
        if self.queries is not None:
            return as_workload(list(self.queries))
        sa = table.sa
        return Workload([Query((Predicate(sa, "eq", (v,)),)) for v in table.domain(sa)])

    def _publish(self, table, rng):
        wl = self.workload(table)
        noisy = laplace_answers(answer_exact(table, wl), self.epsilon, len(wl), rng)
        answers = pa.table({"where": pa.array([str(q) for q in wl], pa.string()),
                            "query": pa.array([query_key(q) for q in wl], pa.string()),
                            "count": pa.array(noisy, pa.float64())})
        N = table.n_rows
        manifest = {"schema": schema_of(table, table.sensitive), "n_input": N, "n_published": N, "dropped": 0,
                    "certificate": LaplaceAnswersClaim.derive(self.epsilon, len(wl)).to_certificate()}
        return AnswersRelease(manifest, {"answers": answers})
