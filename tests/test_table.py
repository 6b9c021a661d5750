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
