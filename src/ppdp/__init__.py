"""ppdp — privacy-preserving data publishing.

    >>> import ppdp
    >>> t = ppdp.datasets.load("edu")
    >>> r = ppdp.publish(t, ppdp.FPrivacy(theta=4))
    >>> ppdp.verify(r).ok
    True

Safe by default: a release disclosing a sensitive value of any record with certainty is
refused (at θ = 8 the three commonest EDU values get f' = 1) unless the values that need
protecting are declared (``sensitive_values=``) or ``allow_disclosure=True`` is given.
"""

from . import datasets
from .api import publish, verify
from .errors import ParameterError, PpdpError
from .provenance import VERSION as __version__
from .queries import Query, Workload, answer_exact
from .queries.sql import query_table as query
from .releases.base import Release, VerifyReport, load_release
from .schema import load_schema, read_table
from .table import Table

__all__ = ["__version__", "Table", "publish", "verify", "load_release", "Release", "VerifyReport", "Query", "Workload",
           "answer_exact", "query", "PpdpError", "ParameterError", "datasets", "load_schema", "read_table"]


def __getattr__(name: str) -> type:
    """Mechanism classes (``ppdp.FPrivacy``, ``ppdp.DPCube`` …) come from the registry, so each
    family loads on demand and a new mechanism is exported by being defined."""
    if name[:1].isupper():
        from .registry import by_class_name

        cls = by_class_name(name)
        if cls is not None:
            return cls
    raise AttributeError(f"module 'ppdp' has no attribute {name!r}")


def __dir__() -> list[str]:
    from .registry import mechanisms

    return sorted(set(globals()) | {c.__name__ for c in mechanisms().values()})
