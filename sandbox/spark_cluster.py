"""A Spark standalone cluster on this machine: one master and one worker, from the Spark
that pyspark ships in the venv (``bin/spark-class``), for running `selfheal stream
--master spark://...` as it runs on a real cluster (driver, master, executors in
separate JVMs; the job's Python code runs in the executor's Python workers).

Both are bound to 127.0.0.1 on free ports, started detached with their output in the
work dir, their heaps capped, and stopped by PID (a PID is trusted only while its command
line still carries its marker), never by name. `spark-class` execs the JVM, so the PID
we start is the JVM's. The worker starts executors as its own children; `stop` stops the
worker (which kills its executors), then the master, then any executor left, by PID.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from sandbox import processes
from sandbox.jvm import SandboxError
from sandbox.ports import PortBook, PortClash, port_clash, read_logs

# The master's and worker's own heaps (SPARK_DAEMON_MEMORY); what executors may use is the
# worker's --memory.
DAEMON_HEAP = os.environ.get("SELFHEAL_SPARK_DAEMON_HEAP", "256m")
WORKER_MEMORY = os.environ.get("SELFHEAL_SPARK_WORKER_MEMORY", "1g")
WORKER_CORES = 1
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
HOST = "127.0.0.1"


def spark_home() -> Path:
    """The Spark distribution inside the pyspark package (bin/, jars/)."""
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").exists():
        raise SandboxError(f"pyspark at {home} has no bin/spark-class; reinstall it "
                           "(pip install -e '.[spark]')")
    return home


@dataclasses.dataclass
class Daemon:
    """The master or the worker: its command, PID, marker and log."""

    role: str
    argv: list[str]
    marker: str
    log: Path
    pid: int | None = None

    def running(self) -> bool:
        return processes.is_running(self.pid, self.marker)

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log yet)"


@dataclasses.dataclass
class SparkCluster:
    """A running master and worker; `master_url` is what `--master` takes."""

    work_dir: Path
    master_port: int
    master_ui_port: int
    worker_port: int
    worker_ui_port: int
    master: Daemon
    worker: Daemon
    # Every executor JVM the worker was seen running (see `executor_pids`).
    executors_seen: set[int] = dataclasses.field(default_factory=set)

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def master_ui(self) -> str:
        return f"http://{HOST}:{self.master_ui_port}"

    @property
    def worker_ui(self) -> str:
        return f"http://{HOST}:{self.worker_ui_port}"

    @property
    def worker_dir(self) -> Path:
        """Where the worker keeps each application's executor folders and logs."""
        return self.work_dir / "worker"

    def master_json(self) -> dict[str, Any]:
        """The master's state (`/json` of its web UI): status, workers, apps."""
        return _get_json(f"{self.master_ui}/json/")

    def worker_json(self) -> dict[str, Any]:
        """The worker's state (`/json` of its web UI): its executors."""
        return _get_json(f"{self.worker_ui}/json/")

    def executor_pids(self) -> set[int]:
        """The executor JVMs the worker runs now, remembered for `stop`. Only the worker's
        own children count: an executor starting a Python worker forks, and until that
        child execs it carries the executor's command line (a run counted two executors)."""
        found = {pid for pid in processes.children_by_parent().get(self.worker.pid or 0, [])
                 if EXECUTOR_CLASS in cmdline(pid)}
        self.executors_seen |= found
        return found

    def executor_logs(self) -> list[Path]:
        """The executors' stderr files: ``worker/<app id>/<executor id>/stderr``."""
        return sorted(self.worker_dir.glob("app-*/*/stderr"))

    def alive(self) -> list[int]:
        """PIDs of this cluster's processes that still run (master, worker, executors)."""
        left = [d.pid for d in (self.master, self.worker) if d.running() and d.pid]
        return left + sorted(p for p in self.executors_seen if EXECUTOR_CLASS in cmdline(p))

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the worker (its shutdown kills its executors), then the master, each by
        PID (SIGKILL after ``timeout``); then any executor still running, by PID."""
        if self.worker.running():
            self.executor_pids()
        processes.stop(self.worker.pid, self.worker.marker, timeout=timeout)
        processes.stop(self.master.pid, self.master.marker, timeout=timeout)
        deadline = time.monotonic() + timeout
        for pid in sorted(self.executors_seen):
            while EXECUTOR_CLASS in cmdline(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            processes.stop(pid, EXECUTOR_CLASS, timeout=5.0, sig=signal.SIGKILL)


def start(work_dir: Path, timeout: float = 120.0, attempts: int = 3) -> SparkCluster:
    """Start a master and one worker (1 core, ``WORKER_MEMORY``) under ``work_dir`` and
    wait until the master lists the worker as ALIVE. A port another process took in the
    moment before a daemon bound it is retried on new ports."""
    for attempt in range(1, attempts + 1):
        spark = _launch(work_dir / f"attempt-{attempt}" if attempt > 1 else work_dir)
        try:
            _wait_ready(spark, timeout)
            return spark
        except PortClash:
            spark.stop()
            if attempt == attempts:
                raise
        except BaseException:
            spark.stop()
            raise
    raise AssertionError("unreachable")


def _launch(work_dir: Path) -> SparkCluster:
    home = spark_home()
    work_dir.mkdir(parents=True, exist_ok=True)
    conf_dir = work_dir / "conf"  # empty: no spark-defaults.conf or spark-env.sh of the host
    conf_dir.mkdir(exist_ok=True)
    (work_dir / "worker").mkdir(exist_ok=True)
    spark_class = str(home / "bin" / "spark-class")
    with PortBook(HOST) as book:
        mp, mui, wp, wui = (book.take() for _ in range(4))
        master = Daemon(
            "master",
            [spark_class, MASTER_CLASS, "--host", HOST, "--port", str(mp),
             "--webui-port", str(mui)],
            f"{MASTER_CLASS} --host {HOST} --port {mp} ", work_dir / "master.log")
        worker = Daemon(
            "worker",
            [spark_class, WORKER_CLASS, "--host", HOST, "--port", str(wp),
             "--webui-port", str(wui), "--cores", str(WORKER_CORES), "--memory",
             WORKER_MEMORY, "--work-dir", str(work_dir / "worker"), f"spark://{HOST}:{mp}"],
            f"{WORKER_CLASS} --host {HOST} --port {wp} ", work_dir / "worker.log")
        spark = SparkCluster(work_dir, mp, mui, wp, wui, master, worker)
        env = _env(home, work_dir, conf_dir)
        try:
            book.release([mp, mui])
            master.pid = _spawn(master.argv, master.log, work_dir, env)
            _wait_master(spark, 60.0)
            book.release([wp, wui])
            worker.pid = _spawn(worker.argv, worker.log, work_dir, env)
        except BaseException:
            spark.stop()
            raise
    return spark


def _env(home: Path, work_dir: Path, conf_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update({
        "SPARK_HOME": str(home),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOCAL_DIRS": str(work_dir / "local"),
        "SPARK_DAEMON_MEMORY": DAEMON_HEAP,
        "SPARK_DAEMON_JAVA_OPTS": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 "
                                  "-XX:+ExitOnOutOfMemoryError",
        # Executors' Python workers: this interpreter (pandas, pyarrow, GX, this package)
        # unless the driver names another (PYSPARK_PYTHON travels with the job).
        "PYSPARK_PYTHON": sys.executable,
    })
    return env


def _spawn(argv: list[str], log: Path, cwd: Path, env: dict[str, str]) -> int:
    import subprocess

    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc.pid


def _check_alive(spark: SparkCluster, daemon: Daemon) -> None:
    if daemon.running():
        return
    texts = read_logs([daemon.log])
    ports = ([spark.master_port, spark.master_ui_port] if daemon.role == "master"
             else [spark.worker_port, spark.worker_ui_port])
    clash = port_clash(texts, ports)
    who = f"the Spark {daemon.role} (pid {daemon.pid})"
    if clash:
        raise PortClash(f"{who} exited: {clash}")
    raise SandboxError(f"{who} exited during start-up; its log {daemon.log} ends:\n"
                       f"{daemon.log_tail()}")


def _wait_master(spark: SparkCluster, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        _check_alive(spark, spark.master)
        try:
            if spark.master_json().get("status") == "ALIVE":
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SandboxError(f"the Spark master did not report ALIVE on {spark.master_ui}"
                               f"/json within {timeout:.0f} s; its log ends:\n"
                               f"{spark.master.log_tail()}")
        time.sleep(0.3)


def _wait_ready(spark: SparkCluster, timeout: float) -> None:
    """Until the master lists our worker as ALIVE with its core."""
    deadline = time.monotonic() + timeout
    while True:
        _check_alive(spark, spark.master)
        _check_alive(spark, spark.worker)
        try:
            workers = spark.master_json().get("workers", [])
        except OSError:
            workers = []
        if any(w.get("state") == "ALIVE" and w.get("port") == spark.worker_port
               and w.get("cores", 0) >= WORKER_CORES for w in workers):
            return
        if time.monotonic() > deadline:
            raise SandboxError(f"the Spark worker did not register with {spark.master_url} "
                               f"within {timeout:.0f} s; its log ends:\n"
                               f"{spark.worker.log_tail()}")
        time.sleep(0.3)


def _get_json(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return dict(json.load(reply))
    except (urllib.error.URLError, ValueError) as exc:
        raise OSError(f"{url}: {exc}") from exc


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def descendants(pid: int | None) -> set[int]:
    """Every process below ``pid``."""
    if not pid:
        return set()
    children = processes.children_by_parent()
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found
