"""Release files and Parquet tables are decoded on the system allocator, and Arrow's default pool
is restored afterwards (also after an error, and when nested)."""

import pyarrow as pa
import pytest

import ppdp
from ppdp.releases.narrow import system_allocator


def test_scoped_and_restored():
    before = pa.default_memory_pool().backend_name
    with system_allocator():
        assert pa.default_memory_pool().backend_name == "system"
        with system_allocator():
            assert pa.default_memory_pool().backend_name == "system"
        assert pa.default_memory_pool().backend_name == "system"
    assert pa.default_memory_pool().backend_name == before
    with pytest.raises(RuntimeError):
        with system_allocator():
            raise RuntimeError("boom")
    assert pa.default_memory_pool().backend_name == before


def test_loaded_release_on_system_allocator(tmp_path):
    t = ppdp.datasets.load("occ", n=2000, seed=1)
    rel = ppdp.publish(t, ppdp.SDR(0.1, 0.3), seed=1)
    rel.save(tmp_path / "r")
    before = pa.default_memory_pool().backend_name
    held = pa.system_memory_pool().bytes_allocated()
    loaded = ppdp.load_release(tmp_path / "r")
    assert pa.default_memory_pool().backend_name == before
    assert pa.system_memory_pool().bytes_allocated() > held  # the release's columns came from malloc
    assert ppdp.verify(loaded).ok
