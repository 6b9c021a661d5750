"""A default release must state when it discloses the protected fact itself with certainty.

Fair's affairs table (the gauntlet's ``fair.tsv`` read through its reviewed schema) declares
every affairs bin but "none" sensitive. At F'-privacy's default θ = 8 every bucket that holds an
affair value holds only affair values: 1,570 of the 1,578 women who had an affair sit in such
buckets, and an adversary who knows a woman's quasi-identifiers (and not which QIT row is hers)
still learns with certainty that she had one for 385 of them, while each single bin's share
stays within its threshold — and ``ppdp publish`` used to exit 0 saying no declared sensitive
value was disclosed. It now says so in the disclosure line it prints, in the manifest
(``disclosure.sensitive_set``, re-derived by verify), in the README and in the audit's headline.
The attack (:func:`ppdp.audit.certain.adversary_disclosure`: the QIT rows carrying the target's
quasi-identifiers, its posterior that the value is one of the declared ones) runs on the release
the CLI published (power: it finds the fact at θ = 8), and on the custodian's θ = 2, where it
must find nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import ppdp
from ppdp.audit.certain import adversary_disclosure
from ppdp.cli import cli
from ppdp.schema import load_schema, read_table

GAUNTLET = Path(__file__).resolve().parents[1] / "gauntlet"
DATA, SCHEMA = GAUNTLET / "data" / "fair.tsv", GAUNTLET / "schemas" / "fair.toml"


@pytest.fixture(scope="module")
def fair():
    return read_table(DATA, load_schema(SCHEMA))


def _publish(tmp_path, name, *extra):
    out = tmp_path / name
    r = CliRunner().invoke(cli, ["publish", "fprivacy", str(DATA), "--schema", str(SCHEMA), *extra, "-o", str(out),
                                 "--seed", "0"])
    return r, out


def test_default_fprivacy_on_fair_states_the_fact_it_discloses(tmp_path, fair):
    r, out = _publish(tmp_path, "default")
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.output.splitlines() if "disclosure:" in ln)
    assert "1,570 of 6,366 records (24.7%) are disclosed with certainty to hold one of the sensitive values" in line, line
    assert "1,570 of 6,366 records" in (out / "README.md").read_text()
    rel = ppdp.load_release(out)
    adv = adversary_disclosure(rel, fair)
    had = int(sum(fair.codes("affairs") != list(fair.domain("affairs")).index("[0, 0.5)")))
    assert had == 1578
    # the QI-linked adversary: 385 of them certain (others share their QI values with a "none" bucket)
    assert adv["records_certain_in_set"] > 0.2 * had, adv
    assert adv["records_certain"] == 0 and adv["records_above_bound"] == 0  # no single bin is certain or above f'_x
    # the release's record classes (buckets): 1,570 of the 1,578 sit in buckets of affair values only
    stated = rel.manifest["disclosure"]["sensitive_set"]["records_certain"]
    assert stated > 0.9 * had and stated >= adv["records_certain_in_set"]
    assert ppdp.verify(out, fair).ok
    audit = ppdp.audit.audit_release(rel, fair)
    assert audit.exposed_set == 1570 and "1,570 of 6,366 records are disclosed with certainty to hold one" in audit.headline()

    # a manifest that hides it fails verify
    rel.manifest["disclosure"]["sensitive_set"]["records_certain"] = 0
    rep = ppdp.verify(rel, fair)
    assert not rep.ok and any("one of the sensitive values" in p for p in rep.problems)


def test_custodian_theta_mixes_the_buckets(tmp_path, fair):
    r, out = _publish(tmp_path, "theta2", "--theta", "2")
    assert r.exit_code == 0, r.output
    assert "hold one of the sensitive values" not in r.output
    rel = ppdp.load_release(out)
    adv = adversary_disclosure(rel, fair)
    assert adv["records_certain_in_set"] == 0 and adv["records_certain"] == 0 and adv["records_above_bound"] == 0, adv
    assert rel.manifest["disclosure"]["sensitive_set"]["records_certain"] == 0
    audit = ppdp.audit.audit_release(rel, fair)
    assert audit.ok and audit.exposed_set == 0 and "hold one of" not in audit.headline()


def test_the_block_engine_states_the_same_set(tmp_path, fair):
    r, out = _publish(tmp_path, "stream", "--engine", "stream")
    assert r.exit_code == 0, r.output
    assert "1,570 of 6,366 records (24.7%) are disclosed with certainty to hold one of the sensitive values" in r.output
    assert ppdp.load_release(out).manifest["disclosure"]["sensitive_set"]["records_certain"] == 1570
    assert ppdp.verify(out, fair).ok  # re-derived from the files on disk
