"""What a custodian declares about the bundled tables' sensitive values, for tests that publish
them to exercise something else than the disclosure refusal (queries, files, engines).

EDU (education as the sensitive attribute): a custodian protects the degrees and school grades
and declares the three commonest values — children, high-school graduates, some college — as
needing no protection; F'-privacy at θ = 8 leaves exactly those three unbounded (f' = 1), so
the release is the one an undeclared run would make, and publish does not refuse it.
"""

from __future__ import annotations

#: sensitive attribute → the values a custodian declares as needing no protection
NOT_SENSITIVE = {"education": ("Children", "High school graduate", "Some college but no degree")}


def protected(table) -> list[str] | None:
    """The sensitive values of ``table``'s sensitive attribute that need protecting (None: all)."""
    common = NOT_SENSITIVE.get(table.sa)
    if common is None:
        return None
    return [v for v in table.domain(table.sa) if v not in common]
