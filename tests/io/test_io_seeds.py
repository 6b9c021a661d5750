"""Seeds and sampling (issue [leaks] item 6) and the publication generator (item 8).

The replay attack: whoever knows a seeded release's seed re-runs the publication on a table of
the same shape (same N, same published domain, SA values of their choosing) and sees which rows
kept their own value — those rows' published SA is their true SA, with certainty. The seed is
therefore never written into a release: only the custodian-side file holds it.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli
from ppdp.kernels.rng import full_width_seed, publication_rng
from ppdp.releases.base import custodian_path, load_custodian

SEED = 424_242
RETENTION = 0.36


def _with_ids(t: ppdp.Table, sa_labels) -> ppdp.Table:
    """The table with a unique row id as a quasi-identifier (to score the attack) and the
    given SA labels."""
    df = pd.DataFrame({"rid": np.arange(t.n_rows).astype(str), t.sa: np.asarray(sa_labels).astype(str)})
    return ppdp.Table.from_pandas(df, quasi=["rid"], sensitive=[t.sa])


def _replay(release: ppdp.Release, table: ppdp.Table, seed: int) -> tuple[float, float]:
    """The replay attack with ``seed``: (share of rows flagged as certainly kept, precision of
    'published SA = true SA' on the flagged rows)."""
    sa = table.sa
    dom = release.domains[sa]
    rng = np.random.default_rng(7)  # the attacker's own dummy SA values over the published domain
    dummy_sa = np.asarray(dom)[rng.integers(len(dom), size=table.n_rows)]
    dummy_sa[: len(dom)] = dom  # every published label present, so the dummy has the same domain
    dummy = _with_ids(table, dummy_sa)
    replay = ppdp.publish(dummy, ppdp.UniformPerturbation(retention=RETENTION), seed=seed)
    d, r = replay.tables["data"], release.tables["data"]
    kept = np.asarray(d.column(sa).cast("string").to_pylist()) == dummy_sa[np.asarray(d.column("rid").cast("string").to_pylist(), int)]
    rid = np.asarray(r.column("rid").cast("string").to_pylist(), int)
    truth = np.asarray(table.labels(sa))[rid]
    published = np.asarray(r.column(sa).cast("string").to_pylist())
    return float(kept.mean()), float((published[kept] == truth[kept]).mean())


@pytest.fixture(scope="module")
def edu20k():
    t = ppdp.datasets.load("edu", n=20_000, seed=0)
    return _with_ids(t, t.labels(t.sa))


def test_seed_replay_needs_the_seed_and_the_release_does_not_carry_it(edu20k, tmp_path):
    rel = ppdp.publish(edu20k, ppdp.UniformPerturbation(retention=RETENTION), seed=SEED)
    d = rel.save(tmp_path / "rel")
    manifest = json.loads((d / "manifest.json").read_text())
    # the release carries no seed, anywhere in its directory; it says it is not fit for publication
    assert "seed" not in manifest and manifest["fit_for_publication"] is False
    assert all(str(SEED).encode() not in p.read_bytes() for p in d.iterdir())
    assert load_custodian(custodian_path(d)) == {"seed": SEED}
    assert not custodian_path(d).is_relative_to(d)
    # power control: with the custodian's seed the replay recovers the SA of ~36% of rows with certainty
    share, precision = _replay(rel, edu20k, SEED)
    assert precision == 1.0 and share == pytest.approx(RETENTION, abs=0.02), (share, precision)
    # an attacker holding only the release has no seed: any guess (here the neighbours of the
    # true seed) gives chance-level precision — a published value equals the truth with
    # probability `retention` (binomial sd over ~7,200 rows < 0.006; 0.05 margin: false alarm < 1e-15)
    for guess in (SEED - 1, SEED + 1, 0):
        share, precision = _replay(rel, edu20k, guess)
        assert precision == pytest.approx(RETENTION, abs=0.05), (guess, precision)


def test_cli_seeded_release_is_unfit_and_verify_exits_1(tmp_path):
    out = tmp_path / "rel"
    r = CliRunner().invoke(cli, ["publish", "uniform", "--dataset", "edu", "-n", "3000", "--retention", "0.4", "--seed", "11",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "NOT fit for publication" in r.output and "custodian" in r.output
    assert "seed" not in json.loads((out / "manifest.json").read_text())
    v = CliRunner().invoke(cli, ["verify", str(out)])
    assert v.exit_code == 1 and "verify: OK" in v.output
    assert "NOT fit for publication" in v.output.splitlines()[-1]
    # unseeded: fit for publication, verify exits 0
    out2 = tmp_path / "rel2"
    r = CliRunner().invoke(cli, ["publish", "uniform", "--dataset", "edu", "-n", "3000", "--retention", "0.4", "-o", str(out2)])
    assert r.exit_code == 0, r.output
    assert not custodian_path(out2).exists()
    assert CliRunner().invoke(cli, ["verify", str(out2)]).exit_code == 0


def test_seed_in_a_manifest_that_claims_fitness_is_a_problem(edu20k, tmp_path):
    rel = ppdp.publish(edu20k, ppdp.UniformPerturbation(retention=RETENTION))
    assert ppdp.verify(rel).ok and rel.manifest["fit_for_publication"] is True
    d = rel.save(tmp_path / "rel")
    m = json.loads((d / "manifest.json").read_text())
    m["seed"] = 5
    (d / "manifest.json").write_text(json.dumps(m))
    rep = ppdp.verify(d)
    assert not rep.ok and any("seed" in p and "fit_for_publication" in p for p in rep.problems), rep.problems
    m["fit_for_publication"] = "yes"
    del m["seed"]
    (d / "manifest.json").write_text(json.dumps(m))
    rep = ppdp.verify(d)
    assert not rep.ok and any("fit_for_publication" in p for p in rep.problems)


@pytest.mark.parametrize("source", ["dataset", "csv"])
def test_sample_larger_than_the_table_is_refused(tmp_path, source):
    if source == "dataset":
        n = ppdp.datasets.load("occ").n_rows
        args = ["--dataset", "occ"]
    else:
        n = 50
        csv = tmp_path / "t.csv"
        csv.write_text("a,s\n" + "".join(f"x{i % 3},v{i % 5}\n" for i in range(n)))
        args = [str(csv), "--quasi", "a", "--sensitive", "s"]
    out = tmp_path / "rel"
    r = CliRunner().invoke(cli, ["publish", "uniform", *args, "-n", str(10 * n), "--retention", "0.5", "-o", str(out)])
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: -n/--rows") and "exceeds" in lines[0], r.output
    assert not out.exists()
    # n = N is allowed (the whole table, each row once)
    r = CliRunner().invoke(cli, ["publish", "uniform", *args, "-n", str(n), "--retention", "0.5", "-o", str(out)])
    assert r.exit_code == 0, r.output


def test_unseeded_generator_is_aes_counter_mode_and_seeded_is_reproducible():
    from randomgen import AESCounter

    a, b = publication_rng(None), publication_rng(None)
    assert isinstance(a.bit_generator, AESCounter)
    assert not np.array_equal(a.integers(2**63, size=4), b.integers(2**63, size=4))  # fresh 128-bit keys
    assert np.array_equal(publication_rng(3).random(5), publication_rng(3).random(5))
    assert np.array_equal(publication_rng(3).random(5), np.random.default_rng(3).random(5))  # seeded runs unchanged
    with pytest.raises(ppdp.errors.PpdpError):
        publication_rng(-1)
    with pytest.raises(ppdp.errors.PpdpError):
        publication_rng(True)


def test_spark_rank_seeds_are_full_width():
    rng = publication_rng(None)
    seeds = [full_width_seed(rng) for _ in range(200)]
    assert all(-(2**63) <= s < 2**63 for s in seeds)
    assert max(abs(s) for s in seeds) > 2**62  # uses the whole 64-bit range, not 31 bits
    assert len(set(seeds)) == len(seeds)
