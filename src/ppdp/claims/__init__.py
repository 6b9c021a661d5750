"""Typed privacy claims: one class per model, stated next to the code that checks it.

A claim is derived from the mechanism's parameters and public statistics at publish time
(``derive``), written once in the manifest as the ``certificate`` (``to_certificate``, with a
``model`` key), and re-derived by ``verify`` from ``params`` and the published files (and the
source table when given) by :meth:`Claim.check`: any disagreement between params, claim and
files is a problem in the report. ``audit`` reads its bounds from the same object
(:meth:`Claim.bound`). Each model lives in a sibling module and registers itself by ``model``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Mapping

from ..errors import ReleaseError

_CLAIMS: dict[str, type["Claim"]] = {}


class Claim:
    """Base class of the typed claims. Subclasses are frozen dataclasses."""

    model: ClassVar[str] = ""

    def __init_subclass__(cls, **kw: Any):
        super().__init_subclass__(**kw)
        if cls.__dict__.get("model"):
            _CLAIMS[cls.model] = cls

    # ---------------------------------------------------------------- manifest form
    def to_certificate(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_certificate(cls, cert: Mapping[str, Any]) -> "Claim":
        raise NotImplementedError

    # ---------------------------------------------------------------- verification
    def check(self, release, report, source=None) -> None:
        """Re-derive the claim from ``release.manifest['params']``, the files (and ``source``)
        and record every disagreement in ``report`` (a :class:`~ppdp.releases.base.VerifyReport`)."""
        raise NotImplementedError

    def agrees_with(self, derived: "Claim", report) -> bool:
        """Record whether this (published) claim equals ``derived``, the claim re-derived from
        params and the files: every field of the certificate form, floats to 1e-9 relative."""
        got, want = self.to_certificate(), derived.to_certificate()
        wrong = sorted(k for k in set(got) | set(want) if not _same(got.get(k), want.get(k)))
        return report.check(not wrong, f"{self.model} claim re-derived from params and files",
                            f"the certificate's {', '.join(wrong)} differ from what params and the files give: "
                            + "; ".join(f"{k} = {want.get(k)!r}, not {got.get(k)!r}" for k in wrong))

    # ---------------------------------------------------------------- audit / words
    def bound(self) -> Mapping[str, Any]:
        """What the claim bounds, for the audit (e.g. SA label → largest allowed posterior)."""
        raise NotImplementedError

    def statement(self) -> str:
        """The claim in plain words (for the CLI, the report and the release README)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- disclosure (SPEC §7)
    def disclosure(self, release) -> dict[str, Any] | None:
        """What ``release`` discloses, computed from its published files alone: the records
        whose SA value a receiver learns with certainty (``records_certain``, and
        ``per_value``: SA label → records), out of ``n_records``, and the largest posterior
        of any SA value for any record (``max_posterior``; None when not computed).

        The default is the randomized and differentially private families': every published
        value has a positive probability under every true value, so no record's SA is
        disclosed with certainty; their largest posterior is left to the family (None).
        Bucketized claims override it (a bucket holding one SA value discloses it)."""
        n = int(release.manifest.get("n_published", 0) or 0)
        return {"records_certain": 0, "n_records": n, "share_certain": 0.0, "per_value": {}, "max_posterior": None}

    def check_disclosure(self, release, report) -> None:
        """verify: the manifest's ``disclosure`` equals the one re-derived from the files (a
        manifest that understates it fails), and a release disclosing a declared sensitive value
        (``sensitive_values``; absent or None: every value) of any record with certainty says
        that its publisher allowed it explicitly (``disclosure_allowed``)."""
        derived = self.disclosure(release)
        if derived is None:
            return
        stated = release.manifest.get("disclosure")
        if not isinstance(stated, Mapping):
            report.check(False, "the manifest states the disclosure", "the manifest lacks 'disclosure' (what the release "
                         "discloses with certainty); it cannot be taken as stated")
            return
        wrong = []
        for key in ("records_certain", "n_records", "per_value"):
            if not _same(stated.get(key), derived.get(key)):
                wrong.append(f"{key} = {derived.get(key)!r}, not {stated.get(key)!r}")
        sm, dm = stated.get("max_posterior"), derived.get("max_posterior")
        if dm is not None and not (isinstance(sm, (int, float)) and not isinstance(sm, bool) and _same(float(sm), dm)):
            wrong.append(f"max_posterior = {dm!r}, not {sm!r}")
        under = (_num(stated.get("records_certain")) < _num(derived.get("records_certain"))
                 or (dm is not None and _num(sm) < dm - 1e-9))
        report.check(not wrong, "disclosure re-derived from the files",
                     f"the manifest's disclosure {'understates' if under else 'differs from'} what the files disclose: "
                     + "; ".join(wrong))
        declared = stated.get("sensitive_values")
        if declared is not None and not (isinstance(declared, list) and all(isinstance(v, str) for v in declared)):
            report.check(False, "the declared sensitive values are a list of labels",
                         f"the manifest's disclosure declares sensitive_values = {declared!r}, not a list of labels")
            return
        exposed = exposed_values(derived, declared)
        in_set = sensitive_set_disclosure(release, declared)
        st_set = stated.get("sensitive_set")
        # stated, or it should be (a streamed plan with fake values does not state it at publish)
        if in_set is not None and (st_set is not None or (in_set["records_certain"] and not getattr(release, "fake_values", 0))):
            said = int(st_set.get("records_certain") or 0) if isinstance(st_set, Mapping) else None
            report.check(said == in_set["records_certain"], "the disclosure of the sensitive values as a set re-derived "
                         "from the files", f"the release discloses that {in_set['records_certain']:,} record(s) hold one "
                         f"of the sensitive values with certainty; the manifest says {said!r}")
        if exposed:
            k = sum(exposed.values())
            report.check(bool(stated.get("disclosure_allowed") is True
                              or (stated.get("full_disclosure_allowed") is True and is_full_disclosure(derived))),
                         "a release disclosing sensitive values with certainty was explicitly allowed",
                         f"the release discloses a sensitive value of {k:,} record(s) with certainty "
                         f"({_values_text(exposed)}) and the manifest does not record that its publisher allowed it "
                         "(disclosure_allowed)")
        else:
            report.check(True, "no sensitive value disclosed with certainty"
                         + ("" if declared is None else f" (sensitive values: {', '.join(declared) or 'none'})"), None)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else float("-inf")


def is_full_disclosure(d: Mapping[str, Any] | None) -> bool:
    """Does disclosure ``d`` disclose the SA of every (of at least one) record?"""
    if not d:
        return False
    n = int(d.get("n_records") or 0)
    return n > 0 and int(d.get("records_certain") or 0) >= n


#: the CLI flag and the API argument that allow a release disclosing sensitive values with certainty
ALLOW_DISCLOSURE_FLAG = "--allow-disclosure"
FULL_DISCLOSURE_FLAG = ALLOW_DISCLOSURE_FLAG  # the former name (a release disclosing every record is one case)
#: the CLI flag declaring a sensitive value (repeatable); the schema key is ``sensitive_values``
SENSITIVE_VALUE_FLAG = "--sensitive-value"


def disclosure_of(release) -> dict[str, Any] | None:
    """The disclosure of ``release`` according to its claim (None when the claim cannot say)."""
    return claim_of(release.manifest).disclosure(release)


def exposed_values(d: Mapping[str, Any] | None, sensitive_values=None) -> dict[str, int]:
    """Sensitive value → records whose value the disclosure ``d`` discloses with certainty, for
    the declared ``sensitive_values`` (None: every value is sensitive)."""
    if not d:
        return {}
    per = d.get("per_value") or {}
    keep = None if sensitive_values is None else {str(v) for v in sensitive_values}
    return {str(v): int(k) for v, k in per.items() if int(k) > 0 and (keep is None or str(v) in keep)}


def declared_sensitive(release, sensitive_values=None) -> list[str] | None:
    """The sensitive values the release is judged against: ``sensitive_values`` when given,
    else those the claim protects (F'-privacy's ``sensitive_values``), else None (all). Labels
    outside the sensitive column's domain raise :class:`~ppdp.errors.ParameterError`."""
    from ..errors import ParameterError

    if sensitive_values is None:
        try:
            sensitive_values = getattr(claim_of(release.manifest), "sensitive_values", None)
        except ReleaseError:
            sensitive_values = None
    if sensitive_values is None:
        return None
    if isinstance(sensitive_values, str):
        sensitive_values = [sensitive_values]
    out = list(dict.fromkeys(str(v) for v in sensitive_values))
    known: set[str] = set()
    schema = release.manifest.get("schema") or {}
    for c in schema.get("sensitive") or []:
        known.update(str(v) for v in ((schema.get("domains") or {}).get(c) or ()))
    unknown = [v for v in out if known and v not in known]
    if unknown:
        raise ParameterError(f"{SENSITIVE_VALUE_FLAG} {unknown[0]!r} is not a value of the sensitive column "
                             f"(values: {', '.join(sorted(known)[:12])}{' …' if len(known) > 12 else ''})",
                             param="sensitive_values")
    return out


def _values_text(exposed: Mapping[str, int], most: int = 5) -> str:
    top = sorted(exposed.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{v}: {k:,}" for v, k in top[:most]) + (f", … ({len(top) - most} more)" if len(top) > most else "")


def sensitive_set_disclosure(release, declared) -> dict[str, Any] | None:
    """Records a receiver knows to hold *one of* the declared sensitive values, though no single
    value is certain: in a bucketized release, the rows of every bucket whose published values
    (fakes included) are all declared sensitive. None when the question does not arise (no
    declaration, fewer than two declared values, every value declared, or not a bucketized
    release). A bucket holding only sensitive values discloses the protected fact itself (on
    Fair's affairs table, "had an affair" for 1,570 of 1,578 women at the default θ = 8) while each
    value's share stays within its bound."""
    import numpy as np

    if declared is None or getattr(release, "family", None) != "bucketized" or not hasattr(release, "buckets"):
        return None
    dom = [str(x) for x in release.domains[release.sa]]
    in_set = np.isin(dom, [str(v) for v in declared])
    if in_set.sum() < 2 or in_set.all():
        return None
    values = [v for v, m in zip(dom, in_set) if m]
    layout: Any = getattr(release, "layout", None)
    if "st" not in release.tables and layout is not None and getattr(layout, "types", None) is not None:
        if getattr(release, "fake_values", 0):  # a streamed plan with fakes: its buckets are not at hand here
            return None
        types = np.asarray(layout.types, dtype=np.float64)  # the block engine's bucket types (real counts) …
        mult = np.asarray(layout.mult, dtype=np.float64)  # … and how many buckets have each
        total, inside = types.sum(axis=1), types[:, in_set].sum(axis=1)
        certain = (total > 0) & (inside >= total - 0.5)
        share = np.divide(inside, total, out=np.zeros(len(total)), where=total > 0)
        return {"records_certain": int((total * mult)[certain].sum()), "values": values,
                "max_posterior": float(share.max()) if len(share) else 0.0}
    if "st" not in release.tables:
        return None
    b = release.buckets()
    sb, sc = np.asarray(b["sb"], dtype=np.int64), np.asarray(b["sc"], dtype=np.int64)
    cnt = np.asarray(b["count"], dtype=np.float64)
    sizes = np.asarray(b["sizes"], dtype=np.int64)
    nb = len(sizes)
    total = np.bincount(sb, weights=cnt, minlength=nb)
    inside = np.bincount(sb, weights=cnt * in_set[sc], minlength=nb)
    certain = (total > 0) & (inside >= total - 0.5)
    share = np.divide(inside, total, out=np.zeros(nb), where=total > 0)
    return {"records_certain": int(sizes[certain].sum()), "values": values,
            "max_posterior": float(share.max()) if nb else 0.0}


def state_disclosure(release, allow_disclosure: bool = False, sensitive_values=None) -> dict[str, Any] | None:
    """Write the release's disclosure into its manifest (``disclosure``, with the declared
    ``sensitive_values``: None means every value is sensitive) and refuse a release that
    discloses a sensitive value of any record with certainty (the claim's :meth:`Claim.disclosure`,
    computed from the files) unless ``allow_disclosure`` (recorded as ``disclosure_allowed``;
    verify re-derives it). Raises :class:`~ppdp.errors.DisclosureError`. Records known with
    certainty to hold *one of* several declared values (:func:`sensitive_set_disclosure`) are
    stated (``sensitive_set``, in the disclosure line publish prints and in the README) and
    re-derived by verify, not refused."""
    from ..errors import DisclosureError

    d = disclosure_of(release)
    if d is None:
        return None
    d = dict(d)
    declared = declared_sensitive(release, sensitive_values)
    d["sensitive_values"] = declared
    exposed = exposed_values(d, declared)
    in_set = sensitive_set_disclosure(release, declared)
    if in_set is not None:
        d["sensitive_set"] = in_set
    if exposed:
        k, n = sum(exposed.values()), int(d.get("n_records") or 0)
        if not allow_disclosure:
            raise DisclosureError(
                f"refused: the release would disclose the sensitive value of {k:,} of {n:,} records with certainty "
                f"({k / max(n, 1):.1%}; {_values_text(exposed)}); either declare the sensitive values and leave out "
                f"those that need no protection ({SENSITIVE_VALUE_FLAG} V for each protected value, sensitive_values "
                f"in the schema or of ppdp.publish), or pass {ALLOW_DISCLOSURE_FLAG} (allow_disclosure=True; recorded "
                "in the manifest) to publish it anyway", exposed=exposed, n_records=n)
        d["disclosure_allowed"] = True
    release.manifest["disclosure"] = d
    return d


def disclosure_statement(d: Mapping[str, Any] | None) -> str:
    """The disclosure in plain words (one or two lines)."""
    if not d:
        return "disclosure: not assessed for this release"
    n = int(d.get("n_records") or 0)
    k = int(d.get("records_certain") or 0)
    mp = d.get("max_posterior")
    post = ("" if mp is None else f"; the largest posterior of any sensitive value for any record is {float(mp):.4g}"
            + (f" ({d['max_posterior_value']})" if d.get("max_posterior_value") is not None else ""))
    in_set = d.get("sensitive_set") or {}
    set_k = int(in_set.get("records_certain") or 0)
    set_text = ("" if not set_k else
                f"; {set_k:,} of {n:,} records ({set_k / max(n, 1):.1%}) are disclosed with certainty to hold one of the "
                f"sensitive values ({', '.join(in_set.get('values') or [])})"
                + (" (explicitly allowed)" if d.get("disclosure_allowed") else ""))
    if k == 0:
        return f"disclosure: no record's sensitive value is disclosed with certainty{set_text}{post}"
    per = d.get("per_value") or {}
    top = sorted(per.items(), key=lambda kv: -kv[1])
    shown = ", ".join(f"{lab}: {c:,}" for lab, c in top[:5]) + (f", … ({len(top) - 5} more values)" if len(top) > 5 else "")
    allowed = " (explicitly allowed)" if d.get("disclosure_allowed") or d.get("full_disclosure_allowed") else ""
    declared = d.get("sensitive_values")
    exposed = exposed_values(d, declared)
    judged = ("" if declared is None else
              f"; of a declared sensitive value ({', '.join(declared) or 'none'}): {sum(exposed.values()):,}"
              if exposed else f"; none of them a declared sensitive value ({', '.join(declared) or 'none'})")
    return (f"disclosure: the release discloses the sensitive value of {k:,} of {n:,} records with certainty "
            f"({k / n:.1%}){allowed} — by value: {shown}{judged}{set_text}{post}")


def claim_class(model: str) -> type[Claim]:
    _load()
    cls = _CLAIMS.get(model)
    if cls is None:
        raise ReleaseError(f"unknown privacy model {model!r} in the certificate; known: {', '.join(_CLAIMS)}")
    return cls


def claim_of(manifest: Mapping[str, Any]) -> Claim:
    """The typed claim written in a release manifest (ReleaseError when malformed)."""
    cert = manifest.get("certificate")
    if not isinstance(cert, Mapping) or not isinstance(cert.get("model"), str):
        raise ReleaseError("the certificate does not name its privacy model")
    try:
        return claim_class(cert["model"]).from_certificate(cert)
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, ReleaseError):
            raise
        raise ReleaseError(f"malformed {cert['model']} certificate: {e}") from None


def _load() -> None:
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


__all__ = ["Claim", "claim_class", "claim_of", "disclosure_of", "state_disclosure", "disclosure_statement",
           "sensitive_set_disclosure",
           "is_full_disclosure", "exposed_values", "declared_sensitive", "FULL_DISCLOSURE_FLAG", "ALLOW_DISCLOSURE_FLAG",
           "SENSITIVE_VALUE_FLAG"]
