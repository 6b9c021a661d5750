"""A table of counted label combinations (what the Spark engine aggregates on its executors)
gives the same histogram release as the rows it stands for — dense and sparse cubes alike."""
import numpy as np
import pytest

import ppdp
from ppdp.engines.spark import CountedTable
from ppdp.table import Table


def _tables(n_labels: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    dom = [f"v{i:03d}" for i in range(n_labels)]
    codes = {d: rng.integers(0, 12, 2_000).astype(np.int32) for d in ("a", "b", "c")}
    rows = Table(codes, {d: dom for d in codes})
    keys = np.stack([codes[d] for d in codes], axis=1)
    uniq, cnt = np.unique(keys, axis=0, return_counts=True)
    counted = CountedTable({d: uniq[:, i].astype(np.int32) for i, d in enumerate(codes)}, {d: dom for d in codes})
    counted.row_weights = cnt.astype(np.int64)
    return rows, counted, dom


@pytest.mark.parametrize("n_labels", [20, 300])  # 8,000 cells (dense); 27 M cells (sparse storage)
def test_counted_table_equals_rows(n_labels):
    rows, counted, dom = _tables(n_labels)
    mech = ppdp.CellHistogram(1.0, ["a", "b", "c"], domains={d: dom for d in "abc"})
    r1 = ppdp.publish(rows, mech, seed=3)
    r2 = ppdp.publish(counted, mech, seed=3)
    for sql in ("SELECT COUNT(*) WHERE a = 'v001' AND b = 'v002'", "SELECT c, COUNT(*) GROUP BY c"):
        e1, e2 = ppdp.query(r1, sql), ppdp.query(r2, sql)
        assert np.array_equal(e1["estimate"].to_numpy(), e2["estimate"].to_numpy())
        assert np.allclose(e1["se"].to_numpy(), e2["se"].to_numpy(), equal_nan=True)
