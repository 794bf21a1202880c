"""The intake: reads `selfheal.actions` and hands each record to the executor.

Offsets are committed only after the executor has stored (or refused, with the reason
in the audit) the record, so a crash re-reads at most the records in hand; the store
knows every action id, so a re-read record is a duplicate, never a second action.
When the cluster cannot be read the record is kept and retried: nothing is decided on
a guess and nothing is skipped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from remediation.executor.cluster import ClusterError
from remediation.executor.runner import Executor, Received
from remediation.service.outbox import source_text


class Intake:
    """A consumer of the actions topic feeding one executor; `poll` is called in a loop."""

    def __init__(self, consumer: Any, topic: str, executor: Executor,
                 count: Callable[[Received], None] = lambda r: None,
                 log: Callable[[str], None] = lambda m: None) -> None:
        self.consumer = consumer
        self.topic = topic
        self.executor = executor
        self._count = count
        self._log = log
        self._waiting: str | None = None  # the record the cluster could not be read for
        consumer.subscribe([topic])

    def poll(self, timeout: float, stop: threading.Event) -> int:
        """Take in what arrives within `timeout` seconds; returns how many were handled."""
        handled = 0
        batch = self.consumer.consume(num_messages=100, timeout=timeout)
        for i, msg in enumerate(batch):
            if stop.is_set():
                self._rewind(batch[i:])
                break
            if msg.error() is not None:
                self._log(f"reading {self.topic}: {msg.error()}")
                continue
            if not self._handle(msg):
                self._rewind(batch[i:])
                stop.wait(timeout)  # back off; the records come again on the next poll
                break
            handled += 1
        return handled

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
