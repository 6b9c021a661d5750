"""The Spark engine applies the same plan for every family, writes a partitioned release from
the executors, and its releases pass the same verify against the source Table (SPEC §6)."""

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ppdp
from ppdp.claims import disclosure_of
from ppdp.releases.custodian import load_custodian
from ppdp.releases.readme import render_readme

pytest.importorskip("pyspark")

from ppdp.engines import blocks as B  # noqa: E402
from ppdp.engines import spark as S  # noqa: E402

N = 6000


@pytest.fixture(scope="session")
def spark():
    s = S.local_session(2, "ppdp-tests", memory="1g", shuffle_partitions=2)
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def source(tmp_path_factory, spark):
    """A synthetic OCC-like table written by Table.to_parquet, read by Spark in 2 partitions."""
    base = ppdp.datasets.load("occ", n=N, seed=5)
    path = tmp_path_factory.mktemp("src") / "occ.parquet"
    pq.write_table(base.to_arrow(), path, row_group_size=N // 2)
    sdf, schema = S.read_dataset(spark, path)
    return ppdp.Table.from_parquet(path), sdf.repartition(2), schema, path


def test_the_shared_local_session_listens_on_loopback_only(spark):
    """The session every Spark test uses (ppdp.engines.spark.local_session): driver, block
    managers and every listening socket of its JVM on 127.0.0.1."""
    from test_spark_loopback import check_loopback, loopback_facts  # same folder: on sys.path under pytest

    check_loopback(loopback_facts(spark))


MECHS = [ppdp.UniformPerturbation(rho1=0.05, rho2=0.3), ppdp.SDR(rho1=0.05, rho2=0.3), ppdp.Diverted(3),
         ppdp.GlobalRandomization(4), ppdp.FPrivacy(theta=8, fake_values=1), ppdp.Anatomy(3),
         ppdp.CellHistogram(epsilon=1.0, dims=["age", "sex"], domains="occ"),
         ppdp.DPCube(epsilon=1.0, dims=["age", "sex"], domains="occ"),
         ppdp.HierarchicalKDTree(epsilon=1.0, dims=["age", "sex"], domains="occ"),
         ppdp.ConsistentHierarchy(epsilon=1.0, dims=["age", "sex"], domains="occ"),
         ppdp.DefaultHistogram(epsilon=1.0, dims=["age", "sex"], domains="occ")]
@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
def test_every_family_verifies_against_the_source_with_the_local_claim(spark, source, tmp_path, mech, same_manifest):
    table, sdf, schema, _ = source
    out = tmp_path / "rel"
    S.publish(sdf, mech, out, schema, seed=3)
    rel = ppdp.load_release(out)
    rep = ppdp.verify(rel, table)
    assert rep.ok, rep.problems
    if mech.family != "histogram":  # an ε-DP release discloses no record by construction (stated, nothing to re-derive)
        assert "disclosure re-derived from the files" in rep.checks
    assert rel.manifest["engine"] == "spark" and "seed" not in rel.manifest
    assert rel.manifest["fit_for_publication"] is False
    local = ppdp.publish(table, mech, seed=3)
    same_manifest(rel.manifest, local.manifest, mech.name)
    if mech.family == "histogram":  # the noise is the local engine's, on the same cube: identical release
        for stem, t in local.tables.items():  # the loader reads narrow types (int8 indices, int32 ids): same values
            assert rel.tables[stem].cast(t.schema).equals(t), stem
    else:  # the large table is a directory of parts written by the executors
        stem = "qit" if mech.family == "bucketized" else "data"
        assert rel.manifest["files"][stem]["partitioned"] is True
        assert (out / stem).is_dir() and not (out / f"{stem}.parquet").exists()
        assert sorted(p.name.split("-")[0] for p in (out / stem).iterdir()) == ["part"] * len(list((out / stem).iterdir()))
        # estimators read the partitioned release
        q = [f"{table.quasi[0]} = '{table.domain(table.quasi[0])[1]}'"]
        assert np.all(np.isfinite(rel.answer(q)))


def test_seeded_spark_run_is_reproducible_and_shuffled(spark, source, tmp_path):
    table, sdf, schema, _ = source
    mech = ppdp.SDR(rho1=0.05, rho2=0.3)
    for name in ("a", "b"):
        S.publish(sdf, mech, tmp_path / name, schema, seed=11)
    a, b = (ppdp.load_release(tmp_path / n).tables["data"] for n in ("a", "b"))
    assert a.equals(b)
    # the published rows are not in the source order (the first QI column differs somewhere)
    src_first = table.to_arrow().column(table.quasi[0]).to_pylist()
    assert a.column(table.quasi[0]).to_pylist() != src_first


def test_an_unrandomized_partitioned_release_fails_verify_with_the_source(spark, source, tmp_path):
    """verify must be able to fail on a partitioned release: parts replaced by the source rows."""
    table, sdf, schema, _ = source
    out = tmp_path / "rel"
    S.publish(sdf, ppdp.UniformPerturbation(rho1=0.05, rho2=0.3), out, schema, seed=4)
    shutil.rmtree(out / "data")
    (out / "data").mkdir()
    cols = [*table.quasi, table.sa]
    pq.write_table(table.to_arrow(cols), out / "data" / "part-00000.parquet")
    rep = ppdp.verify(ppdp.load_release(out), table)
    assert not rep.ok  # the stated disclosure no longer matches the files
    assert any("disclosure understates" in p for p in rep.problems), rep.problems
    # a publisher who also restates the disclosure (and README) is caught by the source fit
    m = json.loads((out / "manifest.json").read_text())
    m["disclosure"] = disclosure_of(ppdp.load_release(out))
    (out / "manifest.json").write_text(json.dumps(m))
    (out / "README.md").write_text(render_readme(m))
    rep = ppdp.verify(ppdp.load_release(out), table)
    assert not rep.ok
    assert any("does not fit the declared randomization" in p for p in rep.problems), rep.problems


def test_domains_are_ordered_as_table_orders_them(spark):
    import pandas as pd

    df = pd.DataFrame({"age": [30, 9, 100, 9, 45], "city": ["b", "B", "a", "10", "9"], "sa": ["x", "y", "x", "z", "y"]})
    sdf = spark.createDataFrame(df)
    schema = S.frame_schema(sdf, ["age", "city"], "sa")
    t = ppdp.Table.from_pandas(df, ["age", "city"], ["sa"])
    for c in ("age", "city", "sa"):
        assert list(schema.domains[c]) == list(t.domain(c))
    assert schema.numeric["age"] == t.numeric_values("age").tolist()


def test_spark_engine_rejects_unknown_columns(spark, source, tmp_path):
    _, sdf, _, _ = source
    with pytest.raises(ppdp.PpdpError, match="unknown column"):
        S.publish(sdf, ppdp.FPrivacy(), tmp_path / "x", quasi=["zip"], sensitive="occupation")


def test_diverted_drops_n_mod_l_rows_and_keeps_the_local_claim(spark, tmp_path, same_manifest):
    """A' on N = 3·k + 2 rows: the two dropped rows are chosen per block on the executors and
    their values leave the plan's counts; claim and verify as with the local engine."""
    base = ppdp.datasets.load("occ", n=4001, seed=8)
    path = tmp_path / "occ.parquet"
    pq.write_table(base.to_arrow(), path, row_group_size=1500)
    sdf, schema = S.read_dataset(spark, path)
    table = ppdp.Table.from_parquet(path)
    mech = ppdp.Diverted(3)
    S.publish_randomized(sdf, mech, tmp_path / "rel", schema, seed=2, out_partitions=3)
    rel = ppdp.load_release(tmp_path / "rel")
    assert rel.manifest["dropped"] == 2 and rel.manifest["n_published"] == 3999
    rep = ppdp.verify(rel, table)
    assert rep.ok, rep.problems
    same_manifest(rel.manifest, ppdp.publish(table, mech, seed=2).manifest, mech.name)


def test_a_plan_that_does_not_fit_the_data_is_refused(spark, source, tmp_path):
    from ppdp.mechanisms.bucketization.plan import SACounts

    _, sdf, schema, _ = source
    plan = ppdp.Anatomy(3).plan(SACounts.of_table(ppdp.datasets.load("occ", n=N + 30, seed=6)))
    with pytest.raises(ppdp.PpdpError, match="plan and data disagree"):
        S.apply_bucketized(plan, sdf, schema, tmp_path / "rel", seed=1)
    assert not (tmp_path / "rel").exists()


@pytest.mark.parametrize("mech", [ppdp.SDR(rho1=0.05, rho2=0.3), ppdp.Anatomy(3),
                                  ppdp.DPCube(epsilon=1.0, dims=["age", "sex"], domains="occ")], ids=lambda m: m.name)
def test_a_frame_from_read_dataset_is_read_directly_with_the_same_claim(spark, source, tmp_path, mech, same_manifest):
    """The untransformed frame of read_dataset is read by the executors with pyarrow (row
    groups as tasks): same verify, same claim; a transformed frame goes through Spark SQL."""
    table, _, _, path = source
    sdf, schema = S.read_dataset(spark, path)
    scan = B.file_scan(sdf, None)
    assert scan is not None and len(scan.units) == 1 and scan.n_rows == N
    assert B.file_scan(sdf.select("*"), None) is None and B.file_scan(sdf, False) is None
    S.publish(sdf, mech, tmp_path / "rel", schema, seed=3)
    rel = ppdp.load_release(tmp_path / "rel")
    rep = ppdp.verify(rel, table)
    assert rep.ok, rep.problems
    local = ppdp.publish(table, mech, seed=3)
    same_manifest(rel.manifest, local.manifest, mech.name)
    if mech.family == "histogram":
        for stem, t in local.tables.items():  # the loader reads narrow types (int8 indices, int32 ids): same values
            assert rel.tables[stem].cast(t.schema).equals(t), stem


@pytest.mark.parametrize("mech", [ppdp.FPrivacy(theta=8, fake_values=1),
                                  pytest.param(ppdp.FPrivacy(theta=8, fake_values=2), marks=pytest.mark.slow),
                                  ppdp.Anatomy(3)], ids=lambda m: f"{m.name}-{getattr(m, 'fake_values', 0)}")
def test_the_st_is_written_and_its_disclosure_streamed_a_range_of_buckets_at_a_time(spark, source, tmp_path, mech,
                                                                                    same_manifest, monkeypatch):
    """A few buckets per range, three ranges per executor task: the ST is a directory of parts
    (one per task, one row group per range), the custodian file is written range by range, the
    manifest's disclosure (streamed over the ranges, or from the bucket types for σ = 0) equals
    what disclosure_of derives from the whole files and the local engine's, verify passes with
    the source and the custodian file; the seeded run is reproducible; a tampered ST fails
    verify."""
    table, sdf, schema, _ = source
    m = len(schema.domains[schema.sensitive[0]])
    per = 7 if mech.name == "fprivacy" else 70  # buckets per range: 4-12 ranges of a few hundred (F') or 2,000 (ℓ = 3) buckets
    monkeypatch.setattr(B, "ST_RANGE_CELLS", per * m)
    monkeypatch.setattr(B, "ST_TASK_CELLS", 3 * per * m)  # 3 ranges per task
    out = tmp_path / "rel"
    S.publish(sdf, mech, out, schema, seed=5)
    rel = ppdp.load_release(out)
    n_buckets = rel.manifest["certificate"]["n_buckets"]
    n_ranges = -(-n_buckets // per)
    parts = sorted((out / "st").iterdir())
    assert not (out / "st.parquet").exists() and [p.name for p in parts] == [f"part-{g:05d}.parquet" for g in range(-(-n_ranges // 3))]
    assert sum(pq.ParquetFile(p).metadata.num_row_groups for p in parts) == n_ranges > 3
    assert rel.manifest["files"]["st"] == {"rows": rel.tables["st"].num_rows, "partitioned": True}
    bid = rel.tables["st"].column("bid").to_numpy()
    assert np.all(np.diff(bid) >= 0) and np.array_equal(np.unique(bid), np.arange(n_buckets))  # parts in bucket order
    whole = disclosure_of(rel)  # from the files, held whole
    assert {k: rel.manifest["disclosure"][k] for k in whole} == whole
    cust = out.with_name(out.name + ".custodian.json")
    sigma = getattr(mech, "fake_values", 0)
    kept = json.loads(cust.read_text())  # the fakes in a Parquet sidecar, written range by range
    assert kept["seed"] == 5 and (kept["fake"]["rows"] == sigma * n_buckets if sigma else "fake" not in kept)
    if sigma:
        side = pq.ParquetFile(cust.with_name(kept["fake"]["file"]))
        assert side.metadata.num_rows == sigma * n_buckets and side.schema_arrow.names == ["bid", "value"]
    # nothing left beside the release (the temporary directory, the fakes the ST's writer left for the driver)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, cust.name, *([kept["fake"]["file"]] if sigma else [])])
    rep = ppdp.verify(rel, table, custodian=cust)
    assert rep.ok, rep.problems
    same_manifest(rel.manifest, ppdp.publish(table, mech, seed=5).manifest, mech.name)
    S.publish(sdf, mech, tmp_path / "again", schema, seed=5)  # reproducible: the same ST and fakes
    assert ppdp.load_release(tmp_path / "again").tables["st"].equals(rel.tables["st"])
    assert load_custodian(tmp_path / "again.custodian.json") == load_custodian(cust)
    # a tampered ST: one real count moved from one bucket to another
    st = pa.concat_tables([pq.read_table(p) for p in parts])
    cnt = st.column("count").to_numpy().copy()
    i, j = int(np.argmax(cnt)), int(np.flatnonzero(st.column("bid").to_numpy() != st.column("bid")[int(np.argmax(cnt))].as_py())[0])
    cnt[i] -= 1
    cnt[j] += 1
    for p in parts:
        p.unlink()
    pq.write_table(st.set_column(2, "count", pa.array(cnt)), out / "st" / "part-00000.parquet")
    rep = ppdp.verify(ppdp.load_release(out), table, custodian=cust)
    assert not rep.ok


@pytest.mark.parametrize("seed", [5, None], ids=["seeded", "unseeded"])
@pytest.mark.parametrize("mech", [ppdp.FPrivacy(theta=8, fake_values=1), ppdp.Anatomy(3)], ids=lambda m: m.name)
def test_the_feistel_relabelling_end_to_end(spark, source, tmp_path, mech, seed, same_manifest, monkeypatch):
    """The relabelling's Feistel network (used above 2^16 buckets; forced here), seeded and
    unseeded: every published bucket id is used, verify passes against the source (and with the
    custodian file), the seeded manifest equals the local engine's, two unseeded publications
    differ."""
    table, sdf, schema, _ = source
    monkeypatch.setattr(B, "RELABEL_EXPLICIT_MAX", 0)
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        S.publish(sdf, mech, out, schema, seed=seed)
        rel = ppdp.load_release(out)
        n_buckets = rel.manifest["certificate"]["n_buckets"]
        for stem in ("qit", "st"):
            assert np.array_equal(np.unique(rel.tables[stem].column("bid").to_numpy()), np.arange(n_buckets))
        cust = out.with_name(out.name + ".custodian.json")
        rep = ppdp.verify(rel, table, custodian=cust if cust.exists() else None)
        assert rep.ok, rep.problems
        runs.append(rel)
    if seed is not None:  # (which of the values tied at the largest posterior is named depends on the relabelling)
        a, b = (json.loads(json.dumps(m)) for m in (runs[0].manifest, ppdp.publish(table, mech, seed=seed).manifest))
        for m in (a, b):
            m["disclosure"].pop("max_posterior_value")
        same_manifest(a, b, mech.name)
        assert runs[0].tables["st"].equals(runs[1].tables["st"])
    else:
        assert not runs[0].tables["st"].equals(runs[1].tables["st"])


def test_cli_publish_sdr_on_spark(spark, tmp_path):
    """``ppdp publish sdr --engine spark`` on a custodian's ';'-separated CSV with its schema file
    (tests/engines/test_cli_engines.py's), then ``ppdp verify --input`` against the CSV; the CLI's
    local session is this file's (one JVM per test process)."""
    from test_cli_engines import run, write_own_csv  # same folder: on sys.path under pytest

    path, schema = write_own_csv(tmp_path)
    out = tmp_path / "sp"
    res = run("publish", "sdr", path, "--schema", schema, "--rho1", "0.1", "--rho2", "0.5", "--engine", "spark", "-o", out)
    assert res.exit_code == 0, res.output
    assert json.loads((out / "manifest.json").read_text())["engine"] == "spark"
    res = run("verify", out, "--input", path, "--schema", schema)
    assert res.exit_code == 0 and "verify: OK" in res.output, res.output
