import numpy as np

import ppdp
from ppdp.datasets.synthetic import synthetic, synthetic_chunks, write_synthetic
from ppdp.table import Table


def test_synthetic_reproduces_one_and_two_way_marginals():
    t = ppdp.datasets.load("occ")
    s = synthetic(t, 1_000_000, seed=4)
    assert s.n_rows == 1_000_000 and s.quasi == t.quasi and s.domains == t.domains
    m = len(t.domain(t.sa))
    p_true = t.counts(t.sa) / t.n_rows
    p_syn = s.counts(s.sa) / s.n_rows
    # binomial standard error of a proportion at n = 10^6 is ≤ 5e-4; allow 5 standard errors
    assert np.max(np.abs(p_true - p_syn)) < 2.5e-3
    for c in ["age", "education", "country_of_birth"]:
        d = len(t.domain(c))
        jt = np.bincount(t.codes(t.sa).astype(np.int64) * d + t.codes(c), minlength=m * d) / t.n_rows
        js = np.bincount(s.codes(s.sa).astype(np.int64) * d + s.codes(c), minlength=m * d) / s.n_rows
        se = np.sqrt(np.maximum(jt, 1e-6) / s.n_rows)
        assert np.max(np.abs(jt - js) / se) < 6, c
        # no value appears that the source never has together with that SA value
        assert not np.any((jt == 0) & (js > 0))


def test_chunks_and_parquet(tmp_path):
    t = ppdp.datasets.load("edu", n=5000, seed=1)
    chunks = list(synthetic_chunks(t, 25_000, seed=2, chunk_rows=10_000))
    assert [c.n_rows for c in chunks] == [10_000, 10_000, 5_000]
    p = write_synthetic(t, 25_000, tmp_path / "s.parquet", seed=2, chunk_rows=10_000)
    back = Table.from_parquet(p)
    assert back.n_rows == 25_000 and back.sensitive == t.sensitive
