"""The Laplace answer baseline of Fu et al. §9.4: answer a batch of m count queries with
ε-differential privacy by adding noise of scale m/ε to each (sensitivity 1 per count,
sequential composition over the m queries, Dwork 2008).

The noise is the hardened discrete Laplace of :mod:`ppdp.kernels.noise` with parameter
ε/m (pmf ∝ exp(−(ε/m)|k|), the integer analogue of Lap(m/ε)); floating-point Laplace draws
are never released (Mironov 2012). A custom ``sampler(rng, epsilon, size)`` may be passed,
e.g. for experiments that compare samplers.
"""

from __future__ import annotations

import numpy as np

from ...errors import PpdpError
from ...kernels.noise import discrete_laplace

__all__ = ["laplace_answers", "laplace_scale"]


def laplace_scale(epsilon: float, m: int) -> float:
    """b = m/ε, the Laplace scale per query for a batch of m queries."""
    if not (isinstance(m, (int, np.integer)) and m >= 1):
        raise PpdpError(f"the batch size m must be an integer ≥ 1, got {m!r}")
    if not epsilon > 0:
        raise PpdpError(f"ε must be > 0, got {epsilon!r}")
    return m / float(epsilon)


def laplace_answers(true_counts, epsilon: float, m: int | None = None, rng=None, sampler=None) -> np.ndarray:
    """Noisy answers to the batch ``true_counts`` (m = its length unless given: the number of
    queries the budget ε is split over). Returns float64 (the noisy integers)."""
    c = np.asarray(true_counts)
    m = int(len(c)) if m is None else m
    laplace_scale(epsilon, m)
    rng = np.random.default_rng(rng)
    sampler = sampler or discrete_laplace
    noise = np.asarray(sampler(rng, float(epsilon) / m, c.shape))
    return c.astype(np.float64) + noise
