"""core.bus.produce: waits out what a later try passes (the bus not listing a topic right
now, a full local queue), raises the rest at once and the passable ones at its deadline."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from core import bus


class Refusing:
    """produce() refuses ``refusals`` times with ``error``, then accepts."""

    def __init__(self, refusals: int, error: Exception) -> None:
        self.refusals = refusals
        self.error = error
        self.accepted: list[tuple[str, bytes, bytes | None]] = []
        self.polls = 0

    def produce(self, topic: str, value: bytes, key: bytes | None = None, **_: object) -> None:
        if self.refusals:
            self.refusals -= 1
            raise self.error
        self.accepted.append((topic, value, key))

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return 0


UNKNOWN_TOPIC = KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC))


@pytest.mark.parametrize("error", [UNKNOWN_TOPIC,
                                   KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION)),
                                   BufferError("Local: Queue full")])
def test_a_refusal_a_later_try_passes_is_waited_out(error):
    producer = Refusing(3, error)
    bus.produce(producer, "selfheal.actions", b"action", b"k", timeout=30.0)
    assert producer.accepted == [("selfheal.actions", b"action", b"k")]
    assert producer.polls == 3  # metadata and callbacks served between tries


def test_other_refusals_are_raised_at_once():
    producer = Refusing(1, KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)))
    with pytest.raises(KafkaException):
        bus.produce(producer, "selfheal.actions", b"action", timeout=30.0)
    assert producer.polls == 0 and producer.accepted == []


@pytest.mark.parametrize("error", [UNKNOWN_TOPIC, BufferError("Local: Queue full")])
def test_a_refusal_still_there_at_the_deadline_raises_refused(error):
    producer = Refusing(10**9, error)
    with pytest.raises(bus.Refused) as raised:
        bus.produce(producer, "selfheal.actions", b"action", timeout=0.5)
    assert raised.value.__cause__ is error
    assert "selfheal.actions" in str(raised.value)
    assert producer.accepted == []


def test_only_passable_refusals_count_as_such():
    assert bus.refusal_passes(UNKNOWN_TOPIC)
    assert not bus.refusal_passes(KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)))
    assert not bus.refusal_passes(KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC,
                                                            fatal=True)))
    assert not bus.refusal_passes(ValueError("not Kafka's"))
