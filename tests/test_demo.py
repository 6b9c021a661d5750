"""``ppdp demo`` — the README's main job — runs through the safe-by-default refusal only because
its custodian declares the values needing protection; without the declaration it is refused."""

from __future__ import annotations

from click.testing import CliRunner

from ppdp.cli import cli


def test_demo_declares_and_publishes(tmp_path):
    res = CliRunner().invoke(cli, ["demo", "--queries", "50", "--out", str(tmp_path / "d")])
    assert res.exit_code == 0, res.output
    assert "declared as needing no protection" in res.output and "verify: OK" in res.output


def test_demo_without_declaration_is_refused(tmp_path):
    """Control: declaring a value that is not the table's leaves every common value sensitive."""
    res = CliRunner().invoke(cli, ["demo", "--queries", "50", "--not-sensitive", "no such value", "--out", str(tmp_path / "d")])
    assert res.exit_code == 2, res.output
    assert "refused" in res.output and not (tmp_path / "d").exists()
