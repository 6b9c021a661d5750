"""Safe loading (issue [verify] item 3): only the files and columns a family's format defines
are read, as regular files; bounded, strict JSON; Parquet row counts checked from the footer
before decoding; every malformed release is one clear ReleaseError (CLI: one ``error:`` line,
exit 2), never a traceback; anything extra in the directory is a problem ``verify`` reports.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import ppdp
from ppdp import registry
from ppdp.cli import cli
from ppdp.errors import ReleaseError
from ppdp.releases import storage
from ppdp.releases.base import load_release

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contract"))
from test_contract import EXAMPLES  # noqa: E402  (the contract suite's example of every mechanism)

#: one mechanism per release family
FAMILIES = {"bucketized": "fprivacy", "randomized": "sdr", "histogram": "dpcube", "answers": "laplace"}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """family → (a saved release directory, its source table)."""
    root = tmp_path_factory.mktemp("releases")
    out = {}
    for fam, name in FAMILIES.items():
        params, (ds, n) = EXAMPLES[name]
        table = ppdp.datasets.load(ds, n=n, seed=0)
        rel = ppdp.publish(table, registry.mechanism(name)(**params))
        assert rel.family == fam
        out[fam] = (rel.save(root / fam), table)
    return out


def _copy(saved, fam, tmp_path) -> Path:
    d = tmp_path / fam
    shutil.copytree(saved[fam][0], d)
    return d


def _largest(d: Path) -> str:
    """The declared Parquet file with the most rows."""
    toc = json.loads((d / "manifest.json").read_text())["files"]
    return max(toc, key=lambda k: toc[k]["rows"])


def test_untouched_releases_verify(saved):
    for fam, (d, table) in saved.items():
        rep = ppdp.verify(d, table)
        assert rep.ok, (fam, rep.problems)


# ------------------------------------------------------------------ problems verify reports
@pytest.mark.parametrize("fam", FAMILIES)
def test_raw_source_added_as_an_extra_parquet_is_a_problem(saved, fam, tmp_path):
    d = _copy(saved, fam, tmp_path)
    saved[fam][1].to_parquet(d / "source.parquet")
    rel = load_release(d)
    assert "source" not in rel.tables
    rep = ppdp.verify(rel)
    assert not rep.ok and any("source.parquet" in p for p in rep.problems), rep.problems


@pytest.mark.parametrize("fam", FAMILIES)
def test_extra_row_id_column_is_a_problem_and_not_read(saved, fam, tmp_path):
    d = _copy(saved, fam, tmp_path)
    stem = _largest(d)
    t = pq.read_table(d / f"{stem}.parquet")
    pq.write_table(t.append_column("row_id", pa.array(np.arange(t.num_rows))), d / f"{stem}.parquet")
    rel = load_release(d)
    assert "row_id" not in rel.tables[stem].column_names
    rep = ppdp.verify(rel)
    assert not rep.ok and any("row_id" in p for p in rep.problems), rep.problems


@pytest.mark.parametrize("fam", FAMILIES)
def test_a_parquet_symlinked_from_outside_is_not_followed(saved, fam, tmp_path):
    d = _copy(saved, fam, tmp_path)
    stem = _largest(d)
    outside = tmp_path / "outside.parquet"
    shutil.move(d / f"{stem}.parquet", outside)
    os.symlink(outside, d / f"{stem}.parquet")
    rel = load_release(d)
    assert stem not in rel.tables
    rep = ppdp.verify(rel)
    assert not rep.ok and any("symbolic link" in p for p in rep.problems), rep.problems


@pytest.mark.parametrize("entry", ["symlink", "subdir", "notes"])
def test_any_other_entry_is_a_problem(saved, entry, tmp_path):
    d = _copy(saved, "randomized", tmp_path)
    if entry == "symlink":
        os.symlink("/etc/passwd", d / "extra.parquet")
    elif entry == "subdir":
        (d / "more").mkdir()
    else:
        (d / "notes.txt").write_text("hi")
    rep = ppdp.verify(d)
    assert not rep.ok and len(rep.problems) >= 1, rep.problems


def test_fewer_rows_than_the_manifest_states_is_a_problem(saved, tmp_path):
    d = _copy(saved, "randomized", tmp_path)
    t = pq.read_table(d / "data.parquet")
    pq.write_table(t.slice(0, t.num_rows - 10), d / "data.parquet")
    rep = ppdp.verify(d)
    assert not rep.ok and any("table of contents" in p for p in rep.problems), rep.problems


# ------------------------------------------------------------------ malformed: ReleaseError
@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    """10^8 rows of one int64 column in ~0.5 MB of Parquet."""
    p = tmp_path_factory.mktemp("bomb") / "bomb.parquet"
    chunk = pa.table({"bid": pa.array(np.zeros(10**6, np.int64))})
    with pq.ParquetWriter(p, chunk.schema, compression="zstd") as w:
        for _ in range(100):
            w.write_table(chunk, row_group_size=10**6)
    return p


def test_a_parquet_of_1e8_rows_is_refused_before_decoding(saved, bomb, tmp_path):
    d = _copy(saved, "bucketized", tmp_path)
    shutil.copy(bomb, d / "qit.parquet")
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    with pytest.raises(ReleaseError, match="100,000,000 rows, the manifest states"):
        load_release(d)
    took = time.perf_counter() - t0
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    print(f"10^8-row Parquet ({bomb.stat().st_size:,} bytes): refused in {took:.3f} s, peak RSS grew {grew_mb:.0f} MB")
    assert took < 5 and grew_mb < 200
    # also when the manifest is edited to match: the absolute cap (load_release(max_rows=…))
    m = json.loads((d / "manifest.json").read_text())
    m["files"]["qit"]["rows"] = 10**8
    (d / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ReleaseError, match="at most 1,000,000 are read"):
        load_release(d, max_rows=10**6)


def _deep(n: int) -> str:
    return "[" * n + "]" * n


MANIFEST_EDITS = {
    "a JSON list": lambda m: "[1, 2, 3]",
    "NaN": lambda m: json.dumps(m).replace('"n_input": ', '"n_input": NaN, "x": ', 1),
    "Infinity": lambda m: json.dumps(m).replace('"n_input": ', '"n_input": Infinity, "x": ', 1),
    "1e999": lambda m: json.dumps(m).replace('"n_input": ', '"n_input": 1e999, "x": ', 1),
    "a duplicate key": lambda m: json.dumps(m)[:-1] + ', "format": "ppdp-release/1"}',
    "50,000-deep nesting": lambda m: json.dumps({**m, "extra": "@@"}).replace('"@@"', _deep(50_000)),
    "truncated JSON": lambda m: json.dumps(m)[:-20],
    "not UTF-8": lambda m: json.dumps(m).encode().replace(b'"format"', b'"\xff\xfeformat"'),
    "a huge integer": lambda m: json.dumps(m).replace('"n_input": ', '"n_input": ' + "9" * 5000 + ', "x": ', 1),
    "no format": lambda m: json.dumps({k: v for k, v in m.items() if k != "format"}),
    "no family": lambda m: json.dumps({k: v for k, v in m.items() if k != "family"}),
    "unknown family": lambda m: json.dumps({**m, "family": "os.system"}),
    "no schema": lambda m: json.dumps({k: v for k, v in m.items() if k != "schema"}),
    "no files": lambda m: json.dumps({k: v for k, v in m.items() if k != "files"}),
    "schema a string": lambda m: json.dumps({**m, "schema": "quasi"}),
    "quasi not a list": lambda m: json.dumps({**m, "schema": {**m["schema"], "quasi": "age"}}),
    "domains hold numbers": lambda m: json.dumps({**m, "schema": {**m["schema"], "domains": {"a": [1, 2]}}}),
    "files rows a string": lambda m: json.dumps({**m, "files": {k: {"rows": "many"} for k in m["files"]}}),
    "files rows negative": lambda m: json.dumps({**m, "files": {k: {"rows": -1} for k in m["files"]}}),
    "params a list": lambda m: json.dumps({**m, "params": [1]}),
    "certificate a string": lambda m: json.dumps({**m, "certificate": "trust me"}),
}


@pytest.mark.parametrize("case", MANIFEST_EDITS)
def test_every_malformed_manifest_is_one_clear_error(saved, case, tmp_path):
    d = _copy(saved, "bucketized", tmp_path)
    m = json.loads((d / "manifest.json").read_text())
    text = MANIFEST_EDITS[case](m)
    (d / "manifest.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ReleaseError):
        load_release(d)
    for cmd in (["verify", str(d)], ["query", str(d), "sex = 'Female'"]):
        r = CliRunner().invoke(cli, cmd)
        assert isinstance(r.exception, SystemExit), (case, r.exception)  # not an uncaught exception
        lines = [x for x in r.output.splitlines() if x.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (case, r.output)


def test_wrongly_typed_counts_and_fitness_are_problems_not_crashes(saved, tmp_path):
    d = _copy(saved, "randomized", tmp_path)
    m = json.loads((d / "manifest.json").read_text())
    for key, value in (("n_input", "3000"), ("n_published", 2.5), ("dropped", True), ("fit_for_publication", 1)):
        (d / "manifest.json").write_text(json.dumps({**m, key: value}))
        rep = ppdp.verify(d)
        assert not rep.ok, key


def test_oversized_manifest_is_refused(saved, tmp_path, monkeypatch):
    d = _copy(saved, "bucketized", tmp_path)
    monkeypatch.setattr(storage, "MAX_JSON_BYTES", 1000)
    import ppdp.releases.storage as st

    real = st.read_json
    monkeypatch.setattr("ppdp.releases.base.read_json", lambda p, what: real(p, what, max_bytes=1000))
    with pytest.raises(ReleaseError, match="exceeds 1,000 bytes"):
        load_release(d)


@pytest.mark.parametrize("case", ["manifest symlink", "manifest directory", "garbage parquet", "nested column",
                                  "not a directory", "empty directory"])
def test_malformed_files_are_one_clear_error(saved, case, tmp_path):
    d = _copy(saved, "randomized", tmp_path)
    if case == "manifest symlink":
        shutil.move(d / "manifest.json", tmp_path / "m.json")
        os.symlink(tmp_path / "m.json", d / "manifest.json")
    elif case == "manifest directory":
        (d / "manifest.json").unlink()
        (d / "manifest.json").mkdir()
    elif case == "garbage parquet":
        (d / "data.parquet").write_bytes(os.urandom(5000) + b"PAR1")
    elif case == "nested column":
        t = pq.read_table(d / "data.parquet")
        sa = json.loads((d / "manifest.json").read_text())["schema"]["sensitive"][0]
        i = t.column_names.index(sa)
        t = t.set_column(i, sa, pa.array([[1, 2]] * t.num_rows))
        pq.write_table(t, d / "data.parquet")
    elif case == "not a directory":
        shutil.rmtree(d)
        d.write_text("x")
    else:
        shutil.rmtree(d)
        d.mkdir()
    with pytest.raises(ReleaseError):
        load_release(d)
    r = CliRunner().invoke(cli, ["verify", str(d)])
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), (case, r.output)
    if case != "not a directory":  # that one is click's own usage error ("… is a file")
        lines = [x for x in r.output.splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), (case, r.output)


def test_json_depth_scanner_skips_strings():
    assert storage.json_depth('{"a": "[[[[{{{{", "b": [1, [2]]}') == 3
    assert storage.json_depth(r'{"a": "\"[[[["}') == 1
