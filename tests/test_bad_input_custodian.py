"""A custodian's wide table in `ppdp evaluate`: a histogram model whose dims the run fills from
the workload (every quasi-identifier and the sensitive attribute) over a cube of millions of
cells is refused at once with the way out, not built for minutes; on a workload over fewer columns it
runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
from click.testing import CliRunner

from ppdp.cli import cli


def _wide(tmp_path):
    rng = np.random.default_rng(0)
    n = 600
    cols = {f"q{i}": rng.integers(0, 12, n).astype(str) for i in range(6)}
    cols["y"] = rng.choice(["a", "b", "c"], n)
    p = tmp_path / "w.csv"
    pd.DataFrame(cols).to_csv(p, index=False)
    dom = ", ".join(f'"{i}"' for i in range(12))
    s = "[file]\nna = []\n" + "".join(f'[columns.q{i}]\nrole = "quasi"\ndomain = [{dom}]\n' for i in range(6))
    s += '[columns.y]\nrole = "sensitive"\ndomain = ["a", "b", "c"]\n'
    sch = tmp_path / "w.toml"
    sch.write_text(s, encoding="utf-8")
    return p, sch


def test_filled_dims_over_a_huge_cube_are_refused_with_the_way_out(tmp_path):
    p, sch = _wide(tmp_path)  # 12^6 · 3 ≈ 9 M cells for 600 rows
    out = tmp_path / "ev"
    r = CliRunner().invoke(cli, ["evaluate", str(p), "--schema", str(sch), "--trials", "1", "--queries", "50",
                                 "--model", "fprivacy:theta=2", "--model", "dpcube:epsilon=1", "-o", str(out)])
    assert r.exit_code == 0, r.output
    models = pd.read_csv(out / "models.csv", keep_default_na=False)
    err = models.loc[models["name"] == "dpcube", "error"].iloc[0]
    assert "8,957,952 cells for 600 rows" in err and "--workload range --dims q0,q1,y" in err
    assert models.loc[models["name"] == "fprivacy", "error"].iloc[0] == ""  # the other model still runs
    out2 = tmp_path / "ev2"
    r = CliRunner().invoke(cli, ["evaluate", str(p), "--schema", str(sch), "--trials", "1", "--queries", "50",
                                 "--workload", "range", "--dims", "q0,q1,y", "--model", "dpcube:epsilon=1", "-o", str(out2)])
    assert r.exit_code == 0, r.output
    m2 = pd.read_csv(out2 / "models.csv", keep_default_na=False)
    assert m2["error"].iloc[0] == "" and str(m2["verified"].iloc[0]) == "True"


def test_diverted_interval_holds_the_rows_it_dropped(tmp_path):
    """ℓ'-diverted publication drops N mod ℓ' random rows; a count over quasi-identifiers is then
    exact for the release but may be one short of the input's: the interval must hold it."""
    rng = np.random.default_rng(1)
    n = 401  # odd: one row dropped at ℓ' = 2
    df = pd.DataFrame({"sex": rng.choice(["f", "m"], n), "y": rng.choice(["a", "b", "c", "d"], n)})
    p = tmp_path / "t.csv"
    df.to_csv(p, index=False)
    args = ["--quasi", "sex", "--sensitive", "y"]
    r = CliRunner().invoke(cli, ["publish", "diverted", str(p), *args, "--l-prime", "2", "-o", str(tmp_path / "d")])
    assert r.exit_code == 0, r.output
    out = tmp_path / "q.csv"
    r = CliRunner().invoke(cli, ["query", str(tmp_path / "d"), "SELECT sex, COUNT(*) FROM t GROUP BY sex", "--input", str(p),
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    q = pd.read_csv(out)
    lo, hi = [c for c in q.columns if "lower" in c][0], [c for c in q.columns if "upper" in c][0]
    assert (q["exact"] >= q[lo]).all() and (q["exact"] <= q[hi]).all(), q
    assert (q[hi] - q[lo] == 1).all()  # exact on the release, one dropped row on the upper side
