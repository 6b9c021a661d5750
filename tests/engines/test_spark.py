"""The Spark engine applies the same plan and its releases pass the same verify (SPEC §6)."""

import numpy as np
import pytest

import ppdp
from ppdp.engines.spark import local_session, publish_bucketized


@pytest.fixture(scope="module")
def spark():
    s = local_session(2, "ppdp-tests")
    yield s
    s.stop()


def test_spark_fprivacy_release_verifies_against_the_source(spark, tmp_path):
    t = ppdp.datasets.load("occ", n=20_000, seed=5)
    sdf = spark.createDataFrame(t.to_pandas().astype(str))
    mech = ppdp.FPrivacy(theta=8, fake_values=1)
    rel = publish_bucketized(sdf, mech, list(t.quasi), t.sa, seed=3, domains=t.domains)
    rep = ppdp.verify(rel, t)
    assert rep.ok, rep.problems
    assert rel.manifest["engine"] == "spark" and rel.custodian["seed"] == 3 and "seed" not in rel.manifest
    # the plan is the local engine's plan: same certificate (sizes, loss) as ppdp.publish
    local = ppdp.publish(t, mech, seed=3)
    for key in ("loss", "n_buckets", "bucket_sizes", "thresholds"):
        assert rel.manifest["certificate"][key] == local.manifest["certificate"][key]
    rel.save(tmp_path / "rel")
    back = ppdp.load_release(tmp_path / "rel")
    assert ppdp.verify(back, t).ok
    # estimates on the Spark release are as good as on the local one (same estimator, same plan)
    from ppdp.queries.workloads import anatomy_workload

    wl = anatomy_workload(t, 300, 0.05, seed=1)
    act = ppdp.answer_exact(t, wl)
    err_spark = np.mean(np.abs(back.answer(wl) - act) / act)
    err_local = np.mean(np.abs(local.answer(wl) - act) / act)
    assert err_spark < 2 * err_local + 0.05


def test_spark_engine_rejects_unknown_columns(spark):
    t = ppdp.datasets.load("occ", n=1000, seed=5)
    sdf = spark.createDataFrame(t.to_pandas().astype(str))
    with pytest.raises(ppdp.PpdpError, match="unknown column"):
        publish_bucketized(sdf, ppdp.FPrivacy(), ["zip"], t.sa)


def test_one_plan_applied_locally_and_on_spark_both_verify(spark):
    """The same public plan object, applied by the local engine and by Spark."""
    from ppdp.api import stamp_manifest
    from ppdp.engines.local import apply_bucketized as apply_local
    from ppdp.engines.spark import apply_bucketized as apply_spark
    from ppdp.mechanisms.bucketization import SACounts

    t = ppdp.datasets.load("edu", n=8_000, seed=6)
    sdf = spark.createDataFrame(t.to_pandas().astype(str))
    for mech in (ppdp.FPrivacy(theta=8, fake_values=1), ppdp.Anatomy(3)):
        plan = mech.plan(SACounts.of_table(t))
        local = stamp_manifest(apply_local(plan, t, 1), mech, 1)
        remote = stamp_manifest(apply_spark(plan, sdf, list(t.quasi), t.domains, 1), mech, 1)
        for rel in (local, remote):
            rep = ppdp.verify(rel, t)
            assert rep.ok, rep.problems
            assert ppdp.verify(rel).ok
        assert remote.manifest["engine"] == "spark"
        for key in ("model", "loss", "n_buckets", "bucket_sizes", "thresholds", "fake_values"):
            assert remote.manifest["certificate"][key] == local.manifest["certificate"][key]
        q = [f"{t.quasi[0]} = '{t.domain(t.quasi[0])[1]}'"]  # QI-only: exact on either release
        np.testing.assert_allclose(remote.answer(q), ppdp.answer_exact(t, q), atol=1e-6)
        np.testing.assert_allclose(local.answer(q), ppdp.answer_exact(t, q), atol=1e-6)
