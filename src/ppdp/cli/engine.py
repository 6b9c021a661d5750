"""``--engine local|spark|stream`` on publish, verify and query (no command of its own).

- ``local`` (the default): the table and the release in this process's memory.
- ``spark``: the publication runs on Apache Spark (:mod:`ppdp.engines.spark`), on the master
  ``--spark-master`` or the environment's ``PPDP_SPARK_MASTER`` names (default: a local-mode
  session bound to 127.0.0.1); the release is partitioned.
- ``stream``: the publication is streamed in chunks in this process (:mod:`ppdp.engines.stream`),
  in bounded memory; the release is partitioned.

INPUT is read as ``--schema`` and the reading flags say, in this process, exactly as for the
local engine (same checks, same codes), and handed to the engine as a coded Parquet file in a
staging directory beside ``--out``, deleted when the command ends. ``verify`` and ``query``
with ``spark`` or ``stream`` read the release in bounded memory in this process (Spark has no
verifier of its own: both engines' releases are verified and queried the same way).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import click

from ..errors import ParameterError, PpdpError

#: the engines the CLI offers
ENGINES = ("local", "spark", "stream")
#: environment variable naming the Spark master (``--spark-master`` wins)
MASTER_ENV = "PPDP_SPARK_MASTER"


def engine_params(what: str = "publish") -> list[click.Option]:
    """``--engine`` and ``--spark-master``; ``what``: the command (its help says what the engine does)."""
    doing = {"publish": "Where the publication runs: in memory (local), on Apache Spark (spark, a partitioned "
                        "release), or streamed in chunks in bounded memory (stream, a partitioned release).",
             "verify": "How the release is read: in memory (local), or in bounded memory, a chunk at a time "
                       "(spark or stream: the same streamed verifier for the releases of both).",
             "query": "How the release is read: in memory (local, every estimator, intervals), or streamed a "
                      "chunk at a time (spark or stream: randomized releases, estimators linear in the rows, "
                      "estimates without intervals)."}[what]
    opts = [click.Option(["--engine"], type=click.Choice(ENGINES), default="local", show_default=True, help=doing)]
    if what == "publish":
        opts.append(click.Option(["--spark-master", "spark_master"], default=None, metavar="URL",
                                 help="Spark master with --engine spark (local[N], spark://HOST:7077, yarn …)  "
                                      f"[default: ${MASTER_ENV}, else local[2] bound to 127.0.0.1]."))
    return opts


def engine_options(what: str):
    """Decorator adding :func:`engine_params` to a command."""

    def deco(f):
        params = engine_params(what)
        f.__click_params__ = list(getattr(f, "__click_params__", [])) + list(reversed(params))  # type: ignore[attr-defined]
        return f

    return deco


def spark_master(flag: str | None) -> str | None:
    """The master URL: the flag, else the environment variable, else None (local mode)."""
    got = flag if flag is not None else os.environ.get(MASTER_ENV)
    if got is not None and not got.strip():
        raise ParameterError(f"--spark-master: an empty master URL (flag or ${MASTER_ENV})", param="spark_master")
    return got.strip() if got else None


@contextmanager
def staged_parquet(table, near) -> Iterator[Path]:
    """``table`` written as a coded Parquet file (roles, domains and numeric values in its
    footer, as ``Table.to_parquet`` writes them) in a staging directory beside ``near``,
    removed afterwards whatever happens."""
    parent = Path(near).resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix=f".{Path(near).name}.input-", dir=parent))
    try:
        path = d / "input.parquet"
        table.to_parquet(path)
        yield path
    finally:
        shutil.rmtree(d, ignore_errors=True)


def publish_on_engine(engine: str, table, mech, out, seed, master=None, allow_full_disclosure: bool = False,
                      allow_low_utility: bool = False) -> None:
    """Publish ``table`` under ``mech`` into ``out`` on the Spark or the streaming engine."""
    from ..kernels.progress import stage

    out = Path(out)
    if engine == "spark":
        try:
            import pyspark  # noqa: F401
        except ModuleNotFoundError:
            raise PpdpError("--engine spark needs PySpark: pip install 'ppdp[spark]'") from None
    with staged_parquet(table, out) as src:
        if engine == "stream":
            from ..engines import stream as E

            with stage(f"publish ({engine} engine)"):
                if getattr(mech, "family", None) == "bucketized":
                    E.publish_stream_bucketized(src, mech, out, seed, allow_full_disclosure=allow_full_disclosure)
                else:
                    E.publish_stream(src, mech, out, seed, allow_low_utility=allow_low_utility)
            return
        from pyspark.sql import SparkSession

        from ..engines import spark as S

        active = SparkSession.getActiveSession()  # a session this process already runs: use it, leave it running
        if active is not None and master is not None:
            raise PpdpError("--spark-master: this process already runs a Spark session; it is used as it is")
        with stage("start Spark"):
            session = active or S.local_session(master=master)
        try:
            with stage(f"publish ({engine} engine)"):
                sdf, schema = S.read_dataset(session, src)
                S.publish(sdf, mech, out, schema if mech.family != "histogram" else None, seed,
                          allow_full_disclosure=allow_full_disclosure, allow_low_utility=allow_low_utility)
        finally:
            if active is None:
                session.stop()


def verify_on_engine(release, table) -> dict:
    """The streamed verifier (bounded memory) of ``release``, against ``table`` when given."""
    from ..engines.stream import verify_stream
    from ..kernels.progress import stage

    with stage("verify (streamed)"):
        if table is None:
            return verify_stream(release)
        with staged_parquet(table, Path(release)) as src:
            return verify_stream(release, src)


def where_text(statement: str) -> str:
    """The condition of ``[SELECT COUNT(*) [FROM t]] [WHERE] condition`` (the forms without
    GROUP BY), as the streamed answers take it."""
    import re

    body = statement.strip().rstrip(";").strip()
    m = re.match(r"(?is)^select\s+count\s*\(\s*\*\s*\)\s*(?:from\s+\S+\s*)?(.*)$", body)
    if m:
        body = m.group(1).strip()
    m = re.match(r"(?is)^where\s+(.*)$", body)
    return m.group(1).strip() if m else body


def query_on_engine(release, statements, estimator):
    """Estimates of count statements (no GROUP BY) on a partitioned randomized release,
    streamed (estimators linear in the rows: the sum over the parts is the in-memory answer)."""
    from ..engines.stream import answer_where_stream
    from ..errors import QueryError
    from ..kernels.progress import stage
    from ..queries.sql import parse_statement

    conditions = []
    for i, s in enumerate(statements):
        st = parse_statement(s) if isinstance(s, str) else s
        if st.group_by:
            raise QueryError(f"statement {i + 1}: GROUP BY is answered in memory only; use --engine local")
        conditions.append(where_text(st.text))
    with stage("answer (streamed)"):
        return answer_where_stream(release, conditions, estimator)


def check_engine(engine: str, custodian, master) -> None:
    """Flags that do not go with ``--engine`` (one clear error, before any work)."""
    if custodian is not None:
        raise PpdpError(f"--custodian: the {engine} engine writes the custodian file beside the release "
                        "(<out>.custodian.json); omit --custodian, or use --engine local")
    if master is not None and engine != "spark":
        raise PpdpError(f"--spark-master goes with --engine spark, not --engine {engine}")


def finish_engine_publish(out):
    """Verify a release an engine wrote and print the one-screen summary."""
    from ..releases.base import custodian_path, load_release
    from .common import report_release

    path = Path(out)
    rel = load_release(path)
    cpath = custodian_path(path)
    if cpath.exists():
        from ..releases.custodian import load_custodian

        rel.custodian = load_custodian(cpath)
    return report_release(rel, path, cpath)
