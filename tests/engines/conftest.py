"""Shared by the Spark and streaming engine tests: the field-by-field manifest comparison, and
a Parquet source of several row groups for the streaming engine."""

import pyarrow.parquet as pq
import pytest

import ppdp

#: rows of the streaming engine's source
STREAM_N = 20_000

#: manifest fields that depend on the published draws, not on the plan: the randomized
#: family's largest posterior (a function of the published counts); A''s SA counts and the leak
#: figures computed from them when N mod ℓ' rows are dropped (which rows, a draw);
#: for Anatomy, which of several values tied at the largest posterior is named
DRAWN = {"uniform": {"disclosure.max_posterior"}, "sdr": {"disclosure.max_posterior"},
         "global": {"disclosure.max_posterior"},
         "diverted": {"disclosure.max_posterior", "certificate.swap_advantage", "certificate.swap_advantage_lower",
                      "certificate.closed_fraction", "certificate.max_posterior", "certificate.sa_counts"},
         "anatomy": {"disclosure.max_posterior_value"}}
#: manifest fields that name the engine or the files' layout
LAYOUT = {"engine", "files"}


def flat(m, prefix=""):
    out = {}
    for k, v in m.items():
        if isinstance(v, dict) and v:
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def same_manifest(engine_manifest, local_manifest, name):
    """Field by field: the engine's manifest (claim, certificate, disclosure, schema, counts,
    params …) equals the local engine's, except the fields listed in DRAWN and LAYOUT."""
    skip = DRAWN.get(name, set())
    a, b = flat(engine_manifest), flat(local_manifest)
    keep = [k for k in sorted(set(a) | set(b))
            if k not in skip and not any(k.startswith(s + ".") for s in skip) and k.split(".")[0] not in LAYOUT]
    assert keep and "disclosure.records_certain" in keep and "certificate.model" in keep
    diff = {k: (a.get(k), b.get(k)) for k in keep if a.get(k) != b.get(k)}
    assert not diff, diff
    if "disclosure.max_posterior" in skip:  # a draw-dependent field is still stated, and re-derived by verify
        assert isinstance(a["disclosure.max_posterior"], float) and 0 < a["disclosure.max_posterior"] <= 1


@pytest.fixture(name="same_manifest")
def same_manifest_fixture():
    return same_manifest


@pytest.fixture(scope="session")
def source(tmp_path_factory):
    """(Table, path) of a bundled OCC sample written as Parquet in row groups of 3,000 (several
    chunks for the streaming engine)."""
    t = ppdp.datasets.load("occ", n=STREAM_N, seed=7)
    path = tmp_path_factory.mktemp("src") / "occ.parquet"
    pq.write_table(t.to_arrow(), path, row_group_size=3000)
    return ppdp.Table.from_parquet(path), path
