"""SPEC §7 for F'-privacy / Anatomy: each bad input gives one clear error — a ValueError
subclass in Python; exit code 2 and a single 'error: …' line (no traceback) on the CLI — and
leaves no release directory or temporary directory behind."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli
from ppdp.errors import InfeasibleError, PpdpError, SchemaError
from ppdp.table import Table


def _table(sa_values, n=40, seed=0):
    rng = np.random.default_rng(seed)
    sa = np.resize(np.arange(len(sa_values)), n)
    return Table({"age": rng.integers(0, 5, n), "s": sa}, {"age": [str(20 + i) for i in range(5)], "s": list(sa_values)},
                 quasi=["age"], sensitive=["s"])


def _csv(path, table):
    table.to_csv(path)
    return str(path)


# ---------------------------------------------------------------- Python API
@pytest.mark.parametrize("make, err, match", [
    (lambda: ppdp.FPrivacy(theta=0), ppdp.ParameterError, "theta must be a finite number > 0"),
    (lambda: ppdp.FPrivacy(theta=-2.0), PpdpError, "theta must be a finite number > 0"),
    (lambda: ppdp.FPrivacy(method="greedy"), PpdpError, "method must be one of"),
    (lambda: ppdp.FPrivacy(max_bucket=1), PpdpError, "max_bucket must be a whole number ≥ 2"),
    (lambda: ppdp.FPrivacy(fake_values=-1), PpdpError, "fake_values must be a whole number ≥ 0"),
    (lambda: ppdp.FPrivacy(floor=1.5), PpdpError, "floor must be a finite number in"),
    (lambda: ppdp.FPrivacy(overrides={"x": 0}), PpdpError, r"overrides\['x'\] must be a finite number"),
    (lambda: ppdp.FPrivacy(negative_associations=[("a", "b")]), PpdpError, "negative association"),
    (lambda: ppdp.Anatomy(1), PpdpError, "l must be a whole number ≥ 2"),
    (lambda: ppdp.Anatomy(2.5), PpdpError, "l must be a whole"),
])
def test_bad_parameters(make, err, match):
    with pytest.raises(err, match=match):
        make()


def test_bad_tables_and_requests():
    t = _table(["flu", "hiv", "cold"], n=300)
    cases = [
        (t, ppdp.FPrivacy(negative_associations=[["zip", "1", "flu"]], fake_values=1), SchemaError, "'zip' is not a quasi-identifier"),
        (_table(["flu", "hiv"]).take(np.zeros(0, dtype=np.int64)), ppdp.FPrivacy(), PpdpError, "empty"),
        (_table(["flu"]), ppdp.FPrivacy(), InfeasibleError, "single value"),
        (_table(["flu"]), ppdp.Anatomy(2), InfeasibleError, "single value"),
        (t, ppdp.FPrivacy(overrides={"hiv": 0.05}), InfeasibleError, "'hiv'"),
        (t, ppdp.FPrivacy(overrides={"aids": 0.5}), InfeasibleError, "'aids'"),
        (t, ppdp.Anatomy(4), InfeasibleError, "ℓ = 4 is larger than the number of SA values present \\(3\\)"),
        (t.with_roles(sensitive=[]), ppdp.FPrivacy(), SchemaError, "exactly one sensitive attribute"),
    ]
    for table, mech, err, match in cases:
        with pytest.raises(err, match=match):
            ppdp.publish(table, mech, seed=0)
        assert issubclass(err, ValueError)


def test_unknown_column_in_roles():
    with pytest.raises(SchemaError, match="unknown column 'nope'"):
        _table(["a", "b"]).with_roles(sensitive=["nope"])


# ----------------------------------------------------------------------- CLI
def _run(args, where):
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 2, (res.exit_code, res.output)
    err = res.stderr.strip()
    assert err.startswith("error:") and "Traceback" not in res.output and len(err.splitlines()) == 1, err
    leftovers = [p.name for p in where.iterdir() if p.name.startswith((".rel", "rel"))]
    assert not leftovers, leftovers
    return err


def test_cli_bad_input(tmp_path):
    out = str(tmp_path / "rel")
    three = _csv(tmp_path / "three.csv", _table(["flu", "hiv", "cold"], n=300))
    one = _csv(tmp_path / "one.csv", _table(["flu"]))
    empty = tmp_path / "empty.csv"
    empty.write_text("age,s\n")
    cases = [
        (["publish", "fprivacy", three, "--quasi", "zipcode", "--sensitive", "s", "-o", out], "zipcode"),
        (["publish", "fprivacy", "--dataset", "edu", "-n", "500", "--sensitive", "nope", "-o", out], "nope"),
        (["publish", "fprivacy", str(empty), "--quasi", "age", "--sensitive", "s", "-o", out], "empty"),
        (["publish", "fprivacy", one, "--quasi", "age", "--sensitive", "s", "-o", out], "single value"),
        (["publish", "anatomy", one, "--quasi", "age", "--sensitive", "s", "--l", "2", "-o", out], "single value"),
        (["publish", "fprivacy", three, "--quasi", "age", "--sensitive", "s", "--override", "hiv=0.05", "-o", out], "hiv"),
        (["publish", "fprivacy", three, "--quasi", "age", "--sensitive", "s", "--override", "hiv", "-o", out], "LABEL=F'"),
        (["publish", "anatomy", three, "--quasi", "age", "--sensitive", "s", "--l", "4", "-o", out], "larger than the number"),
        (["publish", "anatomy", "--dataset", "edu", "-n", "2000", "--l", "30", "-o", out], "larger than the number"),
        (["publish", "fprivacy", "--dataset", "edu", "-n", "500", "--theta", "0", "-o", out], "theta must be a finite number > 0"),
        (["publish", "fprivacy", "--dataset", "edu", "-n", "500", "--theta", "-1", "-o", out], "theta must be a finite number > 0"),
        (["publish", "fprivacy", three, "--quasi", "age", "--sensitive", "s", "--fake-values", "3", "-o", out], "fake values"),
    ]
    for args, needle in cases:
        err = _run(args, tmp_path)
        assert needle in err, (args, err)


def test_cli_refuses_an_existing_release_directory(tmp_path):
    three = _csv(tmp_path / "three.csv", _table(["flu", "hiv", "cold"], n=300))
    (tmp_path / "rel").mkdir()
    res = CliRunner().invoke(cli, ["publish", "fprivacy", three, "--quasi", "age", "--sensitive", "s", "-o", str(tmp_path / "rel")])
    assert res.exit_code == 2 and res.stderr.startswith("error:") and "exists" in res.stderr
    assert list((tmp_path / "rel").iterdir()) == []
