"""A file-level tamper corpus for the histogram family ([verify] item 2).

A DPCube release (cells and partitions) of a 3,000-row Adult sample over age × sex (Adult's
documented domains, ε = 1) is saved; each case edits its files or manifest on disk and runs
``ppdp.verify`` on the directory — from the files alone, or with the source table where the
case says so. Every case a verifier can detect in principle must be caught; the cases that no
verifier can detect are listed with the reason (and the test checks they really pass, so the
list stays honest). ``test_corpus_summary`` prints tamperings / detectable / caught.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ppdp
from ppdp.releases.readme import render_readme
from ppdp.claims.dp import dpcube_split_rule, published_total
from ppdp.kernels.grid import box_counts, cube_codes, declared_domains, dense_counts, summed_area
from ppdp.kernels.noise import discrete_laplace
from ppdp.mechanisms.histogram import DPCube
from ppdp.errors import ReleaseError
from ppdp.releases.base import VerifyReport

MECH = DPCube(1.0, ["age", "sex"], domains="adult")


@dataclass(frozen=True)
class Tamper:
    name: str
    edit: Callable[[Path, object], None]  # (release dir, source table) → None
    with_source: bool = False
    #: None: detectable; else why no verifier can detect it
    undetectable: str | None = None


# ------------------------------------------------------------------------------- helpers
def _manifest(d: Path, fn):
    m = json.loads((d / "manifest.json").read_text())
    fn(m)
    (d / "manifest.json").write_text(json.dumps(m))
    (d / "README.md").write_text(render_readme(m))  # a tamperer rewrites the generated README too


def _table(d: Path, name: str, fn):
    t = pq.read_table(d / f"{name}.parquet")
    pq.write_table(fn(t), d / f"{name}.parquet")


def _set_col(t: pa.Table, col: str, values) -> pa.Table:
    return t.set_column(t.column_names.index(col), col, pa.array(values))


def _counts(t: pa.Table, fn) -> pa.Table:
    return _set_col(t, "count", fn(t.column("count").to_numpy().copy()))


def _cube(table):
    declared, _ = declared_domains(MECH.dims, None, MECH.domains)
    spec, codes = cube_codes(table, MECH.dims, None, declared)
    return dense_counts(codes, spec.shape)


def _set_counts(d: Path, cells=None, parts=None):
    """Replace the raw counts (and keep n_input/n_published consistent, as a careful forger would)."""
    if cells is not None:
        _table(d, "cells", lambda t: _counts(t, lambda c: cells(t)))
    if parts is not None:
        _table(d, "partitions", lambda t: _counts(t, lambda c: parts(t)))
    pc = pq.read_table(d / "partitions.parquet").column("count").to_numpy()
    _manifest(d, lambda m: m.update(n_input=published_total([], pc), n_published=published_total([], pc)))


def _exact_cells(d, src):
    x = _cube(src)
    return lambda t: x[tuple(t.column(c).to_numpy().astype(np.int64) for c in MECH.dims)]


def _exact_parts(d, src):
    x = _cube(src)
    sat = summed_area(x)

    def f(t):
        lo = np.stack([t.column(f"{c}_lo").to_numpy() for c in MECH.dims], 1)
        hi = np.stack([t.column(f"{c}_hi").to_numpy() for c in MECH.dims], 1)
        return box_counts(sat, lo, hi)
    return f


def _noise_eps(d, src, eps_cells, eps_parts):
    """Counts = true + discrete Laplace noise of the given ε (a wrong scale)."""
    rng = np.random.default_rng(99)
    ec, ep = _exact_cells(d, src), _exact_parts(d, src)
    _set_counts(d, cells=lambda t: ec(t) + discrete_laplace(rng, eps_cells, t.num_rows),
                parts=lambda t: ep(t) + discrete_laplace(rng, eps_parts, t.num_rows))


def _scale_claim(m, f):
    """Scale ε everywhere in params and certificate consistently (split rule recomputed)."""
    m["params"]["epsilon"] *= f
    c = m["certificate"]
    for k in ("epsilon", "epsilon_cells", "epsilon_partitions", "epsilon_other"):
        c[k] *= f
    for e in c["ledger"]:
        e["epsilon"] *= f
    c["split_rule"] = dpcube_split_rule(m["params"])


def _scale_cert(key, f):
    def fn(m):
        m["certificate"][key] *= f
    return fn


def _append_domain_label(m):
    m["schema"]["domains"]["sex"].append("Other")
    m["schema"]["numeric"]["sex"] = None
    m["certificate"]["bins"]["sex"].append("Other")
    m["certificate"]["shape"][1] += 1
    m["certificate"]["n_cells"] = m["certificate"]["shape"][0] * m["certificate"]["shape"][1]


FILES_ALONE = ("from the files alone a possible (if unlikely) noise draw: the noise is random, so only the source "
               "table shows that the counts are not true + noise (the same edit with the source is caught)")

CORPUS = [
    # ---- cells.parquet
    Tamper("cells: one count +1", lambda d, s: _table(d, "cells", lambda t: _counts(t, lambda c: c + (np.arange(len(c)) == 3)))
           , with_source=True, undetectable="a +1 on one count is another likely noise draw, with or without the source"),
    Tamper("cells: one count +10^6 (with source)", lambda d, s: _table(d, "cells", lambda t: _counts(t, lambda c: c + 10**6 * (np.arange(len(c)) == 3))),
           with_source=True),
    Tamper("cells: one count +10^6 (files alone)", lambda d, s: _table(d, "cells", lambda t: _counts(t, lambda c: c + 10**6 * (np.arange(len(c)) == 3))),
           undetectable=FILES_ALONE),
    Tamper("cells: a row dropped", lambda d, s: _table(d, "cells", lambda t: t.slice(1))),
    Tamper("cells: a row duplicated", lambda d, s: _table(d, "cells", lambda t: pa.concat_tables([t, t.slice(0, 1)]))),
    Tamper("cells: a cell index outside the cube", lambda d, s: _table(d, "cells", lambda t: _set_col(t, "age", np.where(np.arange(t.num_rows) == 0, 500, t.column("age").to_numpy())))),
    Tamper("cells: an extra row_id column", lambda d, s: _table(d, "cells", lambda t: t.append_column("row_id", pa.array(np.arange(t.num_rows))))),
    Tamper("cells: a NaN count", lambda d, s: _table(d, "cells", lambda t: _counts(t, lambda c: np.where(np.arange(len(c)) == 0, np.nan, c.astype(float))))),
    Tamper("cells: fractional counts", lambda d, s: _table(d, "cells", lambda t: _counts(t, lambda c: c + 0.5))),
    Tamper("cells: the exact counts (with source)", lambda d, s: _set_counts(d, cells=_exact_cells(d, s)), with_source=True),
    Tamper("cells: the exact counts (files alone)", lambda d, s: _set_counts(d, cells=_exact_cells(d, s)), undetectable=FILES_ALONE),
    Tamper("cells.parquet deleted", lambda d, s: (d / "cells.parquet").unlink()),
    # ---- partitions.parquet
    Tamper("partitions: two boxes overlap", lambda d, s: _table(d, "partitions", lambda t: _set_col(t, "age_lo", np.where(np.arange(t.num_rows) == 0, 0, t.column("age_lo").to_numpy())))),
    Tamper("partitions: a row dropped", lambda d, s: _table(d, "partitions", lambda t: t.slice(1))),
    Tamper("partitions: a row duplicated", lambda d, s: _table(d, "partitions", lambda t: pa.concat_tables([t, t.slice(0, 1)]))),
    Tamper("partitions: a box outside the cube", lambda d, s: _table(d, "partitions", lambda t: _set_col(t, "sex_hi", np.full(t.num_rows, 7, np.int32)))),
    Tamper("partitions: an extra column", lambda d, s: _table(d, "partitions", lambda t: t.append_column("note", pa.array(["x"] * t.num_rows)))),
    Tamper("partitions: pid shuffled", lambda d, s: _table(d, "partitions", lambda t: _set_col(t, "pid", t.column("pid").to_numpy()[::-1].copy()))),
    Tamper("partitions: the exact counts (with source)", lambda d, s: _set_counts(d, parts=_exact_parts(d, s)), with_source=True,
           undetectable="the release has only a handful of partition counts with α2 = 0.1: honest noise leaves all of them "
                        "exact with probability tanh(α2/2)^P ≈ 0.05^5 ≈ 3e-7, not below the test's false-alarm rate, so "
                        "no test at that rate can tell (with the cells exact too, it is caught: next case)"),
    Tamper("cells and partitions: the exact counts (with source)",
           lambda d, s: _set_counts(d, cells=_exact_cells(d, s), parts=_exact_parts(d, s)), with_source=True),
    Tamper("cells and partitions: noise of 10× the declared ε (with source)", lambda d, s: _noise_eps(d, s, 9.0, 1.0),
           with_source=True),
    Tamper("cells and partitions: noise of 0.1× the declared ε (with source)", lambda d, s: _noise_eps(d, s, 0.09, 0.01),
           with_source=True),
    # ---- extra files
    Tamper("the raw source table added as source.parquet", lambda d, s: s.to_parquet(d / "source.parquet")),
    # ---- the claim
    Tamper("certificate ε × 0.1", lambda d, s: _manifest(d, _scale_cert("epsilon", 0.1))),
    Tamper("certificate α1 × 0.1", lambda d, s: _manifest(d, _scale_cert("epsilon_cells", 0.1))),
    Tamper("certificate α2 × 0.1", lambda d, s: _manifest(d, _scale_cert("epsilon_partitions", 0.1))),
    Tamper("a ledger entry × 0.1", lambda d, s: _manifest(d, lambda m: m["certificate"]["ledger"][0].update(epsilon=m["certificate"]["ledger"][0]["epsilon"] * 0.1))),
    Tamper("params, certificate and ledger all × 0.1 (files alone)", lambda d, s: _manifest(d, lambda m: _scale_claim(m, 0.1)),
           undetectable="a self-consistent claim of a smaller ε: the noise draws are random, so only the source "
                        "table shows they are too small for it (the same edit with the source is caught)"),
    Tamper("params, certificate and ledger all × 0.1 (with source)", lambda d, s: _manifest(d, lambda m: _scale_claim(m, 0.1)),
           with_source=True),
    Tamper("a negative refund in the ledger", lambda d, s: _manifest(d, lambda m: m["certificate"]["ledger"].extend(
        [{"epsilon": 5.0, "what": "extra", "composition": "single", "parts": 1},
         {"epsilon": -5.0, "what": "refund", "composition": "single", "parts": 1}]))),
    Tamper("sampler renamed to a floating-point Laplace", lambda d, s: _manifest(d, lambda m: m["certificate"].update(sampler="numpy-laplace"))),
    Tamper("a ledger step below the ε floor", lambda d, s: _manifest(d, lambda m: _scale_claim(m, 1e-7))),
    # ---- row counts, seed
    Tamper("n_input edited", lambda d, s: _manifest(d, lambda m: m.update(n_input=m["n_input"] + 5, n_published=m["n_published"] + 5))),
    Tamper("n_input set to the exact N", lambda d, s: _manifest(d, lambda m: m.update(n_input=s.n_rows, n_published=s.n_rows, dropped=0))),
    Tamper("seed set with fit_for_publication true", lambda d, s: _manifest(d, lambda m: m.update(seed=1234, fit_for_publication=True))),
    # ---- the public cube model
    Tamper("params.domains removed (domain read off the rows)", lambda d, s: _manifest(d, lambda m: m["params"].update(domains=None))),
    Tamper("a published label renamed", lambda d, s: _manifest(d, lambda m: m["schema"]["domains"]["sex"].__setitem__(0, "F"))),
    Tamper("the cube extended by a label", lambda d, s: _manifest(d, _append_domain_label)),
    Tamper("certificate shape edited", lambda d, s: _manifest(d, lambda m: m["certificate"]["shape"].__setitem__(0, 10))),
    Tamper("storage claimed sparse", lambda d, s: _manifest(d, lambda m: m["certificate"].update(storage="sparse", threshold=1))),
    Tamper("schema.numeric shifted", lambda d, s: _manifest(d, lambda m: m["schema"]["numeric"].update(age=[v + 1 for v in m["schema"]["numeric"]["age"]]))),
    Tamper("dims reordered", lambda d, s: _manifest(d, lambda m: m["certificate"].update(dims=m["certificate"]["dims"][::-1]))),
    Tamper("params.bins added", lambda d, s: _manifest(d, lambda m: m["params"].update(bins={"age": [17, 50, 91]}))),
    Tamper("split rule edited", lambda d, s: _manifest(d, lambda m: m["certificate"]["split_rule"].update(min_count=1.0))),
]


@pytest.fixture(scope="module")
def source():
    return ppdp.datasets.load("adult", n=3000, seed=0)


@pytest.fixture(scope="module")
def saved(source, tmp_path_factory):
    d = tmp_path_factory.mktemp("orig") / "rel"
    rel = ppdp.publish(source, MECH, seed=5)
    assert ppdp.verify(rel, source).ok
    rel.save(d)
    return d


def _run(case: Tamper, saved: Path, source, tmp: Path):
    d = tmp / "rel"
    shutil.copytree(saved, d)
    case.edit(d, source)
    try:
        return ppdp.verify(d, source if case.with_source else None)
    except ReleaseError as e:  # refused at load (e.g. row counts against the manifest): caught
        return VerifyReport(problems=[str(e)])


def test_the_untampered_release_verifies(saved, source):
    assert ppdp.verify(saved).ok and ppdp.verify(saved, source).ok


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_tampering(case, saved, source, tmp_path):
    rep = _run(case, saved, source, tmp_path)
    if case.undetectable:
        assert rep.ok, f"listed as undetectable but caught: {rep.problems}"
    else:
        assert not rep.ok, f"missed: {case.name}"


def test_corpus_summary(saved, source, tmp_path):
    detectable = [c for c in CORPUS if not c.undetectable]
    caught = 0
    for i, c in enumerate(detectable):
        caught += not _run(c, saved, source, tmp_path / str(i)).ok
    names = {c.name.split(" (")[0] for c in CORPUS}
    print(f"\nhistogram tamper corpus: {len(CORPUS)} tamperings ({len(names)} distinct edits), "
          f"{len(detectable)} detectable, {caught} caught")
    for c in CORPUS:
        if c.undetectable:
            print(f"  undetectable by design: {c.name} — {c.undetectable}")
    assert len(detectable) >= 25 and caught == len(detectable)
