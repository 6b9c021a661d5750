"""``ppdp.read_table(path, schema=…)`` and ``ppdp.Table.read(path, schema=…)``: a custodian's
CSV read through a schema file, the same table either way."""

from __future__ import annotations

import numpy as np
import pytest

import ppdp
from ppdp.errors import SchemaError

SCHEMA = """
[file]
sep = ";"
na = ["NA"]
missing = "category"

[columns.age]
role = "quasi"
type = "numeric"
bins = [17, 30, 50, 91]

[columns.sex]
role = "quasi"

[columns.occupation]
role = "sensitive"
"""


@pytest.fixture
def files(tmp_path):
    df = ppdp.datasets.load("adult", n=500, seed=1).to_pandas()[["age", "sex", "occupation"]].astype(str)
    df = df.replace("(missing)", "NA")
    df.to_csv(tmp_path / "t.csv", sep=";", index=False)
    (tmp_path / "t.toml").write_text(SCHEMA)
    return tmp_path / "t.csv", tmp_path / "t.toml", df


def test_read_table_and_table_read_agree(files):
    csv, toml, df = files
    a = ppdp.read_table(csv, schema=toml)
    b = ppdp.Table.read(csv, schema=ppdp.load_schema(toml))
    c = ppdp.read_table(csv, ppdp.load_schema(toml))
    for t in (b, c):
        assert t.quasi == a.quasi and t.sensitive == a.sensitive
        for col in ("age", "sex", "occupation"):
            assert t.domain(col) == a.domain(col) and np.array_equal(t.codes(col), a.codes(col))
    assert a.n_rows == 500 and list(a.quasi) == ["age", "sex"] and list(a.sensitive) == ["occupation"]
    assert len(a.domain("age")) == 3  # the bins
    assert int((df["occupation"] == "NA").sum()) == int(a.counts("occupation")[a.domain("occupation").index("(missing)")])


def test_table_read_with_a_schema_path_is_a_clear_error(files):
    csv, toml, _ = files
    with pytest.raises(SchemaError, match="ppdp.read_table"):
        ppdp.Table.read(csv, schema=str(toml))
    with pytest.raises(SchemaError, match="pass nothing else"):
        ppdp.Table.read(csv, quasi=["sex"], schema=ppdp.load_schema(toml))
