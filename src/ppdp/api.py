"""The three verbs of the Python API: publish, load_release, verify."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .claims import state_disclosure
from .errors import PpdpError, ReleaseError
from .kernels.progress import stage
from .kernels.rng import publication_rng
from .provenance import VERSION
from .releases.base import Release, VerifyReport, load_release, recorded_bins
from .releases.custodian import load_custodian
from .releases.base import stamp_manifest as stamp_release

if TYPE_CHECKING:
    from .mechanisms.base import Mechanism
    from .table import Table


def publish(table: Table, mechanism: Mechanism, seed: int | None = None, *,
            sensitive_values: Sequence[str] | None = None, allow_disclosure: bool = False,
            allow_full_disclosure: bool = False, allow_low_utility: bool = False) -> Release:
    """Publish ``table`` under ``mechanism``.

    Without ``seed`` the randomness comes from a cryptographically secure generator
    (AES-128 in counter mode keyed from the OS, :mod:`ppdp.kernels.rng`) and the release is
    fit for publication. With a seed the run is reproducible: the manifest says
    ``fit_for_publication: false`` and the seed is kept only in ``release.custodian`` (saved
    beside the release, never inside it) — anyone knowing it could undo the randomisation.

    The manifest states what the release discloses (``disclosure``: records whose SA value
    the files disclose with certainty, per value and in total, and the largest posterior).
    Safe by default: a release that discloses a *sensitive* value of any record with
    certainty is refused (:class:`~ppdp.errors.DisclosureError`) unless
    ``allow_disclosure=True`` (CLI ``--allow-disclosure``), recorded in the manifest as
    ``disclosure_allowed`` and re-derived by ``verify``. ``sensitive_values`` (CLI
    ``--sensitive-value``, schema ``sensitive_values``) declares which SA values need
    protecting; by default those the mechanism protects (F'-privacy's ``sensitive_values``),
    else every value. ``allow_full_disclosure`` is the former name of ``allow_disclosure``.

    An ε-DP histogram whose noisy total is mostly noise at its ε is refused (InfeasibleError)
    unless ``allow_low_utility=True`` (CLI ``--allow-low-utility``); a release of doubtful use
    carries a plain-words warning in ``manifest["utility"]`` (:func:`ppdp.claims.dp.utility_check`,
    which reads the noisy counts only). Rows left out for a missing value (a column's
    ``missing = "drop"``) are stated in ``manifest["missing_values"]``.
    """
    from .mechanisms.base import Mechanism
    from .table import Table

    if not isinstance(table, Table):
        raise PpdpError(f"publish() needs a ppdp.Table, got {type(table).__name__}")
    if not isinstance(mechanism, Mechanism):
        raise PpdpError(f"publish() needs a ppdp mechanism, got {type(mechanism).__name__}")
    if table.n_rows == 0:
        raise PpdpError("the input table is empty")
    rng = publication_rng(seed)
    with stage(f"publish {mechanism.name}"):
        release = mechanism._publish(table, rng)
    release.manifest.setdefault("n_input", table.n_rows)
    state_disclosure(release, bool(allow_disclosure or allow_full_disclosure), sensitive_values)
    stamp_manifest(release, mechanism, seed)
    bins = recorded_bins(release.domains)
    if bins:  # the edges of every binned column, for receivers and range queries
        release.manifest["schema"]["bins"] = bins
    if release.family == "histogram":
        from .claims.dp import state_utility

        state_utility(release, bool(allow_low_utility))
    if table.missing_dropped:
        _state_missing(release, table.missing_dropped)
    if table.drawn_with_replacement:  # people repeat: independent randomizations of one person add up
        release.manifest["fit_for_publication"] = False
        release.manifest["sampling"] = "with replacement (people repeat): a test release, not fit for publication"
    return release


def _state_missing(release: Release, dropped: Mapping) -> None:
    """Rows left out because a column drops its missing values: every row read is accounted for
    (exact counts outside ε-DP; an ε-DP histogram keeps them in the custodian-side file only —
    an exact count is not differentially private)."""
    info: dict[str, Any] = {"policy": "drop", "columns": sorted(dropped.get("by_column", {}))}
    if release.family == "histogram":
        release.custodian["missing_values"] = dict(dropped)
        info["counts"] = "not published (an exact count is not ε-DP); in the custodian-side file"
    else:
        info.update({"rows_read": int(dropped["rows_read"]), "rows_dropped": int(dropped["rows_dropped"]),
                     "missing_by_column": {c: int(v) for c, v in dropped.get("by_column", {}).items()}})
    release.manifest["missing_values"] = info


def stamp_manifest(release: Release, mechanism: Mechanism, seed: int | None) -> Release:
    """Fill in the manifest fields every release shares (format, mechanism, seed …)."""
    return stamp_release(release, mechanism.name, mechanism.get_params(), seed, VERSION)


def verify(release_or_dir: Release | str | os.PathLike, table: Table | None = None,
           custodian: str | os.PathLike | None = None) -> VerifyReport:
    """Re-check a release's certificate from its files (and, given the source table, that
    every input row is accounted for; given the custodian-side file, what only the custodian
    keeps). Returns a report with ``.ok`` and ``.problems``; a custodian file that cannot be read
    (malformed, or its Parquet sidecar changed, truncated, swapped or missing) is one problem."""
    from .table import Table

    if isinstance(release_or_dir, (str, os.PathLike, Path)):
        release = load_release(release_or_dir)
    elif isinstance(release_or_dir, Release):
        release = release_or_dir
    else:
        raise PpdpError(f"verify() needs a Release or a release directory, got {type(release_or_dir).__name__}")
    if table is not None and not isinstance(table, Table):
        raise PpdpError(f"verify(table=...) needs a ppdp.Table, got {type(table).__name__}")
    if custodian is not None:
        try:
            release.custodian = load_custodian(custodian)
        except ReleaseError as e:  # unreadable, or its sidecar changed / truncated / missing: one problem
            rep = VerifyReport()
            rep.check(False, "the custodian file loads", f"the custodian file cannot be used: {e}")
            rep.facts["custodian"] = "not loaded (nothing was verified)"
            return rep
    if table is not None and isinstance(release.schema.get("domains"), Mapping):
        table = table.over_domains(release.schema["domains"])  # the same rows, coded in the release's label order
    with stage("verify"):
        return release.verify(table)
