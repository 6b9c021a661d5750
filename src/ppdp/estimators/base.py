"""The estimator base class. Estimators: immutable parameter objects with one signature for every release family.

``release.answer(workload, estimator=None | "name" | Estimator)``: ``None`` takes the
mechanism's default, a name is looked up in the registry for the release's family, an
:class:`Estimator` object is used as given. Each family's estimators live in a sibling module
and register themselves when defined.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import stats

from ..registry import register_estimator
from ..validation import Parametrized, check_level


INTERVAL_KINDS = ("confidence", "certain", "none")


@dataclass(frozen=True)
class Estimates:
    """Estimated counts with their uncertainty, one entry per query.

    ``se``: standard error of each estimate; ``lower``/``upper``: the two-sided interval at
    ``level``; ``method``: how the uncertainty was obtained, in words (closed form and its
    source, or parametric bootstrap with its replicate count), as shown to the receiver.
    An estimator that cannot quantify its uncertainty returns NaN ``se`` and bounds and says so
    in ``method``.

    ``kind`` says what the interval promises, for every answer of the call:

    - ``"confidence"``: covers the true count with probability ``level`` over the mechanism's
      randomness (checked against real tables' true counts by ``tests/contract/test_coverage_*``);
    - ``"certain"``: the true count lies in ``[lower, upper]`` with certainty (bounds implied by
      the release itself; ``level`` does not apply);
    - ``"none"``: no interval (NaN bounds), the reason in ``method``."""

    estimate: np.ndarray
    se: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    method: str
    level: float = 0.95
    kind: str = "confidence"

    def __post_init__(self) -> None:
        if self.kind not in INTERVAL_KINDS:
            raise ValueError(f"interval kind must be one of {', '.join(INTERVAL_KINDS)}, not {self.kind!r}")

    @classmethod
    def normal(cls, estimate, se, method: str, level: float = 0.95) -> Estimates:
        """Normal-approximation interval estimate ± z·se."""
        est = np.asarray(estimate, dtype=np.float64)
        se = np.broadcast_to(np.asarray(se, dtype=np.float64), est.shape).copy()
        z = float(stats.norm.ppf(0.5 + level / 2))
        return cls(est, se, est - z * se, est + z * se, method, level)

    def __len__(self) -> int:
        return len(self.estimate)


class Estimator(Parametrized):
    """Base class. ``family``: the release family it reads; ``mechanisms``: the mechanism
    names it applies to (empty: every mechanism of the family)."""

    name: ClassVar[str] = ""
    family: ClassVar[str] = ""
    mechanisms: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kw: Any):
        super().__init_subclass__(**kw)
        if cls.__dict__.get("name"):
            cls._check_constraint_table()
            register_estimator(cls)

    def __init__(self) -> None:
        self._set_params(locals())

    def supports(self, release) -> bool:
        return release.family == self.family and (not self.mechanisms or release.manifest.get("mechanism") in self.mechanisms)

    def answer(self, release, workload) -> np.ndarray:
        """Estimated counts (float64, one per query)."""
        raise NotImplementedError

    def estimate(self, release, workload, level: float = 0.95) -> Estimates:
        """Estimated counts with standard errors and ``level`` intervals. Estimators override
        this; the base answers with unknown (NaN) uncertainty."""
        est = np.asarray(self.answer(release, workload), dtype=np.float64)
        nan = np.full(est.shape, np.nan)
        return Estimates(est, nan, nan.copy(), nan.copy(), "uncertainty not quantified", level, kind="none")


__all__ = ["INTERVAL_KINDS", "Estimates", "Estimator", "check_level"]
