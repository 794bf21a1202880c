"""What the collector tests share: a real `selfheal collect ...` process, stopped by PID,
and a reader of a selfheal.* topic that sees only what arrives after it starts."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.bus import ensure_topics
from core.config import Config
from core.config import load as load_config
from sandbox.cluster import client_config
from sandbox.state import SandboxState
from sandbox.traffic import end_offsets
from tests.conftest import SELFHEAL


@dataclass(frozen=True)
class Message:
    key: bytes | None
    value: bytes | None  # None: a tombstone
    headers: tuple[tuple[str, bytes], ...]
    arrived: float  # time.monotonic() when the reader got it
    arrived_at: float  # time.time() of the same moment, to compare with records' times


def snapshots(messages: list[Message]) -> list[Message]:
    """The snapshots among the records of the snapshot topic, as whole documents: a
    manifest becomes its assembled snapshot (its chunks are among ``messages``; one whose
    chunks came before the reader started is left out), chunks drop out, a whole
    snapshot stays. What every reader of the topic does (schemas/snapshot_chunks.py)."""
    from schemas import snapshot_chunks as chunking
    from schemas.registry import RecordError

    chunks = {chunking.digest(m.value): m.value for m in messages
              if chunking.kind_of(m.value) == chunking.CHUNK and m.value is not None}
    out = []
    for m in messages:
        kind = chunking.kind_of(m.value)
        if kind == chunking.SNAPSHOT:
            out.append(m)
        elif kind == chunking.MANIFEST:
            try:
                manifest = chunking.check_manifest(m.value)
                whole = chunking.assemble(manifest, chunks)
            except (RecordError, chunking.ChunkError):
                continue
            out.append(dataclasses.replace(m, value=whole))
    return out


def sandbox_config(state: SandboxState) -> Config:
    """The configuration a collector started with `Collector` sees."""
    return load_config(path=None, env={"SELFHEAL_SANDBOX_DIR": state.work_dir})


class TopicReader(threading.Thread):
    """Reads every partition of ``topic`` from its end at start-up (no group, no commits);
    creates the selfheal.* topics first if the sandbox has none yet.

    Each record is kept once, in order, whatever the consumer does across an outage: a
    consumer that loses its position goes back to the partition's start (not its end,
    librdkafka's default, which would skip what was written meanwhile), and what it reads
    again is dropped by offset. Errors the consumer reports are kept for failure
    messages (`describe`).

    A consumer that stops fetching is re-created where it stood, as the history reader's
    is (`sandbox.traffic.BackgroundConsumer`, librdkafka issue #5153): a chaos run's
    reader of the actions topic once sat at offset 0 of two partitions holding a record
    each for the whole 180 s the scenario waited for the fix, with no error."""

    STALL_S = 10.0
    ASK_S = 5.0

    def __init__(self, state: SandboxState, topic: str) -> None:
        super().__init__(daemon=True, name=f"reader-{topic}")
        ensure_topics(sandbox_config(state))
        self.topic = topic
        self.messages: list[Message] = []
        self.errors: list[str] = []
        self.stalls: list[str] = []  # each re-creation: when, which partitions lagged
        self._stop_event = threading.Event()
        self._config = {**client_config(state), "group.id": "unused"}
        self._consumer = self._new_consumer()
        start = end_offsets(self._consumer, topic)
        # partition -> the next offset not yet kept
        self._next: dict[int, int] = {tp.partition: tp.offset for tp in start}
        self._consumer.assign(start)

    def _new_consumer(self) -> Any:
        from confluent_kafka import Consumer

        return Consumer({**self._config,
                         "enable.auto.commit": False,
                         "auto.offset.reset": "earliest",
                         # a stale view after the bus restarts or a leader moves lasts
                         # 5 s, not librdkafka's default 5 min
                         "topic.metadata.refresh.interval.ms": 5000})

    def run(self) -> None:
        from confluent_kafka import TopicPartition

        from core.bus import StallWatch

        watch = StallWatch(self.topic, sorted(self._next), self.STALL_S, self.ASK_S)
        try:
            while not self._stop_event.is_set():
                for msg in self._consumer.consume(num_messages=1000, timeout=0.2):
                    if msg.error() is not None:
                        self.errors.append(f"{time.strftime('%H:%M:%S')} {msg.error()}")
                    elif msg.offset() >= self._next.get(msg.partition(), 0):
                        self._next[msg.partition()] = msg.offset() + 1
                        self.messages.append(Message(
                            msg.key(), msg.value(), tuple(msg.headers() or ()),
                            time.monotonic(), time.time()))
                        watch.read()
                stall = watch.check(self._consumer, lambda p: self._next.get(p, 0))
                if stall is None:
                    continue
                self.stalls.append(f"{time.strftime('%H:%M:%S')} {stall}")
                self._consumer.close()
                self._consumer = self._new_consumer()
                self._consumer.assign([TopicPartition(self.topic, p, offset)
                                       for p, offset in sorted(self._next.items())])
        finally:
            self._consumer.close()

    def describe(self) -> str:
        """Where the reader is against the topic's ends, and the errors it was given."""
        from confluent_kafka import Consumer

        # A consumer of its own: the reader's is not safe to call from another thread while
        # it consumes (get_watermark_offsets there hung past its own timeout).
        probe = Consumer(self._config)
        try:
            ends = {tp.partition: tp.offset for tp in end_offsets(probe, self.topic, 10)}
        except Exception as exc:  # the bus may be the problem: say so, do not mask
            ends = {p: f"? ({exc})" for p in self._next}
        finally:
            probe.close()
        where = ", ".join(f"[{p}] read to {offset}, end {ends.get(p, '?')}"
                          for p, offset in sorted(self._next.items()))
        return (f"{self.topic}: {len(self.messages)} records; {where}; "
                f"errors: {self.errors[-5:] or 'none'}; "
                f"re-created after stalls: {self.stalls[-3:] or 'none'}")

    def wait_for(self, predicate: Callable[[list[Message]], Any], timeout: float = 60.0,
                 what: str = "the expected records") -> Any:
        """Poll until ``predicate(messages)`` is truthy; its value. Fails after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            result = predicate(list(self.messages))
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {timeout:.0f} s; {self.describe()}")
            time.sleep(0.2)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=30)

    def __enter__(self) -> TopicReader:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


class Collector:
    """A `selfheal collect <args>` process aimed at ``state``; stderr goes to a file."""

    def __init__(self, state: SandboxState, args: list[str],
                 env: dict[str, str] | None = None) -> None:
        self.log = Path(state.work_dir) / f"collect-{args[0]}-{uuid.uuid4().hex[:6]}.log"
        full_env = {**os.environ, "SELFHEAL_SANDBOX_DIR": state.work_dir,
                    "SELFHEAL_CONFIG": "", **(env or {})}
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen(
                [*SELFHEAL, "collect", *args, "--metrics-port", "0"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                env=full_env)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_line(self, pattern: str, timeout: float = 60.0, after: int = 0) -> str:
        """The first stderr line at index >= ``after`` matching the regex ``pattern``."""
        deadline = time.monotonic() + timeout
        while True:
            lines = self.text().splitlines()[after:]
            for line in lines:
                if re.search(pattern, line):
                    return line
            if self.proc.poll() is not None:
                raise AssertionError(f"collector exited ({self.proc.returncode}) before "
                                     f"/{pattern}/:\n{self.text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no line /{pattern}/ within {timeout:.0f} s:\n"
                                     + self.text())
            time.sleep(0.1)

    def line_count(self) -> int:
        return len(self.text().splitlines())

    def own_metrics(self) -> str:
        """The collector's own Prometheus text, from the port it printed."""
        line = self.wait_for_line(r"own metrics at http://")
        url = line.split("own metrics at ", 1)[1].strip()
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.read().decode()

    def wait_for_metric(self, name: str, check: Callable[[float], bool],
                        timeout: float = 30.0, **labels: str) -> float:
        """Poll the own metrics until sample ``name{labels}`` passes ``check``."""
        deadline = time.monotonic() + timeout
        while True:
            value = sample_value(self.own_metrics(), name, **labels)
            if value is not None and check(value):
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{name}{labels} is {value} after {timeout:.0f} s")
            time.sleep(0.2)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM by PID, then wait; the exit status (SIGKILL after ``timeout``)."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        return self.proc.returncode

    def __enter__(self) -> Collector:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def sample_value(metrics_text: str, name: str, **labels: str) -> float | None:
    """One sample's value from Prometheus text (None when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v
                                           for k, v in labels.items()):
                return float(sample.value)
    return None
