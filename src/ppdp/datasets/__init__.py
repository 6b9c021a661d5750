"""Bundled real data (SPEC §1): UCI Adult, and the OCC / EDU tables from UCI Census-Income (KDD).

``load(name, n=None, seed=0)`` returns a :class:`ppdp.Table` with roles preset:

- ``adult``: 48,842 rows; quasi = age, workclass, education, marital_status, race, sex,
  native_country, hours_per_week; sensitive = occupation ('?' kept as the category
  ``(missing)``); every other Adult column is kept in the table for other uses.
- ``occ``: 148,318 rows with a detailed occupation recode ≠ 0; sensitive = occupation
  (46 values); quasi = age, sex, education, marital_status, race, class_of_worker,
  country_of_birth.
- ``edu``: all 299,285 rows; sensitive = education (17 values); quasi = age, sex,
  marital_status, race, class_of_worker, country_of_birth, major_occupation.

``n`` draws OCC-n / EDU-n: a seeded sample without replacement when n ≤ N, with replacement
beyond (``load_info`` tells which).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

import numpy as np

from ..errors import PpdpError
from ..table import Table

DATASETS: dict[str, dict] = {
    "adult": {
        "file": "adult.parquet",
        "quasi": ["age", "workclass", "education", "marital_status", "race", "sex", "native_country", "hours_per_week"],
        "sensitive": ["occupation"],
        "description": "UCI Adult (1994 census extract), adult.data + adult.test",
    },
    "occ": {
        "file": "census.parquet",
        "quasi": ["age", "sex", "education", "marital_status", "race", "class_of_worker", "country_of_birth"],
        "sensitive": ["occupation"],
        "description": "UCI Census-Income (KDD), rows with an occupation; SA = detailed occupation recode",
    },
    "edu": {
        "file": "census.parquet",
        "quasi": ["age", "sex", "marital_status", "race", "class_of_worker", "country_of_birth", "major_occupation"],
        "sensitive": ["education"],
        "description": "UCI Census-Income (KDD), all rows; SA = education",
    },
}


def _data_path(fname: str):
    return resources.files(__package__).joinpath("data", fname)


@lru_cache(maxsize=4)
def _full(name: str) -> Table:
    spec = DATASETS[name]
    with resources.as_file(_data_path(spec["file"])) as p:
        t = Table.from_parquet(p)
    if name == "occ":
        keep = np.flatnonzero(t.labels("occupation") != "0")
        t = compact(t.take(keep))
    if name in ("occ", "edu"):
        t = t.select([*spec["quasi"], *spec["sensitive"]])
    return t.with_roles(spec["quasi"], spec["sensitive"])


def compact(t: Table) -> Table:
    """Drop labels that no row uses (keeps label order)."""
    codes, doms, numeric = {}, {}, {}
    for c in t.column_names:
        used = np.flatnonzero(t.counts(c))
        remap = np.full(len(t.domain(c)), -1, dtype=np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        codes[c] = remap[t.codes(c)]
        doms[c] = [t.domain(c)[i] for i in used]
        nv = t.numeric_values(c)
        numeric[c] = None if nv is None else nv[used]
    return Table(codes, doms, t.quasi, t.sensitive, numeric=numeric)


def names() -> list[str]:
    return list(DATASETS)


def load(name: str, n: int | None = None, seed: int = 0) -> Table:
    """Load a bundled table; ``n`` gives a seeded OCC-n / EDU-n sample (with replacement past N)."""
    return load_info(name, n, seed)[0]


def load_info(name: str, n: int | None = None, seed: int = 0) -> tuple[Table, dict]:
    """Like :func:`load`, plus a dict describing how the rows were drawn (for result files)."""
    if not isinstance(name, str):
        raise PpdpError(f"a dataset name is a string, one of {names()}; got {type(name).__name__}")
    for what, v in (("n", n), ("seed", seed)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
            raise PpdpError(f"{what} must be a whole number, got {v!r}")
    key = str(name).lower()
    if key not in DATASETS:
        raise PpdpError(f"unknown dataset {name!r}; choose one of {names()}")
    t = _full(key)
    info: dict = {"dataset": key, "n_full": t.n_rows, "n": t.n_rows, "seed": None, "sampling": "full table"}
    if n is not None:
        if n <= 0:
            raise PpdpError(f"n must be positive, got {n}")
        if n != t.n_rows:
            t, replace = t.sample(int(n), seed)
            if n < info["n_full"]:
                t = compact(t)
            info.update(n=int(n), seed=seed, sampling="with replacement" if replace else "without replacement")
    return t, info


def public_domains(name: str, dims=None) -> dict[str, list[str]]:
    """The documented (public) domain of the bundled table ``name``'s columns, or of ``dims``:
    column → labels, from the UCI documentation (:mod:`ppdp.datasets.domains`), never from the
    rows. Pass it to a differentially private mechanism (``domains=…``), or pass the name itself
    (``domains="adult"``)."""
    from .domains import public_domains as documented

    try:
        return documented(name, None if dims is None else [str(d) for d in ([dims] if isinstance(dims, str) else dims)])
    except KeyError:
        raise PpdpError(f"unknown dataset {name!r}; choose one of {names()}") from None
    except LookupError as e:
        raise PpdpError(f"the documentation of {name!r} gives no finite domain for {e.args[0]}: declare their "
                        f"domains or bin them with explicit edges") from None


def sources() -> dict:
    return json.loads(_data_path("sources.json").read_text())
