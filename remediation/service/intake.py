"""The intake: reads `selfheal.actions` and hands each record to the executor.

Offsets are committed only after the executor has stored (or refused, with the reason
in the audit) the record, so a crash re-reads at most the records in hand; the store
knows every action id, so a re-read record is a duplicate, never a second action.

The topic's partitions are assigned, not subscribed: the executor lock already makes this
serve the only reader, and a group rebalance only added waiting. A serve that reconnected
after the bus was away (or took over from a killed one) joined as a new member and waited
for the old member's session to expire, ~35-45 s, before it read a record. Offsets are
still committed to the intake group, so a restart, a standby and the lag metrics read
them as before.
When the cluster cannot be read the record is kept and retried: nothing is decided on
a guess and nothing is skipped.

Each partition is assigned at the offset the group committed, asked for here, not left
to librdkafka (OFFSET_STORED): when its own offset fetch meets a coordinator that has
just moved (NOT_COORDINATOR for the whole request), librdkafka neither retries nor
starts the partition's fetcher, so the intake read nothing ever again (librdkafka issue
5586; a full test run's serve sat so for two minutes after a dir holding
__consumer_offsets failed). Asked here, a refusal is an error that is retried.

A consumer that stops fetching while records wait (`core.bus.StallWatch`: librdkafka
#5153, an assigned consumer after every broker restarted) is replaced by a new one from
`renew`, assigned again from the group's committed offsets: the records in hand were not
committed, so none is skipped, and the store knows every id it has seen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from core.bus import StallWatch, kafka_reason
from remediation.executor.cluster import ClusterError
from remediation.executor.runner import Executor, Received
from remediation.service.outbox import source_text

PARTITIONS_CHECK_SECONDS = 60.0
# While the topic shows no partition yet (just created, its metadata not everywhere yet),
# it is asked again this often rather than a minute later.
NO_PARTITIONS_RETRY_SECONDS = 1.0
# Nothing fetched for this long while a partition's log is past what was handled: stalled.
STALL_SECONDS = 15.0


class Intake:
    """A consumer of the actions topic feeding one executor; `poll` is called in a loop."""

    def __init__(self, consumer: Any, topic: str, executor: Executor,
                 count: Callable[[Received], None] = lambda r: None,
                 log: Callable[[str], None] = lambda m: None,
                 renew: Callable[[], Any] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.consumer = consumer
        self.topic = topic
        self.executor = executor
        self._count = count
        self._log = log
        self._renew = renew  # a new consumer, when this one stalls; None: never replaced
        self._clock = clock
        self._watch: StallWatch | None = None  # once partitions are assigned
        self._next: dict[int, int] = {}  # partition -> the offset after the last handled
        self._waiting: str | None = None  # the record the cluster could not be read for
        self._partitions = 0
        self._checked = -PARTITIONS_CHECK_SECONDS
        self._failed = False
        self._try_assign()

    def _try_assign(self) -> None:
        try:
            self._assign()
        except Exception as exc:  # the bus away: the partitions in hand still read
            self._log(f"reading {self.topic}'s partitions and committed offsets: "
                      f"{kafka_reason(exc)}; trying again in "
                      f"{NO_PARTITIONS_RETRY_SECONDS:g} s")

    def _assign(self) -> None:
        """Read every partition of the topic, each from the group's committed offset (the
        earliest where none); partitions added to the topic are taken in within a minute.
        Raises when the metadata or the committed offsets cannot be read: nothing new is
        assigned then, and the next poll asks again within a second."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

        self._checked = time.monotonic()
        self._failed = True
        topic = self.consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
        # A partition without a leader yet is assigned all the same: it is read once led.
        count = len(topic.partitions) if topic is not None else 0
        if count > self._partitions:
            committed = self.consumer.committed(
                [TopicPartition(self.topic, p) for p in range(self._partitions, count)],
                timeout=10)
            for tp in committed:
                if tp.error is not None:
                    raise KafkaException(tp.error)
            self.consumer.incremental_assign([
                TopicPartition(self.topic, tp.partition,
                               tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                for tp in committed])
            self._next.update((tp.partition, max(tp.offset, 0)) for tp in committed)
            self._partitions = count
            self._watch = StallWatch(self.topic, list(range(count)), STALL_SECONDS,
                                     ask_s=1.0, clock=self._clock)
        self._failed = False

    def poll(self, timeout: float, stop: threading.Event) -> int:
        """Take in what arrives within `timeout` seconds; returns how many were handled."""
        handled = 0
        due = (PARTITIONS_CHECK_SECONDS if self._partitions and not self._failed
               else NO_PARTITIONS_RETRY_SECONDS)
        if time.monotonic() - self._checked > due:
            self._try_assign()
        batch = self.consumer.consume(num_messages=100, timeout=timeout)
        if self._watch is not None and any(m.error() is None for m in batch):
            self._watch.read()  # fetching, if only a record the cluster holds back
        for i, msg in enumerate(batch):
            if stop.is_set():
                self._rewind(batch[i:])
                break
            if msg.error() is not None:
                self._log(f"reading {self.topic}: {kafka_reason(msg.error())}")
                continue
            if not self._handle(msg):
                self._rewind(batch[i:])
                stop.wait(timeout)  # back off; the records come again on the next poll
                break
            self._next[msg.partition()] = msg.offset() + 1
            handled += 1
        self._check_stall()
        return handled

    def _check_stall(self) -> None:
        if self._renew is None or self._watch is None:
            return
        stall = self._watch.check(self.consumer, lambda p: self._next.get(p, 0))
        if stall is None:
            return
        self._log(f"the intake stopped fetching ({stall}; librdkafka #5153): reading on "
                  "with a new consumer from the committed offsets")
        old, self.consumer = self.consumer, self._renew()
        try:
            old.close()
        except Exception:
            pass  # it was stuck; what it had not committed is read again
        self._partitions = 0
        self._try_assign()

    def _rewind(self, rest: list[Any]) -> None:
        """Read these records again on the next poll (each partition from its first)."""
        from confluent_kafka import TopicPartition

        first: dict[tuple[str, int], int] = {}
        for msg in rest:
            if msg.error() is None:
                key = (msg.topic(), msg.partition())
                first[key] = min(first.get(key, msg.offset()), msg.offset())
        for (topic, partition), offset in first.items():
            self.consumer.seek(TopicPartition(topic, partition, offset))

    def _handle(self, msg: Any) -> bool:
        source = source_text(msg.topic(), msg.partition(), msg.offset())
        try:
            received = self.executor.receive(msg.value(), source)
        except ClusterError as exc:
            if self._waiting != source:
                self._log(f"{source}: {exc}; the record waits until the cluster answers")
                self._waiting = source
            return False
        except Exception as exc:  # no record's content may stop or wedge the intake
            reason = (f"refused, nothing executed: the record could not be handled "
                      f"({type(exc).__name__}: {exc}); report it with this audit line")
            self.executor.store.reject(msg.value() or b"", reason, "executor", source=source)
            received = Received("rejected", reason)
        self._waiting = None
        self.consumer.commit(message=msg, asynchronous=False)
        self._count(received)
        if received.outcome == "rejected":
            self._log(f"{source}: {received.reason}")
        return True

    def close(self) -> None:
        try:
            self.consumer.close()
        except Exception:
            pass  # closing twice, or the bus is gone: nothing left to commit
