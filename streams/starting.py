"""Where a fresh checkpoint starts reading: the latest snapshot first, then what is new.

`startingOffsets=latest` for every topic made a new job miss the snapshot the collector
takes at start-up and wait up to a snapshot interval for the next one, knowing nothing
of the cluster until then. The snapshot topic is compacted and keyed by cluster, so this
cluster's latest snapshot is the last record with its key: a fresh checkpoint starts
that topic there (found by reading back from the end, a few records at a time), and the
other topics at latest. An existing checkpoint resumes where it stopped.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from core.config import Config

# Records per partition searched for this cluster's latest snapshot (its manifest, or a
# whole one): a fleet's snapshot at 2.8M replicas is 64 chunks before its manifest.
LOOK_BACK = 128

# Consumers that try, in turn, to learn the snapshot topic's partitions and ends.
TRIES = 3


def is_fresh(checkpoint: Path) -> bool:
    """True when the query at ``checkpoint`` has never planned a batch."""
    offsets = checkpoint / "offsets"
    return not offsets.is_dir() or not any(p.name.isdigit() for p in offsets.iterdir())


def snapshot_offsets(config: Config, cluster: str, timeout: float = 15.0) -> str:
    """Spark's `startingOffsets` JSON for the snapshot topic: per partition, the offset of
    ``cluster``'s latest snapshot, else its end (what arrives from now on)."""
    topic = config.topic("cluster-snapshots")
    start = {str(p): found if found is not None else end
             for p, (found, end) in latest_snapshots(config, cluster, timeout).items()}
    return json.dumps({topic: start})


def latest_snapshots(config: Config, cluster: str, timeout: float = 15.0
                     ) -> dict[int, tuple[int | None, int]]:
    """Per partition of the snapshot topic: the offset of ``cluster``'s latest snapshot
    record (a manifest or a whole snapshot) or None, and the partition's end.

    Up to `TRIES` consumers ask for the topic's partitions and ends, each for a share of
    ``timeout``: one consumer's metadata cache once held a just-created topic so that
    every watermark query answered `_UNKNOWN_PARTITION` for 30 s while the topic was
    listed (docs/facts.md, The clients), and a new consumer starts with an empty
    cache. Then `BusError` says what went wrong and what to check."""
    from confluent_kafka import KafkaException

    from core.bus import BusError, kafka_reason

    topic = config.topic("cluster-snapshots")
    deadline = time.monotonic() + timeout
    for attempt in range(1, TRIES + 1):
        share = max(0.1, min(deadline - time.monotonic(), timeout / TRIES))
        try:
            return _search(config, topic, cluster, share, timeout)
        except (KafkaException, BusError) as exc:
            problem = kafka_reason(exc)
        if attempt == TRIES or time.monotonic() >= deadline:
            raise BusError(
                f"could not find where {topic} holds cluster {cluster}'s latest snapshot "
                f"({attempt} consumers in {timeout:g} s): {problem}. Check that the bus "
                "at [bus] bootstrap_servers is up (`kafka-topics.sh --describe --topic "
                f"{topic}` lists its partitions with leaders), then start again")
    raise AssertionError("unreachable")


def _search(config: Config, topic: str, cluster: str, ask: float, read: float
            ) -> dict[int, tuple[int | None, int]]:
    """One consumer's search: partitions and ends asked within ``ask`` seconds, each
    partition's last records read within ``read``."""
    from confluent_kafka import TopicPartition

    from core.bus import consumer, topic_partitions, watermarks

    reader = consumer(config, "selfheal-stream-start", **{"enable.auto.commit": False,
                                                          "auto.offset.reset": "earliest"})
    try:
        deadline = time.monotonic() + ask
        ends = {p: watermarks(reader, TopicPartition(topic, p),
                              max(0.1, deadline - time.monotonic()))
                for p in topic_partitions(reader, topic, ask)}
        return {p: (_latest_of(reader, TopicPartition, topic, p,
                               max(low, high - LOOK_BACK), high, cluster, read)
                    if high > low else None, high)
                for p, (low, high) in ends.items()}
    finally:
        reader.close()


def _latest_of(reader: Any, partition_type: Any, topic: str, partition: int, first: int,
               end: int, cluster: str, timeout: float) -> int | None:
    """The offset of the last record keyed ``cluster`` in [first, end)."""
    reader.assign([partition_type(topic, partition, first)])
    found = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = reader.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            continue
        key = msg.key()
        if key is not None and key.decode("utf-8", "replace") == cluster:
            found = msg.offset()
        if msg.offset() >= end - 1:
            break
    reader.unassign()
    return found
