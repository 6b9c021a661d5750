"""`ppdp schema infer` on a gzip-compressed CSV and on empty cells with no marker."""

from __future__ import annotations

import gzip
import tomllib

from click.testing import CliRunner

from ppdp.cli import cli

ROWS = "year,gender,vocab,age\n" + "".join(
    f"{1978 + i % 20},{'female' if i % 3 else 'male'},{'' if i % 17 == 0 else i % 11},{18 + i % 70}\n"
    for i in range(400))


def _infer(path, tmp_path):
    out = tmp_path / "s.toml"
    r = CliRunner().invoke(cli, ["schema", "infer", str(path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    return tomllib.loads(out.read_text(encoding="utf-8"))


def test_gzip_is_sniffed_as_its_text(tmp_path):
    plain, gz = tmp_path / "t.csv", tmp_path / "t.csv.gz"
    plain.write_text(ROWS, encoding="utf-8")
    with gzip.open(gz, "wb") as f:
        f.write(ROWS.encode("utf-8"))
    a, b = _infer(plain, tmp_path), _infer(gz, tmp_path)
    assert b["file"] == a["file"]
    assert b["file"]["encoding"] == "utf-8" and b["file"]["sep"] == "," and b["file"]["strip"] is False
    assert b["columns"] == a["columns"]


def test_empty_cells_make_missing_a_category(tmp_path):
    plain = tmp_path / "t.csv"
    plain.write_text(ROWS, encoding="utf-8")
    s = _infer(plain, tmp_path)
    assert s["file"]["na"] == []
    assert s["file"]["missing"] == "category"  # 'error' would refuse the table the schema describes
    no_missing = tmp_path / "u.csv"
    no_missing.write_text("a,b\n" + "".join(f"{i % 3},{'x' if i % 2 else 'y'}\n" for i in range(50)), encoding="utf-8")
    assert _infer(no_missing, tmp_path)["file"]["missing"] == "error"
