"""Lean tables (issue 15): codes in the narrowest unsigned type, checked on construction."""

from __future__ import annotations

import numpy as np
import pytest

import ppdp
from ppdp.errors import SchemaError
from ppdp.table import Table, code_dtype


def test_code_dtype_is_the_narrowest():
    assert code_dtype(2) == np.uint8 and code_dtype(256) == np.uint8
    assert code_dtype(257) == np.uint16 and code_dtype(65536) == np.uint16
    assert code_dtype(65537) == np.uint32


def test_columns_are_stored_narrow_and_one_byte_a_cell():
    n = 1_000_000
    rng = np.random.default_rng(0)
    cols = {f"c{i}": rng.integers(0, 40, n) for i in range(7)}
    cols["wide"] = rng.integers(0, 300, n)
    doms = {c: [str(v) for v in range(40)] for c in cols}
    doms["wide"] = [f"{v:03d}" for v in range(300)]
    t = Table(cols, doms, quasi=[f"c{i}" for i in range(7)], sensitive=["wide"])
    assert all(t.codes(f"c{i}").dtype == np.uint8 for i in range(7)) and t.codes("wide").dtype == np.uint16
    assert sum(t.codes(c).nbytes for c in t.column_names) == 9 * n
    np.testing.assert_array_equal(t.codes("wide"), cols["wide"])
    assert t.counts("c0").sum() == n and t.counts("c0").dtype == np.int64


def test_bad_codes_are_refused():
    with pytest.raises(SchemaError, match="outside its domain"):
        Table({"a": [0, 1, 2]}, {"a": ["x", "y"]})
    with pytest.raises(SchemaError, match="outside its domain"):
        Table({"a": np.array([0, -1])}, {"a": ["x", "y"]})
    with pytest.raises(SchemaError, match="one-dimensional"):
        Table({"a": np.zeros((2, 2), int)}, {"a": ["x"]})


def test_loaded_tables_are_narrow_and_round_trip(tmp_path):
    t = ppdp.datasets.load("occ", n=2000, seed=0)
    assert all(t.codes(c).dtype == np.uint8 for c in t.column_names)
    t.to_parquet(tmp_path / "t.parquet")
    back = Table.from_parquet(tmp_path / "t.parquet")
    for c in t.column_names:
        assert back.codes(c).dtype == np.uint8
        np.testing.assert_array_equal(back.codes(c), t.codes(c))
        assert back.domain(c) == t.domain(c)


def test_synthetic_draws_narrow_columns_in_blocks():
    from ppdp.datasets.synthetic import SyntheticModel

    base = ppdp.datasets.load("edu", n=5000, seed=0)
    model = SyntheticModel(base)
    model.block_rows = 1000
    s = model.sample(4500, np.random.default_rng(0))
    assert s.n_rows == 4500 and all(s.codes(c).dtype == np.uint8 for c in s.column_names)
    assert s.domains == base.domains
