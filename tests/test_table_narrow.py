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


def _same_table(a: Table, b: Table) -> None:
    assert a.column_names == b.column_names and a.quasi == b.quasi and a.sensitive == b.sensitive
    for c in a.column_names:
        assert list(a.domain(c)) == list(b.domain(c))
        np.testing.assert_array_equal(a.codes(c), b.codes(c))
        assert a.codes(c).dtype == b.codes(c).dtype
        va, vb = a.numeric_values(c), b.numeric_values(c)
        assert (va is None and vb is None) or np.array_equal(va, vb)


def test_a_ppdp_parquet_file_is_read_a_column_at_a_time_as_from_arrow_reads_it(tmp_path, monkeypatch):
    """``Table.from_parquet`` of a file ppdp wrote (several row groups) reads a column at a
    time, with the result of the whole-file path (:meth:`Table.from_arrow`); ``columns``,
    role overrides and re-declared numeric columns too. Files it cannot read that way (row
    groups with different dictionaries, nulls, no ppdp metadata) go the whole-file way."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ppdp import table as T

    t = ppdp.datasets.load("adult", n=3000, seed=2)
    path = tmp_path / "t.parquet"
    pq.write_table(t.to_arrow(), path, row_group_size=700)
    whole = Table.from_arrow(pq.read_table(path))
    calls = []
    real = T._parquet_by_column
    monkeypatch.setattr(T, "_parquet_by_column", lambda *a: calls.append(1) or real(*a))
    _same_table(Table.from_parquet(path), whole)
    cols = [t.quasi[1], t.sa]
    _same_table(Table.from_parquet(path, columns=cols), Table.from_arrow(pq.read_table(path), columns=cols))
    _same_table(Table.from_parquet(path, quasi=[t.quasi[0]], sensitive=[t.sa]),
                Table.from_arrow(pq.read_table(path), quasi=[t.quasi[0]], sensitive=[t.sa]))
    assert real(Table, path, (), (), {}) is not None  # the column path took these
    assert real(Table, path, (), (), {"numeric": ["age"]}) is None  # a re-declaration: the whole-file path
    # row groups with their own dictionaries (another writer): read as from_arrow reads them
    a = t.to_arrow()
    other = tmp_path / "dicts.parquet"
    with pq.ParquetWriter(other, a.schema) as w:
        w.write_table(a.slice(0, 1000))
        second = a.slice(1000)
        c0 = t.quasi[0]
        col = second.column(c0).combine_chunks()
        rev = pa.DictionaryArray.from_arrays(pa.array(len(col.dictionary) - 1 - col.indices.to_numpy(zero_copy_only=False),
                                                      col.indices.type), col.dictionary[::-1])
        w.write_table(second.set_column(second.schema.get_field_index(c0), pa.field(c0, rev.type), rev))
    assert real(Table, other, (), (), {}) is None
    got = Table.from_parquet(other)
    assert [got.domain(c0)[k] for k in got.codes(c0)] == [t.domain(c0)[k] for k in t.codes(c0)]
    assert calls
