"""docs/tutorial.md runs: every command of its ```bash blocks, in order, in a fresh directory
(python lines in a subprocess, ppdp lines through the CLI); each must exit 0, and the seeded
evaluate prints the recommendation the tutorial shows."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from ppdp.cli import cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"


def commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    out = []
    for b in blocks:
        for line in b.replace("\\\n", " ").splitlines():
            if line.strip() and not line.strip().startswith("#"):
                out.append(line.strip())
    return out


def test_tutorial_commands_run(tmp_path, monkeypatch):
    cmds = commands()
    assert [c.split()[0] + " " + c.split()[1] for c in cmds] == [
        "python -c", "ppdp evaluate", "ppdp publish", "ppdp verify", "ppdp query", "ppdp audit", "ppdp export"]
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    outputs = {}
    for cmd in cmds:
        args = shlex.split(cmd)
        if args[0] == "python":
            proc = subprocess.run([sys.executable, *args[1:]], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=120)
            assert proc.returncode == 0, f"{cmd}\n{proc.stderr}"
            continue
        r = CliRunner().invoke(cli, args[1:])
        assert r.exit_code == 0, f"{cmd}\n{r.output}"
        outputs[args[1]] = r.output
    doc = DOC.read_text(encoding="utf-8")
    rec = next(ln for ln in outputs["evaluate"].splitlines() if ln.startswith("recommendation:"))
    assert rec in doc, f"the tutorial's evaluate output is stale: {rec}"
    assert (tmp_path / "eval" / "report.html").exists() and (tmp_path / "release.custodian.json").exists()
    assert (tmp_path / "release-csv" / "README.md").exists() and (tmp_path / "audit" / "report.html").exists()
    assert float(outputs["query"].splitlines()[1].split()[0]) > 0
