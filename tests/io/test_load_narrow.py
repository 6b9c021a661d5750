"""The release loader decodes a file a batch at a time into narrow types (int8/int16 dictionary
indices, int32 ids and counts when they fit) holding exactly the stored values."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ppdp
from ppdp.releases.narrow import index_type, read_narrow


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 400), k=st.integers(1, 300), big_at=st.one_of(st.none(), st.integers(0, 399)),
       batch=st.integers(1, 64), seed=st.integers(0, 2**16))
def test_read_narrow_holds_the_stored_values(tmp_path_factory, n, k, big_at, batch, seed):
    rng = np.random.default_rng(seed)
    labels = [f"v{i}" for i in range(k)]
    ids = rng.integers(0, 1000, n).astype(np.int64)
    if big_at is not None and big_at < n:
        ids[big_at] = 2**40  # one batch needs 64 bits: every chunk is widened back
    t = pa.table({"a": pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, k, n).astype(np.int32)), pa.array(labels)),
                  "bid": pa.array(ids), "x": pa.array(rng.random(n))})
    path = tmp_path_factory.mktemp("rn") / "t.parquet"
    pq.write_table(t, path, row_group_size=max(1, n // 3))
    pf = pq.ParquetFile(path)
    got = read_narrow(pf, ["a", "bid", "x"], batch_rows=batch)
    want = pf.read(columns=["a", "bid", "x"])
    assert got.column("a").type.index_type.bit_width <= index_type(k).bit_width
    assert got.column("bid").type == (pa.int64() if big_at is not None and big_at < n else pa.int32())
    assert got.column("a").to_pylist() == want.column("a").to_pylist()
    assert got.column("bid").to_pylist() == want.column("bid").to_pylist()
    assert got.column("x").equals(want.column("x"))


@pytest.mark.parametrize("mech", [ppdp.Anatomy(3), ppdp.UniformPerturbation(0.1, 0.3)], ids=lambda m: m.name)
def test_loaded_release_is_narrow_and_verifies(tmp_path, mech):
    table, _ = ppdp.datasets.load("adult").sample(3000, seed=1)
    rel = ppdp.publish(table, mech, seed=2)
    rel.save(tmp_path / "r")
    back = ppdp.load_release(tmp_path / "r")
    for stem, t in back.tables.items():
        for f in t.schema:
            if pa.types.is_dictionary(f.type):
                assert f.type.index_type == pa.int8(), (stem, f)
            elif pa.types.is_integer(f.type):
                assert f.type.bit_width <= 32, (stem, f)
        assert t.cast(rel.tables[stem].schema).equals(rel.tables[stem]) or \
            t.to_pydict() == rel.tables[stem].to_pydict()
    assert ppdp.verify(back, table).ok
