"""ε-local differential privacy of a per-record report (Warner 1965; Duchi, Jordan & Wainwright
2013), as given by k-subset selection (Ye & Barg 2018; Wang, Wu & Hu 2016).

Every record's report Y satisfies P(Y | x) ≤ e^ε · P(Y | x') for every pair of true values x,
x'. How it compares with (ρ1, ρ2)-privacy (Evfimievski, Gehrke & Srikant 2003): a channel
whose likelihood ratios are bounded by γ = e^ε caps the posterior of a value of prior π at
πγ / (1 + (γ − 1)π) whatever is observed, so with ε = ln γ(ρ1, ρ2) = ln(ρ2(1 − ρ1)/(ρ1(1 − ρ2)))
a value of prior ≤ ρ1 never reaches a posterior above ρ2 — the same worst case as uniform
perturbation with amplification γ — and this holds for every prior an adversary may have
about a record, not only the table's relative frequencies, and for every value, not only those
of prior ≤ ρ1. At (ρ1, ρ2) = (0.1, 0.3): ε = ln 3.857 = 1.350, posterior ≤ 0.3 at prior 0.1.

The certificate: ``epsilon``, ``gamma`` = e^ε, ``m``, ``k``, ``p``, ``q`` (inclusion
probabilities of the own and of any other value), ``rho1``, ``rho2`` (None when ε was given
directly) and ``posterior_at_rho1`` (the largest posterior of a prior-ρ1 value).

``check`` re-derives, from ``params`` and the files: ε from (ρ1, ρ2) or ``params.epsilon``; k
from ``params.k`` or, when it is absent, the variance-optimal k of (m, ε); p, q from (m, k, ε);
the posterior at ρ1 ≤ ρ2; and, from data.parquet, that every record reports exactly k
distinct values in ascending order with one QI row (the file's format:
:class:`~ppdp.releases.ldp.LDPRelease`). Given the source table, the published QI rows must
be the source's and every value's support count must lie within a Hoeffding bound of its
expectation under the declared channel (false-alarm rate ≤ 1e-6 over all values): a report
that is not randomized as declared fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..kernels.subset import inclusion_probabilities, optimal_k, posterior_bound
from ..kernels.transition import close, gamma_for
from . import Claim

#: false-alarm rate of verify's source fit (all values together)
FIT_ALPHA = 1e-6

_KEYS = ("epsilon", "gamma", "m", "k", "p", "q", "rho1", "rho2", "posterior_at_rho1")


def epsilon_of(params: Mapping[str, Any]) -> float | None:
    """ε the parameters ask for: ln γ(ρ1, ρ2), or ``epsilon``."""
    if params.get("epsilon") is not None:
        return float(params["epsilon"])
    if params.get("rho1") is not None and params.get("rho2") is not None:
        return float(math.log(float(gamma_for(float(params["rho1"]), float(params["rho2"])))))
    return None


@dataclass(frozen=True)
class LDPClaim(Claim):
    """ε-LDP of a subset-selection release, with the (ρ1, ρ2) it was set from."""

    model = "local differential privacy"

    epsilon: float
    gamma: float
    m: int
    k: int
    p: float
    q: float
    rho1: float | None = None
    rho2: float | None = None
    posterior_at_rho1: float | None = None

    @classmethod
    def subset(cls, m: int, epsilon: float, k: int | None = None, rho1: float | None = None,
               rho2: float | None = None) -> "LDPClaim":
        k = optimal_k(m, epsilon) if k is None else int(k)
        p, q = inclusion_probabilities(m, k, epsilon)
        post = None if rho1 is None else float(posterior_bound(rho1, epsilon))
        return cls(float(epsilon), float(math.exp(epsilon)), int(m), k, p, q,
                   None if rho1 is None else float(rho1), None if rho2 is None else float(rho2), post)

    def to_certificate(self) -> dict[str, Any]:
        return {"model": self.model, **{k: getattr(self, k) for k in _KEYS}}

    @classmethod
    def from_certificate(cls, cert: Mapping[str, Any]) -> "LDPClaim":
        opt = {k: (None if cert.get(k) is None else float(cert[k])) for k in ("rho1", "rho2", "posterior_at_rho1")}
        return cls(float(cert["epsilon"]), float(cert["gamma"]), int(cert["m"]), int(cert["k"]), float(cert["p"]),
                   float(cert["q"]), **opt)

    # ---------------------------------------------------------------- verification
    def check(self, release, report, source=None) -> None:
        params = release.manifest.get("params", {})
        sa = release.schema["sensitive"][0]
        m = len(release.domains[sa])
        report.check(self.m == m, "certificate m = |SA domain|", f"certificate m = {self.m}, the SA domain has {m} values")
        eps = epsilon_of(params)
        if not report.check(eps is not None and eps > 0, "ε re-derived from params (ln γ(ρ1, ρ2) or epsilon) > 0",
                            f"params give no ε > 0 (params: {dict(params)})"):
            return
        assert eps is not None
        for key in ("rho1", "rho2"):
            want = params.get(key)
            got = getattr(self, key)
            same = (want is None and got is None) or (want is not None and got is not None and close(got, float(want)))
            report.check(same, f"certificate {key} = params.{key}", f"certificate {key} = {got} but params.{key} = {want}")
        want_k = int(params["k"]) if params.get("k") is not None else (optimal_k(m, eps) if m >= 2 else None)
        if not report.check(want_k is not None and 1 <= want_k < m, "k re-derived (params.k or the variance-optimal k of (m, ε))",
                            f"k = {want_k} is not in 1 … m − 1 = {m - 1}"):
            return
        assert want_k is not None
        derived = LDPClaim.subset(m, eps, want_k, self.rho1 if params.get("rho1") is not None else None,
                                  self.rho2 if params.get("rho2") is not None else None)
        self.agrees_with(derived, report)
        if self.rho1 is not None and self.rho2 is not None:
            post = float(posterior_bound(self.rho1, eps))
            report.check(post <= self.rho2 + 1e-9, "posterior of a prior-ρ1 value ≤ ρ2 under ε-LDP",
                         f"ε = {eps} lets a prior-ρ1 value reach posterior {post} > ρ2 = {self.rho2}")
            report.facts["max posterior (prior ρ1)"] = round(post, 6)
        report.facts["epsilon (local DP)"] = round(eps, 6)
        report.facts["k (values per report)"] = want_k
        release.check_reports(report, want_k)
        self.check_disclosure(release, report)
        if source is not None and report.ok:
            self._check_source(release, report, source, eps, want_k)

    def _check_source(self, release, rep, table, eps: float, k: int) -> None:
        sa = release.schema["sensitive"][0]
        if not rep.check(release.qi_rows_match(table), "published QI rows = the source's QI rows (multiset)",
                         "the published QI rows differ from the source's"):
            return
        x = np.bincount(np.asarray(table.codes(sa), dtype=np.int64), minlength=self.m).astype(float)
        n = float(x.sum())
        c = release.support_counts().astype(float)
        p, q = inclusion_probabilities(self.m, k, eps)
        expected = q * n + (p - q) * x
        slack = math.sqrt(n / 2 * math.log(2 * self.m / FIT_ALPHA))  # Hoeffding, union over the m values
        worst = float(np.abs(c - expected).max())
        rep.facts["source fit (largest |support count − expected|)"] = f"{worst:.1f} ≤ {slack:.1f} allowed (false alarm ≤ {FIT_ALPHA:g})"
        rep.check(worst <= slack, f"published reports fit the declared channel given the source (false alarm ≤ {FIT_ALPHA:g})",
                  f"the published reports do not fit the declared channel given the source: a support count is {worst:.1f} "
                  f"from its expectation, more than {slack:.1f} (a report less randomized than declared)")

    # ---------------------------------------------------------------- audit / words
    def bound(self) -> Mapping[str, Any]:
        """ε (every value, every prior: posterior ≤ πe^ε/(1 + (e^ε − 1)π)) and, when set from
        (ρ1, ρ2), the posterior bound ρ2 of the values of prior ≤ ρ1."""
        name = (f"ε = {self.epsilon:.4g} local DP: posterior ≤ πe^ε/(1+(e^ε−1)π)"
                + ("" if self.rho2 is None else f" (≤ ρ2 = {self.rho2} for prior ≤ ρ1 = {self.rho1})"))
        return {"epsilon": self.epsilon, "posterior": self.rho2, "prior_at_most": self.rho1, "name": name}

    def disclosure(self, release) -> dict[str, Any]:
        """No record's value is disclosed with certainty (every k-set has a positive probability
        under every true value when k < m); the largest posterior of any value for any record,
        with the whole-table distribution reconstructed from the support counts as the prior."""
        n = int(release.manifest.get("n_published", 0) or 0)
        post, value = release.largest_posterior(self.epsilon, self.k)
        return {"records_certain": 0, "n_records": n, "share_certain": 0.0, "per_value": {}, "max_posterior": post,
                "max_posterior_value": value}

    def statement(self) -> str:
        rho = ("" if self.rho1 is None else
               f"; set from (ρ1, ρ2) = ({self.rho1}, {self.rho2}) as ε = ln γ: a value of prior ≤ {self.rho1} reaches a "
               f"posterior of at most {self.posterior_at_rho1:.4g} ≤ ρ2, for every prior an adversary may hold")
        return (f"ε-local differential privacy with ε = {self.epsilon:.4g} (γ = e^ε = {self.gamma:.4g}): each record's "
                f"report, a set of k = {self.k} of the m = {self.m} values, is at most e^ε times likelier under one "
                f"true value than under another{rho}.")


__all__ = ["FIT_ALPHA", "LDPClaim", "epsilon_of"]
