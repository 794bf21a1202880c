"""The snapshot collector drops its admin connection when a registered broker does not
answer DescribeLogDirs, in a snapshot or a probe: a connection to a broker that
restarted can keep failing, and a snapshot built on it carries the broker's last known
dirs (a dir that failed while the broker was down shows online)."""

from __future__ import annotations

import contextlib

import pytest

import core.live
from core.config import load
from streams.collect.runner import CollectorRun
from streams.collect.snapshots import SnapshotCollector
from tests.unit.test_live_reuse import Admin


class Flaky(Admin):
    """Broker 1 does not answer DescribeLogDirs on this connection while ``silent``."""

    def __init__(self, silent: bool) -> None:
        super().__init__({"t": {0: [0, 1], 1: [1, 2], 2: [2, 0]}})
        self.silent = silent

    def describe_log_dirs(self, brokers: list[int], topic_partitions=None) -> list[dict]:
        if self.silent and brokers == [1]:
            raise ConnectionError("the connection to a restarted broker is stale")
        return super().describe_log_dirs(brokers)


class Sink:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, _topic: str, value: bytes, _key: bytes, _stop: object) -> bool:
        self.sent.append(value)
        return True


@pytest.fixture
def collector(tmp_path, monkeypatch):
    """A collector whose first connection fails on broker 1 and every later one works."""
    opened: list[Flaky] = []

    @contextlib.contextmanager
    def open_admin(*_args, **_kwargs):
        opened.append(Flaky(silent=not opened))
        yield opened[-1]

    monkeypatch.setattr(core.live, "open_admin", open_admin)
    monkeypatch.setattr(core.live.time, "sleep", lambda _s: None)
    config = load(env={"SELFHEAL_SANDBOX_DIR": str(tmp_path),
                       "SELFHEAL_CLUSTER_BOOTSTRAP_SERVERS": "127.0.0.1:9"})
    run = CollectorRun("snapshots", config, 0)
    lines: list[str] = []
    monkeypatch.setattr(run, "log", lines.append)
    made = SnapshotCollector(run)
    made.opened, made.lines = opened, lines  # type: ignore[attr-defined]
    return made


def test_a_snapshot_a_broker_did_not_answer_is_followed_by_a_fresh_connection(collector):
    sink = Sink()
    assert collector.snapshot(sink, "test")
    assert collector.memory.unanswered == {1}
    assert any("broker(s) 1 are registered but did not answer" in line
               for line in collector.lines), collector.lines
    reads = len(collector.opened)
    assert collector.snapshot(sink, "test")  # a new connection: broker 1 answers
    assert len(collector.opened) > reads
    assert collector.memory.unanswered == frozenset()


def test_a_probe_a_broker_did_not_answer_is_followed_by_a_fresh_connection(collector):
    collector.probe(Sink())
    first = collector.opened[0]
    assert collector.admin() is not first
    assert collector.admin() is collector.admin()  # kept while every broker answers
