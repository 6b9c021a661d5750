"""Start-up of the ``ppdp`` command: ``import ppdp.cli`` loads no numerical library, ``ppdp
--help`` lists the commands without importing their modules, and the list matches them."""

from __future__ import annotations

import shlex
import subprocess
import sys

import click
from click.testing import CliRunner

HEAVY = ("numpy", "pandas", "scipy", "scipy.optimize", "pyarrow", "jax", "highspy", "pyspark", "ppdp.table",
         "ppdp.registry", "ppdp.mechanisms", "ppdp.cli.core", "ppdp.cli.publish")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_import_ppdp_cli_loads_no_numerical_stack():
    loaded = _modules_after("import ppdp.cli")
    assert not [m for m in HEAVY if m in loaded]
    assert "ppdp.cli" in loaded  # the control: the import itself happened


def test_help_and_version_import_no_command_module():
    for args in (["--help"], ["--version"]):
        loaded = _modules_after(f"import sys\nfrom ppdp.cli import cli\ntry:\n    cli.main({args!r}, 'ppdp')\n"
                                "except SystemExit:\n    pass")
        assert not [m for m in HEAVY if m in loaded], args


def test_the_command_list_matches_the_modules():
    from ppdp.cli import COMMANDS, cli, load_all

    load_all()
    assert set(cli.commands) == set(COMMANDS)
    ctx = click.Context(cli)
    for name, (module, _) in COMMANDS.items():
        cmd = cli.commands[name]
        if module:
            assert cmd.callback.__module__ == f"ppdp.cli.{module}", name
        # the listed description is the command's own first sentence(s), shortened
        first = " ".join((cmd.help or "").split())
        assert first, name
        assert COMMANDS[name][1].split()[0] == first.split()[0], name
    assert cli.get_command(ctx, "no-such-command") is None


def test_reproduce_subcommands_are_described():
    from ppdp.cli import cli

    res = CliRunner().invoke(cli, ["reproduce", "--help"])
    assert res.exit_code == 0
    lines = res.output.split("Commands:")[1].strip().splitlines()
    assert len(lines) >= 5
    for ln in lines:
        assert len(ln.split()) >= 3, ln  # a name and a description


def test_a_broken_pipe_exits_quietly():
    # `ppdp … | head -1`: the reader goes away after one line, long before the output ends
    code = ("import click\nfrom ppdp.cli import cli, main\n"
            "@cli.command('long')\ndef long():\n    for i in range(200000):\n        click.echo(f'line {i}')\n"
            "main(['long'])")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert p.stdout.count("\n") == 200000 and p.returncode == 0  # the control: without a closed pipe, all of it
    p = subprocess.run(f"{sys.executable} -c {shlex.quote(code)} | head -1", shell=True, capture_output=True,
                       text=True)
    assert p.stdout.count("\n") == 1
    assert "Broken pipe" not in p.stderr and "Traceback" not in p.stderr, p.stderr


def _all_commands(group, path=()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from _all_commands(cmd, (*path, name))


def test_every_option_shows_one_default_at_most():
    from ppdp.cli import cli, load_all

    load_all()
    seen = 0
    for path, cmd in _all_commands(cli):
        ctx = click.Context(cmd, info_name=" ".join(path))
        for p in cmd.get_params(ctx):
            rec = p.get_help_record(ctx) if isinstance(p, click.Option) else None
            if rec is None:
                continue
            seen += rec[1].count("[default")
            assert rec[1].count("[default") <= 1, (path, rec)
    assert seen > 20  # the control: defaults are shown


def test_python_dash_m_runs_the_command():
    p = subprocess.run([sys.executable, "-m", "ppdp.cli", "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("ppdp, version"), p.stderr
