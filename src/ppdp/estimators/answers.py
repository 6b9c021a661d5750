"""Estimator of the "answers" family: the published noisy answer of each query (unbiased; the
release answers only the workload it was made for)."""

from __future__ import annotations

import numpy as np

from .base import Estimator


class Lookup(Estimator):
    """The release's own noisy answer for every query of the workload."""

    name = "lookup"
    family = "answers"

    def __init__(self) -> None:
        self._set_params(locals())

    def answer(self, release, workload) -> np.ndarray:
        return release.lookup(workload)


__all__ = ["Lookup"]
