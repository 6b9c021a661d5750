import numpy as np
import pandas as pd
import pytest

import ppdp
from ppdp.errors import PpdpError, SchemaError
from ppdp.table import MISSING_LABEL, Table


def df():
    return pd.DataFrame({"age": [30, 25, 30, 41], "sex": ["M", "F", "F", "M"], "dis": ["flu", "hiv", "flu", "?"]})


def test_from_pandas_orders_numeric_and_text():
    t = Table.from_pandas(df(), quasi=["age", "sex"], sensitive=["dis"], missing="category")
    assert t.domain("age") == ("25", "30", "41")
    assert t.domain("sex") == ("F", "M")
    assert t.domain("dis") == ("flu", "hiv", MISSING_LABEL)
    assert t.codes("age").tolist() == [1, 0, 1, 2]
    assert t.numeric_values("age").tolist() == [25, 30, 41]
    back = t.to_pandas()
    assert back["sex"].astype(str).tolist() == ["M", "F", "F", "M"]


def test_missing_is_an_error_by_default():
    with pytest.raises(SchemaError, match="missing"):
        Table.from_pandas(df(), quasi=["age"], sensitive=["dis"])


def test_binning_and_uncovered_values():
    t = Table.from_pandas(df(), quasi=["age"], sensitive=["sex"], bins={"age": [20, 30, 50]})
    assert t.domain("age") == ("[20, 30)", "[30, 50]")
    assert t.codes("age").tolist() == [1, 0, 1, 1]
    with pytest.raises(SchemaError, match="uncovered"):
        Table.from_pandas(df(), quasi=["age"], sensitive=["sex"], bins={"age": [26, 35]})


def test_unknown_column_and_empty():
    with pytest.raises(SchemaError, match="unknown column 'zip'"):
        Table.from_pandas(df(), quasi=["zip"], sensitive=["sex"])
    with pytest.raises(PpdpError, match="empty"):
        Table.from_pandas(df().iloc[:0], quasi=["age"], sensitive=["sex"])


def test_parquet_roundtrip_keeps_domains_and_roles(tmp_path):
    t = Table.from_pandas(df(), quasi=["age", "sex"], sensitive=["dis"], missing="category")
    t.to_parquet(tmp_path / "t.parquet")
    u = Table.from_parquet(tmp_path / "t.parquet")
    assert u.quasi == t.quasi and u.sensitive == t.sensitive
    for c in t.column_names:
        assert u.domain(c) == t.domain(c)
        assert np.array_equal(u.codes(c), t.codes(c))


def test_csv_roundtrip_and_malformed_row(tmp_path):
    t = Table.from_pandas(df(), quasi=["age", "sex"], sensitive=["dis"], missing="category")
    t.to_csv(tmp_path / "t.csv")
    u = Table.from_csv(tmp_path / "t.csv", quasi=["age", "sex"], sensitive=["dis"], missing="category")
    assert u.domain("age") == t.domain("age")
    assert np.array_equal(u.codes("sex"), t.codes("sex"))
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(PpdpError, match="malformed CSV"):
        Table.from_csv(tmp_path / "bad.csv", quasi=["a"], sensitive=["b"])


def test_arrow_input():
    import pyarrow as pa

    t = Table.from_arrow(pa.Table.from_pandas(df()), quasi=["age"], sensitive=["sex"])
    assert t.n_rows == 4 and t.domain("sex") == ("F", "M")


def test_bundled_datasets_match_the_data_readme():
    occ, edu, adult = ppdp.datasets.load("occ"), ppdp.datasets.load("edu"), ppdp.datasets.load("adult")
    assert (adult.n_rows, occ.n_rows, edu.n_rows) == (48_842, 148_318, 299_285)
    assert len(occ.domain("occupation")) == 46 and len(occ.domain("age")) == 76
    assert len(edu.domain("education")) == 17
    f = occ.counts("occupation") / occ.n_rows
    assert round(f.min() * 100, 2) == 0.04 and round(f.max() * 100, 2) == 8.84
    f = edu.counts("education") / edu.n_rows
    assert round(f.min() * 100, 2) == 0.41 and round(f.max() * 100, 1) == 24.2


def test_dataset_samples():
    t, info = ppdp.datasets.load_info("occ", n=1000, seed=3)
    assert t.n_rows == 1000 and info["sampling"] == "without replacement"
    t2, info2 = ppdp.datasets.load_info("occ", n=200_000, seed=3)
    assert t2.n_rows == 200_000 and info2["sampling"] == "with replacement"
    assert np.array_equal(ppdp.datasets.load("occ", n=1000, seed=3).codes("age"), t.codes("age"))


# ------------------------------------------------------------- input kept exactly (SPEC §1)
def _csv_table(tmp_path, text, **kw):
    p = tmp_path / "in.csv"
    p.write_text(text)
    return Table.from_csv(p, **kw)


def test_zip_codes_keep_their_leading_zeros(tmp_path):
    t = _csv_table(tmp_path, "zip,sa\n02134,a\n10001,b\n00501,a\n", quasi=["zip"], sensitive=["sa"])
    assert t.domain("zip") == ("00501", "02134", "10001")
    assert t.labels("zip").tolist() == ["02134", "10001", "00501"]
    assert t.numeric_values("zip") is None  # text: no arithmetic on ZIP codes


def test_distinct_labels_are_never_merged(tmp_path):
    t = _csv_table(tmp_path, "q,sa\nx,1\nx,1.0\ny,01\ny,1\n", quasi=["q"], sensitive=["sa"])
    assert t.domain("sa") == ("01", "1", "1.0")
    assert t.counts("sa").tolist() == [1, 2, 1]
    # the same column declared numeric: 1, 1.0 and 01 are one number, said so by the caller
    u = _csv_table(tmp_path, "q,sa\nx,1\nx,1.0\ny,01\ny,2\n", quasi=["q"], sensitive=["sa"], numeric=["sa"])
    assert u.domain("sa") == ("1", "2") and u.counts("sa").tolist() == [3, 1]
    # no whitespace stripped: ' a' and 'a' are two labels
    w = _csv_table(tmp_path, "q,sa\nx, a\nx,a\n", quasi=["q"], sensitive=["sa"])
    assert w.domain("sa") == (" a", "a")
    # a DataFrame column mixing the number 1 and the text '1' cannot be encoded without merging
    with pytest.raises(SchemaError, match="would share"):
        Table.from_pandas(pd.DataFrame({"q": ["x", "y"], "sa": pd.Series([1, "1"], dtype=object)}),
                          quasi=["q"], sensitive=["sa"])


def test_empty_field_is_missing_not_a_label(tmp_path):
    text = "q,sa\nx,flu\ny,\nz,hiv\n"
    with pytest.raises(SchemaError, match="1 missing value"):
        _csv_table(tmp_path, text, quasi=["q"], sensitive=["sa"])
    t = _csv_table(tmp_path, text, quasi=["q"], sensitive=["sa"], missing="category")
    assert t.domain("sa") == ("flu", "hiv", MISSING_LABEL)
    assert "" not in t.domain("sa")
    # an empty number is missing too
    u = _csv_table(tmp_path, "age,sa\n30,a\n,b\n", quasi=["age"], sensitive=["sa"], numeric=["age"], missing="category")
    assert u.domain("age") == ("30", MISSING_LABEL)


@pytest.mark.parametrize("bad", ["inf", "-inf", "Infinity", "nan", "NaN", "1e999", "thirty"])
def test_non_finite_numbers_are_refused(tmp_path, bad):
    with pytest.raises(SchemaError, match="finite"):
        _csv_table(tmp_path, f"age,sa\n30,a\n{bad},b\n", quasi=["age"], sensitive=["sa"], numeric=["age"])


@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_non_finite_numbers_in_a_dataframe_are_refused(value):
    df = pd.DataFrame({"age": [30.0, value], "sa": ["a", "b"]})
    with pytest.raises(SchemaError, match="non-finite"):
        Table.from_pandas(df, quasi=["age"], sensitive=["sa"])
    with pytest.raises(SchemaError, match="non-finite"):  # read as text, a number is still a number
        Table.from_pandas(df, quasi=["age"], sensitive=["sa"], numeric=[])


def test_inf_age_never_becomes_a_histogram_cell(tmp_path):
    """The histogram path: an 'inf' age in a CSV declared numeric is refused, through the API
    and the CLI (before it was a cell of its own)."""
    from click.testing import CliRunner

    from ppdp.cli import cli

    p = tmp_path / "ages.csv"
    p.write_text("age,sex\n" + "".join(f"{20 + i % 40},{'MF'[i % 2]}\n" for i in range(200)) + "inf,M\n")
    with pytest.raises(SchemaError, match="finite"):
        Table.from_csv(p, quasi=["age", "sex"], numeric=["age"])
    r = CliRunner().invoke(cli, ["publish", "cells", str(p), "--dims", "age", "sex", "--numeric", "age", "-e", "1",
                                 "-o", str(tmp_path / "rel")])
    assert r.exit_code == 2 and "finite" in r.stderr and not (tmp_path / "rel").exists()
    # binned, the column is numeric without being declared
    r = CliRunner().invoke(cli, ["publish", "dpcube", str(p), "--dims", "age", "--bins", "age=0,50,100", "-e", "1",
                                 "-o", str(tmp_path / "rel2")])
    assert r.exit_code == 2 and "finite" in r.stderr and not (tmp_path / "rel2").exists()


def test_declared_numeric_columns_keep_numeric_order_and_ranges(tmp_path):
    text = "age,sa\n" + "".join(f"{a},{'ab'[a % 2]}\n" for a in (9, 10, 100, 30, 45, 9))
    t = _csv_table(tmp_path, text, quasi=["age"], sensitive=["sa"], numeric=["age"])
    assert t.domain("age") == ("9", "10", "30", "45", "100")
    assert t.numeric_values("age").tolist() == [9, 10, 30, 45, 100]
    assert ppdp.queries.answer_exact(t, "age BETWEEN 10 AND 45")[0] == 3
    assert ppdp.queries.answer_exact(t, "age > 9 AND age < 100")[0] == 3
    # undeclared, the same column is text in code point order and has no numeric value
    u = _csv_table(tmp_path, text, quasi=["age"], sensitive=["sa"])
    assert u.domain("age") == ("10", "100", "30", "45", "9") and u.numeric_values("age") is None


def test_bundled_numeric_columns_stay_numeric():
    adult, edu = ppdp.datasets.load("adult"), ppdp.datasets.load("edu")
    for t, cols in ((adult, ["age", "hours_per_week"]), (edu, ["age"])):
        for c in cols:
            nv = t.numeric_values(c)
            assert nv is not None and np.all(np.diff(nv) > 0), c
    assert adult.numeric_values("sex") is None
    assert ppdp.queries.answer_exact(adult, "age BETWEEN 30 AND 39")[0] == int(
        ((adult.numeric_values("age")[adult.codes("age")] >= 30) & (adult.numeric_values("age")[adult.codes("age")] <= 39)).sum())


def test_csv_header_checks(tmp_path):
    with pytest.raises(SchemaError, match="duplicate"):
        _csv_table(tmp_path, "a,a,b\n1,2,3\n", quasi=["a"], sensitive=["b"])
    with pytest.raises(SchemaError, match="no name"):
        _csv_table(tmp_path, "a,,b\n1,2,3\n", quasi=["a"], sensitive=["b"])
    with pytest.raises(PpdpError, match="empty"):
        _csv_table(tmp_path, "", quasi=["a"], sensitive=["b"])
    (tmp_path / "l1.csv").write_bytes("a,b\nx,caf\xe9\n".encode("latin-1"))
    with pytest.raises(PpdpError, match="UTF-8"):
        Table.from_csv(tmp_path / "l1.csv", quasi=["a"], sensitive=["b"])


def test_reserved_missing_label_in_the_data_with_missing_values(tmp_path):
    with pytest.raises(SchemaError, match="reserved"):
        _csv_table(tmp_path, f"q,sa\nx,{MISSING_LABEL}\ny,\n", quasi=["q"], sensitive=["sa"], missing="category")
