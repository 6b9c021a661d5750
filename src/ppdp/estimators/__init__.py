"""Estimators: immutable parameter objects with one signature for every release family.

``release.answer(workload, estimator=None | "name" | Estimator)``: ``None`` takes the
mechanism's default, a name is looked up in the registry for the release's family, an
:class:`Estimator` object is used as given. Each family's estimators live in a sibling module
and register themselves when defined.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..registry import register_estimator
from ..validation import Parametrized


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


__all__ = ["Estimator"]

from . import bucketized  # noqa: E402,F401  (registers the bucketized family's estimators)
