"""The adversary's best posterior per record class, for every release family (SPEC §4).

A *record class* is the set of records the adversary cannot tell apart in the release:

- bucketized (F'-privacy, Anatomy): a bucket g. For a record of g the posterior of SA
  value x is the share |g,x|/|g| (Wang et al. 2011, §3); the bound is the claim's
  (``claim_of(manifest).bound()``: f'_x for F'-privacy, 1/ℓ for an ℓ-diverse Anatomy release).
- randomized, uniform perturbation: the published value y. Bayes posterior
  P(x | y) = P(y | x)·π_x / Σ_z P(y | z)·π_z with P(y | x) = γ/(m−1+γ) if y = x else
  1/(m−1+γ) and π the SA frequencies of T; (ρ1, ρ2)-privacy bounds P(x | y) by ρ2 for
  every x with π_x ≤ ρ1 (the set SA').
- randomized, SDR: the pair (sub-table j, published value y), with (p_j, q_j) from the
  certificate and the sub-table priors π_j; the bound ρ2 applies to the SA' values.
- randomized, A' (Fu et al. 2014): the published value s. Under the uniform draw over
  the decoy group, P(x | s) = C[x, s] / Σ_z C[z, s] where C[x, s] counts the decoy groups
  holding both x and s; ℓ'-diversion bounds it by 1/ℓ'.
- histogram: a QI cell. The adversary's estimate of Pr(x | cell) is the ratio of two noisy
  counts, Y/X = noisy(cell, x) / Σ_x noisy(cell, x); differential privacy gives no bound
  on it (Wang et al. 2011, Theorem 2: for a large X it is close to the true ratio y/x).

:func:`audit_release` returns an :class:`AuditResult` with the per-class table, the per-value
summary (max posterior vs bound) and the violations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from ..claims import claim_of
from ..claims.rho import RhoClaim
from ..errors import ReleaseError
from ..kernels.transition import TransitionGroup, TransitionModel, decoy_cooccurrence as kernel_cooccurrence, posterior_retained
from ..releases.base import labels_to_codes
from ..releases.custodian import fake_list

TOL = 1e-9


@dataclass
class AuditResult:
    family: str
    mechanism: str
    bound_name: str
    classes: pd.DataFrame  # one row per (record class, SA value): class, value, posterior, bound, violation
    summary: pd.DataFrame  # one row per SA value: prior, bound, max_posterior, mean_posterior, n_classes, violations
    notes: list[str] = field(default_factory=list)
    #: what the release discloses (records certain, per value, largest posterior; Claim.disclosure)
    disclosure: dict | None = None
    #: the declared sensitive values the audit judges against (None: every value is sensitive)
    sensitive_values: list[str] | None = None
    #: sensitive value → records whose value the release discloses with certainty
    exposed: dict[str, int] = field(default_factory=dict)
    #: the manifest records that its publisher allowed that disclosure (``--allow-disclosure``)
    disclosure_allowed: bool = False
    #: records known with certainty to hold one of the declared sensitive values, though no single
    #: value is certain (:func:`ppdp.claims.sensitive_set_disclosure`; stated, not a failure)
    exposed_set: int = 0

    @property
    def n_violations(self) -> int:
        return int(self.summary["violations"].sum()) if len(self.summary) else 0

    @property
    def n_exposed(self) -> int:
        """Records whose sensitive value (a declared one) the release discloses with certainty."""
        return int(sum(self.exposed.values()))

    @property
    def ok(self) -> bool:
        """No record class above the claim's bound and no sensitive value disclosed with certainty."""
        return self.n_violations == 0 and self.n_exposed == 0

    @property
    def max_posterior_sensitive(self) -> float:
        """The largest posterior the audit finds on a declared sensitive value (NaN: none found)."""
        s = self.summary
        if not len(s) or "max_posterior" not in s:
            return float("nan")
        post = s["max_posterior"].to_numpy(dtype=float)
        if "sensitive" in s:
            post = post[s["sensitive"].to_numpy(dtype=bool)]
        post = post[~np.isnan(post)]
        return float(post.max()) if len(post) else float("nan")

    def headline(self) -> str:
        """The verdict in one line, disclosure first: what a custodian must read before anything else."""
        if self.n_exposed:
            n = int((self.disclosure or {}).get("n_records") or 0)
            top = ", ".join(f"{v}: {k:,}" for v, k in sorted(self.exposed.items(), key=lambda kv: -kv[1])[:5])
            share = f" ({self.n_exposed / n:.1%})" if n else ""
            return (f"DISCLOSURE: the release discloses the sensitive value of {self.n_exposed:,} of {n:,} records with "
                    f"certainty{share} — {top}"
                    + ("; its publisher allowed it (--allow-disclosure)" if self.disclosure_allowed else
                       "; the manifest does not record that this was allowed")
                    + (f"; and {self.n_violations} record class(es) exceed the bound" if self.n_violations else ""))
        if self.n_violations:
            return f"VIOLATIONS: {self.n_violations} record class(es) exceed the bound"
        which = "" if self.sensitive_values is None else f" (sensitive values: {', '.join(self.sensitive_values) or 'none'})"
        in_set = ""
        if self.exposed_set:
            n = int((self.disclosure or {}).get("n_records") or 0)
            in_set = (f"; but {self.exposed_set:,} of {n:,} records are disclosed with certainty to hold one of the "
                      "sensitive values (every value in their buckets is a sensitive one)")
        return f"OK: no violations, and no sensitive value disclosed with certainty{which}{in_set}"


def audit_release(release, table=None, sensitive_values=None) -> AuditResult:
    """The adversary's best posterior per record class vs the model's bound (see module doc),
    judged against the declared sensitive values: ``sensitive_values`` when given, else those
    the manifest's ``disclosure`` records (the publisher's declaration), else every value. The
    result's :meth:`AuditResult.headline` puts a disclosure with certainty first.

    Dispatch is by the release family and, within a family, by the claim the release makes
    (the certificate's ``model``, else the registered mechanism's ``claim_model``) — never by
    mechanism name: a new mechanism of a known family and claim is audited without an edit."""
    fam = release.manifest.get("family", getattr(release, "family", None))
    auditors = _AUDITORS.get(fam)
    if auditors is None:
        raise ReleaseError(f"cannot audit a release of family {fam!r}; auditable families: {', '.join(_AUDITORS)}")
    claim = _claim_model(release)
    audit = auditors.get(claim) or auditors.get(None)
    if audit is None:
        raise ReleaseError(f"cannot audit a {fam} release claiming {claim!r} (mechanism "
                           f"{release.manifest.get('mechanism')!r}); auditable claims: "
                           f"{', '.join(str(k) for k in auditors if k)}")
    return judge(audit(release, table), release, sensitive_values)


def judge(res: AuditResult, release, sensitive_values=None) -> AuditResult:
    """Fill in what ``res`` is judged against: the declared sensitive values, the records whose
    sensitive value the release discloses with certainty (its claim's disclosure, the figure
    ``publish`` refuses on) and whether the manifest records that this was allowed; mark each
    summary row ``sensitive``."""
    from ..claims import declared_sensitive, exposed_values, sensitive_set_disclosure

    stated = release.manifest.get("disclosure")
    stated = stated if isinstance(stated, dict) else {}
    if sensitive_values is None and stated.get("sensitive_values") is not None:
        sensitive_values = stated["sensitive_values"]
    declared = declared_sensitive(release, sensitive_values)
    if res.disclosure is None:
        try:
            res.disclosure = claim_of(release.manifest).disclosure(release)
        except (ReleaseError, NotImplementedError):
            res.disclosure = None
    res.sensitive_values = declared
    res.exposed = exposed_values(res.disclosure, declared)
    in_set = sensitive_set_disclosure(release, declared)
    res.exposed_set = int(in_set["records_certain"]) if in_set else 0
    res.disclosure_allowed = bool(stated.get("disclosure_allowed") or stated.get("full_disclosure_allowed"))
    if len(res.summary) and "value" in res.summary:
        keep = None if declared is None else set(declared)
        res.summary["sensitive"] = [keep is None or str(v) in keep for v in res.summary["value"]]
    return res


def _claim_model(release) -> str | None:
    """The privacy model a release claims: its certificate's ``model``, else its mechanism's."""
    cert = release.manifest.get("certificate") or {}
    if isinstance(cert.get("model"), str):
        return cert["model"]
    from .. import registry
    from ..errors import ParameterError

    try:
        return registry.mechanism(release.manifest.get("mechanism", "")).claim_model or None
    except ParameterError:  # a mechanism this build does not know
        return None


def _audit_rho_privacy(release, table) -> AuditResult:
    """(ρ1, ρ2)-privacy: one perturbation matrix (uniform) or one per sub-table (SDR)."""
    cert = release.manifest.get("certificate") or {}
    return _audit_sdr(release, table) if "subtables" in cert else _audit_uniform(release, table)


def _audit_randomized(release, table) -> AuditResult:
    """A randomized release with a claim not listed below: read the perturbation from the
    certificate's shape (per-sub-table matrices, decoy groups, or one matrix)."""
    cert = release.manifest.get("certificate") or {}
    if "l_prime" in cert:
        return _audit_diverted(release, table)
    if "subtables" in cert or "gamma" in cert or "retention" in cert:
        return _audit_rho_privacy(release, table)
    raise ReleaseError(f"randomized release of mechanism {release.manifest.get('mechanism')!r}: its certificate has none of "
                       "'subtables', 'l_prime', 'gamma'; cannot audit")


def _summarise(classes: pd.DataFrame, sa_domain, prior: np.ndarray, bound: np.ndarray, weights_col: str | None = None) -> pd.DataFrame:
    """Per SA value: max / weighted-mean posterior over classes, bound and violations."""
    m = len(sa_domain)
    code = classes["code"].to_numpy()
    post = classes["posterior"].to_numpy()
    w = classes[weights_col].to_numpy(float) if weights_col else np.ones(len(classes))
    mx = np.full(m, np.nan)
    if len(code):
        mx_vals = np.full(m, -np.inf)
        np.maximum.at(mx_vals, code, post)
        mx = np.where(np.isfinite(mx_vals), mx_vals, np.nan)
    wsum = np.bincount(code, weights=w, minlength=m)
    mean = np.divide(np.bincount(code, weights=w * post, minlength=m), wsum, out=np.full(m, np.nan), where=wsum > 0)
    viol = np.bincount(code, weights=classes["violation"].to_numpy(float), minlength=m).astype(int)
    return pd.DataFrame({"value": list(sa_domain), "prior": prior, "bound": bound, "max_posterior": mx,
                         "mean_posterior": mean, "n_classes": np.bincount(code, minlength=m), "violations": viol})


# ------------------------------------------------------------------------------ bucketized
def bucket_shares(release, seed: int = 0):
    """(sizes |g| from the QIT, real counts (n_buckets × m) from the ST, fake counts, SA domain).

    Which values are fake comes from the custodian-side file when loaded (``release.custodian``)
    or a published ``fake`` column. Without either (σ > 0), the real/fake split is not in the
    files: a plausible one is drawn (σ of each bucket's count-1 values that the publication rule
    allows as fakes, uniformly, seeded) — :func:`fakes_known` says which case applies."""
    if "qit" not in release.tables or "st" not in release.tables:
        raise ReleaseError("a bucketized release needs qit.parquet and st.parquet")
    sa = release.schema["sensitive"][0]
    dom = release.domains[sa]
    qit, st = release.tables["qit"], release.tables["st"]
    qbid = np.asarray(qit.column("bid").to_numpy(), dtype=np.int64)
    sbid = np.asarray(st.column("bid").to_numpy(), dtype=np.int64)
    n_b = int(max(qbid.max(initial=-1), sbid.max(initial=-1)) + 1)
    sizes = np.bincount(qbid, minlength=n_b)
    x = labels_to_codes(st.column(sa), dom, sa)
    cnt = np.asarray(st.column("count").to_numpy(), dtype=np.int64) if "count" in st.column_names else np.ones(len(x), np.int64)
    m = len(dom)
    fake = _fake_rows(release, sbid, x, dom)
    if fake is None:
        fake = np.zeros(len(x), bool)
        sigma = int((release.manifest.get("certificate") or {}).get("fake_values", 0) or 0)
        if sigma:
            fake = _plausible_fakes(release, sbid, x, cnt, sigma, seed)
    real = np.bincount(sbid[~fake] * m + x[~fake], weights=cnt[~fake], minlength=n_b * m).reshape(n_b, m).astype(np.int64)
    fakes = np.bincount(sbid[fake] * m + x[fake], weights=cnt[fake], minlength=n_b * m).reshape(n_b, m).astype(np.int64)
    return sizes, real, fakes, dom


def fakes_known(release) -> bool:
    """Are the fake values identified (custodian file loaded, or a published flag), or is there none?"""
    st = release.tables.get("st")
    cert = release.manifest.get("certificate") or {}
    return (not int(cert.get("fake_values", 0) or 0) or "fake" in (release.custodian or {})
            or (st is not None and "fake" in st.column_names))


def _fake_rows(release, sbid, x, dom) -> np.ndarray | None:
    st = release.tables["st"]
    if "fake" in st.column_names:
        return np.asarray(st.column("fake").to_numpy(zero_copy_only=False), dtype=bool)
    spec = (getattr(release, "custodian", None) or {}).get("fake")
    if spec is None:
        return None
    fakes = fake_list(spec)
    codes = fakes.codes_in(dom)
    m = len(dom)
    fake_key = np.unique(fakes.bid * m + codes)
    return np.isin(np.asarray(sbid, dtype=np.int64) * m + x, fake_key, assume_unique=False)


def _plausible_fakes(release, sbid, x, cnt, sigma, seed) -> np.ndarray:
    b = release.buckets()
    dense = np.searchsorted(b["ids"], sbid)
    cand = (cnt == 1) & ~release.cell_excluded(dense, x)
    key = np.where(cand, np.random.default_rng(seed).random(len(x)), np.inf)
    order = np.lexsort((key, dense))
    rank = np.empty(len(x), np.int64)
    starts = np.searchsorted(dense[order], dense[order], side="left")
    rank[order] = np.arange(len(x)) - starts
    return cand & (rank < sigma)


def _thresholds(release, dom) -> tuple[np.ndarray, str]:
    """The per-value posterior bound of the release's claim (f'_x, or 1/ℓ), in domain order."""
    bound = claim_of(release.manifest).bound()
    post = bound["posterior"]
    return np.array([float(post.get(v, 1.0)) for v in dom]), str(bound["name"])


def _audit_bucketized(release, table) -> AuditResult:
    from ..claims import disclosure_statement

    sizes, real, fakes, dom = bucket_shares(release)
    bound, bname = _thresholds(release, dom)
    notes = []
    claim = claim_of(release.manifest)
    disclosure = claim.disclosure(release)
    notes.append(disclosure_statement(disclosure))
    n = int(sizes.sum())
    prior = (table.counts(table.sa) / table.n_rows) if table is not None else real.sum(axis=0) / max(real.sum(), 1)
    mismatch = np.flatnonzero(real.sum(axis=1) != sizes)
    if len(mismatch):
        notes.append(f"{len(mismatch)} bucket(s) whose real ST counts do not sum to their QIT size (e.g. bucket "
                     f"{int(mismatch[0])}: ST {int(real.sum(axis=1)[mismatch[0]])} vs QIT {int(sizes[mismatch[0]])}); "
                     "the share uses the QIT size")
    if fakes.any():
        if fakes_known(release):
            notes.append(f"{int(fakes.sum())} fake SA values (identified by the custodian file): the share counts real "
                         "values only, an upper bound on a receiver's posterior (who cannot tell fakes apart)")
        else:
            notes.append(f"{int(fakes.sum())} fake SA values, not identified (no custodian file): the shares use a "
                         "plausible real/fake split; the disclosure above is the receiver's exact view of the files")
    g, xc = np.nonzero(real)
    share = real[g, xc] / np.maximum(sizes[g], 1)
    viol = share > bound[xc] + TOL
    # a bucket with ST counts but no QIT rows is itself a violation (a value with no record to hide it)
    viol |= sizes[g] == 0
    classes = pd.DataFrame({"class": g, "code": xc, "value": np.asarray(dom, dtype=object)[xc], "count": real[g, xc],
                            "size": sizes[g], "posterior": np.where(sizes[g] > 0, share, 1.0), "bound": bound[xc],
                            "violation": viol})
    summary = _summarise(classes, dom, prior, bound, weights_col="count")
    notes.append(f"{len(sizes):,} buckets, {n:,} records; record class = bucket; posterior = |g,x|/|g|")
    return AuditResult("bucketized", release.manifest.get("mechanism", "?"), bname, classes, summary, notes,
                       disclosure=disclosure)


# ------------------------------------------------------------------------------ randomized
# The randomized audits read the release's public transition model (one per SA,
# RandomizedRelease.transition_models) and take their bound from the typed claim
# (claim_of(manifest).bound()), the object verify checks.
def _published_counts(release, sa, dom, mask=None) -> np.ndarray:
    codes = release.codes("data", sa)
    if mask is not None:
        codes = codes[mask]
    return np.bincount(codes, minlength=len(dom)).astype(float)


def _rho(release) -> tuple[float | None, float | None]:
    """(ρ1, ρ2) as the claim states them (verify checks them against params); (None, None)
    for a claim without a (ρ1, ρ2) bound."""
    b = claim_of(release.manifest).bound()
    r1, r2 = b.get("prior_at_most"), b.get("posterior")
    return (None if r1 is None else float(r1)), (None if r2 is None else float(r2))


def bayes_posterior(prior: np.ndarray, keep: float, other: float) -> np.ndarray:
    """P(x | y) (rows y, columns x) for P(y|x) = keep if y = x else other."""
    prior = np.asarray(prior, float)
    m = len(prior)
    lik = np.full((m, m), other)
    np.fill_diagonal(lik, keep)
    return TransitionGroup(np.arange(m), lik).posterior(prior)


def _reconstructed_prior(y_counts: np.ndarray, group: TransitionGroup) -> np.ndarray:
    """The adversary's prior estimated from the release: the model's inversion x̂ = y T⁻¹, clipped, normalised."""
    est = np.clip(group.invert(y_counts), 0, None)
    return est / est.sum() if est.sum() > 0 else np.full(len(y_counts), 1 / len(y_counts))


def _randomized_classes(post: np.ndarray, y_counts: np.ndarray, prior: np.ndarray, sa_prime: np.ndarray, rho2, dom_codes,
                        dom, label_prefix="") -> pd.DataFrame:
    m = post.shape[0]
    yy: np.ndarray; xx: np.ndarray  # grids, then raveled
    yy, xx = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
    yy, xx = yy.ravel(), xx.ravel()
    p = post[yy, xx]
    bound = np.full(len(p), np.nan) if rho2 is None else np.where(sa_prime[xx], rho2, np.nan)
    viol = np.where(np.isnan(bound), False, p > np.nan_to_num(bound, nan=1.0) + 1e-9)
    return pd.DataFrame({"class": [f"{label_prefix}y={dom[dom_codes[y]]}" for y in yy], "code": dom_codes[xx],
                         "value": np.asarray(dom, object)[dom_codes[xx]], "count": y_counts[yy], "posterior": p,
                         "bound": bound, "violation": viol})


def _audit_uniform(release, table) -> AuditResult:
    model = release.transition_models()[0]
    group = model.single
    sa = model.attribute
    dom = release.domains[sa]
    m = len(dom)
    y = _published_counts(release, sa, dom)
    notes = []
    if table is not None:
        prior = table.counts(table.sa) / table.n_rows
    else:
        prior = _reconstructed_prior(y, group)
        notes.append("no source table given: priors are the adversary's reconstruction from the release")
    rho1, rho2 = _rho(release)
    sa_prime = sa_prime_mask_of(prior, rho1)
    post = group.posterior(prior)
    classes = _randomized_classes(post, y, prior, sa_prime, rho2, np.arange(m), dom)
    bound = np.where(sa_prime, rho2 if rho2 is not None else np.nan, np.nan)
    summary = _summarise(classes, dom, prior, bound, weights_col="count")
    keep, other = float(group.matrix[0, 0]), float(group.q)
    gamma = keep / other
    notes.append(f"uniform perturbation on m = {m} values, γ = {gamma:.4g}: P(keep) = {keep:.4g}, P(each other) = {other:.4g}; "
                 f"SA' = {int(sa_prime.sum())} values with prior ≤ ρ1 = {rho1}")
    bname = claim_of(release.manifest).bound().get("name", f"ρ2 = {rho2} for SA' values")
    return AuditResult("randomized", release.manifest.get("mechanism", "uniform"), bname, classes, summary, notes)


def _sdr_plan_counts(release, table):
    """The sub-table × SA count matrix, recomputed by the SDR planner from the source's SA
    counts (the plan is a function of the counts only); None if it does not match the release."""
    from ..mechanisms.randomization.sdr import SDR

    p = release.manifest.get("params", {})
    try:
        C = SDR(**p).plan(table.counts(table.sa), table.domain(table.sa)).counts
    except (TypeError, ValueError):
        return None
    sts = release.certificate["subtables"]
    dom = list(release.domains[release.schema["sensitive"][0]])
    if C.shape[0] != len(sts):
        return None
    for st in sts:
        row = C[int(st["id"])]
        if int(row.sum()) != int(st["n"]) or sorted(dom[x] for x in np.flatnonzero(row)) != sorted(st["domain"]):
            return None
    return C


def _audit_sdr(release, table) -> AuditResult:
    model = release.transition_models()[0]
    sa = model.attribute
    dom = list(release.domains[sa])
    m = len(dom)
    sub = np.asarray(release.tables["data"].column(model.group_column).to_numpy(), dtype=np.int64)
    codes = release.codes("data", sa)
    claim = cast(RhoClaim, claim_of(release.manifest))  # an SDR claim (dispatched on "subtables")
    bound_of = claim.bound()
    rho1, rho2 = _rho(release)
    if table is not None:
        global_prior = table.counts(table.sa) / table.n_rows
        sa_prime_global = sa_prime_mask_of(global_prior, rho1)
    else:
        global_prior = np.bincount(codes, minlength=m) / max(len(codes), 1)
        sa_prime_global = np.isin(np.arange(m), [dom.index(v) for v in bound_of["sa_prime"]]) \
            if bound_of.get("sa_prime") is not None else sa_prime_mask_of(global_prior, rho1)
    C = _sdr_plan_counts(release, table) if table is not None else None
    notes = []
    if C is not None:
        notes.append("sub-table priors are exact: the SDR plan recomputed from the source's SA counts matches the certificate")
    else:
        notes.append("sub-table priors unknown (no source table, or its plan does not match): the posterior of an SA' value is "
                     "taken at the certificate's ρ1j (the largest SA' prior the certificate allows in T_j); "
                     "posterior_estimated_prior uses the adversary's reconstruction")
    parts = []
    for j, (group, st) in enumerate(zip(model.groups, claim.subtables)):
        jdom = group.domain
        yj = np.bincount(codes[sub == j], minlength=m)[jdom].astype(float)
        est_prior = _reconstructed_prior(yj, group)
        sap = sa_prime_global[jdom]
        if C is not None:
            prior = C[j, jdom] / max(C[j].sum(), 1)
            post = group.posterior(prior)
        else:
            prior = est_prior
            post = group.posterior(prior)
            r1 = float(st["rho1"])
            worst = float(posterior_retained(r1, float(st["gamma"]))) if r1 > 0 else 0.0  # prior ρ1j, seen retained
            post_cert = np.where(sap[None, :], worst * np.eye(len(jdom)), post)
            est_post = post
            post = post_cert
        part = _randomized_classes(post, yj, prior, sap, rho2, jdom, dom, label_prefix=f"T{j} ")
        part["prior"] = np.tile(prior, len(jdom))
        if C is None:
            part["posterior_estimated_prior"] = est_post.ravel()
        parts.append(part)
    classes = pd.concat(parts, ignore_index=True)
    bound = np.where(sa_prime_global, rho2 if rho2 is not None else np.nan, np.nan)
    summary = _summarise(classes, dom, global_prior, bound, weights_col="count")
    notes.append(f"SDR with {len(model.groups)} sub-tables; record class = (sub-table, published value)")
    return AuditResult("randomized", release.manifest.get("mechanism", "sdr"), bound_of.get("name", f"ρ2 = {rho2} for SA' values"),
                       classes, summary, notes)


def sa_prime_mask_of(prior: np.ndarray, rho1) -> np.ndarray:
    return prior <= rho1 + 1e-12 if rho1 is not None else np.zeros(len(prior), bool)


def decoy_cooccurrence(counts: np.ndarray, l_prime: int) -> np.ndarray:
    """C[x, s]: number of decoy groups holding both x and s, for the mechanism's own group
    creation on SA counts ``counts`` (Anatomy's rule, the decoy schedule of A')."""
    return kernel_cooccurrence(counts, l_prime)


def _audit_diverted(release, table) -> AuditResult:
    sa = release.schema["sensitive"][0]
    dom = release.domains[sa]
    bound_of = claim_of(release.manifest).bound()
    lp = int(release.claim.l_prime)
    y = _published_counts(release, sa, dom)
    notes = []
    if table is not None:
        counts = table.counts(table.sa).astype(np.int64)
        n_pub = int(release.manifest["n_published"])
        if counts.sum() != n_pub:  # rows dropped to make N a multiple of ℓ': remove from the largest counts
            drop = int(counts.sum() - n_pub)
            for _ in range(drop):
                counts[int(np.argmax(counts))] -= 1
            notes.append(f"{drop} dropped row(s) removed from the largest SA counts for the group reconstruction")
    else:
        counts = np.rint(y).astype(np.int64)  # E[published count of s] = f_s under A'
        notes.append("no source table given: decoy groups rebuilt from the published counts (the MLE of f_s)")
    model = TransitionModel.diverted(sa, counts, lp)  # the receiver-side model with the audit's counts
    prior = counts / max(counts.sum(), 1)
    post = model.single.posterior(prior)  # post[s, x] = P(x | published s) = C[x, s]/Σ_z C[z, s]
    m = len(dom)
    bnd = float(bound_of["posterior"])
    classes = _randomized_classes(post, y, prior, np.ones(m, bool), bnd, np.arange(m), dom)
    summary = _summarise(classes, dom, prior, np.full(m, bnd), weights_col="count")
    notes.append(f"A' with ℓ' = {lp}: record class = published value s; posterior C[x,s]/Σ_z C[z,s]; bound 1/ℓ' = {1 / lp:.4g}")
    return AuditResult("randomized", release.manifest.get("mechanism", "diverted"), bound_of.get("name", f"1/ℓ' = 1/{lp}"),
                       classes, summary, notes)


# ------------------------------------------------------------------------------- histogram
def _audit_histogram(release, table) -> AuditResult:
    from ..claims import claim_of

    cells = release.tables.get("cells")
    if cells is None:
        raise ReleaseError("a histogram release needs cells.parquet")
    dims = [c for c in cells.column_names if c != "count"]
    sens = release.schema.get("sensitive") or []
    target = next((d for d in dims if d in sens), dims[-1])
    notes = []
    if target not in sens:
        notes.append(f"the histogram has no sensitive dimension; the audit infers {target!r} from the other dimensions")
    idx = {d: np.asarray(cells.column(d).to_numpy(), dtype=np.int64) for d in dims}
    cnt = np.asarray(cells.column("count").to_numpy(), dtype=float)
    others = [d for d in dims if d != target]
    m = int(idx[target].max()) + 1 if len(cnt) else 0
    bins = release.certificate.get("bins", {}).get(target)
    labels = [str(b) for b in bins] if isinstance(bins, list) and len(bins) == m else [str(i) for i in range(m)]
    if others:
        key = np.ravel_multi_index([idx[d] for d in others], [int(idx[d].max()) + 1 for d in others])
        ukey, inv = np.unique(key, return_inverse=True)
    else:
        ukey, inv = np.zeros(1, np.int64), np.zeros(len(cnt), np.int64)
    X = np.bincount(inv, weights=cnt, minlength=len(ukey))
    ratio = np.divide(cnt, X[inv], out=np.full(len(cnt), np.nan), where=X[inv] > 0)
    classes = pd.DataFrame({"class": inv, "code": idx[target], "value": np.asarray(labels, object)[idx[target]],
                            "count": X[inv], "posterior": ratio, "bound": np.nan, "violation": False})
    classes = classes[classes["count"] > 0].reset_index(drop=True)
    eps = claim_of(release.manifest).bound()["epsilon"]  # ε-DP bounds no posterior: only ε is reported
    big = classes[(classes["count"] >= 100) & (classes["posterior"] >= 0.9)]
    notes.append(f"record class = a cell of ({', '.join(others) or '—'}); posterior = Y/X, the ratio of the noisy count of "
                 f"(cell, {target}) to the noisy cell total; ε = {eps}: differential privacy bounds no such ratio, so "
                 "there is no bound and no violation; by Theorem 2 of Wang et al. (2011) Y/X ≈ y/x once X is large")
    notes.append(f"{len(big)} class(es) with noisy total X ≥ 100 and Y/X ≥ 0.9 (inferential disclosures a DP release allows)")
    prior = np.bincount(idx[target], weights=cnt, minlength=m) / max(cnt.sum(), 1)
    summary = _summarise(classes.assign(posterior=classes["posterior"].clip(0, 1)), labels, prior, np.full(m, np.nan),
                         weights_col="count")
    return AuditResult("histogram", release.manifest.get("mechanism", "?"), "none (ε-DP bounds no posterior)", classes, summary, notes)


def _audit_ldp(release, table) -> AuditResult:
    """ε-LDP subset selection: a record class is the set of records whose report holds the value
    (and, apart, those whose report does not). For a report Y the posterior of v ∈ Y is
    π_v e^ε / (1 + (e^ε − 1)π(Y)) and of v ∉ Y it is π_v / (1 + (e^ε − 1)π(Y)); the bound is ε-LDP's,
    π_v e^ε / (1 + (e^ε − 1)π_v), which is ≤ ρ2 for a value of prior ≤ ρ1 when ε = ln γ(ρ1, ρ2)."""
    from ..kernels.subset import inclusion_probabilities, posterior_bound

    claim = claim_of(release.manifest)
    eps, k = float(claim.bound()["epsilon"]), int(release.manifest["certificate"]["k"])
    sa = release.sensitive[0]
    dom = list(release.domains[sa])
    m = len(dom)
    notes = []
    if table is not None:
        prior = table.counts(table.sa) / table.n_rows
    else:
        n = int(release.manifest["n_published"])
        p, q = inclusion_probabilities(m, k, eps)
        est = np.clip((release.support_counts() - n * q) / (p - q), 0, None)
        prior = est / est.sum() if est.sum() > 0 else np.full(m, 1.0 / m)
        notes.append("no source table given: priors are the adversary's reconstruction from the release")
    g = float(np.exp(eps))
    Y = release.reports()
    held_max, free_max = np.zeros(m), np.zeros(m)
    held_sum, held_n = np.zeros(m), np.zeros(m)
    for lo in range(0, len(Y), 1 << 18):
        y = np.asarray(Y[lo:lo + (1 << 18)], dtype=np.int64)
        den = 1.0 + (g - 1.0) * prior[y].sum(axis=1)
        post = prior[y] * g / den[:, None]
        np.maximum.at(held_max, y.ravel(), post.ravel())
        held_sum += np.bincount(y.ravel(), weights=post.ravel(), minlength=m)
        held_n += np.bincount(y.ravel(), minlength=m)
        free_max = np.maximum(free_max, prior / den.min())  # v ∉ Y: largest at the smallest denominator
    bound = np.asarray(posterior_bound(prior, eps), dtype=float)
    codes = np.concatenate([np.arange(m), np.arange(m)])
    post = np.concatenate([held_max, np.minimum(free_max, prior * g / (1 + (g - 1) * prior))])
    b = np.concatenate([bound, bound])
    viol = post > b + TOL
    classes = pd.DataFrame({"class": [f"report holds {v}" for v in dom] + [f"report lacks {v}" for v in dom], "code": codes,
                            "value": np.asarray(dom, object)[codes], "count": np.concatenate([held_n, len(Y) - held_n]),
                            "posterior": post, "bound": b, "violation": viol})
    mean = np.divide(held_sum, held_n, out=np.full(m, np.nan), where=held_n > 0)
    summary = pd.DataFrame({"value": dom, "prior": prior, "bound": bound, "max_posterior": np.maximum(held_max, post[m:]),
                            "mean_posterior": mean, "n_classes": np.full(m, 2),
                            "violations": viol[:m].astype(int) + viol[m:].astype(int)})
    notes.append(f"k-subset selection, k = {k} of m = {m} values, ε = {eps:.4g} (γ = {g:.4g}): a report holding v gives v at "
                 "most πe^ε/(1+(e^ε−1)π)")
    return AuditResult("ldp", release.manifest.get("mechanism", "subset"), claim.bound()["name"], classes, summary, notes)


#: family → {claim model (None: the family's default) → auditor}
_AUDITORS: dict[str, dict[str | None, Any]] = {
    "bucketized": {None: _audit_bucketized},  # a bucket's SA shares vs f' (F'-privacy) or 1/ℓ (ℓ-diversity)
    "randomized": {None: _audit_randomized, "(rho1, rho2)-privacy": _audit_rho_privacy, "global randomization": _audit_uniform,
                   "l'-diverted zero-differential privacy": _audit_diverted},
    "histogram": {None: _audit_histogram},  # ε-DP: the noisy-count ratio, no bound
    "ldp": {None: _audit_ldp},  # ε-LDP subset selection: the posterior of each value per report
}
