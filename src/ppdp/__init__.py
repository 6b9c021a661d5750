"""ppdp — privacy-preserving data publishing.

    >>> import ppdp
    >>> t = ppdp.datasets.load("edu")
    >>> r = ppdp.publish(t, ppdp.FPrivacy(theta=8))
    >>> ppdp.verify(r).ok
    True
"""

__version__ = "0.1.0"

from . import datasets  # noqa: E402
from .api import publish, verify  # noqa: E402
from .errors import PpdpError  # noqa: E402
from .queries import Query, Workload, answer_exact  # noqa: E402
from .releases.base import Release, VerifyReport, load_release  # noqa: E402
from .table import Table  # noqa: E402

__all__ = ["Table", "publish", "verify", "load_release", "Release", "VerifyReport", "Query", "Workload",
           "answer_exact", "PpdpError", "datasets"]


def __getattr__(name):  # mechanisms are imported lazily so that each family loads on demand
    import importlib

    where = {
        "FPrivacy": "ppdp.mechanisms.bucketization",
        "Anatomy": "ppdp.mechanisms.bucketization",
        "DPCube": "ppdp.mechanisms.histogram",
        "CellHistogram": "ppdp.mechanisms.histogram",
        "Diverted": "ppdp.mechanisms.randomization",
        "SDR": "ppdp.mechanisms.randomization",
        "UniformPerturbation": "ppdp.mechanisms.randomization",
    }
    if name in where:
        return getattr(importlib.import_module(where[name]), name)
    raise AttributeError(f"module 'ppdp' has no attribute {name!r}")
