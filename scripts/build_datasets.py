"""Build ppdp's package data from the raw UCI files in ../shared/data.

    python scripts/build_datasets.py [--shared ../shared/data]

Writes src/ppdp/datasets/data/{adult,census}.parquet (dictionary-encoded, zstd) and
sources.json (row counts and sha256 of the raw files). The OCC and EDU tables are derived
from census.parquet by ppdp.datasets.load (definitions in shared/data/README.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import pandas as pd

from ppdp.table import Table

ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
    "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week", "native_country", "income",
]
# Census-Income (KDD): 0-based column index -> ppdp name
CENSUS_COLUMNS = {
    0: "age", 12: "sex", 4: "education", 7: "marital_status", 10: "race", 1: "class_of_worker",
    34: "country_of_birth", 3: "occupation", 9: "major_occupation",
}
OUT = Path(__file__).resolve().parents[1] / "src" / "ppdp" / "datasets" / "data"


def sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def read_adult(d: Path) -> pd.DataFrame:
    a = pd.read_csv(d / "adult.data", header=None, names=ADULT_COLUMNS, sep=",", skipinitialspace=True, dtype=str)
    b = pd.read_csv(d / "adult.test", header=None, names=ADULT_COLUMNS, sep=",", skipinitialspace=True,
                    dtype=str, skiprows=1)
    df = pd.concat([a, b], ignore_index=True).dropna(how="all")
    df["income"] = df["income"].str.rstrip(".")
    for c in ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"]:
        df[c] = df[c].astype(int)
    return df


def read_census(d: Path) -> pd.DataFrame:
    frames = [
        pd.read_csv(d / f, header=None, sep=",", skipinitialspace=True, dtype=str, usecols=list(CENSUS_COLUMNS))
        for f in ("census-income.data.gz", "census-income.test.gz")
    ]
    df = pd.concat(frames, ignore_index=True).rename(columns=CENSUS_COLUMNS)[list(CENSUS_COLUMNS.values())]
    df["age"] = df["age"].astype(int)
    return df


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    args = ap.parse_args()
    shared = Path(args.shared)
    OUT.mkdir(parents=True, exist_ok=True)

    adult = read_adult(shared / "adult")
    assert len(adult) == 48_842, len(adult)
    Table.from_pandas(adult, columns=ADULT_COLUMNS, missing="category").to_parquet(OUT / "adult.parquet")

    census = read_census(shared / "census-income")
    assert len(census) == 299_285, len(census)
    Table.from_pandas(census, columns=list(census.columns), missing="category").to_parquet(OUT / "census.parquet")

    sources = {
        "adult": {"rows": len(adult), "files": {f: sha256(shared / "adult" / f) for f in ("adult.data", "adult.test")}},
        "census": {
            "rows": len(census),
            "files": {f: sha256(shared / "census-income" / f) for f in ("census-income.data.gz", "census-income.test.gz")},
        },
    }
    (OUT / "sources.json").write_text(json.dumps(sources, indent=2) + "\n")
    for f in sorted(OUT.glob("*.parquet")):
        print(f"{f.name}: {f.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
