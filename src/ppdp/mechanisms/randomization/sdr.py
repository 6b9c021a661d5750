"""Small-domain randomization (SDR) under (ρ1, ρ2)-privacy (Chaytor & Wang 2010; SPEC §2.3).

Plan on SA counts: Phase 1 balancing (:mod:`.balancing`), Phase 2 merging (:mod:`.merging`);
then rows are assigned to sub-tables (random order within each SA value) and each sub-table
T_j's SA is perturbed uniformly on its own domain D_j (m_j = |D_j|) with
γ_j = ρ2(1−ρ1j)/(ρ1j(1−ρ2)), ρ1j the largest relative frequency of an SA' value in T_j —
the adversary who knows a record's sub-table has that prior, and its posterior after seeing the
value retained is exactly ρ2 at ρ1j (lower for rarer values).

Release (family "randomized"): data.parquet = QI columns + ``subtable`` + randomized SA, rows
grouped by sub-table in random order; certificate ``subtables`` = [{id, domain, m, rho1,
gamma, retention, p, q, n}].

Verify, from the files alone: every sub-table's γ_j from (ρ1j, ρ2), retention/p_j/q_j from
(m_j, γ_j), the posterior bound ≤ ρ2, m_j = |domain|, n_j = the rows carrying that id, every
published SA label inside its sub-table's domain. The files cannot show that ρ1j is the true
largest SA' frequency (the original SA is not published). With the source table: SA' is
recomputed; the published QI rows must be exactly the source's QI rows (as a multiset); and the
declared (n_j, D_j, ρ1j) must admit the source's SA counts — a transportation feasibility LP
(c_jx ≥ 0, Σ_x c_jx = n_j, Σ_j c_jx = f_x, c_jx = 0 outside D_j, c_jx ≤ ρ1j n_j for x ∈ SA').
"""

from __future__ import annotations

import numpy as np

from ...errors import PpdpError
from ...releases.randomized import RandomizedRelease, register_mechanism
from ...errors import ParameterError
from ...validation import Integer, Options, Real
from ..base import Mechanism
from .balancing import assign_rows, balance
from .merging import STRATEGIES, counts_error, merge, subtable_stats
from .uniform import (TOL, check_params, check_sensitive, data_table, gamma_for, keyed_estimates,
                      perturb_local, perturbation_params, posterior_retained, sa_prime_mask, schema_of)


class SDR(Mechanism):
    """Small-domain randomization: SDR(rho1, rho2, merge="objective"|"none"|"min-size", min_size=1000)."""

    name = "sdr"
    family = "randomized"

    claim_model = "(rho1, rho2)-privacy"
    paper = "Chaytor & Wang 2010"
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

    def plan(self, table):
        """(Phase 1 plan, sub-table count matrix J × |SA|, SA' mask) — counts only, no rows."""
        sa, counts = check_sensitive(table)
        sap = sa_prime_mask(counts, self.rho1)
        if not sap.any():
            raise PpdpError(f"no value of {sa!r} has relative frequency ≤ rho1 = {self.rho1} (SA' is empty): nothing to protect")
        p1 = balance(counts, sap)
        C = merge(p1.groups, sap, self.rho2, self.merge, self.min_size)
        return p1, C, sap

    def _publish(self, table, rng):
        sa = table.sa
        p1, C, sap = self.plan(table)
        n_j, m_j, rho_j = subtable_stats(C, sap)
        gamma_j = gamma_for(rho_j, self.rho2)
        ret_j, p_j, q_j = perturbation_params(m_j, gamma_j)
        domains = [np.flatnonzero(row) for row in C]
        codes = table.codes(sa).astype(np.int64)
        sub = assign_rows(codes, C, rng)
        J, m_sa = C.shape
        lut = np.full((J, m_sa), -1, dtype=np.int64)
        for j, d in enumerate(domains):
            lut[j, d] = np.arange(len(d))
        flat = np.concatenate(domains)
        off = np.concatenate([[0], np.cumsum(m_j)[:-1]])
        local = perturb_local(lut[sub, codes], m_j[sub], ret_j[sub], rng)
        y = flat[off[sub] + local]
        order = np.lexsort((rng.random(table.n_rows), sub))
        cols = {c: table.codes(c) for c in table.quasi}
        cols["subtable"] = sub
        cols[sa] = y
        dom = table.domain(sa)
        subtables = [{"id": j, "domain": [dom[x] for x in domains[j]], "m": int(m_j[j]), "rho1": float(rho_j[j]),
                      "gamma": float(gamma_j[j]), "retention": float(ret_j[j]), "p": float(p_j[j]), "q": float(q_j[j]),
                      "n": int(n_j[j])} for j in range(J)]
        cert = {"model": "(rho1, rho2)-privacy", "rho1": self.rho1, "rho2": self.rho2,
                "sa_prime": [dom[x] for x in np.flatnonzero(sap)], "lambda": p1.lam, "lambda_prime": p1.lam_prime,
                "f_max": p1.f_max, "initial_groups": int(len(p1.groups)), "merge": self.merge,
                "objective_initial": float(counts_error(p1.groups, sap, self.rho2).sum()),
                "objective": float(counts_error(C, sap, self.rho2).sum()), "subtables": subtables}
        N = table.n_rows
        manifest = {"schema": schema_of(table, sa), "n_input": N, "n_published": N, "dropped": 0, "certificate": cert}
        return RandomizedRelease(manifest, {"data": data_table(table, cols, order)})


def _subtables(release):
    sa = release.schema["sensitive"][0]
    dom = {lab: i for i, lab in enumerate(release.domains[sa])}
    sts = release.certificate["subtables"]
    domains = [np.array([dom[lab] for lab in st["domain"]], dtype=np.int64) for st in sts]
    return sa, sts, domains


def _estimate(release, workload, masks):
    sa, sts, domains = _subtables(release)
    sub = release.data.column("subtable").to_numpy().astype(np.int64)
    y = release.column_codes(sa)
    p = np.array([st["p"] for st in sts])
    q = np.array([st["q"] for st in sts])
    return keyed_estimates(release, masks, sub, y, domains, p, q)


def _verify(release, rep, table) -> None:
    from ...errors import ReleaseError

    c = release.certificate
    rho2 = float(release.manifest["params"]["rho2"])
    rho1 = float(release.manifest["params"]["rho1"])
    sa = release.schema["sensitive"][0]
    labels = set(release.domains[sa])
    sts = c.get("subtables", [])
    J = len(sts)
    rep.check(J >= 1 and [st["id"] for st in sts] == list(range(J)), "sub-table ids are 0..J−1", "sub-table ids are not 0..J−1")
    for st in sts:
        if not rep.check(set(st["domain"]) <= labels and len(set(st["domain"])) == len(st["domain"]),
                         f"sub-table {st['id']}: domain ⊆ SA domain", f"sub-table {st['id']}: bad domain {st['domain']}"):
            raise ReleaseError(f"sub-table {st['id']} has a domain outside the SA domain")
    sa_, sts, domains = _subtables(release)
    sub = release.data.column("subtable").to_numpy().astype(np.int64)
    if sub.size and (sub.min() < 0 or sub.max() >= J):
        raise ReleaseError("data.parquet has sub-table ids not in the certificate")
    y = release.column_codes(sa)
    n_obs = np.bincount(sub, minlength=J)
    m_sa = len(release.domains[sa])
    in_dom = np.zeros((J, m_sa), dtype=bool)
    for j, d in enumerate(domains):
        in_dom[j, d] = True
    rep.check(bool(in_dom[sub, y].all()), "every published SA value lies in its sub-table's domain",
              f"{int((~in_dom[sub, y]).sum())} published SA values lie outside their sub-table's domain")
    worst = 0.0
    for j, st in enumerate(sts):
        lab = f"sub-table {j}"
        rep.check(int(st["m"]) == len(domains[j]) and len(domains[j]) >= 2, f"{lab}: m = |domain| ≥ 2",
                  f"{lab}: m = {st['m']} but the domain has {len(domains[j])} values")
        rep.check(int(st["n"]) == int(n_obs[j]), f"{lab}: n = its rows in data.parquet",
                  f"{lab}: certificate n = {st['n']}, data.parquet has {int(n_obs[j])} rows")
        r1j = float(st["rho1"])
        ok = 0 < r1j < rho2
        rep.check(ok, f"{lab}: 0 < ρ1j < ρ2", f"{lab}: ρ1j = {r1j} is not in (0, ρ2 = {rho2})")
        if not ok:
            continue
        g = float(gamma_for(r1j, rho2))
        rep.check(abs(float(st["gamma"]) - g) <= TOL * g, f"{lab}: γ_j = ρ2(1−ρ1j)/(ρ1j(1−ρ2))",
                  f"{lab}: γ_j = {st['gamma']}, ρ2(1−ρ1j)/(ρ1j(1−ρ2)) = {g}")
        check_params(rep, lab, len(domains[j]), float(st["gamma"]), st["retention"], st["p"], st["q"])
        post = float(posterior_retained(r1j, float(st["gamma"])))
        worst = max(worst, post)
        rep.check(post <= rho2 + TOL, f"{lab}: posterior of a prior-ρ1j value ≤ ρ2", f"{lab}: posterior {post} > ρ2 = {rho2}")
    rep.facts["sub-tables"] = J
    rep.facts["max posterior (declared priors)"] = round(worst, 6)
    if table is None:
        rep.facts["not checkable without the source table"] = "that each ρ1j is the sub-table's true largest SA' frequency"
        return
    _verify_with_source(release, rep, table, sa, sts, domains, rho1, rho2)


def _verify_with_source(release, rep, table, sa, sts, domains, rho1, rho2) -> None:
    from scipy.optimize import linprog

    counts = table.counts(sa)
    sap = sa_prime_mask(counts, rho1)
    dom = table.domain(sa)
    rep.check(sorted(release.certificate.get("sa_prime", [])) == sorted(dom[x] for x in np.flatnonzero(sap)),
              "SA' of the certificate = values of the source with frequency ≤ ρ1", "SA' of the certificate differs from the source's")
    qi = list(release.schema["quasi"])
    dims = [len(release.domains[c]) for c in qi]
    if qi and float(np.prod(dims, dtype=float)) < 2**62:
        a = np.sort(np.ravel_multi_index([release.column_codes(c).astype(np.int64) for c in qi], dims))
        b = np.sort(np.ravel_multi_index([table.codes(c).astype(np.int64) for c in qi], dims))
        rep.check(len(a) == len(b) and bool(np.array_equal(a, b)), "published QI rows = the source's QI rows (multiset)",
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


register_mechanism("sdr", _estimate, _verify)
