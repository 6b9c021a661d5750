"""CLI: ppdp publish dpcube|cells, query and verify on histogram releases; bad input exits 2."""

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from ppdp.cli import cli


def test_publish_query_verify(tmp_path):
    rng = np.random.default_rng(0)
    csv = tmp_path / "t.csv"
    pd.DataFrame({"age": rng.integers(18, 60, 500), "hours": rng.integers(10, 60, 500)}).to_csv(csv, index=False)
    run = CliRunner().invoke
    out = tmp_path / "rel"
    undeclared = run(cli, ["publish", "dpcube", str(csv), "--dims", "age", "hours", "--epsilon", "1", "--bins",
                           "age=18,30,45,60", "--seed", "1", "--out", str(out)])
    assert undeclared.exit_code == 2 and "not declared" in undeclared.output and not out.exists()
    r = run(cli, ["publish", "dpcube", str(csv), "--dims", "age", "hours", "--epsilon", "1", "--bins",
                  "age=18,30,45,60", "--domains", "hours=" + ",".join(str(h) for h in range(10, 60)), "--seed", "1",
                  "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "verify: OK" in r.output
    q = run(cli, ["query", str(out), "age >= 18 AND age < 30 AND hours BETWEEN 10 AND 30"])  # ranges follow bin edges
    assert q.exit_code == 0 and float(q.output.splitlines()[1].split()[0]) >= 0
    v = run(cli, ["verify", str(out), "--input", str(csv)])
    assert v.exit_code == 1 and "verify: OK" in v.output and "NOT fit for publication" in v.output, v.output  # seeded
    c = run(cli, ["publish", "cells", "--dataset", "adult", "--dims", "age", "sex", "-e", "0.5", "--seed", "2",
                  "-o", str(tmp_path / "c")])
    assert c.exit_code == 0, c.output


@pytest.mark.parametrize("args,msg", [
    (["--dims", "age", "-e", "0"], "epsilon"),
    (["--dims", "agee", "-e", "1"], "unknown dimension"),
    (["--dims", "age", "-e", "1", "--bins", "age=20,50"], "uncovered"),
    (["--dims", "age", "-e", "1", "--bins", "age=a,b"], "numbers"),
    (["--dims", "fnlwgt", "-e", "1"], "not declared"),  # no documented domain: bin it
    (["--dims", "age", "-e", "1e-300"], "epsilon"),  # below the sampler's floor
    (["--dims", "age", "-e", "1", "--domains", "nosuchtable"], "not a bundled table"),
])
def test_bad_input_exit_2(tmp_path, args, msg):
    r = CliRunner().invoke(cli, ["publish", "dpcube", "--dataset", "adult", *args, "-o", str(tmp_path / "x")])
    assert r.exit_code == 2
    assert msg in r.output
    assert not (tmp_path / "x").exists()


def test_empty_input_exit_2(tmp_path):
    csv = tmp_path / "e.csv"
    csv.write_text("age,hours\n")
    r = CliRunner().invoke(cli, ["publish", "cells", str(csv), "--dims", "age", "-e", "1", "-o", str(tmp_path / "x")])
    assert r.exit_code == 2 and "empty" in r.output


def test_verify_and_audit_a_histogram_over_the_datasets_sensitive_column(tmp_path):
    """A histogram's dimensions may include the bundled table's sensitive column: verify and
    audit against ``--dataset`` read it as a dimension (a histogram has no sensitive column)."""
    out = tmp_path / "h"
    r = CliRunner().invoke(cli, ["publish", "cells", "--dataset", "adult", "-n", "500", "--dims", "age,sex,occupation",
                                 "-e", "1", "--seed", "1", "-o", str(out)])
    assert r.exit_code == 0, r.output
    v = CliRunner().invoke(cli, ["verify", str(out), "--dataset", "adult", "-n", "500"])
    assert "verify: OK" in v.output and v.exit_code == 1 and "NOT fit for publication" in v.output, v.output  # seeded
    a = CliRunner().invoke(cli, ["audit", str(out), "--dataset", "adult", "-n", "500", "-o", str(tmp_path / "a")])
    assert a.exit_code == 0 and "no violations" in a.output, a.output
