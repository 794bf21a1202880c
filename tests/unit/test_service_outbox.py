"""The outbox: audit lines become action-status and dead-letter records, and the cursor
moves only past what Kafka acknowledged."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from remediation.executor.actions import parse_action
from remediation.executor.lifecycle import State
from remediation.executor.store import ActionStore
from remediation.service.outbox import CURSOR, Outbox, source_text, to_record
from schemas.registry import validate
from tests.unit.action_records import fix_offline


def test_state_changes_and_topic_rejections_are_published_notes_are_not(
        tmp_path: Path) -> None:
    store = ActionStore(tmp_path / "o.db")
    aid = store.propose(parse_action(fix_offline()), source="selfheal.actions[1]@5").row.id
    store.transition(aid, State.AWAITING_APPROVAL, "policy", "needs approval")
    store.note(aid, "executor", "a note")
    store.reject("{bad", "malformed action record: $: not JSON", source=source_text(
        "selfheal.actions", 2, 9))
    store.reject("tok", "approval link refused (tampered)", actor="http")
    records = [to_record(e, "c0") for e in store.audit_since(0)]
    kinds = [None if r is None else r[0] for r in records]
    assert kinds == ["action-status", "action-status", None, "dead-letter", None]
    status = records[1][1]  # type: ignore[index]
    assert (status.state, status.actor, status.cluster_id) == ("awaiting_approval", "policy",
                                                               "c1")
    validate("action-status", json.loads(status.to_json()))
    letter = records[3][1]  # type: ignore[index]
    assert (letter.source_topic, letter.source_partition, letter.source_offset) == (
        "selfheal.actions", 2, 9)
    assert letter.raw == "{bad"


class Producer:
    """Records what is produced; answers on poll/flush, the first answers all failures;
    with ``silent`` it answers nothing (a partition whose leader just died)."""

    def __init__(self, fail_first: bool, silent: bool = False) -> None:
        self.fail = fail_first
        self.silent = silent
        self.sent: list[tuple[str, bytes, Any]] = []
        self._callbacks: list[Any] = []

    def produce(self, topic: str, value: bytes, key: bytes | None = None,
                on_delivery: Any = None) -> None:
        self.sent.append((topic, value, key))
        self._callbacks.append(on_delivery)

    def poll(self, timeout: float) -> int:
        if self.silent:
            return 0
        for cb in self._callbacks:
            cb("broker unreachable" if self.fail else None, None)
        answered = len(self._callbacks)
        if answered:
            self.fail = False
        self._callbacks.clear()
        return answered

    def flush(self, timeout: float) -> int:
        self.poll(timeout)
        return len(self._callbacks)


def approved(tmp_path: Path) -> tuple[ActionStore, str]:
    store = ActionStore(tmp_path / "o.db")
    aid = store.propose(parse_action(fix_offline())).row.id
    store.transition(aid, State.APPROVED, "policy", "auto")
    return store, aid


def test_the_cursor_moves_only_past_acknowledged_batches(tmp_path: Path) -> None:
    store, aid = approved(tmp_path)
    producer = Producer(fail_first=True)
    outbox = Outbox(store, producer, {"action-status": "s", "dead-letter": "d"}, "c0")
    assert outbox.publish() == 0 and store.cursor(CURSOR) == 0  # not acknowledged: kept
    assert outbox.publish() == 2 and store.cursor(CURSOR) == 2  # sent again, now acked
    assert [(t, k) for t, _, k in producer.sent] == [("s", aid.encode())] * 4
    assert outbox.publish() == 0 and len(producer.sent) == 4  # nothing new


def test_a_batch_kafka_has_not_answered_for_waits_without_blocking_and_is_not_sent_twice(
        tmp_path: Path) -> None:
    store, _ = approved(tmp_path)
    producer = Producer(fail_first=False, silent=True)
    outbox = Outbox(store, producer, {"action-status": "s", "dead-letter": "d"}, "c0")
    started = time.monotonic()
    for _ in range(5):
        assert outbox.publish() == 0
    assert time.monotonic() - started < 1.0  # the executor's pass is not held up
    assert len(producer.sent) == 2 and store.cursor(CURSOR) == 0
    producer.silent = False  # the new leader answers
    assert outbox.publish() == 2 and store.cursor(CURSOR) == 2
    assert len(producer.sent) == 2


def test_drain_waits_for_the_answer_up_to_its_timeout(tmp_path: Path) -> None:
    store, _ = approved(tmp_path)
    producer = Producer(fail_first=False, silent=True)
    outbox = Outbox(store, producer, {"action-status": "s", "dead-letter": "d"}, "c0")
    assert outbox.drain(0.2) == 0 and store.cursor(CURSOR) == 0  # never answered
    producer.silent = False
    assert outbox.drain(5.0) == 2 and store.cursor(CURSOR) == 2
