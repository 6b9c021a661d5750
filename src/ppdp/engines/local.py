"""The local (in-memory NumPy) engine: apply a mechanism's public plan to the rows.

Engines contain no manifest logic and call no private names: they take a typed plan (built by
``mechanism.plan(stats)`` from sufficient statistics) and the per-row inputs, and return the
published columns.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


# ------------------------------------------------------------------------------ randomized family
def apply_randomized(plan, sa_codes: np.ndarray | Sequence[np.ndarray], rng: np.random.Generator):
    """Apply a randomized-family plan per row (vectorised):

    - :class:`~ppdp.mechanisms.randomization.uniform.UniformPlan` → published SA codes;
    - :class:`~ppdp.mechanisms.randomization.sdr.SDRPlan` → (sub-table of every row, published codes);
    - :class:`~ppdp.mechanisms.randomization.diverted.DivertedPlan` (``sa_codes``: one array per
      SA, the kept rows) → one array of published codes per SA.

    The draws are the ones ``ppdp.publish`` makes, in the same order, so a seeded run gives
    the same values."""
    from ..mechanisms.randomization.diverted import DivertedPlan
    from ..mechanisms.randomization.sdr import SDRPlan
    from ..mechanisms.randomization.uniform import UniformPlan

    if isinstance(plan, DivertedPlan):
        return plan.apply([np.asarray(c, dtype=np.int64) for c in sa_codes], rng)
    if isinstance(plan, (UniformPlan, SDRPlan)):
        return plan.apply(np.asarray(sa_codes, dtype=np.int64), rng)
    raise TypeError(f"apply_randomized needs a randomized-family plan, got {type(plan).__name__}")


__all__ = ["apply_randomized"]
