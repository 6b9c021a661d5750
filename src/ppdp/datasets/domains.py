"""The public domains of the bundled tables: what their documentation says, never the rows.

A differentially private release must not read its cell domain off the data (a label that
appears only when one person is in the table reveals that person). The UCI documentation
of the two source data sets (``adult.names``, ``census-income.names``) lists every value of
each nominal attribute; those lists are public, and so are:

* the missing category ``(missing)`` of the attributes whose UCI files mark values with
  ``?`` (Adult: workclass, occupation, native_country; Census-Income: the countries of birth);
* the integer ranges of the numeric attributes used value by value, from the surveys' public
  coding rules: Adult keeps people older than 16 (its extraction rule ``AAGE>16``) and the
  CPS top-codes age at 90 and usual weekly hours at 99 (``HRSWK>0`` in the extraction rule);
  ``education_num`` is the rank of the 16 documented education levels; Census-Income covers
  ages 0..90;
* OCC's sensitive attribute: the detailed occupation recodes 1..46 (OCC keeps the rows whose
  recode is not 0, SPEC's shared/data/README.md).

Labels are spelled as the bundled tables spell them (trailing blanks stripped) and ordered
as the tables order them (text alphabetically, numbers numerically, ``(missing)`` last), so
a release over the documented domain has the cube a release over the full table would have
whenever the full table holds every documented value.

Columns without a documented finite domain (fnlwgt, capital gains, …) are absent: bin them
with explicit, public edges.
"""

from __future__ import annotations

MISSING = "(missing)"


def _labels(values: str, missing: bool = False) -> list[str]:
    out = sorted(v.strip() for v in values.split(",") if v.strip())
    return out + [MISSING] if missing else out


def _range(lo: int, hi: int) -> list[str]:
    return [str(i) for i in range(lo, hi + 1)]


_ADULT = {
    "age": _range(17, 90),
    "workclass": _labels("Private, Self-emp-not-inc, Self-emp-inc, Federal-gov, Local-gov, State-gov, Without-pay, "
                         "Never-worked", missing=True),
    "education": _labels("Bachelors, Some-college, 11th, HS-grad, Prof-school, Assoc-acdm, Assoc-voc, 9th, 7th-8th, "
                         "12th, Masters, 1st-4th, 10th, Doctorate, 5th-6th, Preschool"),
    "education_num": _range(1, 16),
    "marital_status": _labels("Married-civ-spouse, Divorced, Never-married, Separated, Widowed, Married-spouse-absent, "
                              "Married-AF-spouse"),
    "occupation": _labels("Tech-support, Craft-repair, Other-service, Sales, Exec-managerial, Prof-specialty, "
                          "Handlers-cleaners, Machine-op-inspct, Adm-clerical, Farming-fishing, Transport-moving, "
                          "Priv-house-serv, Protective-serv, Armed-Forces", missing=True),
    "relationship": _labels("Wife, Own-child, Husband, Not-in-family, Other-relative, Unmarried"),
    "race": _labels("White, Asian-Pac-Islander, Amer-Indian-Eskimo, Other, Black"),
    "sex": _labels("Female, Male"),
    "hours_per_week": _range(1, 99),
    "native_country": _labels(
        "United-States, Cambodia, England, Puerto-Rico, Canada, Germany, Outlying-US(Guam-USVI-etc), India, Japan, "
        "Greece, South, China, Cuba, Iran, Honduras, Philippines, Italy, Poland, Jamaica, Vietnam, Mexico, Portugal, "
        "Ireland, France, Dominican-Republic, Laos, Ecuador, Taiwan, Haiti, Columbia, Hungary, Guatemala, Nicaragua, "
        "Scotland, Thailand, Yugoslavia, El-Salvador, Trinadad&Tobago, Peru, Hong, Holand-Netherlands", missing=True),
    "income": ["<=50K", ">50K"],
}

_CLASS_OF_WORKER = ("Not in universe, Federal government, Local government, Never worked, Private, "
                    "Self-employed-incorporated, Self-employed-not incorporated, State government, Without pay")
_EDUCATION = ("Children, 7th and 8th grade, 9th grade, 10th grade, High school graduate, 11th grade, 12th grade no "
              "diploma, 5th or 6th grade, Less than 1st grade, Bachelors degree(BA AB BS), 1st 2nd 3rd or 4th grade, "
              "Some college but no degree, Masters degree(MA MS MEng MEd MSW MBA), Associates degree-occup /vocational, "
              "Associates degree-academic program, Doctorate degree(PhD EdD), Prof school degree (MD DDS DVM LLB JD)")
_CENSUS = {
    "age": _range(0, 90),
    "sex": _labels("Female, Male"),
    "marital_status": _labels("Never married, Married-civilian spouse present, Married-spouse absent, Separated, "
                              "Divorced, Widowed, Married-A F spouse present"),
    "race": _labels("White, Black, Other, Amer Indian Aleut or Eskimo, Asian or Pacific Islander"),
    "class_of_worker": _labels(_CLASS_OF_WORKER),
    "country_of_birth": _labels(
        "United-States, Mexico, Puerto-Rico, Peru, Canada, South Korea, India, Japan, Haiti, El-Salvador, "
        "Dominican-Republic, Portugal, Columbia, England, Thailand, Cuba, Laos, Panama, China, Germany, Vietnam, "
        "Italy, Honduras, Outlying-U S (Guam USVI etc), Hungary, Philippines, Poland, Ecuador, Iran, Guatemala, "
        "Holand-Netherlands, Taiwan, Nicaragua, France, Jamaica, Scotland, Yugoslavia, Hong Kong, Trinadad&Tobago, "
        "Greece, Cambodia, Ireland", missing=True),
    "major_occupation": _labels(
        "Not in universe, Professional specialty, Other service, Farming forestry and fishing, Sales, Adm support "
        "including clerical, Protective services, Handlers equip cleaners etc , Precision production craft & repair, "
        "Technicians and related support, Machine operators assmblrs & inspctrs, Transportation and material moving, "
        "Executive admin and managerial, Private household services, Armed Forces"),
}

DOCUMENTED: dict[str, dict[str, list[str]]] = {
    "adult": _ADULT,
    "occ": {**{k: _CENSUS[k] for k in ("age", "sex", "marital_status", "race", "class_of_worker", "country_of_birth")},
            "education": _labels(_EDUCATION),
            "occupation": _range(1, 46)},
    "edu": {**_CENSUS, "education": _labels(_EDUCATION)},
}


def public_domains(name: str, dims=None) -> dict[str, list[str]]:
    """The documented domain (list of labels) of every column of bundled table ``name`` that has
    one, or of ``dims`` only (an error naming a column without a documented domain)."""
    key = str(name).lower()
    if key not in DOCUMENTED:
        raise KeyError(name)
    doc = DOCUMENTED[key]
    if dims is None:
        return {c: list(v) for c, v in doc.items()}
    missing = [d for d in dims if d not in doc]
    if missing:
        raise LookupError(missing)
    return {d: list(doc[d]) for d in dims}
