"""Traffic on the sandbox: topics, an acks=all idempotent producer, a consumer that counts.

Used by the demo and the tests to check the promise that matters under a disk failure:
every acknowledged message is consumed exactly once.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from sandbox.cluster import SandboxError, client_config
from sandbox.state import SandboxState
from sandbox.status import kafka_admin, placement


def create_topic(state: SandboxState, topic: str, partitions: int, replication_factor: int,
                 config: dict[str, str] | None = None) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client_config(state))
    new = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                   config=config or {})
    admin.create_topics([new], request_timeout=30)[topic].result()
    deadline = time.monotonic() + 30
    last: object = None
    while time.monotonic() < deadline:  # wait until every partition has a leader
        try:  # a broker halting or restarting may leave one metadata request unanswered
            meta = admin.list_topics(topic, timeout=5).topics[topic]
        except KafkaException as exc:
            last = exc
            continue
        if meta.error is None and len(meta.partitions) == partitions and all(
            p.leader >= 0 for p in meta.partitions.values()
        ):
            return
        last = meta.error or {p.id: p.leader for p in meta.partitions.values()}
        time.sleep(0.2)
    raise SandboxError(f"topic {topic} has partitions without a leader after 30 s "
                       f"(last: {last})")


def _producer(state: SandboxState, **overrides: Any) -> Any:
    from confluent_kafka import Producer

    return Producer({
        **client_config(state),
        "acks": "all",
        "enable.idempotence": True,
        # One request in flight: with several, librdkafka can bump its epoch and resend
        # what is already in the log (docs/facts.md; read twice once in the bus outage).
        "max.in.flight.requests.per.connection": 1,
        "linger.ms": 5,
        "message.timeout.ms": 120000,
        **overrides,
    })


def produce(state: SandboxState, topic: str, count: int, prefix: str | None = None,
            partition: int | None = None) -> list[str]:
    """Produce ``count`` distinct messages, to ``partition`` when given (else where the
    client's partitioner puts them: keyless, often all in one); returns the values the
    cluster acknowledged."""
    prefix = prefix or uuid.uuid4().hex[:8]
    acked: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(msg.value().decode())

    # a write parked on a leader whose dir just failed waits out the request timeout (30 s
    # by default; the nudges after a fault did): retried sooner, as the bus's producer is
    producer = _producer(state, **{"request.timeout.ms": 5000})
    for i in range(count):
        while True:
            try:
                producer.produce(topic, f"{prefix}-{i}".encode(), on_delivery=on_delivery,
                                 **({} if partition is None else {"partition": partition}))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(120)
    return acked


def produce_in_background(state: SandboxState, topic: str, count: int) -> threading.Thread:
    """`produce` on a started thread (join it): a write right after a fault makes the broker
    notice at once, but its acknowledgement can wait out a request timeout on the failed
    leader, and the caller has to watch the clock meanwhile."""
    thread = threading.Thread(target=produce, args=(state, topic, count), daemon=True,
                              name=f"nudge-{topic}")
    thread.start()
    return thread


class BackgroundProducer(threading.Thread):
    """Produces numbered messages until stopped; ``acked`` holds what the cluster acknowledged."""

    def __init__(self, state: SandboxState, topic: str, rate_per_s: float = 200.0) -> None:
        super().__init__(daemon=True, name=f"producer-{topic}")
        self.state, self.topic, self.interval = state, topic, 1.0 / rate_per_s
        self.acked: list[str] = []
        self.at: dict[str, tuple[int, int]] = {}  # acknowledged value -> (partition, offset)
        self.errors: list[str] = []
        self.refused: list[str] = []  # produce() raised: the message never entered the client
        self.sent = 0
        self._stop_event = threading.Event()
        self._prefix = uuid.uuid4().hex[:8]

    def _on_delivery(self, err: Any, msg: Any) -> None:
        from confluent_kafka import KafkaError

        if err is None:
            value = msg.value().decode()
            self.acked.append(value)
            self.at[value] = (msg.partition(), msg.offset())
        elif err.code() in (KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC):
            # Failed in the client, never sent (every broker restarting: the topic had no
            # leader): the same as produce() refusing it, so never expected either.
            self.refused.append(str(err))
        else:
            # timed, with how many were acknowledged by then: a failure says when the
            # client gave up and whether it recovered after
            self.errors.append(f"{time.strftime('%H:%M:%S')} {err} "
                               f"(after {len(self.acked)} acknowledged)")

    def run(self) -> None:
        from confluent_kafka import KafkaException

        producer = _producer(self.state)
        while not self._stop_event.is_set():
            try:
                producer.produce(self.topic, f"{self._prefix}-{self.sent}".encode(),
                                 on_delivery=self._on_delivery)
                self.sent += 1
            except BufferError:
                pass
            except KafkaException as exc:  # e.g. the topic unknown while every broker restarts
                # Refused before it was queued: never acknowledged, so never expected (an
                # application sees the same exception); keep producing.
                self.refused.append(str(exc))
            producer.poll(self.interval)
        producer.flush(120)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=150)


def consume_all(state: SandboxState, topic: str, expected: int, timeout: float = 60.0,
                group: str | None = None) -> list[str]:
    """Read ``topic`` from the start until ``expected`` messages arrived or ``timeout``."""
    from confluent_kafka import Consumer

    consumer = Consumer({
        **client_config(state),
        "group.id": group or f"selfheal-check-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    })
    consumer.subscribe([topic])
    values: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error() is None:
                    values.append(msg.value().decode())
        # a short grace read, so duplicates beyond ``expected`` are seen too
        grace = time.monotonic() + 2
        while time.monotonic() < grace:
            for msg in consumer.consume(num_messages=1000, timeout=0.3):
                if msg.error() is None:
                    values.append(msg.value().decode())
    finally:
        consumer.close()
    return values


def partitions(state: SandboxState, topic: str) -> list[dict[str, Any]]:
    """Metadata per partition: leader_id, replica_nodes, isr_nodes, offline_replicas."""
    with kafka_admin(state) as admin:
        return sorted(admin.describe_topics([topic])[0]["partitions"],
                      key=lambda p: p["partition_index"])


def partitions_settled(state: SandboxState, topic: str,
                       settled: Callable[[dict[str, Any]], bool],
                       timeout: float = 30.0) -> list[dict[str, Any]]:
    """``partitions`` once every partition is ``settled``, or as last read at ``timeout``.

    A reassignment is done at the controller before every broker's metadata cache says
    so (ZooKeeper mode: UpdateMetadata is sent after it, and a loaded broker answers
    from its older cache meanwhile), so a check of its result waits for the metadata to
    converge; the caller asserts on what comes back."""
    deadline = time.monotonic() + timeout
    while True:
        now = partitions(state, topic)
        if all(settled(p) for p in now) or time.monotonic() > deadline:
            return now
        time.sleep(0.2)


def leader_of(state: SandboxState, topic: str, partition: int, timeout: float = 15.0) -> int:
    """The partition's leader (-1: none). A topic just created may be missing from the
    answering broker's metadata for a moment: waited for, up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        found = [p["leader_id"] for p in partitions(state, topic)
                 if p["partition_index"] == partition]
        if found:
            return found[0]
        if time.monotonic() > deadline:
            raise SandboxError(f"{topic}-{partition} is not in the cluster's metadata "
                               f"after {timeout:.0f} s")
        time.sleep(0.2)


def log_dir_of(state: SandboxState, topic: str, partition: int, broker_id: int,
               timeout: float = 15.0) -> str:
    """The log dir that holds ``broker_id``'s replica of the partition (DescribeLogDirs).

    A follower creates its replica's log a moment after the topic has leaders, so a
    fresh topic's replica is waited for, up to ``timeout``."""
    deadline = time.monotonic() + timeout
    with kafka_admin(state) as admin:
        while True:
            reply = admin.describe_log_dirs(topic_partitions={topic: [partition]},
                                            brokers=[broker_id])[0]
            for log_dir, partitions in placement(reply, topic).items():
                if partition in partitions:
                    return log_dir
            if time.monotonic() > deadline:
                raise SandboxError(f"broker {broker_id} holds no replica of "
                                   f"{topic}-{partition}")
            time.sleep(0.2)


def wait_leader_moves(state: SandboxState, topic: str, partition: int, away_from: int,
                      timeout: float = 60.0) -> int:
    """Wait until the partition is led by a broker other than ``away_from``; return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            leader = leader_of(state, topic, partition,
                               timeout=max(0.0, deadline - time.monotonic()))
        except Exception:
            leader = -1
        if leader not in (-1, away_from):
            return leader
        time.sleep(0.3)
    raise SandboxError(f"{topic}-{partition} still led by {away_from} after {timeout:.0f} s")


class BackgroundConsumer(threading.Thread):
    """Reads every partition of a topic from the start, with no group and no commits.

    Partitions are assigned, not subscribed: a group coordinator that moves with a failed
    disk cannot make it rebalance and re-read, so a duplicate here is a duplicate in the log.

    A reader that stalls is re-created where it stood. librdkafka's consumer with assigned
    partitions sometimes never fetches again after every broker restarted (seen once in
    the chaos bus outage: partition 0 read to 213 while 4,000 more acknowledged records
    sat in the log; librdkafka issue #5153 reports the same, open). So when
    `core.bus.StallWatch` says nothing came for `STALL_S` while a partition's high
    watermark is past what was read, a new consumer is assigned each partition at the
    offset after the last one read: nothing is skipped or read twice by that, and the
    history check keeps its meaning. `stalls` says when.
    """

    STALL_S = 15.0
    ASK_S = 5.0  # how long the stall check asks the bus for a partition's end

    def __init__(self, state: SandboxState, topic: str) -> None:
        super().__init__(daemon=True, name=f"consumer-{topic}")
        self.state, self.topic = state, topic
        self.values: list[str] = []
        self.errors: list[str] = []
        # what was read where: partition -> offsets read, so a miss can be told apart
        # (a hole in what was read, or never fetched that far)
        self.offsets: dict[int, list[int]] = {}
        self.read_at: list[tuple[int, int]] = []  # (partition, offset) of values[i]
        self.stalls: list[str] = []  # each re-creation: which partitions lagged, how far
        self._stop_event = threading.Event()

    def _consumer(self) -> Any:
        from confluent_kafka import Consumer

        return Consumer({
            **client_config(self.state), "group.id": "unused", "enable.auto.commit": False,
            # an offset reset would silently skip (or re-read) data: report it instead
            "auto.offset.reset": "error",
            # after a leader moves, do not wait the default 5 minutes on a stale view
            "topic.metadata.refresh.interval.ms": 5000,
        })

    def _next(self, partition: int) -> int:
        read = self.offsets.get(partition)
        return read[-1] + 1 if read else 0

    def run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        from core.bus import StallWatch

        consumer = self._consumer()
        # A fresh topic's leaders may not know their partition yet; with offset reset set
        # to "error", an early BEGINNING lookup would stop that partition for good.
        partitions = [tp.partition for tp in end_offsets(consumer, self.topic)]
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in partitions])
        watch = StallWatch(self.topic, partitions, self.STALL_S, self.ASK_S)
        try:
            while not self._stop_event.is_set():
                for msg in consumer.consume(num_messages=500, timeout=0.2):
                    if msg.error() is None:
                        self.values.append(msg.value().decode())
                        self.offsets.setdefault(msg.partition(), []).append(msg.offset())
                        self.read_at.append((msg.partition(), msg.offset()))
                        watch.read()
                    else:
                        self.errors.append(f"{msg.topic()}-{msg.partition()}: {msg.error()}")
                stall = watch.check(consumer, self._next)
                if stall is None:
                    continue
                self.stalls.append(str(stall))
                consumer.close()
                consumer = self._consumer()
                consumer.assign([TopicPartition(self.topic, p, self._next(p))
                                 for p in partitions])
        finally:
            consumer.close()

    def wait_for(self, values: list[str], timeout: float = 60.0) -> bool:
        """Wait until every value in ``values`` has been read."""
        wanted = set(values)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if wanted.issubset(self.values):
                return True
            time.sleep(0.2)
        return False

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=30)


def where_missing(producer: BackgroundProducer, consumer: BackgroundConsumer,
                  missing: set[str], shown: int = 5) -> str:
    """Where the first ``shown`` missing messages were acknowledged, against what the
    consumer read of those partitions: the facts that tell a broker's loss from a reader's
    skip."""
    lines = []
    for value in sorted(missing, key=lambda v: producer.at.get(v, (-1, -1)))[:shown]:
        partition, offset = producer.at.get(value, (-1, -1))
        read = sorted(consumer.offsets.get(partition, []))
        span = f"{read[0]}..{read[-1]} ({len(read)} read)" if read else "nothing"
        lines.append(f"{value} acknowledged at {producer.topic}-{partition}@{offset}; "
                     f"read there: {span}")
    return "; ".join(lines)


def where_twice(producer: BackgroundProducer, consumer: BackgroundConsumer,
                values: list[str]) -> str:
    """Where each copy of ``values`` was read, against where it was acknowledged: the
    same offset twice is the reader's re-read, two offsets a duplicate in the log."""
    lines = []
    for value in values:
        # strict=False: a reader still running may have appended one and not the other
        reads = [f"{p}@{o}" for v, (p, o) in
                 zip(consumer.values, consumer.read_at, strict=False) if v == value]
        partition, offset = producer.at.get(value, (-1, -1))
        lines.append(f"{value} acknowledged at {partition}@{offset}, read at {reads}")
    return "; ".join(lines)


def delivery_problems(producer: BackgroundProducer, consumer: BackgroundConsumer,
                      timeout: float = 60.0) -> list[str]:
    """Stop ``producer`` and check the promise: every acknowledged message read exactly
    once by ``consumer``. Empty when kept; else what broke it."""
    producer.stop()
    errors = producer.errors
    problems = [f"{len(errors)} producer error(s), the first {errors[0]}, the last "
                f"{errors[-1]}; {len(producer.acked)} acknowledged in all"] if errors else []
    if not consumer.wait_for(producer.acked, timeout=timeout):
        missing = set(producer.acked) - set(consumer.values)
        problems.append(f"{len(missing)} acknowledged messages not read within {timeout:.0f} s "
                        f"({where_missing(producer, consumer, missing, 3)}); "
                        f"consumer errors: {consumer.errors[:5]}; "
                        f"re-created after stalls: {consumer.stalls[:3]}")
    counts = Counter(consumer.values)
    twice = [v for v in producer.acked if counts[v] > 1]
    if twice:
        problems.append(f"{len(twice)} acknowledged messages read more than once: "
                        f"{where_twice(producer, consumer, twice[:3])}; "
                        f"consumer errors: {consumer.errors[:5]}; "
                        f"re-created after stalls: {consumer.stalls[:3]}")
    return problems


def end_offsets(consumer: Any, topic: str, timeout: float = 30.0) -> list[Any]:
    """`core.bus.end_offsets`, its error the sandbox's."""
    from core.bus import BusError
    from core.bus import end_offsets as bus_end_offsets

    try:
        return bus_end_offsets(consumer, topic, timeout)
    except BusError as exc:
        raise SandboxError(str(exc)) from exc


class TopicTail:
    """Reads JSON records from the current end of a topic (no group, no commits)."""

    def __init__(self, state: SandboxState, topic: str, timeout: float = 60.0) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({**client_config(state), "group.id": "unused",
                                  "enable.auto.commit": False})
        self.consumer.assign(end_offsets(self.consumer, topic, timeout))

    def wait_for(self, match: Callable[[dict[str, Any]], bool],
                 timeout: float) -> tuple[dict[str, Any], float] | None:
        """The first record ``match`` accepts and the wall-clock time it was read; None
        after ``timeout``. Records that are not JSON objects are passed over."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for msg in self.consumer.consume(100, timeout=0.1):
                if msg.error() is not None:
                    continue
                try:
                    record = json.loads(msg.value())
                except ValueError:
                    continue
                if isinstance(record, dict) and match(record):
                    return record, time.time()
        return None

    def close(self) -> None:
        self.consumer.close()


def delete_topic(state: SandboxState, topic: str, timeout: float = 30.0) -> None:
    """Delete ``topic`` and wait until the metadata no longer lists it (its bytes leave the
    dirs moments later), so tests that share the sandbox do not see each other's data."""
    delete_topics(state, [topic], timeout)


def delete_topics(state: SandboxState, topics: list[str], timeout: float = 30.0) -> None:
    """`delete_topic` for several in one request, waited for together (a loop's dozen bus
    topics, one after the other, each waited for, took seconds of every test's teardown)."""
    if not topics:
        return
    with kafka_admin(state) as admin:
        admin.delete_topics(topics)
        deadline = time.monotonic() + timeout
        while listed := set(topics) & set(admin.list_topics()):
            if time.monotonic() > deadline:
                raise SandboxError(f"topics {', '.join(sorted(listed))} still listed "
                                   f"{timeout:.0f} s after delete")
            time.sleep(0.2)
