"""What the stream-job tests share: the job process, the bus, and snapshots and records
made for a scenario."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from core import clock
from core.config import load
from core.live import LiveReadError, PlacementMemory, open_admin, read_snapshot
from sandbox import jvm
from sandbox.loop import render_toml
from schemas import wire
from schemas.registry import TOPICS
from tests.polling import wait_until

GIB = 1 << 30


SKEW_WINDOW = 5.0


FAST_SAMPLES = 50


class StreamJob:
    """The real `selfheal --config FILE stream` process, its output lines collected."""

    def __init__(self, config_path: Path, sandbox) -> None:
        self.config_path = config_path
        self.env = {**os.environ, "SELFHEAL_SANDBOX_DIR": sandbox.work_dir}
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []

    def start(self, fresh: bool = True) -> None:
        self.lines.append("(job starting)")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "selfheal.cli", "--config", str(self.config_path),
             "stream"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=jvm.small_machine_env(self.env, share_classes=True))
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()
        self.wait_for("[stream] running:", 240)
        if fresh:
            # The default start is "latest", resolved by the first batch: only what
            # comes after it is read. (A restart resumes from the checkpoint instead.)
            self.wait_for("[stream] batch ", 120)

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float) -> str:
        since = len(self.lines) - self.lines[::-1].index("(job starting)")  # this run's
        found = wait_until(lambda: next((x for x in self.lines[since:] if text in x), None)
                           or (self.proc.poll() is not None and "exited"),
                           f"{text!r} from the job", timeout,
                           explain=lambda: "\n".join(self.lines[-40:]))
        assert found != "exited", f"the job exited before {text!r}:\n" + "\n".join(
            self.lines[-40:])
        return found

    @property
    def metrics_url(self) -> str:
        line = self.wait_for("[stream] metrics on ", 5)
        return line.split("metrics on ", 1)[1].strip()

    def stop(self) -> int:
        """SIGTERM by PID, as `selfheal` documents; SIGKILL only if it hangs."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc else 0
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
            raise AssertionError("the job did not stop within 120 s of SIGTERM:\n"
                                 + "\n".join(self.lines[-40:])) from None


class Bus:
    """Produce to the job's inputs; collect everything it writes."""

    def __init__(self, config) -> None:
        from core.bus import consumer, ensure_topics, producer, topic_partitions

        self.config = config
        ensure_topics(config)
        self.producer = producer(config)
        self.out: list[tuple[str, dict[str, Any]]] = []
        self._stop = threading.Event()
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        self._consumer = consumer(config, f"stream-test-{uuid.uuid4().hex[:8]}",
                                  **{"auto.offset.reset": "earliest"})
        # Assigned, not subscribed: no group coordinator in the way (a full run once read
        # nothing in this module, its group never joined; what the job writes was there).
        # From the beginning: only the partitions are needed, not their ends (a full run's
        # watermark query for a topic created a moment before failed for 30 s).
        self._consumer.assign([
            TopicPartition(config.topic(name), p, OFFSET_BEGINNING)
            for name in ("actions", "dead-letter")
            for p in topic_partitions(self._consumer, config.topic(name), 30.0)])
        self._thread = threading.Thread(target=self._collect, daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        while not self._stop.is_set():
            msg = self._consumer.poll(0.5)
            if msg is not None and not msg.error():
                suffix = msg.topic().rsplit(".", 1)[-1]  # <prefix>.actions -> actions
                self.out.append((msg.topic(), wire.record(TOPICS[suffix], msg.value())))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()

    def send(self, topic: str, value: Any, key: bytes | None = None) -> tuple[int, int]:
        """Produce one record (dicts as JSON); returns its (partition, offset)."""
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        where: list[Any] = []
        self.producer.produce(self.config.topic(topic), raw, key,
                              on_delivery=lambda err, msg: where.append((err, msg)))
        self.producer.flush(30)
        ((err, msg),) = where
        assert err is None, err
        return msg.partition(), msg.offset()

    def actions(self, cluster_id: str, type: str | None = None) -> list[dict[str, Any]]:
        topic = self.config.topic("actions")
        return [a for t, a in list(self.out) if t == topic and a["cluster_id"] == cluster_id
                and (type is None or a["type"] == type)]

    def dead_letters(self) -> list[dict[str, Any]]:
        topic = self.config.topic("dead-letter")
        return [d for t, d in list(self.out) if t == topic]

    def dead_letter_at(self, topic: str, where: tuple[int, int]) -> dict[str, Any] | None:
        source = self.config.topic(topic)
        return next((d for d in self.dead_letters() if d["source_topic"] == source
                     and (d["source_partition"], d["source_offset"]) == where), None)

    def settle(self, timeout: float = 90) -> None:
        """Return once the job has processed everything produced so far: a marker record
        produced after it comes back as a dead letter, so its batch (or an earlier one)
        held every record before it."""
        where = self.send("broker-metrics", f"marker {uuid.uuid4()}".encode())
        wait_until(lambda: self.dead_letter_at("broker-metrics", where),
                   "the job's dead letter for a marker record", timeout)


def running_stream(sandbox, work, prefix: str, detect: dict):
    """Start the job on topics of a fresh ``prefix`` with these ``[detect]`` settings;
    yield it and the bus; stop it after (it must exit 0)."""
    config_path = work / "selfheal.toml"
    config_path.write_text(render_toml({}, {
        "bus": {"topic_prefix": f"{prefix}{uuid.uuid4().hex[:6]}."},
        "stream": {"checkpoint_dir": work / "checkpoints", "metrics_http_port": 0},
        "detect": detect,
    }))
    config = load(config_path, env={**os.environ, "SELFHEAL_SANDBOX_DIR": sandbox.work_dir})
    bus = Bus(config)
    job = StreamJob(config_path, sandbox)
    job.start()
    try:
        yield job, bus
    finally:
        code = job.stop()
        bus.close()
        print("\n".join(x for x in job.lines if "[stream]" in x))
        assert code == 0, "\n".join(job.lines[-40:])


def snapshot_with_dir_on(sandbox, cluster_id: str, memory: PlacementMemory, topic: str,
                         broker: int, timeout: float = 30.0
                         ) -> tuple[dict[str, Any], tuple[int, str]]:
    """A live snapshot in which ``broker`` holds a replica of ``topic`` in a known dir: a
    fresh topic's follower creates its log a moment after the topic has leaders, and
    until then DescribeLogDirs names no dir for it (a full run once raced that)."""
    deadline = time.monotonic() + timeout
    while True:
        snapshot = live_snapshot(sandbox, cluster_id, memory)
        found = [(b, d) for b, d in dirs_holding(snapshot, topic) if b == broker]
        if found:
            return snapshot, found[0]
        assert time.monotonic() < deadline, (
            f"broker {broker} holds no replica of {topic} in a known dir after {timeout:.0f} s")
        time.sleep(0.5)


def dirs_holding(snapshot: dict[str, Any], topic: str) -> list[tuple[int, str]]:
    """(broker, dir) pairs that hold a replica of ``topic``, in a fixed order."""
    return sorted({(r["broker"], r["log_dir"]) for p in snapshot["partitions"]
                   if p["topic"] == topic for r in p["replicas"] if r["log_dir"]})


def awaited(job: StreamJob, found, what: str, timeout: float = 90):
    """``found()`` once it is truthy; else fail with the job's last lines."""
    return wait_until(found, what, timeout, explain=lambda: "the job said:\n" + "\n".join(
        job.lines[-40:]))


def cid(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def live_snapshot(sandbox, cluster_id: str, memory: PlacementMemory | None = None
                  ) -> dict[str, Any]:
    """A snapshot read from the sandbox, as the snapshot collector takes it (which also
    retries: right after a broker restart the first connection may be refused)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            with open_admin(sandbox.bootstrap_servers) as admin:
                return read_snapshot(admin, cluster_id, memory)
        except LiveReadError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def logdir_event(cluster_id: str, when: datetime, broker: int | None = None,
                 log_dir: str | None = None, source: str = "zookeeper") -> dict[str, Any]:
    znode = "/log_dir_event_notification/log_dir_event_0000000001"
    return {"version": 1, "cluster_id": cluster_id, "event_time": clock.text(when),
            "source": source, "kind": "log_dir_failure", "broker": broker,
            "log_dir": log_dir, "znode": znode if source == "zookeeper" else None,
            "details": None}


def gauge(cluster_id: str, broker: int, log_dir: str, value: int,
          when: datetime | None = None) -> dict[str, Any]:
    return {"version": 1, "cluster_id": cluster_id, "event_time": clock.text(when),
            "broker": broker, "rack": None, "metric": "kafka_log_log_directory_offline",
            "labels": {"log_dir": log_dir}, "value": value}


def taken_later(snapshot: dict[str, Any], when: datetime,
                offline: set[tuple[int, str]]) -> dict[str, Any]:
    """The snapshot as the collector takes it at once after a failure: taken at ``when``,
    the (broker, dir) pairs in ``offline`` offline, replicas where they were."""
    out = copy.deepcopy(snapshot)
    out["taken_at"] = clock.text(when)
    for b in out["brokers"]:
        for d in b["log_dirs"]:
            if (b["id"], d["path"]) in offline:
                d["online"] = False
    return out


def on_dir(snapshot: dict[str, Any], broker: int, path: str) -> set[tuple[str, int]]:
    return {(p["topic"], p["partition"]) for p in snapshot["partitions"]
            for r in p["replicas"] if r["broker"] == broker and r["log_dir"] == path}


def named(action: dict[str, Any]) -> set[tuple[str, int]]:
    plan = action["plan"]
    return {(p["topic"], p["partition"])
            for p in plan["partitions"] + plan.get("unrecoverable", [])}


def skewed(snapshot: dict[str, Any], broker: int, path: str, when: datetime
           ) -> dict[str, Any]:
    """The snapshot with 3 GiB in every replica on one dir of one broker."""
    out = copy.deepcopy(snapshot)
    out["taken_at"] = clock.text(when)
    for p in out["partitions"]:
        for r in p["replicas"]:
            if r["broker"] == broker and r["log_dir"] == path:
                r["size_bytes"] = 3 * GIB
    return out
