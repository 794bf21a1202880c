"""Publishes the audit log to Kafka: state changes to `selfheal.action-status` (compacted,
key = action id), refused topic records to `selfheal.dead-letter`.

The audit table is the outbox: every state change is committed there first, in the same
transaction as the change, and a cursor in the store says how far it has been
published. A batch advances the cursor only when Kafka acknowledged all of it, so after
a crash or an outage of the bus the rest is sent again (at least once; the compacted
topic keeps the latest state per action either way). A batch is never produced twice
while Kafka has not answered for it: the client's own retries and timeout decide.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core import bus
from remediation.executor.store import REJECTED, ActionStore, AuditEntry
from schemas.records import ActionStatus, DeadLetter

CURSOR = "kafka"
_SOURCE = re.compile(r"^(?P<topic>.+)\[(?P<partition>\d+)\]@(?P<offset>\d+)$")


def source_text(topic: str, partition: int, offset: int) -> str:
    """How the store names where a record came from: 'selfheal.actions[2]@118'."""
    return f"{topic}[{partition}]@{offset}"


def to_record(entry: AuditEntry, fallback_cluster: str) -> tuple[str, Any] | None:
    """(topic kind, record) for an audit line worth publishing; None for notes.

    The store writes times as RFC 3339 UTC already, so they go out as they are.
    """
    if entry.to_state == REJECTED:
        found = _SOURCE.match(entry.source or "")
        if found is None:
            return None  # refused on HTTP (a link), not a topic record: the audit has it
        return "dead-letter", DeadLetter.reject(
            entry.raw or "", entry.reason, source_topic=found["topic"],
            source_partition=int(found["partition"]), source_offset=int(found["offset"]),
            cluster_id=entry.cluster, event_time=entry.at)
    if not entry.is_change or entry.action_id is None:
        return None
    return "action-status", ActionStatus(
        cluster_id=entry.cluster or fallback_cluster, action_id=entry.action_id,
        state=entry.to_state, event_time=entry.at, reason=entry.reason, actor=entry.actor)


@dataclass
class _Flight:
    """A batch produced and not yet answered for in full by Kafka."""

    last_id: int  # the audit id the cursor moves to once all of it is acknowledged
    topics: list[str]
    waiting: int
    failed: list[str] = field(default_factory=list)


class Outbox:
    """Publishes the audit beside the executor's passes, from one thread: `publish()`
    starts a batch or settles the one in flight and never waits on the bus (a flush there
    could hold each executor pass up to 15 s while a bus partition had no leader);
    `drain()` waits, at shutdown."""

    def __init__(self, store: ActionStore, producer: Any, topics: dict[str, str],
                 cluster_id: str, count: Callable[[str], None] = lambda topic: None) -> None:
        self.store = store
        self.producer = producer
        self.topics = topics  # kind ("action-status", "dead-letter") -> topic name
        self.cluster_id = cluster_id
        self._count = count
        self._flight: _Flight | None = None

    def publish(self, batch: int = 500) -> int:
        """One step: the batch in flight settled if Kafka has answered for all of it, or
        else the next batch produced. Returns how many records were acknowledged now."""
        self.producer.poll(0)
        if self._flight is not None:
            return self._settle()
        self._start(batch)
        self.producer.poll(0)
        return self._settle()

    def drain(self, timeout: float) -> int:
        """Send what is left and wait up to ``timeout`` s for Kafka's answer (a stop)."""
        deadline = time.monotonic() + timeout
        done = self.publish()
        while self._flight is not None and time.monotonic() < deadline:
            self.producer.flush(min(1.0, max(0.0, deadline - time.monotonic())))
            done += self._settle()
        return done

    def _start(self, batch: int) -> None:
        entries = self.store.audit_since(self.store.cursor(CURSOR), batch)
        if not entries:
            return
        flight = _Flight(entries[-1].id, [], 0)

        def delivered(err: Any, msg: Any) -> None:
            flight.waiting -= 1
            if err is not None:
                flight.failed.append(str(err))

        for entry in entries:
            found = to_record(entry, self.cluster_id)
            if found is None:
                continue
            kind, record = found
            topic = self.topics[kind]
            try:
                bus.produce(self.producer, topic, record.to_json(), record.key(),
                            timeout=1.0, on_delivery=delivered)
            except bus.Refused as exc:  # the whole batch goes again once this is answered
                flight.failed.append(str(exc))
                break
            flight.waiting += 1
            flight.topics.append(topic)
        self._flight = flight

    def _settle(self) -> int:
        """The batch in flight, once Kafka answered for every record: the cursor moves
        past it only if all were acknowledged (otherwise all of it goes again)."""
        flight = self._flight
        if flight is None or flight.waiting > 0:
            return 0
        self._flight = None
        if flight.failed:
            return 0
        self.store.advance_cursor(CURSOR, flight.last_id)
        for topic in flight.topics:
            self._count(topic)
        return len(flight.topics)
