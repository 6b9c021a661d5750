"""Bad input to the file flags and schema files: one line naming the flag or the schema key,
exit 2, nothing written."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ppdp.cli import cli


@pytest.fixture
def data(tmp_path):
    p = tmp_path / "t.data"
    p.write_text("39, State-gov, Female, Sales\n50, ?, Male, Exec\n38, Private, Male, Sales\n")
    return p


def _schema(tmp_path, text):
    p = tmp_path / "s.toml"
    p.write_text(text)
    return str(p)


CASES = {
    "no header, no names": (lambda d, t: [str(d), "--sep", ", ", "--no-header"], "--names"),
    "names count": (lambda d, t: [str(d), "--sep", ", ", "--no-header", "--names", "a,b"], "--names"),
    "names duplicate": (lambda d, t: [str(d), "--no-header", "--names", "a,a,b,c"], "--names"),
    "empty sep": (lambda d, t: [str(d), "--sep", ""], "--sep"),
    "unknown encoding": (lambda d, t: [str(d), "--encoding", "klingon"], "--encoding"),
    "bad bin": (lambda d, t: [str(d), "--bin", "age"], "--bin"),
    "bin not increasing": (lambda d, t: [str(d), "--bin", "age=50,20"], "--bin"),
    "file flag with dataset": (lambda d, t: ["--dataset", "occ", "--sep", ";"], "--sep"),
    "no header row": (lambda d, t: [str(d)], "--no-header"),
    "wrong separator": (lambda d, t: [str(d), "--sep", ";"], "--sep"),
    "schema file missing": (lambda d, t: [str(d), "--schema", str(t / "nope.toml")], "--schema"),
    "schema names an absent column": (
        lambda d, t: [str(d), "--schema", _schema(t, "[file]\nsep = ', '\nheader = false\n"
                                                     "names = ['age', 'w', 'sex', 'occ']\n"
                                                     "[columns.zip]\nrole = 'quasi'\n")], "columns.zip"),
    "value outside the declared domain": (
        lambda d, t: [str(d), "--schema", _schema(t, "[file]\nsep = ', '\nheader = false\nmissing = 'category'\n"
                                                     "names = ['age', 'w', 'sex', 'occ']\n"
                                                     "[columns.sex]\nrole = 'quasi'\ndomain = ['F', 'M']\n"
                                                     "[columns.occ]\nrole = 'sensitive'\n")], "domain"),
    "missing as error names the flag": (
        lambda d, t: [str(d), "--sep", ", ", "--no-header", "--names", "age,w,sex,occ", "--quasi", "w",
                      "--sensitive", "occ"], "--missing category"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_line_naming_the_flag(tmp_path, data, case):
    make, needle = CASES[case]
    args = make(data, tmp_path)
    if "--quasi" not in args and "--schema" not in args:
        args += ["--quasi", "sex", "--sensitive", "occ"]
    out = tmp_path / "rel"
    r = CliRunner().invoke(cli, ["publish", "uniform", *args, "--retention", "0.5", "-o", str(out)])
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: ") and r.output.count("\n") == 1, r.output
    assert needle in r.output, r.output
    assert "Traceback" not in r.output and not out.exists()
