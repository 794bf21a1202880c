"""`core.bus.topic_partitions` waits out a just-created topic: not listed yet, listed
without partitions, listed with an error; then it names what it last saw."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from core import bus
from core.bus import BusError


class Reader:
    """`list_topics` answers, in turn, then the last one again."""

    def __init__(self, *answers: dict) -> None:
        self.answers, self.asked = list(answers), 0

    def list_topics(self, topic: str, timeout: float):
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        topics = {name: type("T", (), {"partitions": parts, "error": error})
                  for name, (parts, error) in answer.items()}
        return type("Meta", (), {"topics": topics})


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(bus.time, "sleep", lambda _s: None)


UNKNOWN = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)


def test_a_topic_not_listed_then_without_partitions_then_with_an_error_is_asked_again():
    reader = Reader({}, {"t": ({}, None)}, {"t": ({}, UNKNOWN)},
                    {"t": ({2: object(), 0: object(), 1: object()}, None)})
    assert bus.topic_partitions(reader, "t", timeout=5) == [0, 1, 2]
    assert reader.asked == 4


@pytest.mark.parametrize(("answer", "problem"), [
    ({}, "the bus does not list it"),
    ({"t": ({}, None)}, "the bus lists it without partitions"),
    ({"t": ({}, UNKNOWN)}, "UNKNOWN_TOPIC_OR_PART"),
])
def test_a_topic_never_readable_fails_naming_what_was_last_seen(answer, problem):
    with pytest.raises(BusError, match="topic t not readable on the bus after 0.05 s: "
                       + problem):
        bus.topic_partitions(Reader(answer), "t", timeout=0.05)
