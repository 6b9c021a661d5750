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


__all__ = ["Claim", "claim_class", "claim_of"]
