"""serve's intake reads on when the group's coordinator has just moved.

A full test run's serve read nothing for two minutes after a dir failure moved the
group's coordinator: librdkafka's own fetch of the committed offsets (OFFSET_STORED)
met NOT_COORDINATOR for the whole request, from the broker it still took for the
coordinator, and it neither retried nor started the fetchers (librdkafka issue 5586).
Here the move is made on purpose and cleanly: the group's consumer learns its
coordinator, the leadership of the group's __consumer_offsets partition moves to another
broker (its replicas reordered, then a preferred election), and an intake then starts
on the consumer.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from core import bus
from remediation.executor.runner import Received
from remediation.service.intake import Intake
from sandbox import traffic
from tests.integration.collect_support import sandbox_config
from tests.integration.serve_harness import lead_by_hand

pytestmark = pytest.mark.integration

OFFSETS = "__consumer_offsets"


def _offsets_partition(group: str, partitions: int) -> int:
    """Kafka's choice of the __consumer_offsets partition for a group: the Java hash of
    its id, made non-negative, modulo the topic's partitions."""
    h = 0
    units = group.encode("utf-16-be")
    for i in range(0, len(units), 2):  # String.hashCode runs over UTF-16 code units
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class _Executor:
    """Takes every record, remembering where it came from."""

    def __init__(self) -> None:
        self.sources: list[str] = []

    def receive(self, value: bytes, source: str) -> Received:
        self.sources.append(source)
        return Received("proposed", "taken")


def test_the_intake_reads_from_committed_offsets_after_the_coordinator_moved(sandbox):
    state, config = sandbox, sandbox_config(sandbox)
    group = f"intake-coordinator-{uuid.uuid4().hex[:8]}"
    topic = f"intake-coordinator-{uuid.uuid4().hex[:6]}"
    traffic.create_topic(state, topic, partitions=2, replication_factor=2)
    # Five in each partition: keyless records may all land in one, and a commit beyond a
    # partition's end is out of range, read from the earliest (run N met that).
    for partition in (0, 1):
        traffic.produce(state, topic, 5, partition=partition)
    committer = bus.consumer(config, group, **{"enable.auto.commit": False})
    committer.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 0)],
                     asynchronous=False)
    committer.close()
    probe = bus.consumer(config, "unused")
    try:
        ends = {tp.partition: tp.offset for tp in traffic.end_offsets(probe, topic)}
    finally:
        probe.close()

    described = traffic.partitions(state, OFFSETS)
    slot = _offsets_partition(group, len(described))
    (offsets,) = [p for p in described if p["partition_index"] == slot]
    replicas, coordinator = list(offsets["replica_nodes"]), offsets["leader_id"]
    # The slot is the group's: else the move below would not touch its coordinator.
    assert _coordinator_of(config, group) == coordinator
    consumer = bus.consumer(config, group, **{"enable.auto.commit": False,
                                              "auto.offset.reset": "earliest"})
    intake = None
    try:
        consumer.committed([TopicPartition(topic, 0)], timeout=30)  # the coordinator known
        lead_by_hand(state, OFFSETS, slot,
                     [b for b in replicas if b != coordinator] + [coordinator])

        executor = _Executor()
        logged: list[str] = []
        intake = Intake(consumer, topic, executor, log=logged.append)  # type: ignore[arg-type]
        stop = threading.Event()
        expected = sorted(f"{topic}[0]@{o}" for o in range(3, ends[0])) + sorted(
            f"{topic}[1]@{o}" for o in range(ends[1]))
        deadline = time.monotonic() + 90
        while len(executor.sources) < len(expected) and time.monotonic() < deadline:
            intake.poll(0.5, stop)
        assert sorted(executor.sources) == sorted(expected), logged
    finally:
        if intake is not None:
            intake.close()
        else:
            consumer.close()
        lead_by_hand(state, OFFSETS, slot, replicas)  # as it was
        traffic.delete_topic(state, topic)


def _coordinator_of(config: Any, group: str) -> int:
    """The broker the cluster names as the group's coordinator."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(bus.client_config(config))
    (described,) = admin.describe_consumer_groups([group], request_timeout=30).values()
    return int(described.result().coordinator.id)
