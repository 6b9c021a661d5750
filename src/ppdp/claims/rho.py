"""(ρ1, ρ2)-privacy (Evfimievski, Gehrke & Srikant 2003; Chaytor & Wang 2010; SPEC §2.3).

For every SA value x whose prior (relative frequency in the table the adversary knows the
record belongs to) is ≤ ρ1 — the set SA' — the posterior after seeing the release is ≤ ρ2.
Uniform perturbation with amplification γ = ρ2(1−ρ1)/(ρ1(1−ρ2)) on m values gives a value of
prior π the posterior πγ/(1+(γ−1)π) when seen retained (its largest), exactly ρ2 at π = ρ1.

One claim class covers both mechanisms that state this model:

- uniform perturbation of the whole table: ``m``, ``gamma``, ``retention``, ``p``, ``q``;
- SDR: ``subtables`` = [{id, domain, m, rho1, gamma, retention, p, q, n}], the sub-table
  T_j perturbed with γ_j from its own largest SA' frequency ρ1j, plus ``sa_prime`` and the
  plan's descriptive statistics (``stats``: λ, f_max, the merge objective …).

``check`` re-derives, from ``params`` and the files: ρ1, ρ2 = params; every γ from (ρ, ρ2);
retention, p, q from (m, γ); the posterior at the declared prior ≤ ρ2; for SDR m_j = |D_j|,
n_j = the rows carrying id j, every published value inside its sub-table's domain. The files
cannot show that ρ1j is T_j's true largest SA' frequency (the original SA is not published):
that is reported unless the source table is given, when SA' is recomputed, the published QI
rows must be the source's, and the declared (n_j, D_j, ρ1j) must admit the source's SA counts
(a transportation feasibility LP).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..errors import ReleaseError
from ..kernels.transition import TOL, close, gamma_for, largest_posterior, perturbation_params, posterior_retained, sa_prime_mask
from ..validation import FrozenDict, freeze, to_json
from . import Claim

_UNIFORM_KEYS = ("m", "gamma", "retention", "p", "q")
_SUBTABLE_KEYS = ("id", "domain", "m", "rho1", "gamma", "retention", "p", "q", "n")


@dataclass(frozen=True)
class RhoClaim(Claim):
    """(ρ1, ρ2)-privacy of a uniform-perturbation (``subtables`` empty) or SDR release."""

    model = "(rho1, rho2)-privacy"

    rho1: float
    rho2: float
    m: int | None = None
    gamma: float | None = None
    retention: float | None = None
    p: float | None = None
    q: float | None = None
    subtables: tuple = ()
    sa_prime: tuple | None = None
    stats: FrozenDict = field(default_factory=FrozenDict)

    # ---------------------------------------------------------------- derivation
    @classmethod
    def uniform(cls, rho1: float, rho2: float, m: int) -> "RhoClaim":
        gamma = float(gamma_for(rho1, rho2))
        retention, p, q = (float(v) for v in perturbation_params(m, gamma))
        return cls(float(rho1), float(rho2), m=int(m), gamma=gamma, retention=retention, p=p, q=q)

    @classmethod
    def sdr(cls, rho1: float, rho2: float, domains: list[list[str]], rho1_j, n_j, sa_prime: list[str],
            stats: Mapping[str, Any]) -> "RhoClaim":
        """The SDR claim from its plan: sub-table domains (labels), ρ1j and sizes n_j."""
        subs = []
        for j, (dom, r1, n) in enumerate(zip(domains, rho1_j, n_j)):
            g = float(gamma_for(float(r1), rho2))
            ret, p, q = (float(v) for v in perturbation_params(len(dom), g))
            subs.append({"id": j, "domain": list(dom), "m": len(dom), "rho1": float(r1), "gamma": g, "retention": ret,
                         "p": p, "q": q, "n": int(n)})
        return cls(float(rho1), float(rho2), subtables=freeze(subs), sa_prime=tuple(sa_prime), stats=freeze(dict(stats)))

    @property
    def is_sdr(self) -> bool:
        return bool(self.subtables)

    # ---------------------------------------------------------------- manifest form
    def to_certificate(self) -> dict[str, Any]:
        cert: dict[str, Any] = {"model": self.model, "rho1": self.rho1, "rho2": self.rho2}
        if self.is_sdr:
            cert["sa_prime"] = list(self.sa_prime or ())
            cert.update(to_json(self.stats))
            cert["subtables"] = to_json(self.subtables)
        else:
            cert.update({k: getattr(self, k) for k in _UNIFORM_KEYS})
        return cert

    @classmethod
    def from_certificate(cls, cert: Mapping[str, Any]) -> "RhoClaim":
        rho1, rho2 = float(cert["rho1"]), float(cert["rho2"])
        if "subtables" in cert:
            subs = [{k: st[k] for k in _SUBTABLE_KEYS} for st in cert["subtables"]]
            known = {"model", "rho1", "rho2", "sa_prime", "subtables"}
            stats = {k: v for k, v in cert.items() if k not in known}
            return cls(rho1, rho2, subtables=freeze(subs), sa_prime=tuple(cert.get("sa_prime", ())), stats=freeze(stats))
        return cls(rho1, rho2, m=int(cert["m"]), gamma=float(cert["gamma"]), retention=float(cert["retention"]),
                   p=float(cert["p"]), q=float(cert["q"]))

    # ---------------------------------------------------------------- verification
    def check(self, release, report, source=None) -> None:
        params = release.manifest.get("params", {})
        for k in ("rho1", "rho2"):
            v = params.get(k)
            ok = v is not None and close(getattr(self, k), float(v))
            report.check(ok, f"certificate {k} = params.{k}", f"certificate {k} = {getattr(self, k)} but params.{k} = {v}")
        if "rho1" not in params or "rho2" not in params or params["rho1"] is None or params["rho2"] is None:
            return
        rho1, rho2 = float(params["rho1"]), float(params["rho2"])
        report.check(0 < rho1 < rho2 < 1, "0 < ρ1 < ρ2 < 1", f"(ρ1, ρ2) = ({rho1}, {rho2}) is not 0 < ρ1 < ρ2 < 1")
        if self.is_sdr:
            self._check_sdr(release, report, source, rho1, rho2)
        else:
            self._check_uniform(release, report, source, rho1, rho2)
        self.check_disclosure(release, report)

    def _check_uniform(self, release, rep, source, rho1, rho2) -> None:
        assert self.gamma is not None and self.retention is not None  # a uniform claim carries both
        sa = release.schema["sensitive"][0]
        m = len(release.domains[sa])
        rep.check(self.m == m, "certificate m = |SA domain|", f"certificate m = {self.m}, the SA domain has {m} values")
        g = float(gamma_for(rho1, rho2))
        rep.check(close(self.gamma, g), "γ = ρ2(1−ρ1)/(ρ1(1−ρ2))", f"γ = {self.gamma} is not ρ2(1−ρ1)/(ρ1(1−ρ2)) = {g}")
        check_perturbation(rep, "uniform", m, g, self.retention, self.p, self.q)
        post = float(posterior_retained(rho1, g))
        rep.check(post <= rho2 + TOL, "posterior of a prior-ρ1 value ≤ ρ2", f"posterior {post} of a prior-ρ1 value exceeds ρ2 = {rho2}")
        rep.facts["max posterior (prior ρ1)"] = round(post, 6)
        if source is not None:
            counts = source.counts(sa)
            prior = counts / counts.sum()
            rep.facts["max posterior over the source's SA values"] = round(float(posterior_retained(prior, g).max()), 6)
            sap = sa_prime_mask(counts, rho1)
            worst = float(posterior_retained(prior[sap], g).max()) if sap.any() else 0.0
            rep.check(worst <= rho2 + TOL, "posterior of every SA' value of the source ≤ ρ2", f"an SA' value reaches posterior {worst} > ρ2")
        rep.facts["retention"] = round(float(self.retention), 6)
        rep.facts["gamma"] = round(float(self.gamma), 6)

    def _check_sdr(self, release, rep, source, rho1, rho2) -> None:
        asked = release.manifest.get("params", {}).get("merge")
        rep.check(self.stats.get("merge") == asked, "Phase-2 merging as requested (params.merge)",
                  f"the certificate's merge {self.stats.get('merge')!r} is not params.merge {asked!r}")
        sa = release.schema["sensitive"][0]
        labels = list(release.domains[sa])
        pos = {lab: i for i, lab in enumerate(labels)}
        sts = self.subtables
        J = len(sts)
        rep.check(J >= 1 and [st["id"] for st in sts] == list(range(J)), "sub-table ids are 0..J−1", "sub-table ids are not 0..J−1")
        for st in sts:
            if not rep.check(set(st["domain"]) <= set(labels) and len(set(st["domain"])) == len(st["domain"]),
                             f"sub-table {st['id']}: domain ⊆ SA domain", f"sub-table {st['id']}: bad domain {st['domain']}"):
                raise ReleaseError(f"sub-table {st['id']} has a domain outside the SA domain")
        domains = [np.array([pos[lab] for lab in st["domain"]], dtype=np.int64) for st in sts]
        data = release.tables["data"]
        if "subtable" not in data.column_names:
            raise ReleaseError("an SDR release needs a 'subtable' column in data.parquet")
        per = group_value_counts(release, "subtable", J, sa)
        n_obs = per.sum(axis=1)
        in_dom = np.zeros((J, len(labels)), dtype=bool)
        for j, d in enumerate(domains):
            in_dom[j, d] = True
        outside = int(per[~in_dom].sum())
        rep.check(outside == 0, "every published SA value lies in its sub-table's domain",
                  f"{outside} published SA values lie outside their sub-table's domain")
        worst = 0.0
        for j, st in enumerate(sts):
            lab = f"sub-table {j}"
            rep.check(int(st["m"]) == len(domains[j]) and len(domains[j]) >= 2, f"{lab}: m = |domain| ≥ 2",
                      f"{lab}: m = {st['m']} but the domain has {len(domains[j])} values")
            rep.check(int(st["n"]) == int(n_obs[j]), f"{lab}: n = its rows in data.parquet",
                      f"{lab}: certificate n = {st['n']}, data.parquet has {int(n_obs[j])} rows")
            r1j = float(st["rho1"])
            if not rep.check(0 < r1j < rho2, f"{lab}: 0 < ρ1j < ρ2", f"{lab}: ρ1j = {r1j} is not in (0, ρ2 = {rho2})"):
                continue
            g = float(gamma_for(r1j, rho2))
            rep.check(close(float(st["gamma"]), g, TOL), f"{lab}: γ_j = ρ2(1−ρ1j)/(ρ1j(1−ρ2))",
                      f"{lab}: γ_j = {st['gamma']}, ρ2(1−ρ1j)/(ρ1j(1−ρ2)) = {g}")
            check_perturbation(rep, lab, len(domains[j]), g, st["retention"], st["p"], st["q"])
            post = float(posterior_retained(r1j, g))
            worst = max(worst, post)
            rep.check(post <= rho2 + TOL, f"{lab}: posterior of a prior-ρ1j value ≤ ρ2", f"{lab}: posterior {post} > ρ2 = {rho2}")
        rep.facts["sub-tables"] = J
        rep.facts["max posterior (declared priors)"] = round(worst, 6)
        if source is None:
            rep.facts["not checkable without the source table"] = "that each ρ1j is the sub-table's true largest SA' frequency"
            return
        self._check_sdr_source(release, rep, source, sa, domains, rho1)

    def _check_sdr_source(self, release, rep, table, sa, domains, rho1) -> None:
        from scipy.optimize import linprog

        sts = self.subtables
        counts = table.counts(sa)
        sap = sa_prime_mask(counts, rho1)
        dom = table.domain(sa)
        rep.check(sorted(self.sa_prime or ()) == sorted(dom[x] for x in np.flatnonzero(sap)),
                  "SA' of the certificate = values of the source with frequency ≤ ρ1", "SA' of the certificate differs from the source's")
        if release.schema["quasi"]:  # the release's NSA groups (int32 cells, shared with its source fit): O(N) narrow
            rep.check(release.qi_rows_match(table), "published QI rows = the source's QI rows (multiset)",
                      "the published QI rows differ from the source's")
        # transportation feasibility of the declared sub-tables with the source's SA counts
        J = len(sts)
        pairs = [(j, x) for j in range(J) for x in domains[j]]
        nv = len(pairs)
        A = np.zeros((J + len(counts), nv))
        ub = np.empty(nv)
        for k, (j, x) in enumerate(pairs):
            A[j, k] = 1
            A[J + x, k] = 1
            ub[k] = np.floor(sts[j]["rho1"] * sts[j]["n"] + 1e-9) if sap[x] else sts[j]["n"]
        b = np.concatenate([[st["n"] for st in sts], counts]).astype(float)
        res = linprog(np.zeros(nv), A_eq=A, b_eq=b, bounds=list(zip(np.zeros(nv), ub)), method="highs")
        rep.check(res.status == 0, "the declared (n_j, domain_j, ρ1j) admit the source's SA counts (feasibility LP)",
                  "no split of the source's SA counts fits the declared sub-tables: some ρ1j or domain is understated")
        rep.facts["SA' values"] = int(sap.sum())

    # ---------------------------------------------------------------- audit / words
    def bound(self) -> Mapping[str, Any]:
        """The posterior bound ρ2 for the SA' values (prior ≤ ρ1; the SDR certificate lists them)."""
        return {"posterior": self.rho2, "prior_at_most": self.rho1, "sa_prime": self.sa_prime,
                "name": f"ρ2 = {self.rho2} for SA' values"}

    def disclosure(self, release) -> dict[str, Any]:
        """What the files disclose: no record with certainty (every group perturbs on ≥ 2 values
        with γ finite); the largest posterior of the transition model with the inverted
        published counts (per sub-table for SDR) as prior."""
        return transition_disclosure(release)

    def statement(self) -> str:
        how = (f"small-domain randomization in {len(self.subtables)} sub-tables" if self.is_sdr
               else f"uniform perturbation on {self.m} values (γ = {self.gamma:.4g}, retention {self.retention:.4g})")
        return (f"(ρ1, ρ2)-privacy with ρ1 = {self.rho1}, ρ2 = {self.rho2}: for every sensitive value whose prior is at "
                f"most {self.rho1}, an adversary's posterior after seeing the release is at most {self.rho2} ({how}).")


#: rows per block of the (group, value) count passes
_BLOCK = 1 << 22


def group_value_counts(release, group_column: str, n_groups: int, attribute: str) -> np.ndarray:
    """(n_groups, |domain|) int64: the published rows of every (group, value) pair — one pass over
    the narrow codes a block at a time (no int64 copy, no mask per group); group ids outside
    0 … n_groups−1 raise :class:`ReleaseError`."""
    m = len(release.domains[attribute])
    y = release.column_codes(attribute)
    col = release.tables["data"].column(group_column)
    per = np.zeros(n_groups * m, dtype=np.int64)
    pos = 0
    for ch in col.chunks:
        sub = ch.to_numpy(zero_copy_only=False)
        if len(sub) and (sub.min() < 0 or sub.max() >= n_groups):
            raise ReleaseError(f"data.parquet has {group_column} ids outside the {n_groups} of the certificate")
        for a in range(0, len(sub), _BLOCK):
            s = sub[a:a + _BLOCK].astype(np.int64)
            s *= m
            s += y[pos + a:pos + a + len(s)]
            per += np.bincount(s, minlength=n_groups * m)
        pos += len(sub)
    return per.reshape(n_groups, m)


def transition_disclosure(release) -> dict[str, Any]:
    """The disclosure (:meth:`Claim.disclosure`'s form) of a uniform or SDR release: the
    records whose published value only one true value can produce (a group on one value, or a
    transition column with a single positive entry: retention 1) are disclosed with
    certainty, per true value; as ``max_posterior`` the largest Bayes posterior over the
    published values, per transition group, with the group's inverted published counts
    (clipped at 0) as the prior. The counts come from the rows, or, for a release whose rows
    are not in memory (a partitioned release of the Spark or streaming engine), from its
    ``streamed_group_counts`` (attribute → groups × domain counts)."""
    post = 0.0
    per_value: dict[str, int] = {}
    streamed = getattr(release, "streamed_group_counts", None)
    for model in release.transition_models():
        labels = list(release.domains[model.attribute])
        if streamed is not None:
            per = np.asarray(streamed[model.attribute], dtype=np.int64).reshape(len(model.groups), model.n_values)
        else:
            y = release.column_codes(model.attribute)
            if model.group_column is None:
                per = np.bincount(y, minlength=model.n_values)[None, :]
            else:
                per = group_value_counts(release, model.group_column, len(model.groups), model.attribute)
        for j, g in enumerate(model.groups):
            counts = per[j][g.domain]
            post = max(post, largest_posterior(g, counts))
            sources = g.matrix > 0                          # sources[x, y]: true x can publish y
            only = sources.sum(axis=0) == 1
            hit = only & (counts > 0)
            if hit.any():
                post = 1.0
                for yk in np.flatnonzero(hit):
                    lab = labels[int(g.domain[int(np.argmax(sources[:, yk]))])]
                    per_value[lab] = per_value.get(lab, 0) + int(counts[yk])
    n = int(release.manifest.get("n_published", 0) or 0)
    k = sum(per_value.values())
    return {"records_certain": k, "n_records": n, "share_certain": (k / n) if n else 0.0, "per_value": per_value,
            "max_posterior": post}


def check_perturbation(rep, label: str, m: int, gamma: float, retention, p, q) -> None:
    """retention, p, q as published must be those of (m, γ); γ > 1 (the release carries information)."""
    er, ep, eq = perturbation_params(m, gamma)
    ok = all(close(a, b) for a, b in ((retention, er), (p, ep), (q, eq)))
    rep.check(ok, f"{label}: retention, p, q re-derived from (m={m}, γ={gamma:.6g})",
              f"{label}: published retention/p/q ({retention}, {p}, {q}) differ from those of m={m}, γ={gamma} ({er}, {ep}, {eq})")
    rep.check(gamma > 1.0, f"{label}: γ > 1 (the release carries information)", f"{label}: γ = {gamma} ≤ 1")


__all__ = ["RhoClaim", "check_perturbation", "group_value_counts", "transition_disclosure"]
