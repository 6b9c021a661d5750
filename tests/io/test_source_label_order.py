"""Verify against a source table read with its labels in another order than the release's
schema (a CLI read sorts labels, ``Table.from_parquet`` keeps a file's dictionary order): the
same rows, so verify passes — for every family — while a real difference (a label one side
lacks, a changed row) is still caught."""

from __future__ import annotations

import numpy as np
import pytest

import ppdp
from ppdp.table import Table

MECHS = {
    "fprivacy": lambda: ppdp.FPrivacy(theta=8.0),
    "anatomy": lambda: ppdp.Anatomy(l=3),
    "uniform": lambda: ppdp.UniformPerturbation(0.1, 0.3),
    "sdr": lambda: ppdp.SDR(0.1, 0.3),
    "global": lambda: ppdp.GlobalRandomization(3),
    "cells": lambda: ppdp.CellHistogram(epsilon=1.0, dims=["age", "occupation"], domains="occ"),
}


def _reordered(t: Table, rng: np.random.Generator, extra: bool = False) -> Table:
    """The same rows, each column's labels in a random order (``extra``: plus an unused label)."""
    codes, doms = {}, {}
    for c in t.column_names:
        dom = list(t.domain(c)) + (["(never used)"] if extra else [])
        order = rng.permutation(len(dom))
        new = [dom[i] for i in order]
        pos = {lab: i for i, lab in enumerate(new)}
        lut = np.array([pos[lab] for lab in t.domain(c)])
        codes[c], doms[c] = lut[t.codes(c)], new
    return Table(codes, doms, t.quasi, t.sensitive, numeric={c: None for c in t.column_names})


@pytest.mark.parametrize("name", list(MECHS))
def test_verify_reads_the_source_by_label(name):
    t = ppdp.datasets.load("occ", n=3000, seed=2)
    rel = ppdp.publish(t, MECHS[name](), seed=1)
    rng = np.random.default_rng(3)
    shuffled = _reordered(t, rng)
    assert any(shuffled.domain(c) != t.domain(c) for c in t.column_names)
    assert ppdp.verify(rel, t).ok
    assert ppdp.verify(rel, shuffled).ok, ppdp.verify(rel, shuffled).problems
    if name == "cells":  # a differentially private histogram cannot be checked row by row
        return
    # control: one row's QI value changed, then relabelled the same way, is caught
    codes = {c: t.codes(c).copy() for c in t.column_names}
    codes["sex"][0] = 1 - codes["sex"][0]
    changed = Table(codes, t.domains, t.quasi, t.sensitive)
    assert not ppdp.verify(rel, _reordered(changed, rng)).ok


@pytest.mark.parametrize("name", ["fprivacy", "sdr"])
def test_a_label_set_that_differs_is_caught(name):
    """An unused label on the source's side only: not the same domain (the release states its
    domain; a source read with a declared schema lists the same labels)."""
    t = ppdp.datasets.load("occ", n=3000, seed=2)
    rel = ppdp.publish(t, MECHS[name](), seed=1)
    rep = ppdp.verify(rel, _reordered(t, np.random.default_rng(4), extra=True))
    assert not rep.ok and any("domain" in p for p in rep.problems)


def test_a_used_label_the_release_lacks_is_not_recoded():
    t = ppdp.datasets.load("occ", n=2000, seed=2)
    rel = ppdp.publish(t, ppdp.FPrivacy(theta=8.0), seed=1)
    codes = {c: t.codes(c).copy() for c in t.column_names}
    dom = dict(t.domains)
    dom["sex"] = (*t.domain("sex"), "other")
    codes["sex"][0] = len(dom["sex"]) - 1
    other = Table(codes, dom, t.quasi, t.sensitive)
    assert other.over_domains(rel.domains).domain("sex") == dom["sex"]   # kept: the release lacks "other"
    rep = ppdp.verify(rel, other)
    assert not rep.ok and any("sex" in p for p in rep.problems)


def test_over_domains_keeps_every_row_and_label():
    rng = np.random.default_rng(0)
    t = ppdp.datasets.load("adult", n=500, seed=1)
    for _ in range(20):
        s = _reordered(t, rng)
        back = s.over_domains(t.domains)
        for c in t.column_names:
            assert back.domain(c) == t.domain(c)
            assert np.array_equal(back.codes(c), t.codes(c))
    assert t.over_domains(t.domains) is t


def test_over_domains_keeps_each_labels_number():
    t = ppdp.datasets.load("adult", n=500, seed=1)
    num = t.numeric_values("age")
    assert num is not None
    rev = tuple(reversed(t.domain("age")))
    r = t.over_domains({"age": rev})
    assert r.domain("age") == rev
    got = dict(zip(r.domain("age"), r.numeric_values("age")))
    assert got == dict(zip(t.domain("age"), num))
    assert np.array_equal(r.labels("age"), t.labels("age"))
