"""Bucket settings: the output of every F'-privacy / Anatomy planner (Wang, Wang, Fu, Wong 2011, §3.4).

A plan is computed from the SA counts ``o`` alone (no table rows). It is returned as a
:class:`BucketSetting` whose ``counts[j, i]`` is the number of records with SA code ``i``
placed in bucket ``j``. Every setting a planner returns satisfies

- column sums equal ``o`` (every record is placed exactly once),
- ``counts[j, i] ≤ privacy_cap(f'_i, |g_j|)`` — the share of ``x_i`` in bucket ``g_j`` is at
  most ``f'_i`` (Definition 2, F'-privacy),
- no empty bucket.

``privacy_cap(f, S)`` is ``⌊f·S⌋`` computed so that it agrees exactly with the test
``c / S ≤ f`` in floating point (it lives with the claim, :mod:`ppdp.claims.fprivacy`).

:class:`SACounts` (the sufficient statistics) and :class:`BucketizationPlan` (what an engine
applies) are the public, typed halves of the plan/apply split (SPEC §6).

Internally the planners work with *size classes* (:class:`SizeClass`: ``b`` buckets of size
``S`` holding ``n_i`` records of each value, with ``n_i ≤ cap_i(S)·b``); a class is turned
into per-bucket counts by round-robin assignment (§4.1), which keeps every bucket within the
cap (Lemma 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ...claims import Claim
from ...claims.fprivacy import privacy_cap
from ...errors import InfeasibleError, PpdpError
from ...releases.bucketized import bucket_statistics
from ...validation import FrozenDict


def min_bucket_size(o: np.ndarray, fprime: np.ndarray) -> int:
    """M = min_i ⌈1/f'_i⌉ over the SA values present (o_i > 0), with ⌈1/f'⌉ computed via the cap.

    Every bucket holds at least one record of a present value x_i, and a bucket of size S can
    hold one only if cap(f'_i, S) ≥ 1; values absent from the table constrain nothing.
    """
    o = np.asarray(o)
    f = np.asarray(fprime, dtype=np.float64)[o > 0]
    if len(f) == 0:
        raise PpdpError("the table is empty: no bucket setting to plan")
    if (f <= 0).any():
        raise InfeasibleError("a value present in the table has threshold f' = 0; no bucket can hold it")
    s = np.ceil(1.0 / f)
    s = np.where(privacy_cap(f, s - 1) >= 1, s - 1, s)
    s = np.where(privacy_cap(f, s) >= 1, s, s + 1)
    return int(max(1, s.min()))


@dataclass(frozen=True)
class SizeClass:
    """``b`` buckets of size ``S`` holding ``n[i]`` records of SA value ``i`` (Σ n = S·b)."""

    S: int
    b: int
    n: np.ndarray

    @property
    def loss(self) -> int:
        return int(self.b) * (int(self.S) - 1) ** 2


def _round_robin_into(out: np.ndarray, n: np.ndarray, offset: int = 0) -> None:
    """Write the RRA counts of ``n`` into ``out`` (m × b, value-major)."""
    b = out.shape[1]
    start = (offset + np.concatenate(([0], np.cumsum(n)[:-1]))) % b
    q, r = np.divmod(n, b)
    out[:] = q[:, None]
    # x_i's remaining r_i records go to the cyclic run of buckets start_i, …, start_i + r_i − 1
    for i in np.flatnonzero(r).tolist():
        s, e = int(start[i]), int(start[i] + r[i])
        out[i, s:min(e, b)] += 1
        if e > b:
            out[i, :e - b] += 1


def round_robin_counts(n: np.ndarray, b: int, offset: int = 0) -> np.ndarray:
    """Counts matrix (b × m) of the Round-Robin Assignment (§4.1) of ``n[i]`` records per value
    to ``b`` buckets: the t-th record of x_i (t = 0, 1, …) goes to bucket
    ``(offset + n_1 + … + n_{i−1} + t) mod b``. Each bucket receives ⌊n_i/b⌋ or ⌈n_i/b⌉ records
    of x_i, and bucket sizes differ by at most one (all equal when b divides Σ n). Vectorised:
    O(b·m), the size of the output (built value-major and returned as its transpose).
    """
    n = np.asarray(n, dtype=np.int64)
    b = int(b)
    out = np.empty((len(n), max(b, 0)), dtype=np.int64)
    if b > 0:
        _round_robin_into(out, n, offset)
    return out.T


def classes_to_counts(classes: Iterable[SizeClass], m: int) -> np.ndarray:
    """Per-bucket counts of a list of size classes (round robin inside each class), buckets of
    the classes in the given order. Returned as the transpose of a value-major array (each
    value's counts are contiguous, which is what applying the plan to rows reads)."""
    classes = [c for c in classes if c.b > 0]
    total = int(sum(int(c.b) for c in classes))
    out = np.empty((m, total), dtype=np.int64)
    pos = 0
    for c in classes:
        _round_robin_into(out[:, pos:pos + int(c.b)], np.asarray(c.n, dtype=np.int64))
        pos += int(c.b)
    return out.T


def class_types(c: SizeClass, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The round-robin counts of one class as bucket *types* with multiplicities: the rows of
    :func:`classes_to_counts` for this class, run-length encoded. A bucket j of the class gets
    ⌊n_i/b⌋ + [j in x_i's cyclic run] records of x_i, so runs change only at the ≤ 2m run ends
    and a class has at most 2m + 1 types, whatever b (O(m²) work, independent of N)."""
    n = np.asarray(c.n, dtype=np.int64)
    b = int(c.b)
    start = (np.cumsum(n) - n) % b
    q, r = np.divmod(n, b)
    cuts = np.unique(np.concatenate(([0, b], start[r > 0], (start[r > 0] + r[r > 0]) % b)))
    lo, hi = cuts[:-1], cuts[1:]
    keep = hi > lo
    lo, hi = lo[keep], hi[keep]
    types = q[None, :] + (((lo[:, None] - start[None, :]) % b) < r[None, :])
    return types.astype(np.int64), (hi - lo).astype(np.int64)


def classes_to_types(classes: Iterable[SizeClass], m: int) -> tuple[np.ndarray, np.ndarray]:
    """(types, multiplicity) whose expansion ``np.repeat(types, multiplicity, axis=0)`` is
    :func:`classes_to_counts` — the bucket setting without one row per bucket."""
    parts = [class_types(c, m) for c in classes if c.b > 0]
    if not parts:
        return np.zeros((0, m), dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate([t for t, _ in parts]), np.concatenate([k for _, k in parts])


def compress_rows(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Run-length encoding of a dense (n_buckets × m) counts matrix: consecutive equal rows
    become one type with its multiplicity."""
    counts = np.asarray(counts)
    if counts.ndim != 2 or len(counts) == 0:
        return counts, np.ones(len(counts), dtype=np.int64)
    new = np.ones(len(counts), dtype=bool)
    new[1:] = (counts[1:] != counts[:-1]).any(axis=1)
    first = np.flatnonzero(new)
    return counts[first], np.diff(np.append(first, len(counts))).astype(np.int64)


def expand_types(types: np.ndarray, multiplicity: np.ndarray) -> np.ndarray:
    """The dense (n_buckets × m) counts matrix of a typed setting (memory Θ(n_buckets·m):
    for small settings, tests and engines that need one row per bucket)."""
    return np.repeat(np.asarray(types, dtype=np.int64), np.asarray(multiplicity, dtype=np.int64), axis=0)


def merge_classes(classes: Iterable[SizeClass]) -> list[SizeClass]:
    """Merge classes of equal size (caps are additive: n ≤ cap·b and n' ≤ cap·b' give
    n + n' ≤ cap·(b + b')), ordered by size."""
    by_size: dict[int, SizeClass] = {}
    for c in classes:
        if c.b <= 0:
            continue
        if c.S in by_size:
            old = by_size[c.S]
            by_size[c.S] = SizeClass(c.S, old.b + c.b, old.n + c.n)
        else:
            by_size[c.S] = SizeClass(int(c.S), int(c.b), np.asarray(c.n, dtype=np.int64).copy())
    return [by_size[s] for s in sorted(by_size)]


@dataclass(frozen=True, eq=False)
class BucketSetting:
    """A bucket setting with its record assignment (see the module docstring), stored as a few
    bucket *types* with multiplicities: bucket rows ``np.repeat(types, multiplicity, axis=0)``.

    ``types``: int64 (n_types × m) — a dense counts matrix (one row per bucket) is accepted
    and run-length encoded; ``method``: "two-size" | "multi-size" | "optimal" | "anatomy" | …;
    ``proven_optimal``: for "optimal", whether the MILP proved optimality; ``info``: method
    details (sizes and counts of the classes, solver status, gap, time …); ``multiplicity``:
    buckets of each type (None: one each).
    """

    types: np.ndarray
    method: str
    proven_optimal: bool | None = None
    info: dict = field(default_factory=dict)
    multiplicity: np.ndarray | None = None

    def __post_init__(self):
        types = np.asarray(self.types, dtype=np.int64)
        if self.multiplicity is None:
            types, mult = compress_rows(types)
        else:
            mult = np.asarray(self.multiplicity, dtype=np.int64)
        object.__setattr__(self, "types", types)
        object.__setattr__(self, "multiplicity", mult)

    @property
    def counts(self) -> np.ndarray:
        """The dense counts matrix (n_buckets × m; memory Θ(n_buckets·m))."""
        return expand_types(self.types, self._mult)

    @property
    def _mult(self) -> np.ndarray:
        assert self.multiplicity is not None
        return self.multiplicity

    @property
    def sizes(self) -> np.ndarray:
        return np.repeat(self.types.sum(axis=1), self._mult)

    @property
    def n_buckets(self) -> int:
        return int(self._mult.sum())

    @property
    def n_records(self) -> int:
        return int((self.types.sum(axis=1) * self._mult).sum())

    @property
    def loss(self) -> int:
        """Loss = Σ_g (|g| − 1)² (eq 2)."""
        s = self.types.sum(axis=1)
        return int((((s - 1) ** 2) * self._mult).sum())

    def mse(self, n: int | None = None) -> float:
        """MSE = Loss / (|T| − 1) (eq 1); ``n`` defaults to the number of records placed."""
        n = self.n_records if n is None else int(n)
        return 0.0 if n <= 1 else self.loss / (n - 1)

    def size_histogram(self) -> dict[int, int]:
        """{bucket size: number of buckets of that size}."""
        out: dict[int, int] = {}
        for s, k in zip(self.types.sum(axis=1).tolist(), self._mult.tolist()):
            if k:
                out[int(s)] = out.get(int(s), 0) + int(k)
        return dict(sorted(out.items()))

    def problems(self, o: np.ndarray, fprime: np.ndarray | None = None) -> list[str]:
        """What is wrong with this setting for SA counts ``o`` and thresholds ``fprime`` (empty if nothing)."""
        return check_setting(self.types, o, fprime, self._mult)

    def __repr__(self) -> str:
        return (f"BucketSetting(method={self.method!r}, n_buckets={self.n_buckets}, loss={self.loss}, "
                f"sizes={self.size_histogram()}, proven_optimal={self.proven_optimal})")


def check_setting(counts: np.ndarray, o: np.ndarray, fprime: np.ndarray | None = None,
                  multiplicity: np.ndarray | None = None) -> list[str]:
    """Check column sums, no empty bucket and (if ``fprime`` is given) the F'-privacy bound.
    ``counts`` is one row per bucket, or one row per bucket type with ``multiplicity``."""
    counts = np.asarray(counts)
    o = np.asarray(o, dtype=np.int64)
    out = []
    if counts.ndim != 2 or counts.shape[1] != len(o):
        return [f"counts has shape {counts.shape}, expected (n_buckets, {len(o)})"]
    mult = np.ones(len(counts), dtype=np.int64) if multiplicity is None else np.asarray(multiplicity, dtype=np.int64)
    if mult.shape != (len(counts),) or (mult < 0).any():
        return [f"multiplicity has shape {mult.shape} or negative entries, expected {len(counts)} non-negative counts"]
    counts, mult = counts[mult > 0], mult[mult > 0]
    if (counts < 0).any():
        out.append("negative counts")
    if not np.array_equal((counts.astype(np.int64) * mult[:, None]).sum(axis=0), o):
        out.append("column sums differ from the SA counts")
    sizes = counts.sum(axis=1)
    if (sizes == 0).any():
        out.append(f"{int(mult[sizes == 0].sum())} empty bucket(s)")
    if fprime is not None and counts.shape[0]:
        cap = privacy_cap(np.asarray(fprime)[None, :], sizes[:, None])
        bad = counts > cap
        if bad.any():
            j, i = np.argwhere(bad)[0]
            j_bucket = int(mult[:j].sum())
            n_bad = int((bad.sum(axis=1) * mult).sum())
            out.append(f"{n_bad} (bucket, value) pair(s) over f': e.g. bucket {j_bucket} holds {counts[j, i]} of "
                       f"{sizes[j]} records of value {i} (f' = {float(fprime[i]):.6g})")
    return out


def make_setting(classes: Sequence[SizeClass], m: int, method: str, proven_optimal: bool | None = None,
                 info: dict | None = None) -> BucketSetting:
    """Materialise size classes into a :class:`BucketSetting` (buckets ordered by class)."""
    classes = [c for c in classes if c.b > 0]
    info = dict(info or {})
    info.setdefault("classes", [{"S": int(c.S), "b": int(c.b)} for c in classes])
    types, mult = classes_to_types(classes, m)
    return BucketSetting(types, method, proven_optimal, info, mult)


def classes_loss(classes: Iterable[SizeClass]) -> int:
    return int(sum(c.loss for c in classes))


def _readonly(a, dtype) -> np.ndarray:
    a = np.array(a, dtype=dtype, copy=True)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class SACounts:
    """Sufficient statistics of bucketization: the SA column's name, its labels (domain order)
    and the counts o_i of the input table (from a :class:`~ppdp.table.Table`, a Spark
    ``groupBy`` or any other source)."""

    sa: str
    labels: tuple[str, ...]
    counts: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "labels", tuple(str(x) for x in self.labels))
        object.__setattr__(self, "counts", _readonly(self.counts, np.int64))
        if self.counts.ndim != 1 or len(self.counts) != len(self.labels):
            raise PpdpError(f"need one SA count per label: {self.counts.shape} counts for {len(self.labels)} labels")
        if (self.counts < 0).any():
            raise PpdpError("SA counts must be non-negative")
        if self.n == 0:
            raise PpdpError("the input table is empty")
        present = np.flatnonzero(self.counts)
        if len(present) < 2:
            raise InfeasibleError(f"the sensitive attribute {self.sa!r} has a single value "
                                  f"({self.labels[present[0]]!r}) in this table; bucketization cannot hide it")

    @classmethod
    def of_table(cls, table) -> "SACounts":
        sa = table.sa  # SchemaError unless exactly one sensitive attribute
        if table.n_rows == 0:
            raise PpdpError("the input table is empty")
        return cls(sa, table.domain(sa), table.counts(sa))

    @property
    def n(self) -> int:
        return int(self.counts.sum())


@dataclass(frozen=True, eq=False)
class BucketizationPlan:
    """Everything an engine needs to write a bucketized release, computed from :class:`SACounts`
    alone: the bucket setting as bucket ``types`` (n_types × m) with their ``multiplicity`` —
    bucket rows ``np.repeat(types, multiplicity, axis=0)`` in planner order, row j holding
    ``counts[j, i]`` records of SA value i (the engine relabels buckets at random) — σ fake
    values per bucket, the negative associations fakes must respect, the typed ``claim`` and
    the certificate's descriptive ``details`` (method, proven_optimal). A dense counts matrix
    (one row per bucket, ``multiplicity`` None) is accepted and run-length encoded; the plan's
    size is O(n_types·m), independent of N. :attr:`counts` expands it (for small plans)."""

    sa: str
    labels: tuple[str, ...]
    sa_counts: np.ndarray
    thresholds: np.ndarray
    types: np.ndarray
    claim: Claim
    fake_values: int = 0
    negative_associations: tuple[tuple[str, str, str], ...] = ()
    details: Mapping[str, Any] = field(default_factory=FrozenDict)
    multiplicity: np.ndarray | None = None

    def __post_init__(self):
        object.__setattr__(self, "labels", tuple(str(x) for x in self.labels))
        object.__setattr__(self, "sa_counts", _readonly(self.sa_counts, np.int64))
        object.__setattr__(self, "thresholds", _readonly(self.thresholds, np.float64))
        types = np.asarray(self.types, dtype=np.int64)
        if self.multiplicity is None:
            types, mult = compress_rows(types)
        else:
            mult = np.asarray(self.multiplicity, dtype=np.int64)
        keep = mult > 0 if mult.ndim == 1 and len(mult) == len(types) else slice(None)
        object.__setattr__(self, "types", _readonly(types[keep], np.int64))
        object.__setattr__(self, "multiplicity", _readonly(mult[keep], np.int64))
        object.__setattr__(self, "negative_associations",
                           tuple(tuple(str(x) for x in a) for a in self.negative_associations or ()))
        object.__setattr__(self, "details", FrozenDict(self.details or {}))
        problems = check_setting(self.types, self.sa_counts, self.thresholds, self.multiplicity)
        if problems:
            raise InfeasibleError(f"the bucket setting does not fit the SA counts and thresholds: {'; '.join(problems)}")

    @property
    def _mult(self) -> np.ndarray:
        assert self.multiplicity is not None
        return self.multiplicity

    @property
    def counts(self) -> np.ndarray:
        """The dense counts matrix (n_buckets × m, read-only; memory Θ(n_buckets·m))."""
        return _readonly(expand_types(self.types, self._mult), np.int64)

    @property
    def n_records(self) -> int:
        return int(self.sa_counts.sum())

    @property
    def n_buckets(self) -> int:
        return int(self._mult.sum())

    @property
    def type_sizes(self) -> np.ndarray:
        return self.types.sum(axis=1)

    @property
    def sizes(self) -> np.ndarray:
        return np.repeat(self.type_sizes, self._mult)

    def certificate(self, sizes: np.ndarray | None = None) -> dict[str, Any]:
        """The manifest certificate: the claim, the bucket statistics, σ, the associations and details."""
        cert = self.claim.to_certificate()
        cert.update(bucket_statistics(self.sizes if sizes is None else sizes, self.n_records))
        cert["fake_values"] = int(self.fake_values)
        cert["negative_associations"] = [list(a) for a in self.negative_associations]
        cert.update(dict(self.details))
        return cert


__all__ = ["SACounts", "BucketizationPlan", "BucketSetting", "SizeClass", "privacy_cap", "min_bucket_size", "round_robin_counts", "classes_to_counts",
           "classes_to_types", "class_types", "compress_rows", "expand_types",
           "merge_classes", "check_setting", "make_setting", "classes_loss"]
