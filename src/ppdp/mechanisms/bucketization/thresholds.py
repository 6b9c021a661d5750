"""F'-privacy thresholds f'_i (Wang, Wang, Fu, Wong 2011, §3.2; SPEC §2.1).

f'_i = min(1, θ·f_i + b) by default, per-label overrides (e.g. ``{"HIV": 0.05}``), and
f'_i = 1 for values outside ``sensitive`` when that set is given. Lemma 1: a bucketization
satisfying F'-privacy exists iff f'_i ≥ f_i for every value; otherwise :class:`InfeasibleError`
names the offending values.
"""

from __future__ import annotations

import math
from typing import Collection, Mapping, Sequence

import numpy as np

from ...errors import InfeasibleError
from .plan import privacy_cap


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def fprime_thresholds(counts: np.ndarray, labels: Sequence[str], theta: float = 8.0, floor: float = 0.02,
                      overrides: Mapping[str, float] | None = None,
                      sensitive: Collection[str] | None = None) -> np.ndarray:
    """Thresholds f'_i (float64, one per label) for SA counts ``counts`` (o_i, in label order).

    Raises :class:`InfeasibleError` for an override naming an unknown label or outside (0, 1],
    an unknown label in ``sensitive``, bad θ / b, or when some f'_i < f_i (Lemma 1).
    """
    o = np.asarray(counts, dtype=np.int64)
    labels = [str(x) for x in labels]
    if o.ndim != 1 or len(o) != len(labels):
        raise InfeasibleError(f"need one SA count per label: {o.shape} counts for {len(labels)} labels")
    if (o < 0).any():
        raise InfeasibleError("SA counts must be non-negative")
    n = int(o.sum())
    if n <= 0:
        raise InfeasibleError("the table is empty: no thresholds to compute")
    if not _is_number(theta) or not math.isfinite(theta) or theta <= 0:
        raise InfeasibleError(f"theta must be a finite number > 0, got {theta!r}")
    if not _is_number(floor) or not math.isfinite(floor) or not 0 <= floor <= 1:
        raise InfeasibleError(f"floor b must be a number in [0, 1], got {floor!r}")
    index = {lab: i for i, lab in enumerate(labels)}

    f = o / n
    fp = np.minimum(1.0, float(theta) * f + float(floor))
    if sensitive is not None:
        sens = {str(s) for s in sensitive}
        unknown = sorted(sens - index.keys())
        if unknown:
            raise InfeasibleError(f"sensitive values not in the SA domain: {', '.join(map(repr, unknown))}")
        mask = np.array([lab not in sens for lab in labels], dtype=bool)
        fp[mask] = 1.0
    if overrides:
        bad_label = sorted(str(k) for k in overrides if str(k) not in index)
        if bad_label:
            raise InfeasibleError(f"threshold overrides name values not in the SA domain: {', '.join(map(repr, bad_label))}"
                                  f" (known: {', '.join(map(repr, labels[:10]))}{', …' if len(labels) > 10 else ''})")
        for k, v in overrides.items():
            if not _is_number(v) or not math.isfinite(v) or not 0 < v <= 1:
                raise InfeasibleError(f"threshold override for {str(k)!r} must be a number in (0, 1], got {v!r}")
            fp[index[str(k)]] = float(v)

    # Lemma 1: feasible iff f'_i ≥ f_i, i.e. o_i ≤ cap(f'_i, |T|) (one bucket holding the whole table)
    bad = np.flatnonzero(o > privacy_cap(fp, n))
    if len(bad):
        shown = ", ".join(f"{labels[i]!r} (f = {f[i]:.4g} > f' = {fp[i]:.4g})" for i in bad[:10])
        more = f" and {len(bad) - 10} more" if len(bad) > 10 else ""
        raise InfeasibleError(f"F'-privacy is infeasible (Lemma 1 needs f'_i ≥ f_i for every value): {shown}{more}; "
                              "raise these thresholds")
    return fp


__all__ = ["fprime_thresholds"]
