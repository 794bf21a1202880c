"""The event bus: the selfheal.* topics, and the producers and consumers that use them.

The bus may be another Kafka than the monitored cluster (`[bus] bootstrap_servers`).
Every producer is idempotent with acks=all, so a retried send never duplicates a record;
snapshots can be tens of MB, so their topic takes large messages, compressed.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from core.config import Config
from core.security import confluent_settings

# A snapshot of 100k partitions is ~30 MB of JSON (~3 MB with zstd).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class TopicSpec:
    partitions: int
    config: dict[str, str]


_DAY_MS = str(24 * 3600 * 1000)
_WEEK_MS = str(7 * 24 * 3600 * 1000)

TOPIC_SPECS: dict[str, TopicSpec] = {
    "broker-metrics": TopicSpec(6, {"retention.ms": _DAY_MS}),
    "logdir-events": TopicSpec(3, {"retention.ms": _WEEK_MS}),
    # Keyed by cluster: compaction keeps each cluster's latest snapshot at least.
    "cluster-snapshots": TopicSpec(1, {
        "cleanup.policy": "compact,delete", "retention.ms": _DAY_MS,
        "max.message.bytes": str(MAX_MESSAGE_BYTES), "compression.type": "zstd",
    }),
    "actions": TopicSpec(3, {"retention.ms": _WEEK_MS}),
    "action-status": TopicSpec(3, {"cleanup.policy": "compact"}),
    "consumer-assignments": TopicSpec(3, {"cleanup.policy": "compact"}),
    "dead-letter": TopicSpec(3, {"retention.ms": _WEEK_MS}),
}


class BusError(RuntimeError):
    """The event bus could not be reached or set up; the message says what to do."""


def _quiet_logger() -> logging.Logger:
    silent = logging.getLogger("selfheal.bus.librdkafka")
    if not silent.handlers:
        silent.addHandler(logging.NullHandler())
        silent.propagate = False
    return silent


def client_config(config: Config) -> dict[str, Any]:
    """confluent-kafka settings for the bus, with librdkafka's connection chatter muted."""
    servers = config.bus.bootstrap_servers
    if servers is None:
        raise BusError(
            "no event bus configured: set [bus] bootstrap_servers (or [cluster] "
            "bootstrap_servers, which the bus defaults to), or start the sandbox with "
            "`selfheal sandbox up`")
    return {"bootstrap.servers": servers, "logger": _quiet_logger(),
            **confluent_settings(config.bus_security, "[bus.security]")}


def ensure_topics(config: Config, timeout: float = 30.0) -> list[str]:
    """Create every selfheal.* topic that does not exist yet; returns the ones created.

    Existing topics are left as they are (an operator may have tuned them).
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client_config(config))  # must outlive its futures
    try:
        meta = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise BusError(f"cannot reach the event bus at {config.bus.bootstrap_servers}: {exc}") \
            from exc
    rf = min(3, len(meta.brokers))
    wanted = [
        NewTopic(config.topic(name), num_partitions=spec.partitions, replication_factor=rf,
                 config=spec.config)
        for name, spec in TOPIC_SPECS.items() if config.topic(name) not in meta.topics
    ]
    if not wanted:
        return []
    created = []
    for name, future in admin.create_topics(wanted, request_timeout=timeout).items():
        try:
            future.result()
            created.append(name)
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":  # another process won the race
                raise BusError(f"cannot create topic {name}: {exc}") from exc
    _wait_for_leaders(admin, created, timeout)
    return created


def _wait_for_leaders(admin: Any, topics: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pending = set(topics)
    while pending:
        for topic in list(pending):
            meta = admin.list_topics(topic, timeout=5).topics[topic]
            if meta.error is None and meta.partitions and all(
                p.leader >= 0 for p in meta.partitions.values()
            ):
                pending.discard(topic)
        if pending and time.monotonic() > deadline:
            raise BusError(f"topics without a leader after {timeout:.0f} s: {sorted(pending)}")
        if pending:
            time.sleep(0.2)


def producer(config: Config, **overrides: Any) -> Any:
    """An idempotent, acks=all confluent-kafka Producer on the bus."""
    from confluent_kafka import Producer

    settings = {
        **client_config(config),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 20,
        # A write parked on a leader whose log dir just failed is only answered when the
        # broker's wait (this timeout) ends; 30 s by default. Retrying sooner is safe with
        # idempotence, and it keeps a failure's own events from waiting behind it.
        "request.timeout.ms": 5000,
        "compression.type": "zstd",
        "message.max.bytes": MAX_MESSAGE_BYTES,
        **overrides,
    }
    return Producer(settings)


def refusal_passes(exc: Exception) -> bool:
    """True when ``produce()`` refused a record for a reason a later try can pass: the
    client's metadata does not list the topic or partition right now. A bus broker that
    just restarted answers Metadata before its controller has told it its topics, and
    librdkafka then refuses new records for them on the spot (``_UNKNOWN_TOPIC``): a
    chaos run's metrics collector died of it when the bus came back after a minute."""
    from confluent_kafka import KafkaError, KafkaException

    if not isinstance(exc, KafkaException) or not exc.args:
        return False
    err = exc.args[0]
    return (not err.fatal()
            and err.code() in (KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION))


class Refused(RuntimeError):
    """`produce` waited out its deadline: the local queue stayed full or the bus still
    does not list the topic. Nothing was queued; try the record again later."""


def produce(producer: Any, topic: str, value: bytes, key: bytes | None = None,
            timeout: float = 30.0, **kwargs: Any) -> None:
    """``producer.produce`` that waits, up to ``timeout`` s, while the local queue is full
    or the bus does not list the topic yet (`refusal_passes`), serving callbacks and
    metadata meanwhile; then raises `Refused`. Other refusals are raised at once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            producer.produce(topic, value, key, **kwargs)
            return
        except Exception as exc:
            if not (isinstance(exc, BufferError) or refusal_passes(exc)):
                raise
            if time.monotonic() >= deadline:
                raise Refused(f"{topic}: the bus refused the record for {timeout:g} s "
                              f"({exc})") from exc
        producer.poll(0.2)


def watermarks(reader: Any, partition: Any, timeout: float) -> tuple[int, int]:
    """The partition's (low, high) offsets, asked again while the broker does not know
    it yet: a topic created moments ago reaches every broker a moment after its leaders
    are elected (a full test run's job died at start-up on "Unknown topic or partition"
    so, and a snapshots collector logged an error and retried)."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout
    while True:
        try:
            low, high = reader.get_watermark_offsets(
                partition, timeout=max(0.1, deadline - time.monotonic()))
            return int(low), int(high)
        except KafkaException:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.25)


@dataclasses.dataclass(frozen=True)
class Stall:
    """A reader that read nothing for `idle` seconds while the bus holds more:
    {partition: (next offset to read, high watermark)}."""

    topic: str
    idle: float
    behind: dict[int, tuple[int, int]]

    def __str__(self) -> str:
        return f"nothing read for {self.idle:.0f} s with " + ", ".join(
            f"{self.topic}-{p} at {n} of {h}" for p, (n, h) in sorted(self.behind.items()))


class StallWatch:
    """Tells when a consumer with assigned partitions has stopped fetching.

    librdkafka's consumer with assigned partitions sometimes never fetches again after
    every broker restarted, and reports nothing (seen in the chaos bus outage; librdkafka
    issue #5153, open). The remedy is a new consumer assigned where the old one stood; this
    says when: nothing read for `stall_s` while a partition's high watermark is past both
    the next offset to read and the log start. It asks the bus at most once per `stall_s`,
    each partition for at most `ask_s`, and stops at the first it cannot ask (the bus may
    be away: then nothing is stalled that a new consumer would fix). A lag that a new
    consumer already met unchanged is not reported again: on a compacted topic the last
    offsets may be gone, and no consumer will read them.
    """

    def __init__(self, topic: str, partitions: list[int], stall_s: float = 15.0,
                 ask_s: float = 5.0, clock: Any = time.monotonic) -> None:
        self.topic, self.partitions = topic, list(partitions)
        self.stall_s, self.ask_s, self._clock = stall_s, ask_s, clock
        self._progress = self._checked = clock()
        self._met: dict[int, tuple[int, int]] | None = None  # the lag last reported

    def read(self) -> None:
        """A record came."""
        self._progress = self._clock()

    def check(self, reader: Any, next_offset: Any) -> Stall | None:
        """The stall to act on now, or None. ``next_offset(p)`` is the offset after the
        last one read of partition p (0 when none was). A reported stall counts as
        progress: the new consumer gets `stall_s` of its own."""
        from confluent_kafka import KafkaException, TopicPartition

        now = self._clock()
        if now - self._progress < self.stall_s or now - self._checked < self.stall_s:
            return None
        self._checked = now
        behind: dict[int, tuple[int, int]] = {}
        for p in self.partitions:
            try:
                low, high = watermarks(reader, TopicPartition(self.topic, p), self.ask_s)
            except KafkaException:
                return None
            at = next_offset(p)
            if high > max(at, low):
                behind[p] = (at, high)
        if not behind or behind == self._met:
            self._met = behind or None
            return None
        self._met = behind
        stall = Stall(self.topic, now - self._progress, behind)
        self._progress = now
        return stall


def topic_partitions(reader: Any, topic: str, timeout: float) -> list[int]:
    """The partition numbers of ``topic``, in order. A topic created moments ago may be
    missing from a broker's metadata or have no partitions yet: asked again until
    ``timeout``, then `BusError` says which."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout
    while True:
        try:
            meta = reader.list_topics(topic, timeout=max(0.1, deadline - time.monotonic()))
            found = meta.topics.get(topic)
            if found is None:
                problem = "the bus does not list it"
            elif found.error is not None:
                raise KafkaException(found.error)
            elif found.partitions:
                return sorted(found.partitions)
            else:
                problem = "the bus lists it without partitions"
        except KafkaException as exc:
            problem = kafka_reason(exc)
        if time.monotonic() >= deadline:
            raise BusError(f"topic {topic} not readable on the bus after {timeout:g} s: "
                           f"{problem}")
        time.sleep(0.25)


def end_offsets(reader: Any, topic: str, timeout: float) -> list[Any]:
    """Every partition of ``topic`` at its high watermark, as TopicPartitions to assign.
    Besides what `topic_partitions` waits out, a partition's leader may not know it yet:
    asked again until ``timeout``, then `BusError` says which."""
    from confluent_kafka import KafkaException, TopicPartition

    deadline = time.monotonic() + timeout
    ends = []
    for p in topic_partitions(reader, topic, timeout):
        try:
            high = watermarks(reader, TopicPartition(topic, p),
                              max(0.1, deadline - time.monotonic()))[1]
        except KafkaException as exc:
            raise BusError(f"topic {topic} not readable on the bus after {timeout:g} s: "
                           f"{kafka_reason(exc)}") from exc
        ends.append(TopicPartition(topic, p, high))
    return ends


def kafka_reason(error: object) -> str:
    """A Kafka client error (a KafkaException or a KafkaError) in words: the error's name
    and librdkafka's text (for anything else, its message), without the client's class
    names."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(error, KafkaException) and error.args:
        error = error.args[0]
    if isinstance(error, KafkaError):
        return f"{error.name()}: {error.str()}"
    return str(error) or type(error).__name__


def consumer(config: Config, group: str, **overrides: Any) -> Any:
    """A confluent-kafka Consumer on the bus in ``group`` (offsets committed by the caller's
    choice: auto-commit unless ``enable.auto.commit`` is overridden)."""
    return consumer_on(client_config(config), group, **overrides)


def consumer_on(client: dict[str, Any], group: str, **overrides: Any) -> Any:
    """The same consumer from plain client settings (``bootstrap.servers``), for code
    that runs where the config is not (the job's executors)."""
    from confluent_kafka import Consumer

    settings = {
        "logger": _quiet_logger(),
        **client,
        "group.id": group,
        "auto.offset.reset": "latest",
        "enable.partition.eof": False,
        "fetch.message.max.bytes": MAX_MESSAGE_BYTES,
        **overrides,
    }
    return Consumer(settings)
