"""serve's intake assigns itself the actions topic's partitions (no group rebalance to
wait for); a topic whose metadata shows no partition yet is asked again within a second,
and partitions added later are taken in."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from remediation.service import intake as intake_module
from remediation.service.intake import Intake


class _Consumer:
    def __init__(self, counts: list[int | None]) -> None:
        self.counts = counts  # what each list_topics shows; None: the topic is unknown
        self.assigned: list[tuple[str, int, int]] = []
        self.asked = 0

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


def test_a_topic_without_partitions_yet_is_asked_again_and_then_read_from_stored_offsets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from confluent_kafka import OFFSET_STORED

    monkeypatch.setattr(intake_module, "NO_PARTITIONS_RETRY_SECONDS", 0.0)
    consumer = _Consumer([None, 0, 3])
    intake = Intake(consumer, "p.actions", executor=None)  # type: ignore[arg-type]
    assert consumer.assigned == []
    stop = threading.Event()
    intake.poll(0.0, stop)
    assert consumer.assigned == []
    intake.poll(0.0, stop)
    assert consumer.assigned == [("p.actions", p, OFFSET_STORED) for p in range(3)]
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
