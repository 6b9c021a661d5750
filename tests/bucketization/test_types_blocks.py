"""The per-type path's block-by-block reading (:func:`~ppdp.estimators.bucketized.bucket_types`,
:func:`~ppdp.estimators.bucketized.qit_key`): the types, their numbering and the estimates do not
depend on the block size, equal a direct grouping of the buckets by their exact profile
(numbered by first appearance, as one factorization of every bucket's signature), and a release
whose files are not in the writer's layout (ST rows shuffled) gives the same numbers."""

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import ppdp
from safe_declarations import protected
from ppdp.estimators import bucketized as bz
from ppdp.queries.engine import combine
from ppdp.queries.workloads import anatomy_workload

sys.path.insert(0, str(Path(__file__).parent))
from release_helpers import publish_counts, random_counts, random_table  # noqa: E402


def _reference_types(rel) -> np.ndarray:
    """Each bucket's type: buckets with the same size, the same (value, count) rows and the
    same excluded values share one; numbered by first appearance."""
    b = rel.buckets()
    excluded = rel.fake_excluded() if rel.fake_values and rel.negative_associations else None
    rows: dict[int, list] = {}
    for g, x, c in zip(b["sb"].tolist(), b["sc"].tolist(), b["count"].tolist()):
        rows.setdefault(g, []).append((x, c))
    seen: dict[tuple, int] = {}
    out = np.empty(b["n_buckets"], dtype=np.int64)
    for g in range(b["n_buckets"]):
        prof = (int(b["sizes"][g]), tuple(sorted(rows[g])), None if excluded is None else excluded[g].tobytes())
        out[g] = seen.setdefault(prof, len(seen))
    return out


def _fresh(rel, tmp_path, name):
    rel.save(tmp_path / name)
    return ppdp.load_release(tmp_path / name)


@pytest.mark.parametrize("mech", [ppdp.FPrivacy(theta=8), ppdp.FPrivacy(theta=8, fake_values=2), ppdp.Anatomy(4)],
                         ids=["fprivacy", "fprivacy-fakes", "anatomy"])
def test_blocks_equal_reference(mech, tmp_path, monkeypatch):
    t = ppdp.datasets.load("edu", n=5000, seed=5)
    wl = anatomy_workload(t, 200, 0.05, seed=3)
    rel = _fresh(ppdp.publish(t, mech, seed=1, sensitive_values=protected(t)), tmp_path, "a")
    ty = bz.bucket_types(rel)
    np.testing.assert_array_equal(ty["type"], _reference_types(rel))
    ref = bz.AnatomyEstimator().estimate(rel, wl)
    monkeypatch.setattr(bz, "_ROW_BLOCK", 7)  # many blocks of buckets
    small = _fresh(ppdp.publish(t, mech, seed=1, sensitive_values=protected(t)), tmp_path, "b")
    ty2 = bz.bucket_types(small)
    for k in ("type", "row_type", "p", "multi"):
        np.testing.assert_array_equal(ty2[k], ty[k])
    got = bz.AnatomyEstimator().estimate(small, wl)
    np.testing.assert_array_equal(got.estimate, ref.estimate)
    np.testing.assert_array_equal(got.se, ref.se)
    # the QIT key a column at a time = the combined codes
    cols = tuple(sorted(rel.quasi))
    want = combine([rel.codes("qit", c) for c in cols], [len(rel.domains[c]) for c in cols])
    np.testing.assert_array_equal(bz.qit_key(rel, cols), want)


@pytest.mark.parametrize("seed", range(4))
def test_not_writer_layout(seed, tmp_path):
    """ST rows shuffled (not grouped by bucket): read through ``release.buckets()``, the same
    types and estimates as the writer's layout."""
    rng = np.random.default_rng(seed)
    sigma = seed % 2 * 2
    table = random_table(rng, 300, 8 + 4 * sigma, qi_sizes=(3, 4))
    counts = random_counts(rng, table.codes(table.sa), 8 + 4 * sigma, 20 if sigma == 0 else 100)
    rel = _fresh(publish_counts(table, counts, rng, fake_values=sigma), tmp_path, "w")
    assert isinstance(bz.bucket_rows(rel), bz._Rows)
    wl = anatomy_workload(table, 60, 0.2, seed=seed)
    ref = bz.AnatomyEstimator().estimate(rel, wl)
    ty = bz.bucket_types(rel)
    shuffled = _fresh(rel, tmp_path, "s")
    st = shuffled.tables["st"]
    shuffled.tables["st"] = st.take(pa.array(rng.permutation(st.num_rows)))
    rows = bz.bucket_rows(shuffled)
    assert not isinstance(rows, bz._Rows)
    ty2 = bz.bucket_types(shuffled)
    for k in ("type", "row_type", "p"):
        np.testing.assert_array_equal(ty2[k], ty[k])
    got = bz.AnatomyEstimator().estimate(shuffled, wl)
    np.testing.assert_array_equal(got.estimate, ref.estimate)
    np.testing.assert_allclose(got.se, ref.se, rtol=0, atol=0)
