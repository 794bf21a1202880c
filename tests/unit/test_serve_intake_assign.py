"""serve's intake assigns itself the actions topic's partitions (no group rebalance to
wait for), each at the offset the group committed, asked for by the intake itself; a
topic whose metadata shows no partition yet, or whose committed offsets cannot be read
(the group's coordinator moved), is asked again within a second, and partitions added
later are taken in."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from remediation.service import intake as intake_module
from remediation.service.intake import Intake


class _Consumer:
    def __init__(self, counts: list[int | None], committed: dict[int, int] | None = None,
                 refusals: int = 0) -> None:
        self.counts = counts  # what each list_topics shows; None: the topic is unknown
        self.offsets = committed or {}  # partition -> committed offset; none: -1001
        self.refusals = refusals  # offset fetches answered NOT_COORDINATOR
        self.assigned: list[tuple[str, int, int]] = []
        self.asked = 0

    def committed(self, parts: list[Any], timeout: float) -> list[Any]:
        from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException, TopicPartition

        if self.refusals:
            self.refusals -= 1
            raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))
        return [TopicPartition(p.topic, p.partition, self.offsets.get(p.partition,
                                                                      OFFSET_INVALID))
                for p in parts]

    def list_topics(self, topic: str, timeout: float) -> Any:
        self.asked += 1
        n = self.counts.pop(0) if len(self.counts) > 1 else self.counts[0]
        topics = {} if n is None else {
            topic: SimpleNamespace(error=None, partitions={p: None for p in range(n)})}
        return SimpleNamespace(topics=topics)

    def incremental_assign(self, parts: list[Any]) -> None:
        self.assigned += [(p.topic, p.partition, p.offset) for p in parts]

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        return []


def test_a_topic_without_partitions_yet_is_asked_again_and_then_read_from_committed_offsets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from confluent_kafka import OFFSET_BEGINNING

    monkeypatch.setattr(intake_module, "NO_PARTITIONS_RETRY_SECONDS", 0.0)
    consumer = _Consumer([None, 0, 3], committed={0: 7, 2: 0})
    intake = Intake(consumer, "p.actions", executor=None)  # type: ignore[arg-type]
    assert consumer.assigned == []
    stop = threading.Event()
    intake.poll(0.0, stop)
    assert consumer.assigned == []
    intake.poll(0.0, stop)
    assert consumer.assigned == [("p.actions", 0, 7), ("p.actions", 1, OFFSET_BEGINNING),
                                 ("p.actions", 2, 0)]
    asked = consumer.asked
    intake.poll(0.0, stop)  # partitions in hand: the next look is a minute away
    assert consumer.asked == asked


def test_partitions_added_later_are_assigned_without_the_ones_in_hand(
        monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = _Consumer([2, 5])
    intake = Intake(consumer, "p.actions", executor=None)  # type: ignore[arg-type]
    monkeypatch.setattr(intake_module, "PARTITIONS_CHECK_SECONDS", 0.0)
    intake.poll(0.0, threading.Event())
    assert [p for _, p, _ in consumer.assigned] == [0, 1, 2, 3, 4]


def test_committed_offsets_refused_by_a_moved_coordinator_are_asked_again_within_a_second(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # librdkafka's own fetch of them (OFFSET_STORED) never retried this refusal and
    # never started the partition's fetcher: the intake read nothing again.
    logged: list[str] = []
    consumer = _Consumer([2], committed={0: 3, 1: 5}, refusals=2)
    intake = Intake(consumer, "p.actions", executor=None,  # type: ignore[arg-type]
                    log=logged.append)
    assert consumer.assigned == []
    assert logged == ["reading p.actions's partitions and committed offsets: "
                      "NOT_COORDINATOR: Broker: Not coordinator; trying again in 1 s"]
    stop = threading.Event()
    intake.poll(0.0, stop)  # within the second: not asked yet
    assert consumer.refusals == 1
    monkeypatch.setattr(intake_module, "NO_PARTITIONS_RETRY_SECONDS", 0.0)
    intake.poll(0.0, stop)
    assert consumer.assigned == [] and len(logged) == 2
    intake.poll(0.0, stop)
    assert consumer.assigned == [("p.actions", 0, 3), ("p.actions", 1, 5)]
    asked = consumer.asked
    intake.poll(0.0, stop)  # in hand: the next look is a minute away
    assert consumer.asked == asked
