"""The per-type path of Anatomy's estimator (:func:`~ppdp.estimators.bucketized.bucket_types`)
gives the same estimates and standard errors as the per-row index it replaces on large
releases (``AnatomyEstimator.estimate_by_rows``), on random hand-built bucket settings with
and without fakes and negative associations, and on published releases; the decoded rows
equal ``release.buckets()``. Deterministic (fixed seeds); tolerances are float round-off."""

import sys
from pathlib import Path

import numpy as np
import pytest

import ppdp
from safe_declarations import protected
from ppdp.estimators import bucketized as bz
from ppdp.estimators.bucketized import AnatomyEstimator, bucket_rows, bucket_types
from ppdp.queries.workloads import anatomy_workload

sys.path.insert(0, str(Path(__file__).parent))
from release_helpers import publish_counts, random_counts, random_table  # noqa: E402


def _same(rel, wl):
    fast = AnatomyEstimator().estimate(rel, wl)
    slow = AnatomyEstimator().estimate_by_rows(rel, wl)
    np.testing.assert_allclose(fast.estimate, slow.estimate, rtol=1e-9, atol=1e-9)
    # a variance within 1e-9·|est| of zero is set to zero on both paths; round-off may put
    # one side across that cut, so se agrees to 1e-4 absolute (else to 1e-9 relative)
    np.testing.assert_allclose(fast.se, slow.se, rtol=1e-9, atol=1e-4)
    np.testing.assert_allclose(AnatomyEstimator().answer(rel, wl), slow.estimate, rtol=1e-9, atol=1e-9)
    assert fast.method == slow.method


@pytest.mark.parametrize("seed", range(12))
def test_types_equal_rows_random_settings(seed):
    rng = np.random.default_rng(seed)
    sigma = seed % 3
    m = int(rng.integers(3, 9)) + 4 * sigma
    n = int(rng.integers(40, 400))
    table = random_table(rng, n, m, qi_sizes=tuple(rng.integers(2, 6, size=int(rng.integers(1, 4)))))
    # with fakes, small buckets (every bucket must have absent values to draw fakes from)
    n_buckets = int(rng.integers(2, 40)) if sigma == 0 else n // 3
    counts = random_counts(rng, table.codes(table.sa), m, n_buckets)
    assoc = None
    if seed % 4 == 3:
        assoc = [("q0", table.domain("q0")[0], table.domain(table.sa)[-1])]
    rel = publish_counts(table, counts, rng, fake_values=sigma, negative_associations=assoc)
    ty = bucket_types(rel)
    assert ty is not None and ty["n_types"] <= len(counts)
    wl = anatomy_workload(table, 60, 0.2, seed=seed)
    _same(rel, wl)
    # each bucket's weights are its type's: the per-bucket profile equals the type's profile
    b = rel.buckets()
    assert np.array_equal(np.bincount(b["qb"], minlength=b["n_buckets"]), b["sizes"])
    obs = rel.observed_counts()
    exc = rel.fake_excluded() if sigma else None
    p, u, c = bz.bucket_profiles(obs, b["sizes"], sigma, exc)
    np.testing.assert_array_equal(p, ty["p"][ty["type"]])
    if sigma:
        np.testing.assert_array_equal(u, ty["u"][ty["type"]])
        np.testing.assert_array_equal(c, ty["c"][ty["type"]])


@pytest.mark.parametrize("mech", [ppdp.FPrivacy(theta=8), ppdp.FPrivacy(theta=8, fake_values=2), ppdp.Anatomy(4)],
                         ids=["fprivacy", "fprivacy-fakes", "anatomy"])
def test_types_equal_rows_published(mech, tmp_path):
    t = ppdp.datasets.load("edu", n=6000, seed=3)
    rel = ppdp.publish(t, mech, seed=1, sensitive_values=protected(t))
    rel.save(tmp_path / "r")
    loaded = ppdp.load_release(tmp_path / "r")
    rows, ref = bucket_rows(loaded), loaded.buckets()
    assert "n_ent" in rows  # the writer's layout: decoded from the sorted bid columns
    for k in ("qb", "sb", "sc", "count", "sizes"):
        np.testing.assert_array_equal(rows[k], ref[k])
    assert rows["n_buckets"] == ref["n_buckets"]
    wl = anatomy_workload(t, 300, 0.05, seed=2)
    _same(loaded, wl)
    # GROUP BY through SQL: the same as the per-row path, group by group
    frame = ppdp.query(loaded, f"SELECT age, {t.sa}, COUNT(*) FROM t GROUP BY age, {t.sa}")
    queries = [f"age = '{a}' AND {t.sa} = '{x}'" for a, x in zip(frame["age"], frame[t.sa])]
    slow = AnatomyEstimator().estimate_by_rows(loaded, queries)
    np.testing.assert_allclose(frame["estimate"], slow.estimate, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(frame["se"], slow.se, rtol=1e-9, atol=1e-4)


def test_too_many_types_falls_back(monkeypatch):
    t = ppdp.datasets.load("edu", n=2000, seed=4)
    rel = ppdp.publish(t, ppdp.Anatomy(3), seed=1)
    wl = anatomy_workload(t, 50, 0.05, seed=1)
    ref = AnatomyEstimator().estimate(rel, wl)
    monkeypatch.setattr(bz, "MAX_TYPES", 1)
    fresh = ppdp.publish(t, ppdp.Anatomy(3), seed=1)
    assert bucket_types(fresh) is None
    e = AnatomyEstimator().estimate(fresh, wl)
    np.testing.assert_allclose(e.estimate, ref.estimate, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(e.se, ref.se, rtol=1e-9, atol=1e-4)
