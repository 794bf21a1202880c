"""sandbox/spark_cluster.py without starting Spark: what its daemons are given, and how it
finds the executors it must stop (the test that starts the cluster is
tests/integration/test_spark_standalone.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sandbox import spark_cluster


def test_the_daemons_get_capped_heaps_loopback_and_no_spark_settings_of_the_host(
        tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_CONF_DIR", "/etc/spark")
    monkeypatch.setenv("SPARK_WORKER_CORES", "64")
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", "ipython")
    env = spark_cluster._env(Path("/opt/spark"), tmp_path, tmp_path / "conf")
    assert env["SPARK_CONF_DIR"] == str(tmp_path / "conf")
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert env["SPARK_DAEMON_MEMORY"] == spark_cluster.DAEMON_HEAP
    assert env["PYSPARK_PYTHON"] == sys.executable
    assert "SPARK_WORKER_CORES" not in env and "PYSPARK_DRIVER_PYTHON" not in env


def test_pyspark_ships_the_launcher_the_sandbox_runs():
    assert (spark_cluster.spark_home() / "bin" / "spark-class").is_file()


def test_descendants_finds_children_and_grandchildren_by_pid():
    outer = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys; p = subprocess.Popen(['sleep', '30']); "
         "print(p.pid, flush=True); sys.stdin.read(); p.kill()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert outer.stdout is not None
        grandchild = int(outer.stdout.readline())
        found = spark_cluster.descendants(os.getpid())
        assert {outer.pid, grandchild} <= found
        assert spark_cluster.descendants(grandchild) == set()
        assert "sleep 30" in spark_cluster.cmdline(grandchild)
    finally:
        assert outer.stdin is not None
        outer.stdin.close()
        outer.wait(30)
    assert spark_cluster.descendants(None) == set()
