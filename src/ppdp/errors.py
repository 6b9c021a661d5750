"""Error types. Every user-facing error is a ``ValueError`` subclass (SPEC §7)."""


class PpdpError(ValueError):
    """Bad input or an infeasible request: one clear message, nothing written."""


class SchemaError(PpdpError):
    """Unknown column, bad role, bad domain or missing value policy violated."""


class InfeasibleError(PpdpError):
    """The privacy requirement cannot be met on this table (e.g. f'_i < f_i)."""


class QueryError(PpdpError):
    """A query names an unknown attribute or value, or cannot be parsed."""


class ReleaseError(PpdpError):
    """A release directory is missing, malformed or of an unknown format."""
