"""The tests' topic reader keeps every record written after it started, once, even when
its consumer loses its position (as across a bus outage): the chaos suite's "nothing
proposed twice" and "a fix was proposed" checks read the actions topic through it."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import TopicPartition

from sandbox import traffic
from tests.integration.collect_support import TopicReader

pytestmark = pytest.mark.integration


def test_a_reader_that_loses_its_position_misses_nothing_and_keeps_nothing_twice(sandbox):
    topic = f"reader-{uuid.uuid4().hex[:6]}"
    traffic.create_topic(sandbox, topic, partitions=2, replication_factor=2)
    before = traffic.produce(sandbox, topic, 6, prefix="before")
    reader = TopicReader(sandbox, topic)  # starts at the end: "before" is not its to read
    written = traffic.produce(sandbox, topic, 8, prefix="after")
    # The position lost: an offset past the end makes the broker answer OFFSET_OUT_OF_RANGE,
    # and librdkafka resets it by auto.offset.reset. At the end (its default) the records
    # just written would be skipped; at the start, the "before" ones come back.
    for partition in (0, 1):
        reader._consumer.seek(TopicPartition(topic, partition, 1_000_000))
    with reader:
        reader.wait_for(lambda ms: len(ms) >= len(written), 60, "the records written")
        more = traffic.produce(sandbox, topic, 4, prefix="later")
        reader.wait_for(lambda ms: len(ms) >= len(written) + len(more), 60, "later records")
        time.sleep(1.0)  # time for a record read twice to show up
        values = [m.value.decode() for m in reader.messages]
    assert sorted(values) == sorted(written + more)  # each once, none from before
    assert not set(values) & set(before)
    traffic.delete_topic(sandbox, topic)
