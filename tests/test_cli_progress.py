"""Progress on stderr: long stages are shown, short ones and a quiet default print nothing."""

from __future__ import annotations

import io
import time

import pytest
from click.testing import CliRunner

from ppdp.kernels import progress


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.setattr(progress, "DELAY", 0.2)
    monkeypatch.setattr(progress, "TICK", 0.05)
    yield
    progress.enable(False)


def test_a_long_stage_is_shown_and_a_short_one_is_not(fast):
    buf = io.StringIO()
    progress.enable(True, buf)
    with progress.stage("short"):
        pass
    assert buf.getvalue() == ""
    with progress.stage("outer"):
        with progress.stage("inner"):
            time.sleep(0.6)
    out = buf.getvalue()
    assert "outer …" in out and "outer › inner …" in out
    assert "outer › inner: done in" in out and "outer: done in" in out


def test_quiet_when_disabled(fast):
    buf = io.StringIO()
    progress.enable(False, buf)
    with progress.stage("long"):
        time.sleep(0.4)
    assert buf.getvalue() == ""


def test_quiet_by_default_when_stderr_is_not_a_terminal(monkeypatch):
    monkeypatch.delenv("PPDP_PROGRESS", raising=False)
    assert progress.enable_from_environment(io.StringIO()) is False
    monkeypatch.setenv("PPDP_PROGRESS", "1")
    assert progress.enable_from_environment(io.StringIO()) is True
    progress.enable(False)


def test_the_cli_shows_publish_and_verify_stages(fast, tmp_path, monkeypatch):
    from ppdp.cli import cli

    monkeypatch.setattr(progress, "DELAY", 0.0)
    res = CliRunner().invoke(cli, ["publish", "sdr", "--dataset", "edu", "-n", "3000", "--rho1", "0.1", "--rho2", "0.5",
                                   "-o", str(tmp_path / "rel")], env={"PPDP_PROGRESS": "1"})
    assert res.exit_code == 0, res.output
    assert "publish sdr: done in" in res.stderr and "verify: done in" in res.stderr
    res = CliRunner().invoke(cli, ["publish", "sdr", "--dataset", "edu", "-n", "3000", "--rho1", "0.1", "--rho2", "0.5",
                                   "-o", str(tmp_path / "rel2")], env={"PPDP_PROGRESS": "0"})
    assert res.exit_code == 0 and "done in" not in res.stderr


def test_quiet_under_another_progress_bar(fast):
    from tqdm import tqdm

    buf = io.StringIO()
    progress.enable(True, buf)
    with tqdm(total=1, file=io.StringIO()):  # e.g. ppdp evaluate's bar over its releases
        with progress.stage("publish"):
            time.sleep(0.4)
    assert buf.getvalue() == ""
    with progress.stage("publish"):  # the control: without the bar, the same stage is shown
        time.sleep(0.4)
    assert "publish: done in" in buf.getvalue()
