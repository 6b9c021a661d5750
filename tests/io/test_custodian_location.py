"""The custodian-side file where the custodian chooses (``ppdp publish --custodian FILE``,
``Release.save(dir, custodian_file=...)``): written there and not beside the release, read back
by verify; refused — before anything is written — inside the release directory or over an
existing file."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli
from ppdp.errors import ReleaseError


def _publish(tmp_path, *extra):
    return CliRunner().invoke(cli, ["publish", "fprivacy", "--dataset", "adult", "-n", "2000", "--fake-values", "1",
                                    "--seed", "3", "-o", str(tmp_path / "rel"), *extra])


def test_cli_custodian_file_goes_where_asked(tmp_path):
    where = tmp_path / "private" / "keep.json"
    r = _publish(tmp_path, "--custodian", str(where))
    assert r.exit_code == 0, r.output
    assert where.is_file() and not (tmp_path / "rel.custodian.json").exists()
    assert any(p.name.startswith("keep.fake-") for p in where.parent.iterdir())   # the fakes' sidecar beside it
    assert f"custodian file: {where}" in r.output
    v = CliRunner().invoke(cli, ["verify", str(tmp_path / "rel"), "--custodian", str(where), "--json"])
    assert '"fake_values": "checked against the custodian file"' in v.output
    rep = ppdp.verify(tmp_path / "rel", custodian=where)
    assert rep.facts.get("fake_values") == "checked against the custodian file"


@pytest.mark.parametrize("case", ["inside", "exists"])
def test_cli_refuses_a_bad_custodian_location(tmp_path, case):
    where = tmp_path / "rel" / "c.json" if case == "inside" else tmp_path / "c.json"
    if case == "exists":
        where.write_text("{}")
    r = _publish(tmp_path, "--custodian", str(where))
    assert r.exit_code == 2
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --custodian"), r.output
    assert not (tmp_path / "rel").exists() and "Traceback" not in r.output


def test_save_refuses_the_custodian_file_inside_the_release(tmp_path):
    t = ppdp.datasets.load("adult", n=1000, seed=0)
    rel = ppdp.publish(t, ppdp.FPrivacy(theta=8, fake_values=1), seed=1)
    with pytest.raises(ReleaseError, match="inside the release"):
        rel.save(tmp_path / "r", custodian_file=tmp_path / "r" / "sub" / "c.json")
    assert not os.path.lexists(tmp_path / "r")
    out = rel.save(tmp_path / "r", custodian_file=tmp_path / "k" / "c.json")
    assert (tmp_path / "k" / "c.json").is_file() and not (tmp_path / "r.custodian.json").exists()
    rep = ppdp.verify(out, custodian=tmp_path / "k" / "c.json")
    assert rep.ok and rep.facts["fake_values"] == "checked against the custodian file"
