"""SPEC §7: every bad input ends in ONE clear error — a ``PpdpError`` (a ``ValueError``) in
Python; on the CLI exit code 2, a single ``error: …`` line on stderr, no traceback — and
leaves nothing behind on disk (no release, no temporary directory, no partial output).

The cases are the inputs that ended in a traceback or were silently reduced before: output
paths that cannot be written, a full disk, a read-only file system, non-UTF-8 CSV and
workload files, injected and nested SQL, clauses the estimators do not answer, malformed
workload lines, ``audit --samples 0``, labels that matplotlib would read as mathtext,
``-n -5``, a duplicate CSV header, and wrong types at the API boundary.
"""

from __future__ import annotations

import errno
import os
import tempfile

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import ppdp
from ppdp.cli import cli
from ppdp.errors import PpdpError, QueryError
from ppdp.table import Table


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A directory with a good CSV and a release published from it."""
    d = tmp_path_factory.mktemp("bad-input")
    rng = np.random.default_rng(0)
    pd.DataFrame({"age": rng.integers(20, 60, 300), "sa": rng.choice(["a", "b", "c", "d"], 300)}).to_csv(
        d / "good.csv", index=False)
    r = CliRunner().invoke(cli, ["publish", "uniform", str(d / "good.csv"), "--numeric", "age", "--quasi", "age",
                                 "--sensitive", "sa", "--retention", "0.5", "--seed", "1", "-o", str(d / "rel")])
    assert r.exit_code == 0, r.output
    return d


def _snapshot(d):
    return sorted(os.listdir(d))


def _one_clear_error(result, before, after):
    """Exit 2, exactly one line on stderr and it starts with 'error:', no traceback, nothing new on disk."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.stderr)
    assert "Traceback" not in result.output and "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert after == before, f"left on disk: {sorted(set(after) - set(before))}"
    return lines[0]


def _write(d, name, data: bytes):
    p = d / name
    p.write_bytes(data)
    return str(p)


# ------------------------------------------------------------------------------ the CLI
def _publish(d, *extra, inp=None, out=None):
    return ["publish", "uniform", inp or str(d / "good.csv"), "--sensitive", "sa", "--retention", "0.5", "--allow-no-quasi",
            *extra, "-o", out or str(d / "new-release")]


CASES = {
    # output paths
    "out path too long": (lambda d: _publish(d, out=str(d / ("x" * 300))), "--out"),
    "out parent is a file": (lambda d: _publish(d, out=str(d / "good.csv" / "rel")), "--out"),
    "out under a missing root": (lambda d: _publish(d, out="/proc/no-such-dir/rel"), "--out"),
    "audit out parent is a file": (lambda d: ["audit", str(d / "rel"), "-o", str(d / "good.csv" / "a")], "--out"),
    "evaluate out parent is a file": (lambda d: ["evaluate", str(d / "good.csv"), "--sensitive", "sa", "--quasi", "age",
                                                 "--model", "uniform:retention=0.5", "--queries", "5", "--trials", "1",
                                                 "-o", str(d / "good.csv" / "e")], "--out"),
    # input files
    "non-UTF-8 CSV header": (lambda d: _publish(d, inp=_write(d, "latin1.csv", "age,sa\n30,caf\xe9\n".encode("latin-1"))),
                             "UTF-8"),
    "non-UTF-8 CSV row": (lambda d: _publish(d, inp=_write(d, "latin1b.csv", "age,sa\n30,ok\n31,caf\xe9\n".encode("latin-1"))),
                          "UTF-8"),
    "duplicate CSV header": (lambda d: _publish(d, inp=_write(d, "dup.csv", b"age,age,sa\n1,2,a\n3,4,b\n")), "duplicate"),
    "input is a directory": (lambda d: _publish(d, inp=str(d)), "directory"),
    "-n -5": (lambda d: _publish(d, "-n", "-5"), "-n"),
    "non-finite declared number": (lambda d: _publish(d, "--numeric", "age", "--quasi", "age",
                                                      inp=_write(d, "inf.csv", b"age,sa\n30,a\ninf,b\n")), "finite"),
    # queries
    "UNION": (lambda d: ["query", str(d / "rel"), "sa = 'a' UNION SELECT 1"], "UNION"),
    "stacked DROP TABLE": (lambda d: ["query", str(d / "rel"), "sa = 'a'; DROP TABLE t"], "one query"),
    "3,000 nested parentheses": (lambda d: ["query", str(d / "rel"), "(" * 3000 + "sa = 'a'" + ")" * 3000], "deep"),
    "LIMIT": (lambda d: ["query", str(d / "rel"), "age = 30 LIMIT 0"], "LIMIT"),
    "HAVING": (lambda d: ["query", str(d / "rel"), "age = 30 HAVING COUNT(*) > 1"], "HAVING"),
    "GROUP BY expression": (lambda d: ["query", str(d / "rel"), "SELECT COUNT(*) FROM t GROUP BY age + 1"], "GROUP BY"),
    "ORDER BY": (lambda d: ["query", str(d / "rel"), "age = 30 ORDER BY age"], "ORDER BY"),
    "LIKE": (lambda d: ["query", str(d / "rel"), "age = 30 OR sa LIKE 'a%'"], "LIKE"),
    "NaN bound": (lambda d: ["query", str(d / "rel"), "age BETWEEN 'nan' AND 40"], "nan"),
    "inf bound": (lambda d: ["query", str(d / "rel"), "age < 'inf'"], "inf"),
    "non-UTF-8 workload": (lambda d: ["query", str(d / "rel"), "--workload",
                                      _write(d, "w1.jsonl", '{"where": "sa = \'caf\xe9\'"}\n'.encode("latin-1"))], "UTF-8"),
    "100,000-deep workload line": (lambda d: ["query", str(d / "rel"), "--workload",
                                              _write(d, "w2.jsonl", b"[" * 100_000 + b"]" * 100_000 + b"\n")], "deep"),
    '{"where": 5}': (lambda d: ["query", str(d / "rel"), "--workload", _write(d, "w3.jsonl", b'{"where": 5}\n')],
                     "string"),
    "workload line not a query": (lambda d: ["query", str(d / "rel"), "--workload",
                                             _write(d, "w4.jsonl", b'{"predicates": [{"column": "sa"}]}\n')], "kind"),
    # audit / evaluate parameters
    "audit --samples 0": (lambda d: ["audit", "--differential-inference", "--samples", "0", "-o", str(d / "aud")],
                          "--samples"),
    "evaluate negative epsilon": (lambda d: ["evaluate", "--dataset", "adult", "-n", "500", "--model",
                                             "dpcube:epsilon=-1,dims=age", "-o", str(d / "ev")], "epsilon"),
    "evaluate --queries 0": (lambda d: ["evaluate", "--dataset", "adult", "-n", "500", "--model", "fprivacy:theta=8",
                                        "--queries", "0", "-o", str(d / "ev")], "--queries"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_cli_bad_input_is_one_clear_error(work, case):
    make, needle = CASES[case]
    args = make(work)
    before = _snapshot(work)
    before = [f for f in before if f not in {"latin1.csv", "latin1b.csv", "dup.csv", "inf.csv", "w1.jsonl", "w2.jsonl",
                                             "w3.jsonl", "w4.jsonl"}]
    r = CliRunner().invoke(cli, args)
    after = [f for f in _snapshot(work) if f not in {"latin1.csv", "latin1b.csv", "dup.csv", "inf.csv", "w1.jsonl",
                                                     "w2.jsonl", "w3.jsonl", "w4.jsonl"}]
    line = _one_clear_error(r, before, after)
    assert needle.lower() in line.lower(), line


@pytest.mark.parametrize("where,fail", [
    ("disk full", "write"), ("read-only file system", "mkdtemp"), ("permission denied", "mkdtemp"),
])
def test_cli_unwritable_output_is_one_clear_error(work, monkeypatch, where, fail):
    """A full disk, a read-only file system and an unwritable directory (simulated: the tests
    may run as root, who can write anywhere) end in one line naming --out, and nothing is left."""
    code = {"disk full": errno.ENOSPC, "read-only file system": errno.EROFS, "permission denied": errno.EACCES}[where]
    if fail == "write":
        import pyarrow.parquet as pq

        def broken(*a, **k):
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(pq, "write_table", broken)
    else:
        real_mkdir = os.mkdir

        def broken_mkdir(path, *a, **k):  # the release's temporary directory cannot be made
            if ".tmp" in os.fspath(path):
                raise OSError(code, os.strerror(code), str(work))
            return real_mkdir(path, *a, **k)

        monkeypatch.setattr(tempfile, "mkdtemp", lambda *a, **k: broken_mkdir(os.path.join(str(work), ".x.tmp")))
        monkeypatch.setattr(os, "mkdir", broken_mkdir)
    before = _snapshot(work)
    r = CliRunner().invoke(cli, _publish(work))
    line = _one_clear_error(r, before, _snapshot(work))
    assert "--out" in line and os.strerror(code) in line


def test_dollar_labels_do_not_break_the_plots(tmp_path):
    """SA labels that matplotlib would parse as (invalid) mathtext: publish and audit work."""
    vals = ["$^$", "$\\foo$", "a$_{$b", "$$"]
    csv = tmp_path / "d.csv"
    csv.write_text("age,sa\n" + "".join(f"{20 + i % 30},{vals[i % 4]}\n" for i in range(400)))
    run = CliRunner().invoke
    r = run(cli, ["publish", "fprivacy", str(csv), "--sensitive", "sa", "--quasi", "age", "--allow-full-disclosure",
                  "-o", str(tmp_path / "rel")])
    assert r.exit_code == 0, r.output
    a = run(cli, ["audit", str(tmp_path / "rel"), "-o", str(tmp_path / "aud")])
    assert a.exit_code in (0, 1), a.output  # 1 = violations found; never a crash
    assert (tmp_path / "aud" / "posterior.png").stat().st_size > 0
    e = run(cli, ["evaluate", str(csv), "--sensitive", "sa", "--quasi", "age", "--model", "uniform:retention=0.5",
                  "--queries", "20", "--trials", "1", "-o", str(tmp_path / "ev")])
    assert e.exit_code == 0, e.output


# ------------------------------------------------------------------------- the Python API
def _release(work):
    return ppdp.load_release(work / "rel")


API_CASES = {
    "count(None)": lambda w: _release(w).count(None),
    "count(42)": lambda w: _release(w).count(42),
    "answer(42)": lambda w: _release(w).answer(42),
    "answer([None])": lambda w: _release(w).answer([None]),
    "verify(42)": lambda w: ppdp.verify(42),
    "verify(table=5)": lambda w: ppdp.verify(_release(w), table=5),
    "publish(None, …)": lambda w: ppdp.publish(None, ppdp.FPrivacy()),
    "Table.from_csv('.')": lambda w: Table.from_csv("."),
    "Table.read(dir)": lambda w: Table.read(w),
    "Table.from_csv(None)": lambda w: Table.from_csv(None),
    "Table.from_pandas(5)": lambda w: Table.from_pandas(5),
    "Table(list, …)": lambda w: Table([1, 2], {}),
    "Table without a domain": lambda w: Table({"a": [0]}, {}),
    "Table non-integer codes": lambda w: Table({"a": ["x"]}, {"a": ["x"]}),
    "quasi not names": lambda w: Table.from_pandas(pd.DataFrame({"a": ["x"]}), quasi=[1]),
    "duplicate DataFrame columns": lambda w: Table.from_pandas(pd.DataFrame([[1, 2]], columns=["a", "a"])),
    "parse_where(5)": lambda w: ppdp.queries.parse_where(5),
    "Workload.load(None)": lambda w: ppdp.queries.Workload.load(None),
    "Query.from_json(list)": lambda w: ppdp.queries.Query.from_json([1]),
}


@pytest.mark.parametrize("case", list(API_CASES))
def test_api_bad_input_raises_a_ppdp_error(work, case):
    with pytest.raises(PpdpError) as info:
        API_CASES[case](work)
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("q", ["age = 30 LIMIT 0", "age = 30 HAVING COUNT(*) > 1", "age = 30 GROUP BY sa",
                               "age = 30 ORDER BY age", "age BETWEEN 'nan' AND 40", "age > 'nan'"])
def test_api_count_refuses_what_it_would_drop(work, q):
    """Release.count answered these with the plain count (or 0) before; now a QueryError."""
    with pytest.raises(QueryError):
        _release(work).count(q)


def test_evaluate_checks_every_model_before_work(tmp_path):
    """A bad model fails at once with exit 2 and writes nothing (the first model is fine)."""
    out = tmp_path / "ev"
    r = CliRunner().invoke(cli, ["evaluate", "--dataset", "adult", "-n", "500", "--model", "fprivacy:theta=8",
                                 "--model", "dpcube:epsilon=-1,dims=age", "-o", str(out)])
    assert r.exit_code == 2 and "epsilon" in r.stderr
    assert not out.exists()


def _required(cls) -> list[str]:
    import inspect

    return [n for n, p in inspect.signature(cls.__init__).parameters.items()
            if n != "self" and p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


@pytest.mark.parametrize("name", sorted(n for n, c in ppdp.registry.mechanisms().items() if _required(c)))
def test_cli_missing_required_parameter_is_one_clear_error(work, name):
    """``ppdp publish <mechanism>`` without a parameter the mechanism requires: one line naming
    its flag(s), exit 2, nothing written (the histograms given their dimensions)."""
    from ppdp.cli.publish import flag_of

    cls = ppdp.registry.mechanisms()[name]
    args = ["publish", name, "--dataset", "adult", "-o", str(work / f"missing-{name}")]
    if "dims" in _required(cls):
        args += ["--dims", "age"]
    before = _snapshot(work)
    r = CliRunner().invoke(cli, args)
    line = _one_clear_error(r, before, _snapshot(work))
    for p in _required(cls):
        if p != "dims":
            assert flag_of(cls, p) in line, line
