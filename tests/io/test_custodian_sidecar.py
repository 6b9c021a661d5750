"""The custodian-side file's columnar form: the fakes in a Parquet sidecar referenced from the
small JSON with its rows, bytes and SHA-256 (:mod:`ppdp.releases.custodian`).

Round trips (local engine, a block of rows per row group, the streaming engine's seed-only
file; the Spark engine's in ``tests/engines/test_spark.py``), a replaced custodian file's old
sidecar removed, a sidecar changed / truncated / swapped with another release's / missing /
renamed → verify fails with one problem (no traceback) and the CLI with one ``--custodian``
line and exit code 2, and the older JSON-only form still verifies.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli
from ppdp.errors import ReleaseError
from ppdp.releases import custodian as C
from ppdp.releases.custodian import FakeList, load_custodian, save_custodian
from ppdp.releases.storage import custodian_path


@pytest.fixture(scope="module")
def table():
    return ppdp.datasets.load("edu", n=3000, seed=0)


@pytest.fixture(scope="module")
def saved(table, tmp_path_factory):
    """Two F'-privacy (σ = 1) releases saved with their custodian files."""
    base = tmp_path_factory.mktemp("cust")
    out = {}
    for name, seed in (("a", 1), ("b", 2)):
        rel = ppdp.publish(table, ppdp.FPrivacy(theta=8, fake_values=1), seed=seed)
        out[name] = (rel, rel.save(base / name))
    return out


def _copy(saved, tmp_path, name="a"):
    """A fresh copy of release ``name`` with its custodian file and sidecar."""
    rel, src = saved[name]
    d = shutil.copytree(src, tmp_path / "rel")
    ref = json.loads(custodian_path(src).read_text())
    side = ref["fake"]["file"].replace(f"{name}.custodian", "rel.custodian")
    ref["fake"]["file"] = side
    shutil.copy(src.with_name(json.loads(custodian_path(src).read_text())["fake"]["file"]), tmp_path / side)
    custodian_path(d).write_text(json.dumps(ref))
    return d, custodian_path(d), tmp_path / side


def test_round_trip_local_engine(saved, table):
    rel, d = saved["a"]
    cust = custodian_path(d)
    ref = json.loads(cust.read_text())
    assert set(ref) == {"seed", "fake"} and cust.stat().st_size < 1000  # small whatever the release's size
    fk = ref["fake"]
    assert set(fk) == {"file", "rows", "bytes", "sha256"} and fk["rows"] == len(rel.custodian["fake"])
    side = cust.with_name(fk["file"])
    assert fk["file"] == f"a.custodian.fake-{fk['sha256'][:16]}.parquet" and side.stat().st_size == fk["bytes"]
    schema = pq.ParquetFile(side).schema_arrow  # narrow types
    assert schema.field("bid").type == pa.int32() and schema.field("value").type == pa.dictionary(pa.int16(), pa.string())
    kept = load_custodian(cust)
    assert kept["seed"] == 1 and isinstance(kept["fake"], FakeList) and kept["fake"] == rel.custodian["fake"]
    assert kept["fake"].code.dtype == np.int16
    rep = ppdp.verify(d, custodian=cust)
    assert rep.ok, rep.problems
    assert rep.facts["fake_values"] == "checked against the custodian file"
    assert ppdp.verify(d, table, custodian=cust).ok


def test_written_and_read_a_block_at_a_time(table, tmp_path, monkeypatch):
    monkeypatch.setattr(C, "SIDECAR_BLOCK", 1000)
    rel = ppdp.publish(table, ppdp.FPrivacy(theta=8, fake_values=2), seed=4)
    d = rel.save(tmp_path / "rel")
    fk = json.loads(custodian_path(d).read_text())["fake"]
    md = pq.ParquetFile(custodian_path(d).with_name(fk["file"])).metadata
    assert md.num_row_groups == -(-fk["rows"] // 1000) > 2
    assert load_custodian(custodian_path(d))["fake"] == rel.custodian["fake"]
    assert ppdp.verify(d, custodian=custodian_path(d)).ok


def test_small_blocks_are_gathered_into_row_groups(tmp_path, monkeypatch):
    """A source of many small blocks (the Spark driver's ranges) makes row groups of
    SIDECAR_BLOCK rows, not one per block."""
    monkeypatch.setattr(C, "SIDECAR_BLOCK", 100)

    class Ranges:
        labels = ["x", "y", "z"]

        def bid_bound(self):
            return 1000

        def blocks(self):
            for lo in range(0, 1000, 7):
                hi = min(lo + 7, 1000)
                yield np.arange(lo, hi), np.arange(lo, hi) % 3

    save_custodian(tmp_path / "r.custodian.json", {"seed": 9}, fakes=Ranges())
    kept = load_custodian(tmp_path / "r.custodian.json")
    assert kept["seed"] == 9 and np.array_equal(kept["fake"].bid, np.arange(1000))
    assert kept["fake"].values() == [["x", "y", "z"][i % 3] for i in range(1000)]
    fk = json.loads((tmp_path / "r.custodian.json").read_text())["fake"]
    assert pq.ParquetFile(tmp_path / fk["file"]).metadata.num_row_groups == 10


def test_replacing_removes_the_old_sidecar_and_never_replaces_without_overwrite(saved, table, tmp_path):
    rel_a, _ = saved["a"]
    rel_b, _ = saved["b"]
    d = rel_a.save(tmp_path / "rel")
    old = custodian_path(d).with_name(json.loads(custodian_path(d).read_text())["fake"]["file"])
    rel_b.save(d, overwrite=True)
    new = custodian_path(d).with_name(json.loads(custodian_path(d).read_text())["fake"]["file"])
    assert new != old and new.exists() and not old.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["rel", "rel.custodian.json", new.name])
    assert ppdp.verify(d, custodian=custodian_path(d)).ok
    for other in (rel_a, rel_b):  # without replace nothing is replaced, not even a sidecar of the same bytes
        with pytest.raises(ReleaseError, match="custodian file"):
            save_custodian(custodian_path(d), other.custodian)
        assert load_custodian(custodian_path(d))["fake"] == rel_b.custodian["fake"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["rel", "rel.custodian.json", new.name])


def test_streaming_engine_round_trip(table, tmp_path):
    from ppdp.engines.stream import publish_stream

    src = tmp_path / "src.parquet"
    pq.write_table(table.to_arrow(), src)
    out = tmp_path / "rel"
    publish_stream(src, ppdp.UniformPerturbation(0.1, 0.3), out, seed=6, chunk_rows=1000, part_rows=2000)
    assert load_custodian(custodian_path(out)) == {"seed": 6}
    assert [p.name for p in tmp_path.iterdir() if "custodian" in p.name] == ["rel.custodian.json"]  # no sidecar
    rep = ppdp.verify(out, custodian=custodian_path(out))
    assert rep.ok, rep.problems


# --------------------------------------------------------------------------- tampering
def _flip(side):
    b = bytearray(side.read_bytes())
    b[len(b) // 2] ^= 0x01
    side.write_bytes(bytes(b))


def _truncate(side):
    side.write_bytes(side.read_bytes()[:-100])


def _swap(side, other):
    shutil.copy(other, side)


TAMPER = {
    "changed bytes": (lambda side, other: _flip(side), "SHA-256"),
    "truncated": (lambda side, other: _truncate(side), "truncated"),
    "swapped with another release's": (_swap, "another release's"),
    "missing": (lambda side, other: side.unlink(), "no custodian file's sidecar there"),
    "a symbolic link": (lambda side, other: (side.unlink(), os.symlink(other, side)), "symbolic link"),
}


@pytest.mark.parametrize("case", list(TAMPER))
def test_a_tampered_sidecar_fails_verify_with_one_problem(saved, tmp_path, case):
    d, cust, side = _copy(saved, tmp_path)
    assert ppdp.verify(d, custodian=cust).ok
    _, other = saved["b"]
    other_side = custodian_path(other).with_name(json.loads(custodian_path(other).read_text())["fake"]["file"])
    edit, words = TAMPER[case]
    edit(side, other_side)
    rep = ppdp.verify(d, custodian=cust)
    assert not rep.ok and len(rep.problems) == 1, rep.problems
    assert "custodian file" in rep.problems[0] and words in rep.problems[0], rep.problems[0]
    with pytest.raises(ReleaseError, match=words):
        load_custodian(cust)
    r = CliRunner().invoke(cli, ["verify", str(d), "--custodian", str(cust)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --custodian: ") and words in err[0], r.stderr


@pytest.mark.parametrize("edit, words", [
    (lambda f: f.update(file="../" + f["file"]), "plain"),
    (lambda f: f.update(file="/etc/passwd"), "plain"),
    (lambda f: f.update(rows=f["rows"] + 1), "states"),
    (lambda f: f.update(rows=-1), "'rows'"),
    (lambda f: f.update(sha256="x" * 64), "sha256"),
    (lambda f: f.pop("bytes"), "exactly"),
    (lambda f: f.update(extra=1), "exactly"),
], ids=["parent dir", "absolute", "rows", "negative rows", "hash format", "no bytes", "extra key"])
def test_a_bad_sidecar_reference_fails_with_one_problem(saved, tmp_path, edit, words):
    d, cust, _ = _copy(saved, tmp_path)
    ref = json.loads(cust.read_text())
    edit(ref["fake"])
    cust.write_text(json.dumps(ref))
    rep = ppdp.verify(d, custodian=cust)
    assert not rep.ok and len(rep.problems) == 1 and words in rep.problems[0], rep.problems


def test_a_sidecar_with_other_contents_but_a_matching_reference_fails_verify(saved, tmp_path):
    """A consistent rewrite of the sidecar and its reference (another list of fakes) loads, and
    verify's own checks reject it."""
    d, cust, side = _copy(saved, tmp_path)
    fakes = load_custodian(cust)["fake"]
    code = fakes.code.copy()
    code[0] = (code[0] + 1) % len(fakes.labels)
    side.unlink()
    cust.unlink()
    save_custodian(cust, {"seed": 1, "fake": FakeList(fakes.bid, code, fakes.labels)})
    rep = ppdp.verify(d, custodian=cust)
    assert not rep.ok


def test_cli_verify_with_the_custodian_file(saved, tmp_path):
    d, cust, _ = _copy(saved, tmp_path)
    r = CliRunner().invoke(cli, ["verify", str(d), "--custodian", str(cust)])
    assert r.exit_code == 1 and "checked against the custodian file" in r.output  # a seeded run: not fit
    assert "NOT fit for publication" in r.output
    for bad in (tmp_path / "nothing.json", tmp_path):
        r = CliRunner().invoke(cli, ["verify", str(d), "--custodian", str(bad)])
        assert r.exit_code == 2 and "Traceback" not in r.output
        err = r.stderr.strip().splitlines()
        assert len(err) == 1 and "--custodian" in err[0], r.stderr
    (tmp_path / "junk.json").write_text("[1, 2")
    r = CliRunner().invoke(cli, ["verify", str(d), "--custodian", str(tmp_path / "junk.json")])
    assert r.exit_code == 2 and r.stderr.strip().startswith("error: --custodian: ") and len(r.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------- the older form
def test_the_older_json_only_form_still_verifies(saved, table, tmp_path):
    d, cust, side = _copy(saved, tmp_path)
    kept = load_custodian(cust)
    old = {"seed": kept["seed"], "fake": kept["fake"].to_json()}  # as ppdp wrote it before the sidecar
    side.unlink()
    cust.write_text(json.dumps(old, indent=2))
    back = load_custodian(cust)
    assert back["fake"] == kept["fake"] and back["seed"] == 1
    rep = ppdp.verify(d, table, custodian=cust)
    assert rep.ok, rep.problems
    assert rep.facts["fake_values"] == "checked against the custodian file"
    r = CliRunner().invoke(cli, ["verify", str(d), "--custodian", str(cust)])
    assert r.exit_code == 1 and "checked against the custodian file" in r.output
    # a fake moved to another bucket in the old form is still caught
    old["fake"]["bid"][0] = old["fake"]["bid"][-1]
    cust.write_text(json.dumps(old))
    assert not ppdp.verify(d, custodian=cust).ok
    # and a malformed old form is one problem
    cust.write_text(json.dumps({"fake": {"bid": [1, 2], "value": ["x"]}}))
    rep = ppdp.verify(d, custodian=cust)
    assert not rep.ok and len(rep.problems) == 1 and "equal lengths" in rep.problems[0]


# --------------------------------------------------------------------------- at scale: row-wise checks
@pytest.mark.parametrize("sigma", [1, 2])
def test_rowwise_checks_and_disclosure_equal_the_matrix_ones(table, tmp_path, monkeypatch, sigma):
    """Above DENSE_CELLS verify checks the fakes from the ST rows and the custodian file's pairs,
    and the disclosure is streamed over bucket ranges: the same checks, facts and disclosure
    as the n_buckets × m matrices give, and the same verdict on a moved fake."""
    import ppdp.releases.bucketized as B

    rel = ppdp.publish(table, ppdp.FPrivacy(theta=8, fake_values=sigma), seed=3)
    d = rel.save(tmp_path / "rel")
    cust = custodian_path(d)
    moved = tmp_path / "moved.custodian.json"
    fk = load_custodian(cust)["fake"]
    bid = fk.bid.copy()
    bid[0] = bid[-1]
    save_custodian(moved, {"fake": FakeList(bid, fk.code, fk.labels)})
    seen = {}
    for cells in (1 << 62, 0):
        monkeypatch.setattr(B, "DENSE_CELLS", cells)
        loaded = ppdp.load_release(d)
        assert loaded.rowwise() == (cells == 0)
        reps = [ppdp.verify(loaded, custodian=cust), ppdp.verify(ppdp.load_release(d)),
                ppdp.verify(ppdp.load_release(d), table, custodian=cust), ppdp.verify(ppdp.load_release(d), custodian=moved)]
        seen[cells] = ([(r.ok, sorted(r.checks), r.facts.get("fake_values")) for r in reps[:3]], reps[3].problems,
                       loaded.disclosure())
        assert all(r.ok for r in reps[:3]) and not reps[3].ok
    assert seen[0] == seen[1 << 62]
