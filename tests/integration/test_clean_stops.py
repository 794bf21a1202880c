"""State per cluster and clean stops, with the real processes on the real sandbox.

Every process is started in a session of its own, as a service manager starts it, and
stopped the way one stops it: SIGTERM to its whole process group (os.killpg by its PID).
It must exit 0 with no trace in its output. The job's checkpoint and serve's store refuse
another cluster's state with a message that says what to do, and a fresh checkpoint
starts on this cluster's latest snapshot.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from core import bus
from core.config import load
from core.owner import MARKER, Owner, claim_checkpoint, identify
from sandbox.loop import render_toml
from sandbox.processes import children_by_parent
from sandbox.state import SandboxState
from tests.conftest import SELFHEAL

pytestmark = pytest.mark.integration

TRACE = re.compile(r"Traceback|Py4J|Exception")


class Proc:
    """A `selfheal` process in its own session, its output (stdout and stderr) collected."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen([*SELFHEAL, *args], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_line(self, pattern: str, timeout: float = 240.0) -> re.Match[str]:
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if found := regex.search(line):
                    return found
            if self.proc.poll() is not None:
                self._reader.join(5)
                raise AssertionError(f"exited ({self.proc.returncode}) before /{pattern}/:\n"
                                     + self.text)
            time.sleep(0.2)
        raise AssertionError(f"no /{pattern}/ within {timeout:.0f} s:\n{self.text}")

    def stop_group(self, timeout: float = 120.0) -> int:
        """SIGTERM to the process group, as a service manager does; its exit code."""
        started = time.monotonic()
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass  # the whole group had exited already: its exit code says how
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
            raise AssertionError(f"still running {timeout:.0f} s after SIGTERM:\n"
                                 + self.text) from None
        self._reader.join(10)
        print(f"{self.proc.args[3:]} stopped in {time.monotonic() - started:.1f} s, "
              f"exit {code}")
        return code

    def stop_pid(self, sig: int = signal.SIGTERM, timeout: float = 120.0) -> int:
        """``sig`` to the process alone, by its PID; its exit code."""
        os.kill(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout)
        finally:
            self._reader.join(10)

    def children(self) -> list[int]:
        """PIDs whose parent is this process."""
        return children_by_parent().get(self.proc.pid, [])

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


def _env(sandbox: SandboxState, **extra: str) -> dict[str, str]:
    env = {**os.environ, "SELFHEAL_SANDBOX_DIR": sandbox.work_dir, "SELFHEAL_CONFIG": ""}
    env.update(extra)
    return env


def _job_config(sandbox: SandboxState, tmp_path: Path, prefix: str
                ) -> tuple[Path, dict[str, str]]:
    """A config for a job of its own (topics under ``prefix``, its checkpoint under
    ``tmp_path``/checkpoints/detect, metrics on a free port) and the environment naming it."""
    config_path = tmp_path / "selfheal.toml"
    config_path.write_text(render_toml({}, {
        "bus": {"topic_prefix": prefix},
        "stream": {"checkpoint_dir": tmp_path / "checkpoints", "metrics_http_port": 0},
    }))
    return config_path, _env(sandbox, SELFHEAL_CONFIG=str(config_path))


def _clean(proc: Proc, code: int) -> None:
    assert code == 0, proc.text
    assert not TRACE.search(proc.text), proc.text


# --- state per cluster ------------------------------------------------------------------


def test_the_job_refuses_a_checkpoint_of_another_cluster_saying_what_to_do(
        sandbox: SandboxState, tmp_path: Path) -> None:
    cp = tmp_path / "detect"
    claim_checkpoint(cp, Owner("another-cluster", "another-bus", "10.0.0.1:9092"))
    result = subprocess.run([*SELFHEAL, "stream", "--checkpoint", str(cp)],
                            capture_output=True, text=True, timeout=300,
                            env=_env(sandbox, SELFHEAL_BUS_TOPIC_PREFIX="own."))
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("selfheal stream: the checkpoint ")
    assert f"belongs to cluster another-cluster, this is cluster {sandbox.cluster_id}" in last
    assert f"delete {cp}" in last
    assert not TRACE.search(result.stdout + result.stderr)
    assert not (cp / "offsets").exists()  # Spark never started on it


# --- the job: a fresh checkpoint, clean stops ---------------------------------------------


def test_a_fresh_job_reads_the_latest_snapshot_first_and_stops_clean_on_group_sigterm(
        sandbox: SandboxState, tmp_path: Path) -> None:
    prefix = f"cs{uuid.uuid4().hex[:6]}."
    config_path, env = _job_config(sandbox, tmp_path, prefix)
    # This cluster's snapshot (chunks, then its manifest), then one of another cluster
    # after it: the job must start at this cluster's manifest, not at the topic's last
    # record, and find the chunks before it on the bus.
    once = subprocess.run([*SELFHEAL, "collect", "snapshots", "--once", "--metrics-port",
                           "0"], capture_output=True, text=True, timeout=120,
                          env={**env, "SELFHEAL_COLLECT_SNAPSHOT_CHUNK_BYTES": "4096"})
    assert once.returncode == 0, once.stderr
    chunks = int(re.search(r"bytes in (\d+) chunks", once.stderr).group(1))
    assert chunks > 1, once.stderr
    config = load(config_path, env=env)
    producer = bus.producer(config)
    producer.produce(config.topic("cluster-snapshots"), b'{"cluster_id": "elsewhere"}',
                     key=b"elsewhere")
    assert producer.flush(30) == 0

    job = Proc(["stream"], env)
    try:
        start = json.loads(job.wait_line(r"new checkpoint: snapshots from (\{.*\}) \(")
                           .group(1))
        assert start == {f"{prefix}cluster-snapshots": {"0": chunks}}  # the manifest
        batch = job.wait_line(r"\[stream\] batch \d+: ([1-9]\d*) rows.* (\d+) dead letters?",
                              240)
        print(f"first batch read {batch.group(1)} rows (the snapshot, the other one)")
        # Only the other cluster's record is refused: the manifest was made whole.
        assert batch.group(2) == "1", job.text
    finally:
        code = job.stop_group()
    _clean(job, code)
    checkpoint = tmp_path / "checkpoints" / "detect"
    owner = json.loads((checkpoint / MARKER).read_text())
    assert owner["cluster"] == sandbox.cluster_id and owner["bus"]

    again = Proc(["stream"], env)  # resumes: the checkpoint says where
    try:
        again.wait_line(r"\[stream\] running:", 240)
        jvms = java_children(again.proc.pid)
        assert len(jvms) == 1, again.children()
        assert os.getpgid(jvms[0]) != os.getpgid(again.proc.pid)  # out of the group's way
        # with the JVM options $SELFHEAL_SPARK_DRIVER_JAVA_OPTIONS names (tests/conftest.py)
        argv = Path(f"/proc/{jvms[0]}/cmdline").read_bytes().split(b"\0")
        assert b"-XX:TieredStopAtLevel=1" in argv, argv
        code = again.stop_pid()  # SIGTERM to the one process works as well
    finally:
        again.kill()
    _clean(again, code)
    assert "new checkpoint" not in again.text
    _wait_gone(jvms[0])
    # A job SIGKILLed: its JVM follows it (tests/chaos/test_kills.py).


def test_a_query_spark_cannot_start_ends_the_job_with_exit_1_and_the_reason(
        sandbox: SandboxState, tmp_path: Path) -> None:
    """Spark refuses to start the query on a checkpoint in an inconsistent state (an
    offset log without its metadata file): the job says why and what to do in its last
    line and exits 1, with no Python trace (the failure once went straight to the top,
    its text lost with the driver)."""
    config_path, env = _job_config(sandbox, tmp_path, f"qf{uuid.uuid4().hex[:6]}.")
    checkpoint = tmp_path / "checkpoints" / "detect"
    claim_checkpoint(checkpoint, identify(load(config_path, env=env)))
    (checkpoint / "offsets").mkdir()
    (checkpoint / "offsets" / "0").write_text("not an offset log\n")
    result = subprocess.run([*SELFHEAL, "stream"], capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    print(last)
    assert last.startswith("selfheal stream: the query could not start: "), result.stderr
    assert "STREAMING_CHECKPOINT_MISSING_METADATA_FILE" in last, last
    assert f"If that names the checkpoint {checkpoint}, move it away" in last


def java_children(pid: int) -> list[int]:
    """The JVMs whose parent is ``pid``: a job's Spark driver."""
    return [child for child in children_by_parent().get(pid, []) if _is_java(child)]


def _is_java(pid: int) -> bool:
    try:
        return b"java" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _wait_gone(pid: int, timeout: float = 60.0) -> None:
    """The process is gone (or a zombie) within ``timeout``; it is killed if not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state == "Z":
            return
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)
    raise AssertionError(f"the driver JVM {pid} outlived its job by {timeout:.0f} s")


# --- serve and the collectors: clean stops ------------------------------------------------


def test_serve_stops_clean_on_group_sigterm(sandbox: SandboxState, tmp_path: Path) -> None:
    serve = Proc(["serve", "--port", "0"],
                 _env(sandbox, SELFHEAL_SERVE_SQLITE_PATH=str(tmp_path / "a.sqlite"),
                      SELFHEAL_BUS_TOPIC_PREFIX=f"cs{uuid.uuid4().hex[:6]}."))
    try:
        serve.wait_line("active executor", 60)
    finally:
        code = serve.stop_group()
    _clean(serve, code)
    assert serve.lines[-1].endswith("stopped")


@pytest.mark.parametrize("kind", ["metrics", "zk", "snapshots"])
def test_each_collector_stops_clean_on_group_sigterm(sandbox: SandboxState,
                                                      kind: str) -> None:
    collector = Proc(["collect", kind, "--metrics-port", "0"],
                     _env(sandbox, SELFHEAL_BUS_TOPIC_PREFIX=f"cs{uuid.uuid4().hex[:6]}."))
    try:
        collector.wait_line("own metrics at http://", 60)
        time.sleep(3)  # into its first cycles
    finally:
        code = collector.stop_group()
    _clean(collector, code)
