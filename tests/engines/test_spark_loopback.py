"""A local Spark session binds to the loopback address only: driver, block manager and every
socket its JVM listens on."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

HERE = os.path.dirname(os.path.abspath(__file__))


def loopback_facts(s) -> dict:
    """What a Spark session listens on: its driver host and bind address, its block managers
    (host:port), and every TCP socket its JVM listens on (from /proc)."""
    sc = s.sparkContext
    bms = str(sc._jsc.sc().getExecutorMemoryStatus().keys().mkString(",")).split(",")  # block managers, host:port
    pid = int(sc._gateway.jvm.ProcessHandle.current().pid())
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    listening = []
    for name in ("tcp", "tcp6"):
        with open(f"/proc/net/{name}") as f:
            next(f)
            for line in f:
                parts = line.split()
                if parts[3] == "0A" and parts[9] in inodes:  # state LISTEN, a socket of the JVM
                    listening.append((name, parts[1]))
    return {"driver.host": s.conf.get("spark.driver.host"), "driver.bindAddress": s.conf.get("spark.driver.bindAddress"),
            "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP"), "blockManagers": bms,
            "driver.port": s.conf.get("spark.driver.port"), "listening": listening}


PROBE = f'''
import json, sys
sys.path.insert(0, {HERE!r})
from test_spark_loopback import loopback_facts
from ppdp.engines import spark as S
s = S.local_session(1, "ppdp-loopback-test", memory="512m")
print(json.dumps(loopback_facts(s)))
s.stop()
'''

LOOPBACK_HEX = {"tcp": "0100007F", "tcp6": "0000000000000000FFFF00000100007F"}


def check_loopback(got: dict) -> None:
    """The driver and every block manager on 127.0.0.1, and every socket the JVM listens on is a loopback one."""
    assert got["driver.host"] == got["driver.bindAddress"] == "127.0.0.1"
    assert got["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert got["blockManagers"] and all(b.rsplit(":", 1)[0] == "127.0.0.1" for b in got["blockManagers"])
    assert got["listening"], "the JVM listens on no socket: the probe sees nothing"  # the probe has power
    ports = {int(addr.split(":")[1], 16) for _, addr in got["listening"]}
    assert int(got["driver.port"]) in ports
    assert {int(b.rsplit(":", 1)[1]) for b in got["blockManagers"]} <= ports
    for kind, addr in got["listening"]:
        assert addr.split(":")[0] == LOOPBACK_HEX[kind], (kind, addr)


@pytest.mark.slow  # a JVM of its own (~20 s); the default run checks the shared session (tests/engines/test_spark.py)
def test_local_session_binds_driver_and_block_manager_to_loopback():
    """A fresh process with SPARK_LOCAL_IP unset: local_session sets it, binds everything to
    loopback, and Spark prints no 'resolves to a loopback address' warning."""
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    check_loopback(json.loads(p.stdout.strip().splitlines()[-1]))
    assert "resolves to a loopback address" not in p.stderr
