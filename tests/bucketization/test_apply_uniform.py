"""The writer's random draws are uniform (apply.apply_plan): every assignment of records to
buckets that the plan's counts allow is equally likely, as is every order of a bucket's QIT
rows and of its ST rows, and bucket ids are exchangeable.

A table of 8 records, one QI value per record (so a record can be found in the QIT) and SA
values x0 x0 x1 x1 x2 x2 x3 x3, published by Anatomy with ℓ = 4: two buckets, each one record
of every value. Record r0's bucket-mates are one of the 2·2·2 = 8 triples {r2|r3, r4|r5,
r6|r7}, each with probability 1/8; its place among its bucket's 4 QIT rows is uniform, so is
its bucket id (0 or 1) and x0's place among its bucket's 4 ST rows. Each frequency table is
tested with a χ² test at level 1e-4 (fixed seeds: the outcome is reproducible; the
false-alarm rate of a run with fresh seeds would be ≤ 4e-4 per variant).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import ppdp
from ppdp.mechanisms.bucketization import apply
from ppdp.table import Table

REPS = 1200
LEVEL = 1e-4


def _table() -> Table:
    who = [f"r{i}" for i in range(8)]
    return Table({"who": np.arange(8), "s": np.repeat(np.arange(4), 2)},
                 {"who": who, "s": ["x0", "x1", "x2", "x3"]}, quasi=["who"], sensitive=["s"])


def _uniform(counts: np.ndarray) -> float:
    return float(stats.chisquare(counts).pvalue)


@pytest.mark.slow
@pytest.mark.parametrize("piles", [False, True])
def test_assignment_and_orders_are_uniform(monkeypatch, piles):
    if piles:  # the cache-friendly path of value_random_order (several piles per value) on a tiny table
        monkeypatch.setattr(apply, "PILE_ROWS", 1)
    t = _table()
    mates = np.zeros(8, np.int64)
    place = np.zeros(4, np.int64)
    bucket = np.zeros(2, np.int64)
    st_place = np.zeros(4, np.int64)
    for seed in range(REPS):
        rel = ppdp.publish(t, ppdp.Anatomy(4), seed=10_000 + seed)
        who = np.asarray(rel.tables["qit"].column("who").to_pylist())
        bid = rel.tables["qit"].column("bid").to_numpy()
        i0 = int(np.flatnonzero(who == "r0")[0])
        same = who[bid == bid[i0]]
        assert sorted(same) == sorted(set(same)) and len(same) == 4
        assert "r1" not in same  # the other x0 record is never r0's bucket-mate
        mates[("r3" in same) * 4 + ("r5" in same) * 2 + ("r7" in same)] += 1
        place[i0 - int(np.flatnonzero(bid == bid[i0])[0])] += 1
        bucket[int(bid[i0])] += 1
        sb = rel.tables["st"].column("bid").to_numpy()
        sv = np.asarray(rel.tables["st"].column("s").to_pylist())[sb == 0]
        st_place[int(np.flatnonzero(sv == "x0")[0])] += 1
        assert ppdp.verify(rel, t).ok if seed < 3 else True
    for name, counts in (("bucket-mates", mates), ("place in the QIT bucket", place), ("bucket id", bucket),
                         ("place in the ST bucket", st_place)):
        assert _uniform(counts) > LEVEL, (name, counts.tolist())


@pytest.mark.slow
def test_value_random_order_is_a_uniform_order_within_each_value(monkeypatch):
    monkeypatch.setattr(apply, "PILE_ROWS", 1)
    codes = np.array([1, 0, 1, 0, 0, 1, 0], dtype=np.uint8)  # value 0 at rows 1 3 4 6
    perms: dict[tuple, int] = {}
    for seed in range(4800):
        order, counts = apply.value_random_order(codes, 2, np.random.default_rng(seed))
        assert counts.tolist() == [4, 3]
        assert sorted(order[:4].tolist()) == [1, 3, 4, 6] and sorted(order[4:].tolist()) == [0, 2, 5]
        key = tuple(order[:4].tolist())
        perms[key] = perms.get(key, 0) + 1
    assert len(perms) == 24
    assert _uniform(np.array(list(perms.values()))) > LEVEL
