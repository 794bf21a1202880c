"""The outbox: audit lines become action-status and dead-letter records, and the cursor
moves only past what Kafka acknowledged."""

from __future__ import annotations

import json
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
    """Records what is produced; the first flush reports every delivery as failed."""

    def __init__(self, fail_first: bool) -> None:
        self.fail = fail_first
        self.sent: list[tuple[str, bytes, Any]] = []
        self._callbacks: list[Any] = []

    def produce(self, topic: str, value: bytes, key: bytes | None = None,
                on_delivery: Any = None) -> None:
        self.sent.append((topic, value, key))
        self._callbacks.append(on_delivery)

    def flush(self, timeout: float) -> int:
        for cb in self._callbacks:
            cb("broker unreachable" if self.fail else None, None)
        self._callbacks.clear()
        self.fail = False
        return 0


def test_the_cursor_moves_only_past_acknowledged_batches(tmp_path: Path) -> None:
    store = ActionStore(tmp_path / "o.db")
    aid = store.propose(parse_action(fix_offline())).row.id
    store.transition(aid, State.APPROVED, "policy", "auto")
    producer = Producer(fail_first=True)
    outbox = Outbox(store, producer, {"action-status": "s", "dead-letter": "d"}, "c0")
    assert outbox.publish() == 0 and store.cursor(CURSOR) == 0  # not acknowledged: kept
    assert outbox.publish() == 2 and store.cursor(CURSOR) == 2  # sent again, now acked
    assert [(t, k) for t, _, k in producer.sent] == [("s", aid.encode())] * 4
    assert outbox.publish() == 0 and len(producer.sent) == 4  # nothing new
