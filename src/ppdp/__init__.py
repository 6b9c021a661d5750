"""ppdp — privacy-preserving data publishing.

    >>> import ppdp
    >>> t = ppdp.datasets.load("edu")
    >>> r = ppdp.publish(t, ppdp.FPrivacy(theta=4))
    >>> ppdp.verify(r).ok
    True

Safe by default: a release disclosing a sensitive value of any record with certainty is
refused (at θ = 8 the three commonest EDU values get f' = 1) unless the values that need
protecting are declared (``sensitive_values=``) or ``allow_disclosure=True`` is given.

Names load on first use (``import ppdp`` itself imports no numerical library), so a command
or a script pays only for what it touches.
"""

from __future__ import annotations

from typing import Any

from .provenance import VERSION as __version__

#: public name → (module, attribute); the attribute None means the module itself
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "datasets": ("datasets", None),
    "publish": ("api", "publish"),
    "verify": ("api", "verify"),
    "ParameterError": ("errors", "ParameterError"),
    "PpdpError": ("errors", "PpdpError"),
    "Query": ("queries", "Query"),
    "Workload": ("queries", "Workload"),
    "answer_exact": ("queries", "answer_exact"),
    "query": ("queries.sql", "query_table"),
    "Release": ("releases.base", "Release"),
    "VerifyReport": ("releases.base", "VerifyReport"),
    "load_release": ("releases.base", "load_release"),
    "load_schema": ("schema", "load_schema"),
    "read_table": ("schema", "read_table"),
    "Schema": ("schema", "Schema"),
    "Table": ("table", "Table"),
}

__all__ = ["__version__", "Table", "publish", "verify", "load_release", "Release", "VerifyReport", "Query", "Workload",
           "answer_exact", "query", "PpdpError", "ParameterError", "datasets", "load_schema", "read_table",
           "Schema"]


def __getattr__(name: str) -> Any:
    """The public names above, imported on first use; mechanism classes (``ppdp.FPrivacy``,
    ``ppdp.DPCube`` …) come from the registry, so each family loads on demand and a new
    mechanism is exported by being defined."""
    import importlib

    if name in _EXPORTS:
        module, attr = _EXPORTS[name]
        mod = importlib.import_module(f"{__name__}.{module}")
        value = mod if attr is None else getattr(mod, attr)
        globals()[name] = value
        return value
    if name[:1].islower() and not name.startswith("_"):  # a submodule (ppdp.registry, ppdp.engines …)
        from importlib.util import find_spec

        if find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f"{__name__}.{name}")
    if name[:1].isupper():
        from .registry import by_class_name

        cls = by_class_name(name)
        if cls is not None:
            return cls
    raise AttributeError(f"module 'ppdp' has no attribute {name!r}")


def __dir__() -> list[str]:
    from .registry import mechanisms

    return sorted(set(globals()) | set(_EXPORTS) | {c.__name__ for c in mechanisms().values()})


if False:  # pragma: no cover - the import graph and type checkers see the public names' modules
    from . import datasets  # noqa: F401
    from .api import publish, verify  # noqa: F401
    from .errors import ParameterError, PpdpError  # noqa: F401
    from .queries import Query, Workload, answer_exact  # noqa: F401
    from .queries.sql import query_table as query  # noqa: F401
    from .releases.base import Release, VerifyReport, load_release  # noqa: F401
    from .schema import Schema, load_schema, read_table  # noqa: F401
    from .table import Table  # noqa: F401
