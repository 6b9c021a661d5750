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
        manifest that understates it fails), and a release disclosing every record says that
        its publisher allowed it explicitly (``full_disclosure_allowed``)."""
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
        if is_full_disclosure(derived):
            report.check(stated.get("full_disclosure_allowed") is True,
                         "a release disclosing every record's SA was explicitly allowed",
                         f"the release discloses the SA of every record ({derived['records_certain']:,}) and the "
                         "manifest does not record that its publisher allowed it (full_disclosure_allowed)")


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


#: the CLI flag and the API argument that allow a release disclosing every record
FULL_DISCLOSURE_FLAG = "--allow-full-disclosure"


def disclosure_of(release) -> dict[str, Any] | None:
    """The disclosure of ``release`` according to its claim (None when the claim cannot say)."""
    return claim_of(release.manifest).disclosure(release)


def state_disclosure(release, allow_full_disclosure: bool = False) -> dict[str, Any] | None:
    """Write the release's disclosure into its manifest (``disclosure``) and refuse a release
    that discloses the SA of every record unless ``allow_full_disclosure`` (recorded in the
    manifest as ``full_disclosure_allowed``). Raises :class:`~ppdp.errors.InfeasibleError`."""
    from ..errors import InfeasibleError

    d = disclosure_of(release)
    if d is None:
        return None
    d = dict(d)
    if is_full_disclosure(d):
        if not allow_full_disclosure:
            raise InfeasibleError(
                f"the release would disclose the sensitive value of every record ({d['records_certain']:,} of "
                f"{d['n_records']:,}, e.g. every bucket holds a single value); change the parameters, or pass "
                f"{FULL_DISCLOSURE_FLAG} (allow_full_disclosure=True) to publish it anyway")
        d["full_disclosure_allowed"] = True
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
    if k == 0:
        return f"disclosure: no record's sensitive value is disclosed with certainty{post}"
    per = d.get("per_value") or {}
    top = sorted(per.items(), key=lambda kv: -kv[1])
    shown = ", ".join(f"{lab}: {c:,}" for lab, c in top[:5]) + (f", … ({len(top) - 5} more values)" if len(top) > 5 else "")
    allowed = " (explicitly allowed)" if d.get("full_disclosure_allowed") else ""
    return (f"disclosure: the release discloses the sensitive value of {k:,} of {n:,} records with certainty "
            f"({k / n:.1%}){allowed} — by value: {shown}{post}")


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
           "is_full_disclosure", "FULL_DISCLOSURE_FLAG"]
