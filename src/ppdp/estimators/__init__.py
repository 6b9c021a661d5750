"""Estimators: immutable parameter objects with one signature for every release family.

``release.answer(workload, estimator=None | "name" | Estimator)``; the base class is
:class:`~ppdp.estimators.base.Estimator`, each family's estimators live in a sibling module
and register themselves when defined (importing this package defines them all).
"""

from . import answers, histogram, randomized  # noqa: F401  (define and register the estimators)
from .base import Estimates, Estimator

__all__ = ["Estimates", "Estimator"]

from . import bucketized  # noqa: E402,F401  (registers the bucketized family's estimators)
from . import subset  # noqa: E402,F401  (registers the ldp family's estimators)
