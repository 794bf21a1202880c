"""Publishes the audit log to Kafka: state changes to `selfheal.action-status` (compacted,
key = action id), refused topic records to `selfheal.dead-letter`.

The audit table is the outbox: every state change is committed there first, in the same
transaction as the change, and a cursor in the store says how far it has been
published. A batch advances the cursor only when Kafka acknowledged all of it, so after
a crash or an outage of the bus the rest is sent again (at least once; the compacted
topic keeps the latest state per action either way).
"""

from __future__ import annotations

import re
from collections.abc import Callable
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


class Outbox:
    """One publishing pass at a time; call `publish()` from one thread, periodically."""

    def __init__(self, store: ActionStore, producer: Any, topics: dict[str, str],
                 cluster_id: str, count: Callable[[str], None] = lambda topic: None) -> None:
        self.store = store
        self.producer = producer
        self.topics = topics  # kind ("action-status", "dead-letter") -> topic name
        self.cluster_id = cluster_id
        self._count = count

    def publish(self, batch: int = 500, timeout: float = 15.0) -> int:
        """Send what the cursor has not covered yet; returns how many records went out."""
        start = self.store.cursor(CURSOR)
        entries = self.store.audit_since(start, batch)
        if not entries:
            return 0
        failed: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                failed.append(str(err))

        sent: list[str] = []
        for entry in entries:
            found = to_record(entry, self.cluster_id)
            if found is None:
                continue
            kind, record = found
            topic = self.topics[kind]
            try:
                bus.produce(self.producer, topic, record.to_json(), record.key(),
                            timeout=timeout, on_delivery=delivered)
            except bus.Refused:  # this batch goes again
                self.producer.flush(timeout)
                return 0
            sent.append(topic)
        left = self.producer.flush(timeout)
        if left or failed:
            return 0  # the cursor stays: the whole batch goes again next time
        self.store.advance_cursor(CURSOR, entries[-1].id)
        for topic in sent:
            self._count(topic)
        return len(sent)
