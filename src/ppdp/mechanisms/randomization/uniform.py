"""Uniform perturbation of the SA under (ρ1, ρ2)-privacy — the "uniform" baseline of SPEC §2.3
and, set by its retention probability, the global randomization (mechanism A) of Fu et al. 2014.

On a domain of m values with amplification γ a record keeps its value with total probability
``retention = γ/(m−1+γ)`` and turns into each other value with ``q = 1/(m−1+γ)``. For a
value with prior π the posterior after the value is seen retained is πγ / (1 + (γ−1)π);
γ = ρ2(1−ρ1)/(ρ1(1−ρ2)) makes it exactly ρ2 at π = ρ1 (and smaller below ρ1).

Reconstruction (SPEC §2.3): among n records meeting a QI predicate, y of which show x,
E[y] = n_x·p + n·q with ``p = retention − q = (γ−1)/(m−1+γ)``, so x̂ = (y − n q)/p is unbiased.

This module also holds the kernels SDR shares (it is uniform perturbation inside each
sub-table): the parameter formulas, the vectorised per-row perturbation, the workload
estimator over (sub-table, value) keys and the parameter checks of verify.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from ...errors import InfeasibleError, ParameterError, ReleaseError
from ...queries import CountIndex, split_masks
from ...releases.base import codes_to_labels
from ...releases.randomized import RandomizedRelease, register_mechanism
from ...validation import Optional, Real
from ..base import Mechanism

TOL = 1e-9


# --------------------------------------------------------------------------- formulas
def gamma_for(rho1, rho2):
    """Amplification γ = ρ2(1−ρ1)/(ρ1(1−ρ2)) that caps the posterior of a prior-ρ1 value at ρ2."""
    rho1 = np.asarray(rho1, dtype=float)
    return rho2 * (1.0 - rho1) / (rho1 * (1.0 - rho2))


def perturbation_params(m, gamma):
    """(retention, p, q) for domain size m and amplification γ: retention = γ/(m−1+γ),
    q = 1/(m−1+γ), p = retention − q (the coefficient of the reconstruction)."""
    s = np.asarray(m, dtype=float) - 1.0 + np.asarray(gamma, dtype=float)
    return np.asarray(gamma) / s, (np.asarray(gamma) - 1.0) / s, 1.0 / s


def gamma_from_retention(m, retention):
    """Inverse of the retention formula: γ = retention·(m−1)/(1−retention)."""
    return retention * (m - 1.0) / (1.0 - retention)


def posterior_retained(prior, gamma):
    """Exact Bayes posterior P(X = x | Y = x) of a value with the given prior (the largest
    posterior the release allows about x: for Y = y ≠ x it is at most the prior)."""
    prior = np.asarray(prior, dtype=float)
    return prior * gamma / (1.0 + (gamma - 1.0) * prior)


def sa_prime_mask(counts: np.ndarray, rho1: float) -> np.ndarray:
    """SA': the observed values whose relative frequency in the table is ≤ ρ1."""
    counts = np.asarray(counts)
    return (counts > 0) & (counts <= rho1 * counts.sum() * (1 + 1e-12))


def check_sensitive(table) -> tuple[str, np.ndarray]:
    sa = table.sa
    counts = table.counts(sa)
    if len(table.domain(sa)) < 2 or np.count_nonzero(counts) < 2:
        raise InfeasibleError(f"the sensitive attribute {sa!r} takes a single value in this table; randomizing it protects nothing")
    return sa, counts


# --------------------------------------------------------------------------- perturbation
def perturb_local(local: np.ndarray, m: np.ndarray, retention: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Vectorised uniform perturbation of local codes in [0, m) (m, retention per row): keep
    with probability ``retention``, otherwise a uniformly chosen *other* local code."""
    n = len(local)
    keep = rng.random(n) < retention
    r = np.minimum(np.floor(rng.random(n) * (m - 1)).astype(np.int64), m - 2)
    other = r + (r >= local)
    return np.where(keep, local, other).astype(np.int64)


def data_table(table, columns: dict[str, np.ndarray], order: np.ndarray) -> pa.Table:
    """data.parquet: the QI columns (unchanged) in ``columns`` order, rows permuted by ``order``."""
    arrays, names = [], []
    for c, codes in columns.items():
        if c == "subtable":
            arrays.append(pa.array(codes[order].astype(np.int32)))
        else:
            arrays.append(codes_to_labels(codes[order], table.domain(c)))
        names.append(c)
    return pa.Table.from_arrays(arrays, names=names)


def schema_of(table, sa: str) -> dict:
    cols = [*table.quasi, sa]
    numeric = {c: (None if table.numeric_values(c) is None else table.numeric_values(c).tolist()) for c in cols}
    return {"quasi": list(table.quasi), "sensitive": [sa], "domains": {c: list(table.domain(c)) for c in cols}, "numeric": numeric}


# --------------------------------------------------------------------------- estimation
def keyed_estimates(release, masks, sub: np.ndarray, y: np.ndarray, domains: Sequence[np.ndarray],
                    p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """x̂(query) = Σ_j Σ_{x ∈ sel ∩ D_j} (y_jx − n_j q_j)/p_j for a whole workload.

    The estimator is linear in the rows: x̂ = Σ_{x ∈ sel} Σ_{rows meeting the QI part} w[row, x]
    with w[row, x] = ([y_row = x] − q_j [x ∈ D_j]) / p_j for the row's sub-table j. One
    CountIndex over the (N × |SA|) weights gives Σ_rows w for every query and value.
    """
    sa = release.schema["sensitive"][0]
    m_sa = len(release.domains[sa])
    J = len(domains)
    in_dom = np.zeros((J, m_sa), dtype=bool)
    for j, d in enumerate(domains):
        in_dom[j, d] = True
    if not in_dom[sub, y].all():
        raise ReleaseError("a published SA value lies outside its sub-table's domain")
    w = in_dom[sub] * (-(q / p))[sub][:, None]
    w[np.arange(len(y)), y] += (1.0 / p)[sub]
    rest, sel = split_masks(masks, sa, m_sa)
    qi_cols = sorted({c for mk in rest for c in mk})
    index = CountIndex({c: release.column_codes(c) for c in qi_cols}, {c: len(release.domains[c]) for c in qi_cols}, w)
    return (index.sums(rest) * sel).sum(axis=1)


# --------------------------------------------------------------------------- verify helpers
def check_params(rep, label: str, m: int, gamma: float, retention, p, q) -> None:
    er, ep, eq = perturbation_params(m, gamma)
    ok = all(abs(float(a) - float(b)) <= TOL * max(1.0, abs(float(b))) for a, b in ((retention, er), (p, ep), (q, eq)))
    rep.check(ok, f"{label}: retention, p, q re-derived from (m={m}, γ={gamma:.6g})",
              f"{label}: published retention/p/q ({retention}, {p}, {q}) differ from those of m={m}, γ={gamma} ({er}, {ep}, {eq})")
    rep.check(gamma > 1.0, f"{label}: γ > 1 (the release carries information)", f"{label}: γ = {gamma} ≤ 1")


# --------------------------------------------------------------------------- the mechanism
class UniformPerturbation(Mechanism):
    """Uniform perturbation of the whole table's SA: give (rho1, rho2) or a retention probability.

    ``retention`` is the total probability that a record keeps its own value (Fu et al.'s p,
    e.g. 1/ℓ' for a comparison with A'); it must exceed 1/m for the release to carry information.
    """

    name = "uniform"
    family = "randomized"

    claim_model = "(rho1, rho2)-privacy"
    paper = "Agrawal, Srikant & Thomas 2005; Chaytor & Wang 2010"
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

    def _publish(self, table, rng):
        sa, counts = check_sensitive(table)
        m = len(table.domain(sa))
        N = table.n_rows
        cert: dict = {"m": m}
        if self.retention is None:
            sap = sa_prime_mask(counts, self.rho1)
            if not sap.any():
                raise InfeasibleError(f"no value of {sa!r} has relative frequency ≤ rho1 = {self.rho1} (SA' is empty): nothing to protect")
            gamma = float(gamma_for(self.rho1, self.rho2))
            cert.update(model="(rho1, rho2)-privacy", rho1=self.rho1, rho2=self.rho2)
        else:
            if self.retention <= 1.0 / m:
                raise InfeasibleError(f"retention {self.retention} ≤ 1/m = 1/{m}: the published values would carry no information")
            gamma = float(gamma_from_retention(m, self.retention))
            cert.update(model="global randomization")
        retention, p, q = (float(v) for v in perturbation_params(m, gamma))
        cert.update(gamma=gamma, retention=retention, p=p, q=q)
        codes = table.codes(sa).astype(np.int64)
        y = perturb_local(codes, np.full(N, m), np.full(N, retention), rng)
        order = rng.permutation(N)  # the source row order may carry information: publish shuffled
        cols = {c: table.codes(c) for c in table.quasi}
        cols[sa] = y
        manifest = {"schema": schema_of(table, sa), "n_input": N, "n_published": N, "dropped": 0, "certificate": cert}
        return RandomizedRelease(manifest, {"data": data_table(table, cols, order)})


def _estimate(release, workload, masks):
    c = release.certificate
    sa = release.schema["sensitive"][0]
    y = release.column_codes(sa)
    dom = np.arange(len(release.domains[sa]))
    return keyed_estimates(release, masks, np.zeros(len(y), dtype=np.int64), y, [dom], np.array([c["p"]]), np.array([c["q"]]))


def _verify(release, rep, table) -> None:
    c = release.certificate
    sa = release.schema["sensitive"][0]
    m = len(release.domains[sa])
    rep.check(int(c.get("m", -1)) == m, "certificate m = |SA domain|", f"certificate m = {c.get('m')}, the SA domain has {m} values")
    gamma = float(c["gamma"])
    params = release.manifest.get("params", {})
    if params.get("retention") is None:
        rho1, rho2 = float(params["rho1"]), float(params["rho2"])
        rep.check(abs(gamma - float(gamma_for(rho1, rho2))) <= TOL * gamma, "γ = ρ2(1−ρ1)/(ρ1(1−ρ2))",
                  f"γ = {gamma} is not ρ2(1−ρ1)/(ρ1(1−ρ2)) = {float(gamma_for(rho1, rho2))}")
        post = float(posterior_retained(rho1, gamma))
        rep.check(post <= rho2 + TOL, "posterior of a prior-ρ1 value ≤ ρ2", f"posterior {post} of a prior-ρ1 value exceeds ρ2 = {rho2}")
        rep.facts["max posterior (prior ρ1)"] = round(post, 6)
    else:
        rep.check(abs(c["retention"] - float(params["retention"])) <= TOL, "retention as requested",
                  f"certificate retention {c['retention']} differs from the parameter {params['retention']}")
    check_params(rep, "uniform", m, gamma, c["retention"], c["p"], c["q"])
    if table is not None:
        counts = table.counts(sa)
        prior = counts / counts.sum()
        rep.facts["max posterior over the source's SA values"] = round(float(posterior_retained(prior, gamma).max()), 6)
        if params.get("retention") is None:
            sap = sa_prime_mask(counts, float(params["rho1"]))
            worst = float(posterior_retained(prior[sap], gamma).max()) if sap.any() else 0.0
            rep.check(worst <= float(params["rho2"]) + TOL, "posterior of every SA' value of the source ≤ ρ2",
                      f"an SA' value reaches posterior {worst} > ρ2")
    rep.facts["retention"] = round(float(c["retention"]), 6)
    rep.facts["gamma"] = round(gamma, 6)


register_mechanism("uniform", _estimate, _verify)
