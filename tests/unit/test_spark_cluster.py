"""sandbox/spark_cluster.py without starting Spark: what its daemons are given, and how it
finds the executors it must stop (the test that starts the cluster is
tests/integration/test_spark_standalone.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
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
        _wait_for_cmdline(grandchild, "sleep 30")
    finally:
        assert outer.stdin is not None
        outer.stdin.close()
        outer.wait(30)
    assert spark_cluster.descendants(None) == set()


def test_only_the_workers_own_children_are_its_executors(tmp_path):
    # The shape a run met: the executor (the worker's child) forks to start a Python worker,
    # and until that child execs it carries the executor's command line too.
    executor = ("import subprocess, sys; "
                f"g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', "
                f"'{spark_cluster.EXECUTOR_CLASS}']); "
                "print(g.pid, flush=True); sys.stdin.read(); g.kill()")
    worker = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys; "
         f"e = subprocess.Popen([sys.executable, '-c', {executor!r}, "
         f"'{spark_cluster.EXECUTOR_CLASS}'], stdin=sys.stdin); sys.stdin.read(); e.wait()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout is not None
        forked = int(worker.stdout.readline())
        _wait_for_cmdline(forked, spark_cluster.EXECUTOR_CLASS)
        daemon = spark_cluster.Daemon("worker", [], "", tmp_path / "log", pid=worker.pid)
        spark = spark_cluster.SparkCluster(tmp_path, 0, 0, 0, 0, daemon, daemon)
        (found,) = spark.executor_pids()
        assert found != forked and found in spark_cluster.descendants(worker.pid)
        assert spark_cluster.EXECUTOR_CLASS in spark_cluster.cmdline(found)
        assert spark.executors_seen == {found}
    finally:
        assert worker.stdin is not None
        worker.stdin.close()
        worker.wait(30)


def _wait_for_cmdline(pid: int, text: str, timeout: float = 30.0) -> None:
    """Popen returns once the child's exec has closed its descriptors, a moment before the
    kernel lays out the new command line: a loaded run read it empty."""
    deadline = time.monotonic() + timeout
    while text not in spark_cluster.cmdline(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert text in spark_cluster.cmdline(pid), f"{pid} never showed {text!r}"
