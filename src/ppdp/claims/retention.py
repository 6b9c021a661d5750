"""Retention-only randomization: uniform perturbation set by its retention probability.

Global randomization A of Fu, Wang, Wang & Wong (2014, §3) — every record keeps its SA value
with probability p (= 1/ℓ' for the comparison with A') and otherwise takes each other value
with (1−p)/(m−1) — and ``UniformPerturbation(retention=…)``. The claim states no posterior
bound of its own: with γ = p(m−1)/(1−p) a value of prior π reaches the posterior
πγ/(1+(γ−1)π) when seen retained (``bound()`` gives γ for that formula).

``check`` re-derives p from ``params`` (``retention``, or 1/``l_prime``), γ from (m, p) and
q, p − q from (m, γ); p must exceed 1/m (the release carries information).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..kernels.transition import close, gamma_from_retention, perturbation_params, posterior_retained
from . import Claim
from .rho import check_perturbation, transition_disclosure


def expected_retention(params: Mapping[str, Any]) -> float | None:
    """The retention the parameters ask for: ``retention``, or 1/ℓ' for global randomization."""
    if params.get("retention") is not None:
        return float(params["retention"])
    if params.get("l_prime") is not None:
        return 1.0 / float(params["l_prime"])
    return None


@dataclass(frozen=True)
class RetentionClaim(Claim):
    model = "retention"

    m: int
    gamma: float
    retention: float
    p: float
    q: float

    @classmethod
    def derive(cls, m: int, retention: float) -> "RetentionClaim":
        gamma = float(gamma_from_retention(m, retention))
        ret, p, q = (float(v) for v in perturbation_params(m, gamma))
        return cls(int(m), gamma, ret, p, q)

    def to_certificate(self) -> dict[str, Any]:
        return {"model": self.model, "m": self.m, "gamma": self.gamma, "retention": self.retention, "p": self.p, "q": self.q}

    @classmethod
    def from_certificate(cls, cert: Mapping[str, Any]) -> "RetentionClaim":
        return cls(int(cert["m"]), float(cert["gamma"]), float(cert["retention"]), float(cert["p"]), float(cert["q"]))

    def check(self, release, report, source=None) -> None:
        sa = release.schema["sensitive"][0]
        m = len(release.domains[sa])
        report.check(self.m == m, "certificate m = |SA domain|", f"certificate m = {self.m}, the SA domain has {m} values")
        self.check_disclosure(release, report)
        want = expected_retention(release.manifest.get("params", {}))
        if not report.check(want is not None, "params give the retention", "params give neither retention nor l_prime"):
            return
        assert want is not None
        report.check(close(self.retention, want), "retention as requested",
                     f"certificate retention {self.retention} differs from the parameters' {want}")
        report.check(want > 1.0 / m, "retention > 1/m", f"retention {want} ≤ 1/m = 1/{m}: the release carries no information")
        if want >= 1.0:
            return
        g = float(gamma_from_retention(m, want))
        report.check(close(self.gamma, g), "γ = retention·(m−1)/(1−retention)", f"γ = {self.gamma}, the retention gives {g}")
        check_perturbation(report, "retention", m, g, self.retention, self.p, self.q)
        if source is not None:
            counts = source.counts(sa)
            report.facts["max posterior over the source's SA values"] = round(
                float(posterior_retained(counts / counts.sum(), g).max()), 6)
        report.facts["retention"] = round(self.retention, 6)
        report.facts["gamma"] = round(self.gamma, 6)

    def disclosure(self, release) -> dict[str, Any]:
        """No record disclosed with certainty (retention < 1 on ≥ 2 values); the largest posterior
        of the uniform transition model with the inverted published counts as prior."""
        return transition_disclosure(release)

    def bound(self) -> Mapping[str, Any]:
        return {"posterior": None, "gamma": self.gamma,
                "name": f"none (retention {self.retention:.4g}: posterior πγ/(1+(γ−1)π), γ = {self.gamma:.4g})"}

    def statement(self) -> str:
        return (f"Each record keeps its sensitive value with probability {self.retention:.4g} and otherwise takes each of "
                f"the other {self.m - 1} values with probability {self.q:.4g}; no posterior bound is claimed.")


__all__ = ["RetentionClaim", "expected_retention"]
