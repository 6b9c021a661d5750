"""F'-privacy bucketization and Anatomy as ppdp mechanisms (SPEC §2.1, §5).

``_publish`` follows statistics → plan → apply: the SA counts o_i of the table give the
thresholds f'_i and a bucket setting (a counts matrix, see ``plan.BucketSetting``); the
setting is applied to the rows (``apply.assign_buckets``), σ fake values are drawn
(``fakes.draw_fakes``) and the QIT/ST files are built (``ppdp.releases.bucketized``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ...errors import InfeasibleError, PpdpError
from ...validation import Flag, Integer, LabelMap, Labels, Optional, Options, Real, Triples
from ..base import Mechanism

METHODS = ("multi-size", "two-size", "optimal")


def _sa_counts(table) -> tuple[str, np.ndarray, tuple[str, ...]]:
    """The table's single SA, its counts o_i and labels; errors for empty / single-valued SA."""
    sa = table.sa  # SchemaError unless exactly one sensitive attribute
    if table.n_rows == 0:
        raise PpdpError("the input table is empty")
    o = table.counts(sa)
    present = np.flatnonzero(o)
    if len(present) < 2:
        raise InfeasibleError(f"the sensitive attribute {sa!r} has a single value ({table.domain(sa)[present[0]]!r}) "
                              "in this table; bucketization cannot hide it")
    return sa, o, table.domain(sa)


class _Bucketized(Mechanism):
    family = "bucketized"
    _cli_names = {"overrides": "--override", "negative_associations": "--negative-association",
                  "sensitive_values": "--sensitive-value", "publish_fake_flag": "--keep-fake-flag/--strip-fake-flag"}

    def _plan(self, o: np.ndarray, labels: Sequence[str]) -> tuple[Any, np.ndarray, dict]:
        raise NotImplementedError

    def _publish(self, table, rng: np.random.Generator):
        sa, o, labels = _sa_counts(table)
        setting, fprime, cert = self._plan(o, labels)
        return publish_setting(table, setting.counts, fprime, cert, rng, self.fake_values,
                               self.negative_associations, self.publish_fake_flag)


class FPrivacy(_Bucketized):
    """F'-privacy bucketization (Wang, Wang, Fu, Wong 2011): f'_i = min(1, θ·f_i + floor),
    overridable per SA label; buckets of several sizes chosen to minimise Σ(|g|−1)².

    ``method``: "multi-size" (Algorithm 2, default), "two-size" (Algorithm 1, optimal among
    two-size settings) or "optimal" (exact MILP with ``time_limit`` seconds).
    ``sensitive_values``: if given, only these SA labels get thresholds; the others f' = 1.
    ``fake_values`` σ: fake SA values injected into every bucket (§6), avoiding values that a
    learned ``negative_associations`` entry (QI column, QI label, SA label) would let an
    adversary exclude. ``publish_fake_flag``: keep the ``fake`` column in st.parquet (for
    verification; a real publication strips it).
    """

    name = "fprivacy"
    claim_model = "F'-privacy"
    paper = "Wang, Wang, Fu, Wong 2011"
    _parameter_constraints = {
        "theta": Real(0, None, closed="neither"),
        "floor": Real(0, 1),
        "overrides": Optional(LabelMap(Real(0, 1, closed="right"), metavar="LABEL=F'")),
        "method": Options(*METHODS),
        "max_bucket": Integer(2, None),
        "fake_values": Integer(0, None),
        "negative_associations": Optional(Triples()),
        "sensitive_values": Optional(Labels()),
        "time_limit": Real(0, None, closed="neither"),
        "publish_fake_flag": Flag(),
    }
    _parameter_help = {
        "theta": "Privacy coefficient θ in f'_i = min(1, θ·f_i + b).",
        "floor": "The constant b in f'_i = min(1, θ·f_i + b).",
        "overrides": "Set one SA value's threshold f' (repeatable).",
        "method": "Bucketing: multi-size (Algorithm 2), two-size (Algorithm 1) or optimal (MILP).",
        "max_bucket": "Largest bucket size M'.",
        "fake_values": "σ fake SA values injected into every bucket.",
        "negative_associations": "Negative association: never inject SA_VALUE as a fake into a bucket holding "
                                 "COLUMN=VALUE (repeatable).",
        "sensitive_values": "Only these SA values are sensitive; the others get f' = 1 (repeatable; default: all).",
        "time_limit": "Seconds for method optimal (MILP).",
        "publish_fake_flag": "Keep the 'fake' column in st.parquet (needed to verify fakes; a real publication strips it).",
    }

    def __init__(self, theta: float = 8.0, floor: float = 0.02, overrides: Mapping[str, float] | None = None,
                 method: str = "multi-size", max_bucket: int = 50, fake_values: int = 0,
                 negative_associations: Sequence[Sequence[str]] | None = None,
                 sensitive_values: Sequence[str] | None = None, time_limit: float = 60.0,
                 publish_fake_flag: bool = True):
        self._set_params(locals())

    def _plan(self, o, labels):
        from .thresholds import fprime_thresholds

        fprime = np.asarray(fprime_thresholds(o, labels, theta=self.theta, floor=self.floor, overrides=self.overrides,
                                              sensitive=self.sensitive_values), dtype=np.float64)
        if self.method == "two-size":
            from .two_size import two_size_bucketing

            setting = two_size_bucketing(o, fprime, max_bucket=self.max_bucket)
        elif self.method == "multi-size":
            from .multi_size import multi_size_bucketing

            setting = multi_size_bucketing(o, fprime, max_bucket=self.max_bucket)
        else:
            from .optimal import optimal_bucketing

            setting = optimal_bucketing(o, fprime, max_bucket=self.max_bucket, time_limit=self.time_limit)
        cert = {"method": self.method}
        if self.method == "optimal":
            cert["proven_optimal"] = bool(setting.proven_optimal)
        return setting, fprime, cert


class Anatomy(_Bucketized):
    """Anatomy (Xiao & Tao 2006): ℓ-diverse buckets of ℓ (or ℓ+1) distinct SA values; the
    baseline of Wang et al. 2011. Eligible only when every SA frequency is ≤ 1/ℓ."""

    name = "anatomy"
    claim_model = "l-diversity"
    paper = "Xiao & Tao 2006"
    _parameter_constraints = {
        "l": Integer(2, None),
        "fake_values": FPrivacy._parameter_constraints["fake_values"],
        "negative_associations": FPrivacy._parameter_constraints["negative_associations"],
        "publish_fake_flag": Flag(),
    }
    _parameter_help = {"l": "ℓ: every bucket holds ℓ (or ℓ+1) distinct SA values.",
                       **{k: FPrivacy._parameter_help[k] for k in ("fake_values", "negative_associations", "publish_fake_flag")}}

    def __init__(self, l: int, fake_values: int = 0, negative_associations: Sequence[Sequence[str]] | None = None,  # noqa: E741
                 publish_fake_flag: bool = True):
        self._set_params(locals())

    def _plan(self, o, labels):
        from .anatomy_plan import anatomy_setting

        distinct = int((o > 0).sum())
        if self.l > distinct:
            raise InfeasibleError(f"ℓ = {self.l} is larger than the number of SA values present ({distinct}); "
                                  "no bucket can hold ℓ distinct values")
        setting = anatomy_setting(o, self.l, labels)
        return setting, np.full(len(o), 1.0 / self.l), {"l": self.l}


def bucketized_certificate(labels: Sequence[str], fprime: np.ndarray, sizes: np.ndarray, n_rows: int, fake_values: int,
                           negative_associations, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The certificate of a bucketized release (thresholds, loss, MSE, size histogram, fakes)."""
    from ...releases.bucketized import bucket_statistics

    cert = {"thresholds": {lab: float(f) for lab, f in zip(labels, fprime)}}
    cert.update(bucket_statistics(sizes, n_rows))
    cert["fake_values"] = int(fake_values)
    cert["negative_associations"] = [list(a) for a in negative_associations or []]
    cert.update(extra)
    return cert


def publish_setting(table, counts: np.ndarray, fprime: np.ndarray, cert_extra: Mapping[str, Any],
                    rng: np.random.Generator, fake_values: int = 0,
                    negative_associations: Sequence[Sequence[str]] | None = None, publish_fake_flag: bool = True):
    """Apply a bucket setting (counts matrix n_buckets × m) to ``table`` and build the release."""
    from ...releases.bucketized import BucketizedRelease, build_tables
    from .apply import assign_buckets
    from .fakes import draw_fakes, negative_association_mask

    sa = table.sa
    for c in table.quasi:
        table.codes(c)  # SchemaError on an unknown column
    bid, counts = assign_buckets(table.codes(sa), counts, rng)
    forbidden = None
    if negative_associations:  # validated even when σ = 0
        forbidden = negative_association_mask(bid, counts.shape[0], {c: table.codes(c) for c in table.quasi},
                                              table.domains, sa, negative_associations)
    fake = draw_fakes(counts, fake_values, rng, forbidden)
    tables = build_tables(table, bid, counts, fake, rng, publish_fake_flag)
    cert = bucketized_certificate(table.domain(sa), fprime, counts.sum(axis=1), table.n_rows, fake_values,
                                  negative_associations, cert_extra)
    manifest = {
        "schema": {"quasi": list(table.quasi), "sensitive": [sa],
                   "domains": {c: list(table.domain(c)) for c in (*table.quasi, sa)}},
        "n_input": table.n_rows,
        "n_published": table.n_rows,
        "dropped": 0,
        "certificate": cert,
    }
    published = (*table.quasi, sa)
    if any(table.numeric_values(c) is not None for c in published):  # numeric values of labels, for BETWEEN
        manifest["schema"]["numeric"] = {c: (None if table.numeric_values(c) is None else table.numeric_values(c).tolist())
                                         for c in published}
    return BucketizedRelease(manifest, tables)


__all__ = ["FPrivacy", "Anatomy", "publish_setting", "bucketized_certificate", "METHODS"]
