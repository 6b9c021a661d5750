"""Schema files and the file flags: one declaration of how to read a table and what each
column is (separators incl. ", " and TAB, header/names, encoding, missing markers, stripping,
roles, public domains, bins, protected values), the same as flags, and `ppdp schema infer`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli
from ppdp.errors import QueryError, SchemaError
from ppdp.schema import BinSpec, bin_edges, load_schema, read_table, schema_from_dict

ROWS = [("39", "State-gov", "Female", "Adm-clerical"), ("50", "?", "Male", "Exec-managerial"),
        ("38", "Private", "Male", "NA"), ("53", "Private", "Female", "Sales"), ("28", "", "Male", "Sales"),
        ("61", "Private", "Female", "Exec-managerial")]
NAMES = ["age", "workclass", "sex", "occupation"]


def write(path: Path, sep: str, header: bool = True, encoding: str = "utf-8", pad: str = "") -> Path:
    lines = [sep.join(f"{pad}{n}{pad}" for n in NAMES)] if header else []
    lines += [sep.join(r) for r in ROWS]
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding))
    return path


def schema_file(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


BASE = """
[file]
{file}
na = ["?", "NA"]
missing = "category"

[columns.age]
role = "quasi"
type = "numeric"
bins = [20, 40, 60, 80]

[columns.workclass]
role = "quasi"

[columns.sex]
role = "quasi"
domain = ["Female", "Male"]

[columns.occupation]
role = "sensitive"
"""


@pytest.mark.parametrize("sep,file_opts,header", [
    (", ", 'sep = ", "\nheader = false\nnames = ["age", "workclass", "sex", "occupation"]', False),
    ("\t", 'sep = "tab"', True),
    (";", 'sep = ";"', True),
    (" | ", 'sep = " | "', True),
])
def test_every_layout_reads_to_the_same_table(tmp_path, sep, file_opts, header):
    data = write(tmp_path / "t.txt", sep, header)
    t = read_table(data, schema_from_dict(_toml(BASE.format(file=file_opts))))
    assert t.quasi == ("age", "workclass", "sex") and t.sensitive == ("occupation",)
    assert t.domain("age") == ("[20, 40)", "[40, 60)", "[60, 80]")
    # '?' and the empty cell in workclass, 'NA' in occupation are missing, never labels
    assert t.domain("workclass") == ("Private", "State-gov", "(missing)")
    assert list(t.labels("workclass")).count("(missing)") == 2
    assert "NA" not in t.domain("occupation") and t.domain("occupation")[-1] == "(missing)"
    assert t.domain("sex") == ("Female", "Male")


def _toml(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)


def test_names_and_values_are_stripped(tmp_path):
    data = write(tmp_path / "t.csv", ",", pad=" ")
    t = read_table(data, schema_from_dict(_toml(BASE.format(file='strip = true'))))
    assert t.column_names == ["age", "workclass", "sex", "occupation"]


def test_encoding_latin1(tmp_path):
    p = tmp_path / "l.csv"
    p.write_bytes("age,city,sa\n30,Zürich,a\n40,Genève,b\n".encode("latin-1"))
    sch = schema_from_dict({"file": {"encoding": "latin-1"}, "columns": {"city": {"role": "quasi"},
                                                                         "sa": {"role": "sensitive"}}})
    t = read_table(p, sch)
    assert t.domain("city") == ("Genève", "Zürich")
    r = CliRunner().invoke(cli, ["publish", "uniform", str(p), "--quasi", "city", "--sensitive", "sa",
                                 "--retention", "0.5", "-o", str(tmp_path / "r")])
    assert r.exit_code == 2 and "--encoding" in r.output


def test_flags_equal_the_schema_file(tmp_path):
    """--sep ', ' --no-header --names … --na … --bin … give the same release as the schema file."""
    data = write(tmp_path / "t.data", ", ", header=False)
    sch = schema_file(tmp_path / "s.toml", BASE.format(
        file='sep = ", "\nheader = false\nnames = ["age", "workclass", "sex", "occupation"]'))
    a, b = tmp_path / "a", tmp_path / "b"
    ra = CliRunner().invoke(cli, ["publish", "uniform", str(data), "--schema", str(sch), "--retention", "0.5",
                                  "--seed", "1", "-o", str(a)])
    rb = CliRunner().invoke(cli, ["publish", "uniform", str(data), "--sep", ", ", "--no-header", "--names",
                                  "age,workclass,sex,occupation", "--na", "?", "--na", "NA", "--missing", "category",
                                  "--quasi", "age,workclass,sex", "--sensitive", "occupation",
                                  "--bin", "age=20,40,60,80", "--retention", "0.5", "--seed", "1", "-o", str(b)])
    assert ra.exit_code == 0 and rb.exit_code == 0, ra.output + rb.output
    ma, mb = (json.loads((d / "manifest.json").read_text()) for d in (a, b))
    assert ma["schema"]["domains"]["age"] == mb["schema"]["domains"]["age"] == ["[20, 40)", "[40, 60)", "[60, 80]"]
    assert ma["schema"]["bins"] == mb["schema"]["bins"] == {"age": [20, 40, 60, 80]}
    assert ma["schema"]["domains"]["occupation"] == mb["schema"]["domains"]["occupation"]
    # a flag wins over the file: the schema's roles replaced by --quasi
    r = CliRunner().invoke(cli, ["publish", "uniform", str(data), "--schema", str(sch), "--quasi", "sex",
                                 "--retention", "0.5", "-o", str(tmp_path / "c")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "c" / "manifest.json").read_text())["schema"]["quasi"] == ["sex"]


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize("text,needle", [
    ("[file]\nseperator = ','\n", "unknown key file.seperator"),
    ("[columns.age]\nrole = 'quasi'\nbin = [1, 2]\n", "unknown key columns.age.bin"),
    ("[columns.age]\nrole = 'qi'\n", "columns.age.role"),
    ("[columns.age]\ntype = 'float'\n", "columns.age.type"),
    ("[columns.age]\nbins = [3, 2]\n", "columns.age.bins"),
    ("[columns.age]\nbins = { width = 5 }\n", "min and max"),
    ("[columns.age]\nbins = { width = 5, min = 0, max = 10, quantiles = 3 }\n", "exactly one of"),
    ("[file]\nheader = 'no'\n", "file.header"),
    ("[file]\nheader = false\n", "file.names"),
    ("[file]\nencoding = 'klingon'\n", "file.encoding"),
    ("[file]\nmissing = 'omit'\n", "file.missing"),
    ("[columns.sa]\nrole = 'quasi'\nsensitive_values = ['x']\n", "columns.sa.sensitive_values"),
    ("nonsense = 1\n", "unknown key nonsense"),
    ("[file\n", "not valid TOML"),
])
def test_a_bad_schema_is_one_line_naming_the_key(tmp_path, text, needle):
    p = schema_file(tmp_path / "bad.toml", text)
    with pytest.raises(SchemaError, match=None) as e:
        load_schema(p)
    assert needle in str(e.value)
    data = write(tmp_path / "t.csv", ",")
    r = CliRunner().invoke(cli, ["publish", "uniform", str(data), "--schema", str(p), "--retention", "0.5",
                                 "-o", str(tmp_path / "r")])
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and r.output.startswith("error: ") and needle in r.output


def test_schema_on_every_command():
    for cmd in (["publish", m] for m in ppdp.registry.mechanisms()):
        assert "--schema" in CliRunner().invoke(cli, [*cmd, "--help"]).output, cmd
    for cmd in (["evaluate"], ["audit"], ["verify"]):
        out = CliRunner().invoke(cli, [*cmd, "--help"]).output
        assert "--schema" in out and "--sep" in out and "--no-header" in out, cmd


# ---------------------------------------------------------------------------------- bins
def test_bin_specs():
    assert BinSpec(width=10, lo=0, hi=95).resolve() == (0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100)
    assert BinSpec(count=4, lo=0, hi=1).resolve() == (0, 0.25, 0.5, 0.75, 1)
    assert BinSpec(quantiles=2).resolve(np.arange(11.0)) == (0, 5, 10)
    assert bin_edges(["[0, 10)", "[10, 20]", "(missing)"]) == (0, 10, 20)
    assert bin_edges(["[0, 10)", "[11, 20]"]) is None and bin_edges(["a", "b"]) is None


def _numeric_table(tmp_path, n=400, seed=0):
    rng = np.random.default_rng(seed)
    p = tmp_path / "num.csv"
    age = rng.integers(18, 90, n)
    sex = rng.choice(["F", "M"], n)
    sa = rng.choice(list("abcdefgh"), n)
    income = np.round(rng.gamma(2, 20000, n), 2)
    p.write_text("age,sex,sa,income\n" + "".join(f"{a},{s},{x},{i}\n" for a, s, x, i in zip(age, sex, sa, income)))
    return p, age, sex


@pytest.mark.parametrize("mech,flags", [
    ("fprivacy", ["--theta", "4"]),  # 8 values of share 1/8: θ = 8 would bound none of them (f' = 1), refused
    ("uniform", ["--retention", "0.5"]),
    ("cells", ["--epsilon", "1", "--dims", "age", "sex"]),
])
def test_bins_for_every_family_and_cut_ranges_are_refused(tmp_path, mech, flags):
    """A binned age in a bucketized, a randomized and a histogram release: whole-bin ranges
    are answered (exactly, for the QI-preserving families), a range cutting a bin is refused
    with the edges named; the edges are in the manifest."""
    data, age, sex = _numeric_table(tmp_path)
    sch = schema_file(tmp_path / "s.toml", """
[columns.age]
role = "quasi"
bins = { width = 20, min = 10, max = 90 }
[columns.sex]
role = "quasi"
domain = ["F", "M"]
[columns.sa]
role = "sensitive"
""")
    rel = tmp_path / "r"
    r = CliRunner().invoke(cli, ["publish", mech, str(data), "--schema", str(sch), *flags, "-o", str(rel)])
    assert r.exit_code == 0, r.output
    m = json.loads((rel / "manifest.json").read_text())
    assert m["schema"]["bins"]["age"] == [10, 30, 50, 70, 90]
    release = ppdp.load_release(rel)
    truth = int(np.sum((age >= 30) & (age < 70)))
    est = release.count("age >= 30 AND age < 70")
    if m["family"] != "histogram":
        assert est == pytest.approx(truth)
    else:  # ε = 1, two cells' worth of discrete Laplace noise: |error| < 40 fails with p < 1e-15
        assert abs(est - truth) < 40
    for where in ("age BETWEEN 30 AND 40", "age > 35", "age >= 30 AND age <= 70"):
        with pytest.raises(QueryError, match=r"cuts its bin .* edges 10, 30, 50, 70, 90"):
            release.count(where)
    q = CliRunner().invoke(cli, ["query", str(rel), "age BETWEEN 30 AND 40"])
    assert q.exit_code == 2 and "cuts its bin [30, 50)" in q.output


def test_quantile_bins(tmp_path):
    """Quantile edges come from the data: fine for a bucketized release (its QI are published
    as they are), refused with advice for an ε-DP one."""
    data, age, _ = _numeric_table(tmp_path)
    sch = schema_file(tmp_path / "s.toml", "[columns.age]\nrole = 'quasi'\nbins = { quantiles = 4 }\n"
                                            "[columns.sex]\nrole = 'quasi'\ndomain = ['F', 'M']\n"
                                            "[columns.sa]\nrole = 'sensitive'\n")
    r = CliRunner().invoke(cli, ["publish", "anatomy", str(data), "--schema", str(sch), "--l", "2",
                                 "-o", str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    edges = json.loads((tmp_path / "a" / "manifest.json").read_text())["schema"]["bins"]["age"]
    assert edges == pytest.approx(list(np.quantile(age.astype(float), [0, .25, .5, .75, 1])))
    r = CliRunner().invoke(cli, ["publish", "dpcube", str(data), "--schema", str(sch), "--epsilon", "1",
                                 "--dims", "age", "sex", "-o", str(tmp_path / "d")])
    assert r.exit_code == 2 and "quantile bins" in r.output and "width" in r.output


def test_continuous_sensitive_attribute_is_refused_with_advice(tmp_path):
    data, _, _ = _numeric_table(tmp_path)
    args = ["publish", "uniform", str(data), "--quasi", "sex", "--sensitive", "income", "--numeric", "income",
            "--retention", "0.5"]
    r = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "a")])
    assert r.exit_code == 2
    assert "'income' is numeric with" in r.output and "--bin income=" in r.output and "--allow-continuous-sa" in r.output
    r = CliRunner().invoke(cli, [*args, "--bin", "income=0,20000,50000,100000,1000000", "-o", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, [*args, "--allow-continuous-sa", "-o", str(tmp_path / "c")])
    assert r.exit_code == 0, r.output


def test_a_release_protecting_nothing_needs_a_flag(tmp_path):
    data, _, _ = _numeric_table(tmp_path)
    base = ["publish", "fprivacy", str(data), "--sensitive", "sa", "--theta", "4"]
    r = CliRunner().invoke(cli, [*base, "-o", str(tmp_path / "a")])
    assert r.exit_code == 2 and "no quasi-identifier" in r.output and "--allow-no-quasi" in r.output
    assert not (tmp_path / "a").exists()
    r = CliRunner().invoke(cli, [*base, "--quasi", "sex", "--sensitive-value", "zz", "-o", str(tmp_path / "b")])
    assert r.exit_code == 2 and "none of the protected values" in r.output
    r = CliRunner().invoke(cli, [*base, "--allow-no-quasi", "-o", str(tmp_path / "c")])
    assert r.exit_code == 0, r.output


# ---------------------------------------------------------------------------------- infer
def test_infer_spells_out_its_guesses_and_reads_back(tmp_path):
    data = write(tmp_path / "t.data", ", ", header=False)
    out = tmp_path / "s.toml"
    r = CliRunner().invoke(cli, ["schema", "infer", str(data), "-o", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert 'sep = ", "' in text and "header = false" in text and "# guessed:" in text
    assert '"?"' in text and '"NA"' in text
    sch = load_schema(out)
    assert sch.file.header is False and sch.file.names == ("col1", "col2", "col3", "col4")
    assert sch.columns["col1"].type == "numeric"
    t = read_table(data, sch)
    assert t.n_rows == len(ROWS)


def test_infer_tsv_with_header(tmp_path):
    data = write(tmp_path / "t.tsv", "\t", header=True)
    r = CliRunner().invoke(cli, ["schema", "infer", str(data)])
    assert r.exit_code == 0, r.output
    sch = schema_from_dict(_toml(r.output))
    assert sch.file.sep == "\t" and sch.file.header is True and list(sch.columns) == NAMES
