"""Estimator of the "answers" family: the published noisy answer of each query (unbiased; the
release answers only the workload it was made for).

Uncertainty (exact, closed form): each published answer is the true count plus independent
discrete Laplace noise with parameter ε/m (pmf ∝ α^|k|, α = exp(−ε/m); the certificate states ε
and m), so the standard error is √(2α)/(1 − α) and the interval is count ± k with the smallest
integer k such that P(|noise| ≤ k) = 1 − 2α^(k+1)/(1 + α) ≥ level: it covers the true count with
probability at least ``level`` for every table, the noise being the only randomness.

A query is matched to the published one that selects the same domain values (its resolved
masks), however it is written: ``a = 'x' AND b = 'y'`` finds ``b IN ('y') AND a = 'x'``.
"""

from __future__ import annotations

import json
import math
import weakref

import numpy as np

from ..errors import QueryError, ReleaseError
from ..queries import Query
from .base import Estimates, Estimator

_KEYS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _key(mask: dict) -> tuple:
    return tuple(sorted((c, np.packbits(m).tobytes()) for c, m in mask.items() if not m.all()))


def noise_alpha(release) -> float:
    """α = exp(−ε/m) of the release's discrete Laplace noise, from its certificate."""
    cert = release.certificate
    try:
        eps, m = float(cert["epsilon"]), int(cert["n_queries"])
    except (KeyError, TypeError, ValueError):
        raise ReleaseError("the certificate does not state epsilon and n_queries (the noise scale)") from None
    if not (eps > 0 and m >= 1):
        raise ReleaseError(f"the certificate's epsilon {eps} / n_queries {m} give no noise scale")
    return math.exp(-eps / m)


def laplace_halfwidth(alpha: float, level: float) -> int:
    """Smallest integer k with P(|X| ≤ k) ≥ level for discrete Laplace X with parameter α."""
    if alpha <= 0:
        return 0
    k = math.ceil(math.log((1 - level) * (1 + alpha) / 2) / math.log(alpha)) - 1
    k = max(k, 0)
    while 1 - 2 * alpha ** (k + 1) / (1 + alpha) < level:  # guard the rounding of the logarithms
        k += 1
    while k > 0 and 1 - 2 * alpha ** k / (1 + alpha) >= level:
        k -= 1
    return k


class Lookup(Estimator):
    """The release's own noisy answer for every query of the workload."""

    name = "lookup"
    family = "answers"

    def __init__(self) -> None:
        self._set_params(locals())

    def answer(self, release, workload) -> np.ndarray:
        table = _KEYS.get(release)
        if table is None:
            held = [Query.from_json(json.loads(k)) for k in release.keys()]
            _, masks = release.resolve(held)
            table = _KEYS[release] = {_key(mk): v for mk, v in zip(masks, release.counts())}
        wl, masks = release.resolve(workload)
        out = np.empty(len(masks), dtype=np.float64)
        for i, mk in enumerate(masks):
            v = table.get(_key(mk))
            if v is None:
                raise QueryError(f"this release answers only its own workload; {str(wl[i])!r} is not in it")
            out[i] = v
        return out

    def estimate(self, release, workload, level: float = 0.95) -> Estimates:
        est = self.answer(release, workload)
        alpha = noise_alpha(release)
        se = math.sqrt(2 * alpha) / (1 - alpha)
        k = laplace_halfwidth(alpha, level)
        method = (f"exact: discrete Laplace noise (α = exp(−ε/m) = {alpha:.6g}, se = √(2α)/(1−α)); interval ± {k}, "
                  f"P(|noise| ≤ {k}) ≥ {level}")
        return Estimates(est, np.full(len(est), se), est - k, est + k, method, level)


__all__ = ["Lookup", "noise_alpha", "laplace_halfwidth"]
