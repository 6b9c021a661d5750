"""Heuristic multi-size bucketing, Algorithm 2 of Wang, Wang, Fu, Wong (2011), §5.2.

MultiSizeBucketing(T, B): find the optimal two-size setting ⟨B1, B2⟩ for T (Algorithm 1); if
Loss(B1 ∪ B2) < Loss(B), split T by RecordPartition into T1 (for B1) and T2 (for B2) and recur
on (T1, B1) and (T2, B2); otherwise keep (T, B). Every recursion works on a sub-table T_j
that exactly fills its one-size bucket set B_j, with the same F', M and M'.

The first call has B = one bucket holding all of T (valid by Lemma 1; loss (|T| − 1)²), so
the first split is TwoSizeBucketing's answer and MultiSize's loss is never above TwoSize's.
The recursion is run with an explicit stack; the final leaves of equal size are merged into
one class (their caps add up) and each class is assigned by round robin.
"""

from __future__ import annotations

import time

import numpy as np

from .assignment import record_partition
from .plan import BucketSetting, SizeClass, classes_loss, make_setting, merge_classes
from .two_size import no_setting_error, prepare_counts, search_present


def multi_size_classes(o, fprime, max_bucket: int = 50) -> tuple[list[SizeClass], dict]:
    """The size classes of Algorithm 2 (not materialised) and search statistics."""
    o_full = np.asarray(o, dtype=np.int64)
    f_full = np.asarray(fprime, dtype=np.float64)
    op, fp, n, M, Mp = prepare_counts(o_full, f_full, max_bucket)
    t0 = time.perf_counter()
    top = search_present(op, fp, n, M, Mp, "full")
    if top is None:
        raise no_setting_error(M, Mp, max_bucket)
    stats = {"M": M, "M_prime": Mp, "two_size_calls": 1, "splits": 0, "two_size_loss": top.loss}
    if top.loss >= (n - 1) ** 2:                     # a single bucket is already best
        return [SizeClass(n, 1, o_full.copy())], stats
    leaves: list[SizeClass] = []
    stack = [(top, o_full)]                          # (two-size result for a sub-table, its counts)
    while stack:
        res, o_part = stack.pop()
        stats["splits"] += 1
        part = record_partition(o_part, f_full, res.S1, res.b1, res.S2, res.b2)
        for cls in part.classes:
            if cls.b == 0:
                continue
            present = cls.n > 0
            size = cls.S * cls.b
            sub = search_present(cls.n[present], f_full[present], size, M, min(Mp, size), "full")
            stats["two_size_calls"] += 1
            if sub is not None and sub.loss < cls.loss:
                stack.append((sub, cls.n))
            else:
                leaves.append(cls)
    stats["leaves"] = len(leaves)
    stats["search_seconds"] = time.perf_counter() - t0
    return merge_classes(leaves), stats


def multi_size_bucketing(o, fprime, max_bucket: int = 50) -> BucketSetting:
    """MultiSizeBucketing (Algorithm 2) → a multi-size :class:`BucketSetting` with its assignment."""
    classes, stats = multi_size_classes(o, fprime, max_bucket)
    stats["loss"] = classes_loss(classes)
    return make_setting(classes, len(np.asarray(o)), "multi-size", None, stats)


__all__ = ["multi_size_bucketing", "multi_size_classes"]
