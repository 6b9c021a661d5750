"""Pieces of ``ppdp reproduce privacy-laws`` that are cheap enough for the unit tests."""

import csv
import math

import numpy as np

import ppdp
from ppdp.experiments import privacy_laws as pl


def test_split_sa_counts_is_the_gamma_scale_up():
    o = np.array([10, 0, 7, 100])
    out = pl.split_sa_counts(o, 4, np.random.default_rng(0))
    assert out.shape == (16,)
    assert out.reshape(4, 4).sum(axis=1).tolist() == o.tolist()   # value x becomes 4x + r, r ∈ [0, 4)
    assert out[4:8].sum() == 0


def test_thresholds_formula():
    o = np.array([10, 30, 60])
    assert pl.thresholds(o, 2).tolist() == [0.22, 0.62, 1.0]


def test_figure3_on_bundled_tables(tmp_path):
    tables = {}
    for d in pl.DATASETS:
        t = ppdp.datasets.load(d)
        tables[d] = (t, t.counts(t.sa), {})
    rows = pl.figure3(tables, pl.QUICK, tmp_path)
    assert (tmp_path / "fig3_l_vs_theta.png").stat().st_size > 0
    with open(tmp_path / "fig3_l_vs_theta.csv") as f:
        assert len(list(csv.DictReader(f))) == len(rows) == 2 * len(pl.FULL["thetas"])
    for r in rows:
        o = tables[r["dataset"]][1]
        assert r["l"] == math.ceil(1 / (r["theta"] * o[o > 0].min() / o.sum() + 0.02))
    # ℓ falls as θ grows (Figure 3's shape)
    for d in pl.DATASETS:
        ls = [r["l"] for r in rows if r["dataset"] == d]
        assert ls == sorted(ls, reverse=True)
