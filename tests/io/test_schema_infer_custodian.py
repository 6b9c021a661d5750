"""`ppdp schema infer` and the reader on what a custodian's own export holds: numbers with a
thousands separator inside quotes, numeric missing-value codes (999), tab separators, values
with spaces around them, and a DP histogram dimension whose domain is not declared."""

from __future__ import annotations

import tomllib

import numpy as np
from click.testing import CliRunner

from ppdp.cli import cli
from ppdp.schema import load_schema, read_table

rng = np.random.default_rng(0)


def _infer(path, tmp_path):
    out = tmp_path / "s.toml"
    r = CliRunner().invoke(cli, ["schema", "infer", str(path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    return tomllib.loads(out.read_text(encoding="utf-8")), out.read_text(encoding="utf-8")


def _wages(tmp_path):
    w = np.round(rng.lognormal(6.2, 0.6, 300), 2)
    lines = ["wage,region,age"] + [
        (f'"{x:,.2f}"' if x >= 1000 else f"{x:.2f}") + f",{'north' if i % 2 else 'south'},{20 + i % 40}"
        for i, x in enumerate(w)]
    p = tmp_path / "w.csv"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert (w >= 1000).sum() > 10
    return p, w


def test_quoted_thousands_are_numbers(tmp_path):
    p, w = _wages(tmp_path)
    s, text = _infer(p, tmp_path)
    assert s["file"]["sep"] == "," and "no separator splits" not in text  # the quoted ',' is no separator
    assert s["file"]["thousands"] == ","
    assert s["columns"]["wage"]["type"] == "numeric"
    sch = tmp_path / "r.toml"
    sch.write_text('[file]\nthousands = ","\nna = []\n[columns.wage]\nrole = "sensitive"\ntype = "numeric"\n'
                   'bins = [0, 500, 1000, 100000]\n[columns.region]\nrole = "quasi"\n', encoding="utf-8")
    t = read_table(p, sch)
    got = np.asarray(t.counts("wage"))
    want = [(w < 500).sum(), ((w >= 500) & (w < 1000)).sum(), (w >= 1000).sum()]
    assert got.tolist() == [int(x) for x in want]  # every "1,234.56" counted in its bin


def test_thousands_leave_text_columns_alone(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text('a,b\n"1,234",x\n"5,6",y\n12,z\n', encoding="utf-8")
    sch = tmp_path / "r.toml"
    sch.write_text('[file]\nthousands = ","\nna = []\n[columns.a]\nrole = "quasi"\n[columns.b]\nrole = "sensitive"\n',
                   encoding="utf-8")
    assert sorted(read_table(p, sch).domain("a")) == ["1,234", "12", "5,6"]  # "5,6" is no grouped number
    bad = tmp_path / "b.toml"
    bad.write_text('[file]\nthousands = "x"\n', encoding="utf-8")
    r = CliRunner().invoke(cli, ["publish", "anatomy", str(p), "--schema", str(bad), "-o", str(tmp_path / "o")])
    assert r.exit_code == 2 and "file.thousands" in r.output and "Traceback" not in r.output


def test_numeric_missing_code_is_proposed(tmp_path):
    ages = 20 + np.arange(400) % 40
    lines = ["id,age,hours,union"] + [
        f"{i},{999 if i % 29 == 0 else a},{999 if i % 13 == 0 else 35 + i % 10},{i % 2}" for i, a in enumerate(ages)]
    p = tmp_path / "n.csv"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    s, text = _infer(p, tmp_path)
    assert s["file"]["na"] == ["999"] and s["file"]["missing"] == "category"
    assert "999 looks like a missing-value code in age, hours" in text
    assert s["columns"]["age"]["bins"]["max"] <= 100  # bins over the ages, not up to 1,000


def test_no_code_where_the_value_is_ordinary(tmp_path):
    p = tmp_path / "n.csv"
    p.write_text("x,y\n" + "".join(f"{i * 7},{'-1' if i % 5 == 0 else i % 9 - 3}\n" for i in range(300)), encoding="utf-8")
    s, _ = _infer(p, tmp_path)
    assert s["file"]["na"] == []  # 999 is an ordinary multiple of 7 here, -1 an ordinary value of y


def test_tab_separated_file_is_not_stripped(tmp_path):
    p = tmp_path / "t.tsv"
    p.write_text("a\tb\n" + "".join(f"{i % 4}\t{'x' if i % 2 else 'y'}\n" for i in range(60)), encoding="utf-8")
    s, text = _infer(p, tmp_path)
    assert s["file"]["sep"] == "\t" and s["file"]["strip"] is False, text
    padded = tmp_path / "p.psv"
    padded.write_text("a|b\n" + "".join(f"{i % 4}|{'x ' if i == 150 else 'y'}\n" for i in range(200)), encoding="utf-8")
    assert _infer(padded, tmp_path)[0]["file"]["strip"] is True  # a padded value beyond the first 50 lines


def test_dp_dimension_without_a_domain_names_the_schema_key(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("age,sex,y\n" + "".join(f"{20 + i % 30},{'f' if i % 2 else 'm'},{'a' if i % 3 else 'b'}\n"
                                          for i in range(300)), encoding="utf-8")
    sch = tmp_path / "s.toml"
    sch.write_text('[file]\nna = []\n[columns.age]\nrole = "quasi"\ntype = "numeric"\n[columns.sex]\nrole = "quasi"\n'
                   'domain = ["f", "m"]\n[columns.y]\nrole = "sensitive"\ndomain = ["a", "b"]\n', encoding="utf-8")
    load_schema(sch)
    r = CliRunner().invoke(cli, ["publish", "dp", str(p), "--schema", str(sch), "--epsilon", "1", "--dims", "age,sex,y",
                                 "-o", str(tmp_path / "o")])
    assert r.exit_code == 2, r.output
    line = r.output.strip()
    assert len(line.splitlines()) == 1 and "--dims age" in line and "[columns.age]" in line and "--domains age=" in line
    assert "domains={" not in line and not (tmp_path / "o").exists()


def test_case_and_space_variants_are_one_label(tmp_path):
    labels = ["white", "black", "asian"]
    rows = []
    for i in range(300):
        v = labels[i % 3]
        v = v.upper() if i % 17 == 0 else v + " " if i % 19 == 0 else v
        rows.append(f"{v}|{'NA' if i % 23 == 0 else 20 + i % 50}|{'yes' if i % 2 else 'no'}")
    p = tmp_path / "a.psv"
    p.write_text("race|age|y\n" + "\n".join(rows) + "\n", encoding="utf-8")
    s, text = _infer(p, tmp_path)
    assert s["file"]["strip"] is True and s["file"]["lowercase"] is True, text
    assert s["columns"]["race"]["domain"] == ["asian", "black", "white"]
    t = read_table(p, tmp_path / "s.toml")
    assert sorted(t.domain("race")) == ["asian", "black", "white"]
    assert sum(t.counts("race")) == 300  # every row counted under its one label
    assert "(missing)" in t.domain("age") or "NA" not in t.domain("age")  # the marker 'NA' stays missing


def test_names_and_dates_are_not_guessed_quasi_identifiers(tmp_path):
    firsts = ["ann", "bob", "cy", "di", "ed", "flo", "gus", "hal", "ivy", "jo"]
    rows = [f"{i},{firsts[i % 10]},{firsts[(i * 7) % 10]}son,2020-03-{1 + i % 28:02d},{'north' if i % 2 else 'south'},"
            f"{20 + i % 50},{'pos' if i % 9 == 0 else 'neg'}" for i in range(400)]
    p = tmp_path / "c.csv"
    p.write_text("subject_id,first_name,last_name,test_date,clinic_name,age,result\n" + "\n".join(rows) + "\n",
                 encoding="utf-8")
    s, text = _infer(p, tmp_path)
    cols = s["columns"]
    assert cols["first_name"]["role"] == "drop" and cols["last_name"]["role"] == "drop"
    assert cols["test_date"]["role"] == "drop" and "2020-03-01 … 2020-03-28" in text
    assert cols["clinic_name"]["role"] == "quasi"  # a clinic's name is no person's
    assert cols["result"]["role"] == "sensitive"  # never a name or a date column


def test_thousands_and_lowercase_flags_without_a_schema(tmp_path):
    p, w = _wages(tmp_path)
    args = ["publish", "anatomy", str(p), "--quasi", "region", "--sensitive", "wage",
            "--bin", "wage=0,300,500,700,1000,100000", "--l", "2"]
    r = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "a")])
    assert r.exit_code == 2 and "--thousands ','" in r.output and len(r.output.strip().splitlines()) == 1, r.output
    r = CliRunner().invoke(cli, [*args, "--thousands", ",", "-o", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["verify", str(tmp_path / "b"), "--input", str(p), "--thousands", ","])
    assert r.exit_code == 0 and "verify: OK" in r.output, r.output
    r = CliRunner().invoke(cli, [*args, "--thousands", "x", "-o", str(tmp_path / "c")])
    assert r.exit_code == 2 and "--thousands" in r.output and not (tmp_path / "c").exists()


def test_the_app_keeps_thousands_and_lowercase():
    from ppdp.app.schema_edit import from_rows
    from ppdp.schema import schema_from_dict

    text = from_rows({"file": {"thousands": '","', "lowercase": "true"}, "columns": [{"name": "a", "role": "quasi"}]})
    sch = schema_from_dict(tomllib.loads(text))
    assert sch.file.thousands == "," and sch.file.lowercase is True


def test_parquet_is_not_sniffed_as_text(tmp_path):
    import pandas as pd

    n = 300
    df = pd.DataFrame({"flag": np.arange(n) % 3 == 0, "day": pd.Timestamp("2020-03-01") + pd.to_timedelta(np.arange(n) % 40, "D"),
                       "age": np.where(np.arange(n) % 31 == 0, np.nan, 20 + np.arange(n) % 50),
                       "y": np.array(["a", "b", "c"])[np.arange(n) % 3]})
    p = tmp_path / "t.parquet"
    df.to_parquet(p)
    s, text = _infer(p, tmp_path)
    assert "a Parquet file" in text and "not UTF-8" not in text and "no separator splits" not in text
    assert s["file"]["missing"] == "category" and s["file"]["encoding"] == "utf-8"
    assert s["columns"]["flag"]["domain"] == ["False", "True"] and s["columns"]["y"]["role"] == "sensitive"
    assert s["columns"]["day"]["role"] == "drop"  # dates
    t = read_table(p, tmp_path / "s.toml")
    assert t.n_rows == n


def test_decimal_comma_is_read_as_numbers(tmp_path):
    x = np.round(rng.normal(8, 1, 300), 1)
    inc = np.round(rng.lognormal(8, 1, 300), 2)
    lines = ["age;income;y"] + [f"{a:.1f};{v:,.2f};{'a' if i % 3 else 'b'}".replace(",", "_").replace(".", ",")
                                .replace("_", ".") for i, (a, v) in enumerate(zip(x, inc))]
    p = tmp_path / "d.csv"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    s, text = _infer(p, tmp_path)
    assert s["file"]["decimal"] == "," and s["file"]["thousands"] == ".", text
    assert s["columns"]["age"]["type"] == "numeric" and s["columns"]["income"]["type"] == "numeric"
    sch = tmp_path / "r.toml"
    sch.write_text('[file]\nsep = ";"\ndecimal = ","\nthousands = "."\nna = []\n[columns.age]\nrole = "quasi"\n'
                   'type = "numeric"\nbins = [0, 8, 20]\n[columns.income]\nrole = "quasi"\ntype = "numeric"\n'
                   'bins = [0, 1000, 1000000]\n[columns.y]\nrole = "sensitive"\n', encoding="utf-8")
    t = read_table(p, sch)
    assert np.asarray(t.counts("age")).tolist() == [int((x < 8).sum()), int((x >= 8).sum())]
    assert np.asarray(t.counts("income")).tolist() == [int((inc < 1000).sum()), int((inc >= 1000).sum())]
    bad = tmp_path / "b.toml"
    bad.write_text('[file]\ndecimal = ","\nthousands = ","\n', encoding="utf-8")
    r = CliRunner().invoke(cli, ["publish", "anatomy", str(p), "--schema", str(bad), "-o", str(tmp_path / "o")])
    assert r.exit_code == 2 and "file.decimal" in r.output


def test_a_thousand_alone_is_no_decimal(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("a;b\n" + "".join(f"{'1,234' if i % 2 else '17'};{'x' if i % 3 else 'y'}\n" for i in range(100)),
                 encoding="utf-8")
    s, _ = _infer(p, tmp_path)
    assert s["file"].get("decimal") is None  # "1,234" alone: a thousand, not one and a fraction


def _rows(sep, end=""):
    return [f"age{sep}sex{sep}health{end}"] + [f"{20 + i % 50}{sep}{'f' if i % 2 else 'm'}{sep}{['good', 'fair', 'poor'][i % 3]}{end}"
                                                for i in range(300)]


def test_utf16_unicode_text_is_read(tmp_path):
    p = tmp_path / "u.txt"
    p.write_bytes("\r\n".join(_rows("\t")).encode("utf-16"))  # a spreadsheet's "Unicode text": BOM, tabs, CRLF
    s, text = _infer(p, tmp_path)
    assert s["file"]["encoding"] == "utf-16" and s["file"]["sep"] == "\t", text
    assert set(s["columns"]) == {"age", "sex", "health"}
    t = read_table(p, tmp_path / "s.toml")
    assert t.n_rows == 300 and sorted(t.domain("sex")) == ["f", "m"]


def test_a_separator_ending_every_line_adds_no_column(tmp_path):
    for sep, name in ((";", "a.csv"), ("; ", "b.csv")):
        p = tmp_path / name
        p.write_text("\n".join(_rows(sep, end=sep.strip())) + "\n", encoding="utf-8")
        s, text = _infer(p, tmp_path)
        assert set(s["columns"]) == {"age", "sex", "health"}, text
        assert read_table(p, tmp_path / "s.toml").n_rows == 300
    p = tmp_path / "c.csv"  # an unnamed column holding values is still refused, naming the way out
    p.write_text("a,,c\n1,2,3\n4,5,6\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["publish", "anatomy", str(p), "--quasi", "a", "--sensitive", "c", "--l", "2",
                                 "-o", str(tmp_path / "o")])
    assert r.exit_code == 2 and "column 2 has no name" in r.output


def test_spreadsheet_and_numpy_missing_markers(tmp_path):
    p = tmp_path / "n.csv"
    p.write_text("age,income,y\n" + "".join(
        f"{'NaN' if i % 7 == 0 else 20 + i % 50},{'#N/A' if i % 11 == 0 else 1000 + i},{'a' if i % 3 else 'b'}\n"
        for i in range(200)), encoding="utf-8")
    s, _ = _infer(p, tmp_path)
    assert s["file"]["na"] == ["#N/A", "NaN"] and s["file"]["missing"] == "category"
    assert s["columns"]["age"]["type"] == "numeric" and s["columns"]["income"]["type"] == "numeric"


def test_title_lines_above_the_header_are_skipped(tmp_path):
    for sep, name in ((";", "a.csv"), ("; ", "b.csv")):
        p = tmp_path / name
        p.write_text("Health survey export; region North\nGenerated 2024-01-02\n\n" + "\n".join(_rows(sep)) + "\n",
                     encoding="utf-8")
        s, text = _infer(p, tmp_path)
        assert s["file"]["skip"] == 3 and s["file"]["sep"] == ";", text  # "; " is read as ";", stripped
        assert set(s["columns"]) == {"age", "sex", "health"}
        assert read_table(p, tmp_path / "s.toml").n_rows == 300
    r = CliRunner().invoke(cli, ["publish", "anatomy", str(p), "--sep", "; ", "--skip", "3", "--quasi", "age",
                                 "--sensitive", "health", "--l", "2", "-o", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    plain = tmp_path / "c.csv"
    plain.write_text("\n".join(_rows(",")) + "\n", encoding="utf-8")
    assert "skip" not in _infer(plain, tmp_path)[0]["file"]


def test_compressed_files_are_read_by_their_bytes_not_their_name(tmp_path):
    """A gzip file named SURVEY.CSV.GZ, a bz2 file saved as .csv: the reader and `schema infer`
    decompress by the file's first bytes (the name's suffix was the only clue, lower-case only)."""
    import bz2
    import gzip
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "gauntlet" / "data" / "chile.csv"
    text = src.read_bytes()
    (tmp_path / "SURVEY.CSV.GZ").write_bytes(gzip.compress(text))
    (tmp_path / "survey_bz.csv").write_bytes(bz2.compress(text))
    for name in ("SURVEY.CSV.GZ", "survey_bz.csv"):
        s, _ = _infer(tmp_path / name, tmp_path)
        assert s["file"]["sep"] == "," and s["file"]["na"] == ["."], name
        schema = load_schema(tmp_path / "s.toml")
        t = read_table(tmp_path / name, schema)
        assert t.n_rows == 2700, name
