"""The streaming engine takes the bucketization family (F'-privacy, Anatomy): the Spark
engine's stages run in this process, without Spark; the release is partitioned, verifies
against the source (in memory and through ``verify_stream``) and with the custodian file,
has the local engine's claim, certificate and disclosure, and every input row is in it."""

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ppdp
from ppdp.claims import disclosure_of
from ppdp.engines import blocks as S
from ppdp.engines.stream import publish_stream, verify_stream
from ppdp.errors import PpdpError
from ppdp.queries.workloads import anatomy_workload

MECHS = [ppdp.FPrivacy(theta=8, fake_values=1), ppdp.FPrivacy(theta=8, fake_values=2), ppdp.FPrivacy(theta=8),
         ppdp.Anatomy(3)]


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: f"{m.name}-{getattr(m, 'fake_values', 0)}")
def test_streamed_bucketization_verifies_with_the_local_claim(source, tmp_path, mech, same_manifest, monkeypatch):
    table, path = source
    m = len(table.domain(table.sa))
    monkeypatch.setattr(S, "ST_RANGE_CELLS", 50 * m)  # 50 buckets per ST range: the disclosure streamed over several
    out = tmp_path / "rel"
    man = publish_stream(path, mech, out, seed=4, chunk_rows=3000, part_rows=5000)
    rel = ppdp.load_release(out)
    assert rel.manifest["engine"] == "stream" and man["n_published"] == table.n_rows == rel.manifest["n_input"]
    assert rel.manifest["files"]["qit"]["partitioned"] is True and len(list((out / "qit").iterdir())) >= 4
    assert rel.tables["qit"].num_rows == table.n_rows  # every input row is in the QIT
    # the parts, in order, hold the QIT ordered by bucket id (as the in-memory engine writes it)
    qb = np.concatenate([pq.read_table(p, columns=["bid"]).column("bid").to_numpy() for p in sorted((out / "qit").iterdir())])
    assert len(qb) == table.n_rows and np.all(np.diff(qb) >= 0)
    sizes = rel.tables["st"].group_by("bid").aggregate([("count", "sum")])
    assert sizes.column("count_sum").to_numpy().sum() == table.n_rows + getattr(mech, "fake_values", 0) * \
        rel.manifest["certificate"]["n_buckets"]
    cust = out.with_name(out.name + ".custodian.json")
    rep = ppdp.verify(rel, table, custodian=cust)
    assert rep.ok, rep.problems
    assert "disclosure re-derived from the files" in rep.checks
    rs = verify_stream(out, path)
    assert rs["ok"], rs["problems"]
    whole = disclosure_of(rel)  # from the files, held whole: the streamed statement equals it
    assert {k: rel.manifest["disclosure"][k] for k in whole} == whole
    local = ppdp.publish(table, mech, seed=4)
    same_manifest(rel.manifest, local.manifest, mech.name)
    # the estimators read the streamed release, and agree with the local release's to sampling error
    wl = anatomy_workload(table, 150, 0.05, seed=3)
    a, b = rel.estimate(wl), local.estimate(wl)
    assert a.kind == "certain" and np.isfinite(a.lower).all() and np.isfinite(a.upper).all()
    assert np.corrcoef(a.estimate, b.estimate)[0, 1] > 0.99


def test_streamed_bucketization_is_reproducible_and_tampering_fails(source, tmp_path):
    table, path = source
    mech = ppdp.FPrivacy(theta=8, fake_values=1)
    for name in ("a", "b"):
        publish_stream(path, mech, tmp_path / name, seed=9, chunk_rows=3000, part_rows=5000)
    a, b = (ppdp.load_release(tmp_path / n) for n in ("a", "b"))
    for stem in ("qit", "st"):
        assert a.tables[stem].equals(b.tables[stem]), stem
    c = publish_stream(path, mech, tmp_path / "c", seed=10, chunk_rows=3000, part_rows=5000)
    assert c["certificate"] == a.manifest["certificate"]  # the plan: the same counts, the same plan
    assert not ppdp.load_release(tmp_path / "c").tables["qit"].equals(a.tables["qit"])  # other draws
    # a QIT part dropped: rows missing, verify fails from the files
    parts = sorted((tmp_path / "a" / "qit").iterdir())
    parts[0].unlink()
    rep = ppdp.verify(ppdp.load_release(tmp_path / "a"))
    assert not rep.ok
    # the ST with one real count moved between buckets: verify with the source fails
    st_parts = sorted((tmp_path / "b" / "st").iterdir())
    st = pa.concat_tables([pq.read_table(p) for p in st_parts])
    cnt = st.column("count").to_numpy().copy()
    bid = st.column("bid").to_numpy()
    i = int(np.argmax(cnt))
    j = int(np.flatnonzero(bid != bid[i])[0])
    cnt[i] -= 1
    cnt[j] += 1
    for p in st_parts:
        p.unlink()
    pq.write_table(st.set_column(st.schema.get_field_index("count"), "count", pa.array(cnt)),
                   tmp_path / "b" / "st" / "part-00000.parquet")
    assert not ppdp.verify(ppdp.load_release(tmp_path / "b"), table).ok
    assert not verify_stream(tmp_path / "b", path)["ok"]


def test_negative_associations_are_refused_before_anything_is_written(source, tmp_path):
    table, path = source
    mech = ppdp.FPrivacy(theta=8, fake_values=1,
                         negative_associations=[["sex", table.domain("sex")[0], table.domain(table.sa)[0]]])
    with pytest.raises(PpdpError, match="negative associations"):
        publish_stream(path, mech, tmp_path / "rel", seed=1)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(PpdpError, match="negative associations"):
        publish_stream(path, ppdp.FPrivacy(theta=8, fake_values=1, learn_associations=True), tmp_path / "rel", seed=1)
    assert list(tmp_path.iterdir()) == []


def test_no_spark_is_needed(source, tmp_path):
    """The streamed bucketization runs where PySpark cannot be imported."""
    _, path = source
    code = (
        "import sys; sys.modules['pyspark'] = None\n"
        "import ppdp, json\n"
        "from ppdp.engines.stream import publish_stream, verify_stream\n"
        f"m = publish_stream({str(path)!r}, ppdp.FPrivacy(theta=8, fake_values=1), {str(tmp_path / 'rel')!r}, seed=1,"
        " chunk_rows=3000, part_rows=5000)\n"
        f"print(json.dumps([m['engine'], verify_stream({str(tmp_path / 'rel')!r})['ok']]))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == ["stream", True]
