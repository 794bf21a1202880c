"""`core.bus_partitions.AwayFromFailedDirs`: records go to a topic's other partitions
while a fix names some of them (the replicas a failed dir held), and as before otherwise.
The metadata is a stand-in; tests/e2e/test_detect_loop_kraft.py fails a real dir."""

from __future__ import annotations

import json
from collections import Counter
from types import SimpleNamespace
from typing import Any

from core.bus_partitions import AwayFromFailedDirs


class _Producer:
    def __init__(self, counts: dict[str, int]) -> None:
        self.counts, self.asked = counts, 0

    def list_topics(self, topic: str, timeout: float) -> Any:
        self.asked += 1
        if topic not in self.counts:
            raise RuntimeError("bus away")
        return SimpleNamespace(topics={topic: SimpleNamespace(
            partitions={p: None for p in range(self.counts[topic])})})


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def _away(counts: dict[str, int] | None = None) -> tuple[AwayFromFailedDirs, _Producer,
                                                         _Clock]:
    producer, clock = _Producer({"actions": 3} if counts is None else counts), _Clock()
    return AwayFromFailedDirs(producer, hold_s=300.0, clock=clock), producer, clock


def test_nothing_avoided_leaves_the_choice_to_the_producer_and_asks_nothing():
    away, producer, _ = _away()
    away.avoid([("orders", 1)])  # another topic's partition
    assert away.partition_for("actions", b"a1") is None
    assert producer.asked == 0


def test_a_named_partition_is_never_chosen_and_a_key_keeps_its_partition():
    away, _, _ = _away()
    away.avoid([("actions", 1), ("orders", 0)])
    chosen = {key: away.partition_for("actions", key)
              for key in (f"id{i}".encode() for i in range(50))}
    assert set(chosen.values()) == {0, 2}  # both others used, 1 never
    assert all(away.partition_for("actions", k) == p for k, p in chosen.items())


def test_the_avoidance_ends_after_its_hold():
    away, _, clock = _away()
    away.avoid([("actions", 0)])
    clock.now = 299.0
    assert away.partition_for("actions", b"a") in (1, 2)
    clock.now = 300.0
    assert away.partition_for("actions", b"a") is None


def test_every_partition_avoided_or_the_bus_away_means_the_producer_s_own_choice():
    away, _, _ = _away()
    away.avoid([("actions", p) for p in range(3)])
    assert away.partition_for("actions", b"a") is None
    away, producer, _ = _away({})
    away.avoid([("actions", 0)])
    assert away.partition_for("actions", b"a") is None
    assert producer.asked == 1


def test_the_partition_count_is_asked_once_in_a_while():
    away, producer, clock = _away()
    away.avoid([("actions", 0)])
    for _ in range(5):
        away.partition_for("actions", b"a")
    assert producer.asked == 1
    clock.now = 301.0
    away.avoid([("actions", 0)])
    away.partition_for("actions", b"a")
    assert producer.asked == 2


class _Recorder(_Producer):
    """A producer that records where each record went (None: its own choice)."""

    def __init__(self) -> None:
        super().__init__({"sh.actions": 3, "sh.dead-letter": 3})
        self.sent: list[tuple[str, int | None]] = []

    def produce(self, topic: str, value: bytes, key: bytes | None = None,
                on_delivery: Any = None, partition: int | None = None) -> None:
        self.sent.append((topic, partition))

    def flush(self, timeout: float) -> int:
        return 0


def test_the_job_sends_a_fix_and_its_page_away_from_the_partitions_they_name(tmp_path):
    """The real `BatchSink._deliver` around stand-ins for the planner, the signer and the
    bus. The fix re-replicates actions-1 and cannot repair actions-2 (both had a replica
    on the failed dir); its page names dead-letter-0. So the fix and the page go to
    actions-0 and the batch's dead letter away from dead-letter-0."""
    from schemas.actions import build_action
    from schemas.records import Trigger
    from streams.batch_state import BatchState
    from streams.detect_types import FIX_OFFLINE, DetectSettings
    from streams.replay import SentLedger
    from streams.sink import BatchSink
    from streams.stateful import DEAD_LETTER, DECISION
    from tests.unit.test_stream_delta_signals import delta
    from tests.unit.test_stream_fast_first import BASE, NOTIFIED, fixes, record, run

    state = BatchState(tmp_path / "state", DetectSettings(), 60_000)
    run(state, 0, [record("s", 0, BASE)])
    (outcomes,) = run(state, 1, [record("e", 0, NOTIFIED), record("s", 1, delta())])
    assert fixes(outcomes)
    made = {"reason": "dir failed", "trigger": Trigger("logdir_event", 0, "/d1"),
            "event_time": "2026-11-22T03:51:00Z", "created_at": "2026-11-22T03:51:01Z"}
    fix = build_action("c1", FIX_OFFLINE, {
        "version": 1,
        "partitions": [{"topic": t, "partition": p, "replicas": [1, 2],
                        "log_dirs": ["any", "any"]} for t, p in (("sh.actions", 1),
                                                                 ("orders", 0))],
        "unrecoverable": [{"topic": "sh.actions", "partition": 2, "replicas": [0, 1, 2],
                           "reason": "no broker left"}]}, **made)
    page = build_action("c1", "page_operator", {
        "message": "replace the disk", "brokers": [0], "log_dirs": ["/d1"],
        "partitions": [{"topic": "sh.dead-letter", "partition": 0}]}, **made)
    letter = json.dumps({"source_topic": "sh.broker-metrics"})
    counter = SimpleNamespace(labels=lambda *_: SimpleNamespace(inc=lambda: None,
                                                                observe=lambda _: None))
    sink: Any = object.__new__(BatchSink)
    sink.producer = _Recorder()
    sink.away = AwayFromFailedDirs(sink.producer)
    sink.sent = SentLedger(tmp_path / "ledger", lambda *_: set())
    sink.proposer = SimpleNamespace(
        actions=lambda decision: [fix, page] if decision.type == FIX_OFFLINE else [])
    sink.signer = SimpleNamespace(sign_action=lambda a: a)
    sink.metrics = SimpleNamespace(actions=counter, latency=counter, dead_letters=counter)
    sink.say = lambda line: None
    sink.actions_topic, sink.dead_letter_topic = "sh.actions", "sh.dead-letter"
    output = SimpleNamespace(actions=Counter(), dead_letters=0, phases=Counter())

    decisions = [o for o in outcomes if o[1] == DECISION]
    BatchSink._deliver(sink, 1, [("c1", DEAD_LETTER, letter), *decisions], output, {})
    assert [p for t, p in sink.producer.sent if t == "sh.actions"] == [0, 0]
    (sent_letter,) = [p for t, p in sink.producer.sent if t == "sh.dead-letter"]
    assert sent_letter in (1, 2)

    before = AwayFromFailedDirs(_Recorder())  # a job that saw no fix: the producer's choice
    assert before.partition_for("sh.actions", fix.key()) is None
