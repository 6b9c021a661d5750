"""Error types. Every user-facing error is a ``ValueError`` subclass (SPEC §7)."""

from __future__ import annotations


class PpdpError(ValueError):
    """Bad input or an infeasible request: one clear message, nothing written."""


class ParameterError(PpdpError):
    """A mechanism or estimator parameter is out of its declared constraints.

    ``param`` names the parameter (Python spelling); the CLI rewrites it to the flag."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


class SchemaError(PpdpError):
    """Unknown column, bad role, bad domain or missing value policy violated."""


class InfeasibleError(PpdpError):
    """The privacy requirement cannot be met on this table (e.g. f'_i < f_i)."""


class DisclosureError(InfeasibleError):
    """The release would disclose a sensitive value of some records with certainty.

    ``exposed``: sensitive value → records disclosed; ``n_records``: records published."""

    def __init__(self, message: str, exposed=None, n_records: int = 0):
        super().__init__(message)
        self.exposed = dict(exposed or {})
        self.n_records = int(n_records)


class QueryError(PpdpError):
    """A query names an unknown attribute or value, or cannot be parsed."""


class ReleaseError(PpdpError):
    """A release directory is missing, malformed or of an unknown format."""
