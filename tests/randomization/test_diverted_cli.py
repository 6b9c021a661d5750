"""``ppdp publish diverted`` end to end (CLI), including the bad-input cases (SPEC §7)."""

import json

import pytest
from click.testing import CliRunner

from ppdp.cli import cli


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_publish_query_verify(tmp_path):
    out = tmp_path / "rel"
    r = run("publish", "diverted", "--dataset", "occ", "-n", "20003", "--l-prime", "5", "--seed", "1", "--out", str(out))
    assert r.exit_code == 0, r.output
    assert "dropped 3" in r.output and "verify: OK" in r.output
    m = json.loads((out / "manifest.json").read_text())
    assert (m["dropped"], m["n_published"], m["certificate"]["l_prime"]) == (3, 20000, 5)
    q = run("query", str(out), "sex = 'Female' AND occupation = '2'")
    assert q.exit_code == 0 and float(q.output.splitlines()[1].split()[0]) >= 0
    v = run("verify", str(out))  # a seeded run: the claim holds, but the release is not fit for publication
    assert v.exit_code == 1 and "verify: OK" in v.output and "NOT fit for publication" in v.output, v.output


@pytest.mark.parametrize("form", [["--sensitive", "age", "occupation"], ["--sensitive", "age", "--sensitive", "occupation"],
                                  ["--sensitive", "age,occupation"]])
def test_several_sensitive_attributes(tmp_path, form):
    out = tmp_path / "rel"
    r = run("publish", "diverted", "--dataset", "occ", "-n", "6000", *form, "--l-prime", "3", "--seed", "2", "--out", str(out))
    assert r.exit_code == 0, r.output
    m = json.loads((out / "manifest.json").read_text())
    assert m["schema"]["sensitive"] == ["age", "occupation"] and "age" not in m["schema"]["quasi"]


def test_input_file(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("a,s\n" + "".join(f"x{i % 3},v{i % 5}\n" for i in range(41)))
    out = tmp_path / "rel"
    r = run("publish", "diverted", str(csv), "--quasi", "a", "--sensitive", "s", "--l-prime", "4", "--seed", "0", "--out", str(out))
    assert r.exit_code == 0, r.output
    assert json.loads((out / "manifest.json").read_text())["dropped"] == 1


@pytest.mark.parametrize("args, message", [
    (["--l-prime", "12"], "not eligible"),
    (["--l-prime", "1"], "≥ 2"),
    (["--l-prime", "50"], "exceeds the 46 values"),
    (["--l-prime", "5", "--sensitive", "nope"], "unknown column"),
])
def test_bad_input_writes_nothing(tmp_path, args, message):
    out = tmp_path / "rel"
    r = run("publish", "diverted", "--dataset", "occ", *args, "--out", str(out))
    assert r.exit_code == 2
    assert message in r.output
    assert not out.exists() and not list(tmp_path.iterdir())
