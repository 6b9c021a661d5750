"""ε-differential privacy of a batch of noisy count answers (Dwork 2008; the Laplace baseline
of Fu, Wang, Wang & Wong 2014, §9.4).

m count queries of sensitivity 1 each, answered with noise of scale m/ε: sequential
composition over the m queries spends ε/m per query, ε in all. The noise is the hardened
discrete Laplace (two-sided geometric, parameter ε/m; Ghosh et al. 2009), so every answer is
an integer (Mironov 2012). The ledger lists the spends; ``check`` re-adds it and re-derives
from ``params`` and ``answers.parquet``: ε = params.epsilon = Σ ledger, m = the number of
answers (= params.queries when given), ε/m per query (≥ the sampler's floor,
:data:`ppdp.kernels.noise.EPSILON_FLOOR`), the sampler, integral answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..errors import PpdpError
from ..kernels.noise import EPSILON_FLOOR
from ..kernels.transition import close
from ..queries.parser import parse_where
from ..validation import freeze, to_json
from . import Claim

SAMPLER = "discrete-laplace"


@dataclass(frozen=True)
class LaplaceAnswersClaim(Claim):
    model = "epsilon-differential privacy (Laplace answers)"

    epsilon: float
    n_queries: int
    sampler: str = SAMPLER
    ledger: tuple = ()

    @classmethod
    def derive(cls, epsilon: float, n_queries: int) -> "LaplaceAnswersClaim":
        per = float(epsilon) / n_queries
        ledger = [{"what": f"{n_queries} count queries (sensitivity 1, noise scale m/ε = {n_queries / float(epsilon):.6g})",
                   "epsilon": float(epsilon), "per_query": per, "composition": "sequential"}]
        return cls(float(epsilon), int(n_queries), SAMPLER, freeze(ledger))

    def to_certificate(self) -> dict[str, Any]:
        return {"model": self.model, "epsilon": self.epsilon, "n_queries": self.n_queries, "sampler": self.sampler,
                "ledger": to_json(self.ledger)}

    @classmethod
    def from_certificate(cls, cert: Mapping[str, Any]) -> "LaplaceAnswersClaim":
        return cls(float(cert["epsilon"]), int(cert["n_queries"]), str(cert["sampler"]), freeze(list(cert["ledger"])))

    def check(self, release, report, source=None) -> None:
        params = release.manifest.get("params", {})
        eps = params.get("epsilon")
        report.check(eps is not None and close(self.epsilon, float(eps)), "certificate epsilon = params.epsilon",
                     f"certificate epsilon {self.epsilon} != params.epsilon {eps}")
        spent = sum(float(e.get("epsilon", 0.0)) for e in self.ledger)
        report.check(close(spent, self.epsilon), "the ledger adds up to ε", f"the ledger spends {spent}, the claim says {self.epsilon}")
        m = release.answers.num_rows
        report.check(self.n_queries == m, "n_queries = the answers published", f"n_queries {self.n_queries} != {m} answers")
        if params.get("queries") is not None:
            report.check(len(params["queries"]) == m, "one answer per query of params.queries",
                         f"{m} answers for {len(params['queries'])} queries")
        per = [float(e.get("per_query", np.nan)) for e in self.ledger]
        report.check(bool(per) and all(close(p, self.epsilon / max(m, 1)) for p in per), "ε/m per query",
                     f"per-query spend {per} is not ε/m = {self.epsilon / max(m, 1)}")
        if eps is not None and m:
            self.agrees_with(LaplaceAnswersClaim.derive(float(eps), m), report)
        if params.get("queries") is not None:
            try:
                asked = [str(parse_where(q)) for q in params["queries"]]
                held = [str(parse_where(w)) for w in release.answers.column("where").to_pylist()]
            except (PpdpError, TypeError) as e:
                asked, held = ["unparseable"], [str(e)]
            report.check(asked == held, "the answered queries are params.queries, in order",
                         f"answers.parquet answers {held}, params.queries asks {asked}")
        report.check(self.sampler == SAMPLER, f"sampler is {SAMPLER}", f"sampler {self.sampler!r} is not {SAMPLER!r}")
        per_query = self.epsilon / max(m, 1)
        report.check(per_query >= EPSILON_FLOOR, f"ε per query ≥ the sampler's floor {EPSILON_FLOOR:g}",
                     f"ε/m = {per_query:g} per query is below the sampler's floor {EPSILON_FLOOR:g}: the draw would not "
                     f"be a faithful discrete Laplace")
        c = release.counts()
        report.check(bool(np.all(np.isfinite(c)) and np.all(c == np.round(c))), "every answer is an integer (discrete noise)",
                     "answers.parquet holds non-integer answers: not the discrete sampler's output")
        report.facts["epsilon"] = self.epsilon
        report.facts["noise scale per answer"] = round(m / self.epsilon, 6) if self.epsilon else None

    def bound(self) -> Mapping[str, Any]:
        return {"posterior": None, "epsilon": self.epsilon, "name": "none (ε-DP bounds no posterior)"}

    def statement(self) -> str:
        return (f"ε-differential privacy with ε = {self.epsilon} for {self.n_queries} count answers, each with discrete "
                f"Laplace noise of scale {self.n_queries / self.epsilon:.4g} (sequential composition).")


__all__ = ["LaplaceAnswersClaim"]
