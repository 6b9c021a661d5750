"""Issue [leaks] items 1–2 and [verify] item 1 for the histogram family, through ``ppdp.publish``.

* Public domains: a label's presence in a release does not depend on whether the one person
  holding it is in the table (Adult's single Holand-Netherlands record), with a control that
  shows the test has power (a domain read off the rows differs between the two tables).
* No exact N: ``n_input``/``n_published`` are the noisy total of the released counts.
* The ε floor: ε = 1e-300 is refused with one clear error; at the floor the noise follows the
  discrete Laplace pmf.
* Verify with the source table rejects noise-free releases of all four mechanisms.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy import stats

import ppdp
from ppdp.errors import ParameterError
from ppdp.kernels.grid import box_counts, cube_codes, declared_domains, dense_counts, summed_area
from ppdp.kernels.noise import EPSILON_FLOOR, discrete_laplace, discrete_laplace_pmf, noise_fit_test
from ppdp.mechanisms.histogram import CellHistogram, ConsistentHierarchy, DPCube, HierarchicalKDTree

RUNS = 50


@pytest.fixture(scope="module")
def adult():
    return ppdp.datasets.load("adult")


@pytest.fixture(scope="module")
def with_and_without(adult):
    """The Adult table as a file would give it (domains from the rows), with and without its one
    native_country = Holand-Netherlands record."""
    df = adult.to_pandas(["age", "sex", "native_country"]).astype(str)
    holland = np.flatnonzero(df.native_country == "Holand-Netherlands")
    assert len(holland) == 1
    cols = dict(quasi=["age", "sex", "native_country"])
    return ppdp.Table.from_pandas(df, **cols), ppdp.Table.from_pandas(df.drop(index=holland), **cols)


def test_membership_of_the_one_holand_netherlands_record_is_hidden(with_and_without):
    """MUST-SHOW: presence of the label in CellHistogram(ε = 0.1) releases, with / without the record:
    50/50 vs 50/50 (before: 50/50 vs 0/50)."""
    t_in, t_out = with_and_without
    # power control: a domain read off the rows differs, so the old behaviour would leak membership
    assert "Holand-Netherlands" in t_in.domain("native_country")
    assert "Holand-Netherlands" not in t_out.domain("native_country")
    with pytest.raises(ParameterError, match="not declared"):
        ppdp.publish(t_in, CellHistogram(0.1, ["native_country"]))  # the leak is refused, not published
    mech = CellHistogram(0.1, ["native_country"], domains="adult")
    present = {}
    for name, t in (("with", t_in), ("without", t_out)):
        rels = [ppdp.publish(t, mech) for _ in range(RUNS)]
        present[name] = sum("Holand-Netherlands" in r.domains["native_country"] for r in rels)
        assert all(r.domains == rels[0].domains for r in rels)
    print(f"Holand-Netherlands label present: with the record {present['with']}/{RUNS}, "
          f"without {present['without']}/{RUNS}")
    assert present == {"with": RUNS, "without": RUNS}


def test_the_published_cube_is_the_declared_one_whatever_the_rows(with_and_without):
    t_in, t_out = with_and_without
    for mech in (CellHistogram(0.5, ["age", "native_country"], domains="adult"),
                 DPCube(0.5, ["age", "native_country"], domains="adult"),
                 HierarchicalKDTree(0.5, ["age", "native_country"], domains="adult"),
                 ConsistentHierarchy(0.5, ["age", "native_country"], domains="adult")):
        a, b = ppdp.publish(t_in, mech, seed=1), ppdp.publish(t_out, mech, seed=1)
        assert a.domains == b.domains and a.shape == b.shape and a.certificate["bins"] == b.certificate["bins"]
        assert ppdp.verify(a, t_in).ok and ppdp.verify(b, t_out).ok


def test_a_value_outside_the_declared_domain_is_an_error():
    df = pd.DataFrame({"c": ["a", "b", "zzz"]})
    t = ppdp.Table.from_pandas(df, quasi=["c"])
    with pytest.raises(ppdp.errors.SchemaError, match="outside its declared domain"):
        ppdp.publish(t, CellHistogram(1.0, ["c"], domains={"c": ["a", "b"]}))


def test_verify_rejects_an_undeclared_domain(adult, tmp_path):
    r = ppdp.publish(adult, CellHistogram(1.0, ["sex"], domains={"sex": ["Female", "Male"]}), seed=0)
    r.manifest["params"]["domains"] = None
    rep = ppdp.verify(r)
    assert not rep.ok and any("not declared" in p for p in rep.problems), rep.problems


def test_no_exact_n_is_published(adult):
    """n_input / n_published are the noisy total (sum of the released counts), not N; the
    kd-tree's default depth reads a noisy total charged to the budget (recorded in the claim)."""
    exact = 0
    for s in range(20):
        r = ppdp.publish(adult, CellHistogram(0.5, ["age", "sex"], domains="adult"), seed=s)
        cnt = r.tables["cells"].column("count").to_numpy()
        assert r.manifest["n_input"] == r.manifest["n_published"] == max(0, int(cnt.sum()))
        exact += r.manifest["n_input"] == adult.n_rows
    assert exact <= 4  # sum of 148 noises (sd ≈ 17): P(exactly N) ≈ 2.4% per release
    k = ppdp.publish(adult, HierarchicalKDTree(0.5, ["age", "sex"], domains="adult"), seed=0)
    first = k.certificate["ledger"][0]
    assert first["what"].startswith("noisy total") and math.isclose(first["epsilon"], 0.5 * 0.02)
    assert isinstance(k.certificate["noisy_total"], int)
    assert ppdp.verify(k, adult).ok


# ------------------------------------------------------------------------------ the ε floor
def test_tiny_epsilon_is_refused(adult):
    """MUST-SHOW: ε = 1e-300 is refused (before: the noise was 0 in 100% of draws and verify said OK)."""
    for mech in (CellHistogram, DPCube, HierarchicalKDTree, ConsistentHierarchy):
        with pytest.raises(ParameterError, match="epsilon"):
            mech(1e-300, ["sex"], domains="adult")
    with pytest.raises(ParameterError, match="floor"):
        discrete_laplace(np.random.default_rng(0), 1e-300, 5)
    with pytest.raises(ParameterError, match="floor"):  # a step below the floor although the total is above it
        ppdp.publish(adult, ConsistentHierarchy(2e-6, ["age", "sex"], domains="adult"))
    ok = ppdp.publish(adult, CellHistogram(EPSILON_FLOOR, ["sex"], domains="adult"), seed=0, allow_low_utility=True)
    assert ppdp.verify(ok).ok


def test_noise_at_the_floor_matches_the_pmf():
    """At ε = EPSILON_FLOOR: binned χ² against the exact pmf (bins of equal probability on |Z|, sign
    separately) and uniform residues mod 2, 3 and 10 (a saturating or lattice-valued draw fails these).
    Fixed seed; each test at level 1e-4, false-alarm ≤ 5e-4 in all (Bonferroni)."""
    e = EPSILON_FLOOR
    n = 200_000
    z = discrete_laplace(np.random.default_rng(20240601), e, n)
    assert z.dtype == np.int64 and len(np.unique(z)) > 0.95 * n  # not saturated (birthday collisions: ≈ 2.5% expected)
    # |Z| binned at its quantiles: P(|Z| ≥ k) = 2p^k/(1+p) for k ≥ 1
    p = math.exp(-e)
    qs = np.linspace(0, 1, 51)[1:-1]
    edges = np.unique(np.ceil(np.log((1 - qs) * (1 + p) / 2) / math.log(p)).astype(np.int64))
    tail = lambda k: np.where(k <= 0, 1.0, 2 * p ** k.astype(float) / (1 + p))  # noqa: E731
    probs = -np.diff(np.concatenate([[1.0], tail(edges), [0.0]]))
    obs = np.bincount(np.searchsorted(edges, np.abs(z), side="right"), minlength=len(probs))
    assert stats.chisquare(obs, probs / probs.sum() * n).pvalue > 1e-4
    assert stats.binomtest(int((z > 0).sum()), int((z != 0).sum()), 0.5).pvalue > 1e-4
    for mod in (2, 3, 10):
        assert stats.chisquare(np.bincount(z % mod, minlength=mod)).pvalue > 1e-4, mod
    # the pmf near 0: P(Z = 0) = tanh(ε/2) ≈ 5e-7; no draw lands there more often than the pmf allows
    assert (z == 0).sum() <= stats.binom.ppf(1 - 1e-4, n, discrete_laplace_pmf(np.array([0]), e)[0])


@pytest.mark.slow
def test_goodness_of_fit_false_alarm_rate():
    """The Chernoff test's false-alarm rate is at most α (here at α = 0.01: 20,000 honest samples
    of 50 counts, the observed rate ≤ 0.01 plus 4 binomial standard errors)."""
    rng = np.random.default_rng(5)
    alarms = sum(not noise_fit_test(discrete_laplace(rng, 0.5, 50), 0.5, alpha=0.01)[0] for _ in range(20_000))
    assert alarms / 20_000 <= 0.01 + 4 * math.sqrt(0.01 * 0.99 / 20_000)
    # power: noise of a 10× larger or smaller ε, and no noise at all
    assert not noise_fit_test(discrete_laplace(rng, 5.0, 200), 0.5)[0]
    assert not noise_fit_test(discrete_laplace(rng, 0.05, 200), 0.5)[0]
    assert not noise_fit_test(np.zeros(40), 0.5)[0]


# ------------------------------------------------------------------- verify re-derives
def _true_cube(table, mech):
    declared, _ = declared_domains(mech.dims, mech.bins, mech.domains)
    spec, codes = cube_codes(table, mech.dims, mech.bins, declared)
    return dense_counts(codes, spec.shape)


def with_exact_counts(release, x):
    """The release with the noise removed: every raw count replaced by the true one."""
    tables = dict(release.tables)
    t = tables["cells"]
    if t.num_rows:
        idx = [t.column(d).to_numpy().astype(np.int64) for d in release.dims]
        exact = x[tuple(idx)].astype(t.schema.field("count").type.to_pandas_dtype())
        tables["cells"] = t.set_column(t.column_names.index("count"), "count", pa.array(exact))
    p = tables["partitions"]
    if p.num_rows:
        lo, hi, _ = release.partition_boxes()
        tables["partitions"] = p.set_column(p.column_names.index("count"), "count",
                                            pa.array(box_counts(summed_area(x), lo, hi)))
    out = type(release)(release.manifest, tables)
    from ppdp.claims.dp import published_total

    c = tables["partitions"].column("count").to_numpy() if p.num_rows else tables["cells"].column("count").to_numpy()
    out.manifest = {**release.manifest, "n_input": published_total(c, []), "n_published": published_total(c, [])}
    return out


@pytest.mark.parametrize("mech", [CellHistogram(1.0, ["age", "sex"], domains="adult"),
                                  DPCube(1.0, ["age", "sex"], domains="adult"),
                                  HierarchicalKDTree(1.0, ["age", "sex"], domains="adult"),
                                  ConsistentHierarchy(1.0, ["age", "sex"], domains="adult")], ids=lambda m: m.name)
def test_noise_free_release_fails_verify_with_the_source(adult, mech):
    """MUST-SHOW: a release carrying the exact counts fails verify with the source (before: 4/4 missed);
    the honest release passes (false-alarm ≤ 1e-6)."""
    r = ppdp.publish(adult, mech, seed=11)
    assert ppdp.verify(r, adult).ok
    bad = with_exact_counts(r, _true_cube(adult, mech))
    assert ppdp.verify(bad).ok  # from the files alone an exact release is a possible (if unlikely) draw
    rep = ppdp.verify(bad, adult)
    assert not rep.ok and any("noise" in p for p in rep.problems), rep.problems
    print(f"{mech.name}: noise-free release with the source → {rep.problems[0][:160]}")
