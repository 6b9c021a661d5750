"""The streaming engine: chunked plan statistics, chunked apply, shuffled partitioned release;
verify and queries stream too (SPEC §6)."""

import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

import ppdp
from ppdp.claims import disclosure_of
from ppdp.queries.workload import answer_exact
from ppdp.engines.stream import (Allotment, answer_stream, answer_where_stream, pair_counts, publish_stream, split_counts,
                                 verify_stream)



@pytest.mark.parametrize("mech", [ppdp.UniformPerturbation(rho1=0.05, rho2=0.3), ppdp.SDR(rho1=0.05, rho2=0.3),
                                  ppdp.Diverted(3), ppdp.GlobalRandomization(4)], ids=lambda m: m.name)
def test_streamed_release_verifies_in_memory_and_streamed(source, tmp_path, mech, same_manifest):
    table, path = source
    out = tmp_path / "rel"
    m = publish_stream(path, mech, out, seed=2, chunk_rows=3000, part_rows=6000)
    assert len(list((out / "data").iterdir())) == -(-m["n_published"] // 6000)
    rel = ppdp.load_release(out)
    rep = ppdp.verify(rel, table)  # the in-memory verify reads the partitioned release
    assert rep.ok, rep.problems
    rs = verify_stream(out, path, chunk_rows=3000)
    assert rs["ok"], rs["problems"]
    assert "disclosure re-derived from the files" in rep.checks and "disclosure re-derived from the files" in rs["checks"]
    local = ppdp.publish(table, mech, seed=2)
    same_manifest(rel.manifest, local.manifest, mech.name)  # claim, certificate, disclosure … field by field
    assert rel.custodian == {} and rel.manifest["fit_for_publication"] is False


def test_streamed_run_is_reproducible_and_unrandomized_parts_fail(source, tmp_path):
    table, path = source
    mech = ppdp.UniformPerturbation(rho1=0.05, rho2=0.3)
    for name in ("a", "b"):
        publish_stream(path, mech, tmp_path / name, seed=5, chunk_rows=4000, part_rows=8000)
    a, b = (ppdp.load_release(tmp_path / n).tables["data"] for n in ("a", "b"))
    assert a.equals(b)
    # parts replaced by the source rows (SA not randomized): both verifies must fail
    shutil.rmtree(tmp_path / "a" / "data")
    (tmp_path / "a" / "data").mkdir()
    pq.write_table(table.to_arrow([*table.quasi, table.sa]), tmp_path / "a" / "data" / "part-00000.parquet")
    rs = verify_stream(tmp_path / "a", path)  # the stated disclosure no longer matches the parts
    assert not rs["ok"] and any("disclosure understates" in p for p in rs["problems"]), rs["problems"]
    # a publisher who also restates the disclosure is caught by the source fit
    m = json.loads((tmp_path / "a" / "manifest.json").read_text())
    m["disclosure"] = disclosure_of(ppdp.load_release(tmp_path / "a"))
    (tmp_path / "a" / "manifest.json").write_text(json.dumps(m))
    rs = verify_stream(tmp_path / "a", path)
    assert not rs["ok"] and any("does not fit" in p for p in rs["problems"]), rs["problems"]
    assert not ppdp.verify(ppdp.load_release(tmp_path / "a"), table).ok


def test_streamed_inversion_estimates_the_sa_counts(source, tmp_path):
    table, path = source
    publish_stream(path, ppdp.UniformPerturbation(rho1=0.05, rho2=0.3), tmp_path / "r", seed=9, chunk_rows=5000)
    labels = list(table.domain(table.sa))
    est = answer_stream(tmp_path / "r", labels)
    true = table.counts(table.sa)
    # the inversion's standard error is ≈ sqrt(N·q(1−q))/p per value; 6 SE: false alarm < 1e-8 per value
    rel = ppdp.load_release(tmp_path / "r")
    c = rel.manifest["certificate"]
    n = table.n_rows
    se = np.sqrt(n * c["q"] * (1 - c["q"]) + true * c["retention"]) / c["p"]
    assert np.all(np.abs(est - true) <= 6 * se)
    np.testing.assert_allclose(est.sum(), n, rtol=1e-9)


def test_allotment_deals_exact_slot_counts_uniformly():
    rng = np.random.default_rng(1)
    slots = np.array([[3, 0], [1, 2], [2, 4]])  # 3 slot types × 2 values
    codes = np.array([0] * 6 + [1] * 6)
    got = np.zeros((3, 2), dtype=np.int64)
    a = Allotment(slots)
    for chunk in np.array_split(rng.permutation(codes), 4):
        t = a.take(chunk, rng)
        np.add.at(got, (t, chunk), 1)
    np.testing.assert_array_equal(got, slots)
    assert not a.left.any()
    # one row of value 0 among 6 lands in type 0 with probability 3/6: 20,000 draws, 6 SE
    hits = sum(int(Allotment(slots).take(codes, rng)[0] == 0) for _ in range(2000))
    assert abs(hits / 2000 - 0.5) < 6 * np.sqrt(0.25 / 2000)
    parts = split_counts(slots, np.array([[2, 3], [4, 3]]), rng)
    np.testing.assert_array_equal(parts.sum(axis=0), slots)
    np.testing.assert_array_equal(parts.sum(axis=1), [[2, 3], [4, 3]])
    with pytest.raises(ppdp.PpdpError):
        Allotment(slots).take(np.zeros(7, dtype=np.int64), rng)


def test_streaming_refuses_what_is_not_a_mechanism_of_its_families(source, tmp_path):
    _, path = source

    class Other:
        name, family = "other", "other"

    with pytest.raises(ppdp.PpdpError, match="randomized family .* bucketization .* histogram family"):
        publish_stream(path, Other(), tmp_path / "x")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("mech", [ppdp.UniformPerturbation(rho1=0.05, rho2=0.3), ppdp.SDR(rho1=0.05, rho2=0.3),
                                  ppdp.Diverted(3)], ids=lambda m: m.name)
def test_streamed_where_queries_equal_the_in_memory_answers(source, tmp_path, mech):
    """A linear estimator summed over batches is the whole release's answer: streamed WHERE
    queries (QI and SA conditions) equal load_release(...).answer to rounding."""
    table, path = source
    out = tmp_path / "rel"
    publish_stream(path, mech, out, seed=4, chunk_rows=3000, part_rows=6000)
    q0, sa = table.quasi[0], table.sa
    dq, ds = table.domain(q0), table.domain(sa)
    wl = [f"{sa} = '{ds[0]}'", f"{q0} = '{dq[1]}' AND {sa} = '{ds[2]}'", f"{q0} IN ('{dq[0]}', '{dq[2]}')",
          f"{q0} = '{dq[3]}' AND {sa} IN ('{ds[1]}', '{ds[4]}', '{ds[7]}')"]
    got = answer_where_stream(out, wl, chunk_rows=2500)
    est = "full-closed" if mech.name == "diverted" else "inversion"
    want = ppdp.load_release(out).answer(wl, estimator=est)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-6)
    # and they track the source's true counts: within 6 standard errors (false alarm < 1e-8 per query)
    se = ppdp.load_release(out).estimate(wl, estimator=est).se
    exact = answer_exact(table, wl)
    assert np.all(np.isfinite(se)) and np.all(np.abs(got - exact) <= 6 * se + 1e-9), (got, exact, se)
    with pytest.raises(ppdp.PpdpError, match="linear"):
        answer_where_stream(out, wl, estimator="norm-sub")


def test_pair_counts_merges_batches_exactly():
    rng = np.random.default_rng(3)
    dims, m = [4, 3], 5
    batches = [{"a": rng.integers(0, 4, k), "b": rng.integers(0, 3, k), "s": rng.integers(0, m, k)}
               for k in rng.integers(0, 40, 25)]
    want_k, want_c = np.unique(np.concatenate([np.ravel_multi_index([b["a"], b["b"]], dims) * m + b["s"]
                                               for b in batches]), return_counts=True)
    for merge_at in (1, 7, 1 << 22):  # merged after every batch, now and then, once at the end
        k, c = pair_counts(iter(batches), ["a", "b"], dims, "s", m, merge_at=merge_at)
        assert np.array_equal(k, want_k) and np.array_equal(c, want_c)


def test_stale_custodian_file_stops_before_any_pass(source, tmp_path):
    _, path = source
    out = tmp_path / "rel"
    stale = tmp_path / "rel.custodian.json"
    stale.write_text('{"seed": 1}\n')
    with pytest.raises(ppdp.PpdpError, match="custodian file"):
        publish_stream(path, ppdp.UniformPerturbation(rho1=0.05, rho2=0.3), out, seed=2)
    assert not out.exists() and stale.read_text() == '{"seed": 1}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["rel.custodian.json"]  # no temporary directory left
