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
from ..base import Mechanism, check_positive

METHODS = ("multi-size", "two-size", "optimal")


def _check_sigma(fake_values) -> None:
    if isinstance(fake_values, bool) or not isinstance(fake_values, (int, np.integer)) or fake_values < 0:
        raise PpdpError(f"fake_values must be a whole number ≥ 0, got {fake_values!r}")


def _check_associations(assoc) -> list[list[str]] | None:
    if assoc is None:
        return None
    out = []
    for a in assoc:
        if isinstance(a, str) or len(a) != 3:
            raise PpdpError(f"a negative association is (QI column, QI value, SA value), got {a!r}")
        out.append([str(x) for x in a])
    return out


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

    def __init__(self, theta: float = 8.0, floor: float = 0.02, overrides: Mapping[str, float] | None = None,
                 method: str = "multi-size", max_bucket: int = 50, fake_values: int = 0,
                 negative_associations: Sequence[Sequence[str]] | None = None,
                 sensitive_values: Sequence[str] | None = None, time_limit: float = 60.0,
                 publish_fake_flag: bool = True):
        check_positive("theta", theta)
        if isinstance(floor, bool) or not isinstance(floor, (int, float, np.integer, np.floating)) or not 0 <= floor <= 1:
            raise PpdpError(f"floor must be a number in [0, 1], got {floor!r}")
        if method not in METHODS:
            raise PpdpError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
        check_positive("max_bucket", max_bucket, integer=True, minimum=2)
        _check_sigma(fake_values)
        check_positive("time_limit", time_limit)
        if overrides is not None:
            if not isinstance(overrides, Mapping):
                raise PpdpError(f"overrides must map SA labels to thresholds, got {overrides!r}")
            for k, v in overrides.items():
                if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not 0 < v <= 1:
                    raise PpdpError(f"override for {k!r} must be a threshold in (0, 1], got {v!r}")
        self.theta = float(theta)
        self.floor = float(floor)
        self.overrides = None if overrides is None else {str(k): float(v) for k, v in overrides.items()}
        self.method = method
        self.max_bucket = int(max_bucket)
        self.fake_values = int(fake_values)
        self.negative_associations = _check_associations(negative_associations)
        self.sensitive_values = None if sensitive_values is None else [str(s) for s in sensitive_values]
        self.time_limit = float(time_limit)
        self.publish_fake_flag = bool(publish_fake_flag)
        self._freeze()

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

    def __init__(self, l: int, fake_values: int = 0, negative_associations: Sequence[Sequence[str]] | None = None,  # noqa: E741
                 publish_fake_flag: bool = True):
        check_positive("l", l, integer=True, minimum=2)
        _check_sigma(fake_values)
        self.l = int(l)
        self.fake_values = int(fake_values)
        self.negative_associations = _check_associations(negative_associations)
        self.publish_fake_flag = bool(publish_fake_flag)
        self._freeze()

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
