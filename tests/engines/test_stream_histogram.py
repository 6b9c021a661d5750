"""The histogram family streamed (:func:`ppdp.engines.stream.publish_stream_histogram`): one
pass counts the label combinations of a Parquet dataset a chunk at a time, and the mechanism
runs on the counts — a seeded streamed release equals the in-memory one (cells, their
partitions, the manifest but for the engine), whatever the chunking and whether the chunks are
counted densely or by sorted keys; verify against the source streams the counts too and
catches a released count moved far from its noise."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ppdp
from ppdp.engines import stream as S
from ppdp.engines.stream import counted_combinations, publish_stream, verify_stream

DIMS = ["age", "education", "sex"]
MECHS = [ppdp.CellHistogram(1.0, DIMS, domains="occ"), ppdp.DPCube(1.0, DIMS, domains="occ"),
         ppdp.HierarchicalKDTree(1.0, DIMS, domains="occ")]


def _same_release(a, b, same_manifest):
    assert set(a.tables) == set(b.tables)
    for name in a.tables:
        assert a.tables[name].equals(b.tables[name]), name
    same_manifest(a.manifest, b.manifest, a.manifest["mechanism"])


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
@pytest.mark.parametrize("dense", [True, False])
def test_streamed_histogram_equals_the_in_memory_release(source, tmp_path, mech, dense, monkeypatch,
                                                         same_manifest):
    table, path = source
    if not dense:
        monkeypatch.setattr(S, "DENSE_COUNT_CELLS", 0)
    manifest = publish_stream(path, mech, tmp_path / "rel", seed=5, chunk_rows=1_700)
    assert manifest["engine"] == "stream"
    streamed = ppdp.load_release(tmp_path / "rel")
    ppdp.publish(table, mech, seed=5).save(tmp_path / "mem")
    _same_release(streamed, ppdp.load_release(tmp_path / "mem"), same_manifest)
    rep = verify_stream(tmp_path / "rel", path, chunk_rows=2_300)
    assert rep["ok"], rep["problems"]
    assert any("goodness of fit" in c for c in rep["checks"])
    assert verify_stream(tmp_path / "rel")["ok"]


def test_counted_combinations_count_every_row(source, monkeypatch):
    table, path = source
    for cells in (1 << 22, 0):
        monkeypatch.setattr(S, "DENSE_COUNT_CELLS", cells)
        ct = counted_combinations(path, DIMS, chunk_rows=999)
        assert int(ct.row_weights.sum()) == table.n_rows
        keys = {tuple(ct.domain(d)[ct.codes(d)[i]] for d in DIMS): int(w) for i, w in enumerate(ct.row_weights)}
        rows = list(zip(*[np.asarray(table.domain(d))[table.codes(d)] for d in DIMS]))
        truth: dict = {}
        for r in rows:
            truth[r] = truth.get(r, 0) + 1
        assert keys == truth


def test_verify_against_the_source_catches_a_moved_count(source, tmp_path):
    _, path = source
    publish_stream(path, MECHS[0], tmp_path / "rel", seed=2)
    cells = pq.read_table(tmp_path / "rel" / "cells.parquet")
    col = [c for c in cells.column_names if c not in DIMS][0]
    vals = cells.column(col).to_numpy().copy()
    vals[int(np.argmax(vals))] += 500
    pq.write_table(cells.set_column(cells.column_names.index(col), col, pa.array(vals, type=cells.schema.field(col).type)),
                   tmp_path / "rel" / "cells.parquet")
    rep = verify_stream(tmp_path / "rel", path)
    assert not rep["ok"] and any("rejected" in p for p in rep["problems"]), rep["problems"]


def test_undeclared_domain_is_refused_before_any_pass(source, tmp_path):
    _, path = source
    with pytest.raises(ppdp.errors.SchemaError, match="not declared"):
        publish_stream(path, ppdp.CellHistogram(1.0, ["age", "sex"]), tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_streamed_histogram_refuses_a_budget_too_small(source, tmp_path):
    """The streaming engine applies the same ε floor as ppdp.publish: refused, nothing written;
    allowed with allow_low_utility, and the manifest says so."""
    _, path = source
    mech = ppdp.CellHistogram(1e-4, DIMS, domains="occ")
    with pytest.raises(ppdp.errors.InfeasibleError, match="allow-low-utility"):
        publish_stream(path, mech, tmp_path / "low", seed=5)
    assert not (tmp_path / "low").exists()
    m = publish_stream(path, mech, tmp_path / "ok", seed=5, allow_low_utility=True)
    assert m["utility"]["allowed_low_utility"] is True
