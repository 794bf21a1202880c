"""The action store: idempotent proposals, audited transitions, durable across restarts."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remediation.executor.actions import parse_action
from remediation.executor.lifecycle import IllegalTransition, State, transition
from remediation.executor.store import (
    DUPLICATE,
    REJECTED,
    ActionStore,
    UnknownAction,
)
from remediation.executor.store_side import LinkAlreadyUsed
from tests.unit.action_records import fix_offline, of_type


class Clock:
    def __init__(self) -> None:
        self.t = datetime(2026, 11, 22, 4, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.t


@pytest.fixture
def store(tmp_path: Path) -> ActionStore:
    return ActionStore(tmp_path / "actions.db")


def test_a_proposal_is_stored_once_and_a_replay_returns_the_same_row(store: ActionStore) -> None:
    action = parse_action(fix_offline())
    first = store.propose(action)
    store.transition(action.action_id, State.AWAITING_APPROVAL, "policy", "fix needs approval")
    again = store.propose(parse_action(fix_offline()))
    assert not first.duplicate and again.duplicate
    assert again.row.state is State.AWAITING_APPROVAL  # the replay changed nothing
    assert len(store.list()) == 1
    assert [e.reason for e in store.audit(action.action_id)][-1] == DUPLICATE


def test_a_duplicate_id_with_other_content_keeps_the_first_and_says_so(
        store: ActionStore) -> None:
    store.propose(parse_action(fix_offline()))
    again = store.propose(parse_action(fix_offline(reason="something else")))
    assert again.duplicate and again.row.record["reason"] != "something else"
    assert store.audit(again.row.id)[-1].reason == (
        DUPLICATE + " (record differs from the stored one)")


def test_the_store_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "actions.db"
    with ActionStore(path) as store:
        action = parse_action(fix_offline())
        store.propose(action)
        store.transition(action.action_id, State.APPROVED, "policy", "auto")
        store.transition(action.action_id, State.EXECUTING, "executor", "reassignment started")
        store.consume_link("n1", action.action_id)
        store.reject("{oops", "not JSON")
    with ActionStore(path) as reopened:
        row = reopened.get(action.action_id)
        assert row is not None and row.state is State.EXECUTING and row.attempts == 1
        assert [r.id for r in reopened.in_flight()] == [action.action_id]
        assert len(reopened.audit(action.action_id)) == 3
        assert reopened.link_used("n1")
        assert reopened.rejected()[0].raw == "{oops"
        assert reopened.propose(action).duplicate


def test_every_transition_leaves_one_audit_line_with_actor_and_reason(store: ActionStore) -> None:
    aid = store.propose(parse_action(fix_offline())).row.id
    steps = [(State.AWAITING_APPROVAL, "policy", "needs approval"),
             (State.APPROVED, "alice", "approved by link"),
             (State.EXECUTING, "executor", "started"),
             (State.VERIFYING, "executor", "reassignment done"),
             (State.FAILED, "executor", "partition orders-0 still offline")]
    for target, actor, reason in steps:
        store.transition(aid, target, actor, reason)
    audit = store.audit(aid)
    assert [(a.from_state, a.to_state) for a in audit] == [
        (None, "proposed"), ("proposed", "awaiting_approval"), ("awaiting_approval", "approved"),
        ("approved", "executing"), ("executing", "verifying"), ("verifying", "failed")]
    assert [(a.actor, a.reason) for a in audit[1:]] == [(a, r) for _, a, r in steps]
    row = store.get(aid)
    assert row is not None and row.error == "partition orders-0 still offline"


def test_an_illegal_transition_changes_nothing_and_writes_no_audit(store: ActionStore) -> None:
    aid = store.propose(parse_action(fix_offline())).row.id
    with pytest.raises(IllegalTransition, match="proposed -> executing"):
        store.transition(aid, State.EXECUTING, "executor", "skip ahead")
    row = store.get(aid)
    assert row is not None and row.state is State.PROPOSED
    assert len(store.audit(aid)) == 1


def test_an_unknown_action_is_named(store: ActionStore) -> None:
    with pytest.raises(UnknownAction, match="no action 'nope' in the store"):
        store.transition("nope", State.APPROVED, "x", "y")


def test_a_malformed_record_is_rejected_with_its_raw_text(store: ActionStore) -> None:
    bad = json.dumps(fix_offline(type="reboot"))
    assert store.ingest(bad) is None
    assert store.ingest(b"\xff not json") is None
    rejected = store.rejected()
    assert [r.to_state for r in rejected] == [REJECTED, REJECTED]
    assert rejected[0].action_id is None and rejected[0].raw == bad
    assert "type: 'reboot' is not one of" in rejected[0].reason
    assert store.list() == ()


def test_ingest_proposes_a_good_record(store: ActionStore) -> None:
    proposed = store.ingest(json.dumps(fix_offline()))
    assert proposed is not None and proposed.row.state is State.PROPOSED


def test_queries_by_state_and_in_flight(store: ActionStore) -> None:
    a = store.propose(parse_action(of_type("move_replica_dirs", seed="a"))).row.id
    b = store.propose(parse_action(of_type("page_operator", seed="b"))).row.id
    store.transition(a, State.APPROVED, "policy", "auto")
    store.transition(b, State.AWAITING_APPROVAL, "policy", "page")
    assert [r.id for r in store.list(state="approved")] == [a]
    assert [r.id for r in store.in_flight()] == [a]
    assert {r.id for r in store.open_actions()} == {a, b}


def test_overdue_approvals_expire_but_pages_never_do(tmp_path: Path) -> None:
    clock = Clock()
    store = ActionStore(tmp_path / "a.db", clock=clock)
    fix = store.propose(parse_action(of_type("fix_offline_replicas", seed="f"))).row.id
    page = store.propose(parse_action(of_type("page_operator", seed="p"))).row.id
    for aid in (fix, page):
        store.transition(aid, State.AWAITING_APPROVAL, "policy", "wait")
    clock.t += timedelta(seconds=3599)
    assert store.expire_overdue(3600) == ()
    clock.t += timedelta(seconds=2)
    assert store.expire_overdue(3600) == (fix,)
    assert store.get(page).state is State.AWAITING_APPROVAL  # type: ignore[union-attr]


def test_a_link_nonce_is_consumed_once(store: ActionStore) -> None:
    store.consume_link("nonce-1", "a" * 64)
    with pytest.raises(LinkAlreadyUsed, match="already used"):
        store.consume_link("nonce-1", "a" * 64)


def test_one_store_is_safe_across_threads(store: ActionStore) -> None:
    action = parse_action(fix_offline())
    results: list[bool] = []

    def propose() -> None:
        results.append(store.propose(action).duplicate)

    threads = [threading.Thread(target=propose) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] + [True] * 7
    assert len(store.audit(action.action_id)) == 8


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(type_=st.sampled_from(["fix_offline_replicas", "page_operator"]),
       targets=st.lists(st.sampled_from(list(State)), max_size=12))
def test_random_transitions_never_leave_an_illegal_history(
        tmp_path: Path, type_: str, targets: list[State]) -> None:
    store = ActionStore(tmp_path / "prop.db")
    try:
        aid = store.propose(parse_action(of_type(type_, seed=repr(targets) + type_))).row.id
        for target in targets:
            try:
                store.transition(aid, target, "fuzz", "random")
            except IllegalTransition:
                pass
        audit = store.audit(aid)
        state = State.PROPOSED
        assert audit[0].to_state == "proposed"
        for entry in audit[1:]:
            if entry.reason.startswith(DUPLICATE):
                continue
            assert entry.from_state == state
            state = transition(state, entry.to_state, type_)  # raises if illegal
        row = store.get(aid)
        assert row is not None and row.state is state
    finally:
        store.close()


def test_two_stores_on_one_file_start_an_action_exactly_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    first, second = ActionStore(path), ActionStore(path)  # as the executor and the service
    aid = first.propose(parse_action(fix_offline())).row.id
    first.transition(aid, State.APPROVED, "policy", "auto")
    outcomes: list[str] = []

    def start(store: ActionStore) -> None:
        try:
            store.transition(aid, State.EXECUTING, "executor", "start")
            outcomes.append("started")
        except IllegalTransition:
            outcomes.append("refused")

    threads = [threading.Thread(target=start, args=(s,)) for s in (first, second) * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["refused"] * 7 + ["started"]
    assert second.get(aid).attempts == 1  # type: ignore[union-attr]


def _finish(store: ActionStore, aid: str, end: State) -> None:
    store.transition(aid, State.APPROVED, "policy", "auto")
    store.transition(aid, State.EXECUTING, "executor", "started")
    if end is State.SUCCEEDED:
        store.transition(aid, State.VERIFYING, "executor", "moved")
    store.transition(aid, end, "executor", "done")


def test_a_finished_action_detected_again_is_reopened_as_a_new_attempt(
        store: ActionStore) -> None:
    aid = store.propose(parse_action(fix_offline())).row.id
    _finish(store, aid, State.SUCCEEDED)
    store.update_journal(aid, submitted=True)
    again = parse_action(fix_offline(reason="the same dir failed again"))
    assert store.propose(again).row.state is State.SUCCEEDED  # the store alone changes nothing
    row = store.reopen(again, "intake", "re-proposed: applies again")
    assert row.state is State.PROPOSED and row.attempts == 1 and row.journal == {}
    assert row.record["reason"] == "the same dir failed again"
    assert [(a.from_state, a.to_state) for a in store.audit(aid)][-1] == ("succeeded", "proposed")


def test_a_cancelled_or_open_action_is_not_reopened(store: ActionStore) -> None:
    action = parse_action(fix_offline())
    store.propose(action)
    with pytest.raises(IllegalTransition, match="still open"):
        store.reopen(action, "intake", "again")
    store.transition(action.action_id, State.AWAITING_APPROVAL, "policy", "wait")
    store.transition(action.action_id, State.CANCELLED, "alice", "not this")
    with pytest.raises(IllegalTransition, match="an operator cancelled this exact plan"):
        store.reopen(action, "intake", "again")
    assert store.get(action.action_id).state is State.CANCELLED  # type: ignore[union-attr]


def test_an_approval_only_applies_to_an_action_waiting_for_one(store: ActionStore) -> None:
    aid = store.propose(parse_action(fix_offline())).row.id
    with pytest.raises(IllegalTransition, match="is proposed, not awaiting_approval"):
        store.transition(aid, State.APPROVED, "alice", "ok",
                         expect=frozenset({State.AWAITING_APPROVAL}))
    assert store.get(aid).state is State.PROPOSED  # type: ignore[union-attr]


def test_cancel_is_immediate_before_execution_and_a_request_during_it(
        store: ActionStore) -> None:
    waiting = store.propose(parse_action(of_type("move_replica_dirs"))).row.id
    store.transition(waiting, State.AWAITING_APPROVAL, "policy", "wait")
    assert store.request_cancel(waiting, "alice", "no").state is State.CANCELLED
    running = store.propose(parse_action(fix_offline())).row.id
    store.transition(running, State.APPROVED, "policy", "auto")
    store.transition(running, State.EXECUTING, "executor", "started")
    row = store.request_cancel(running, "bob", "wrong broker")
    assert row.state is State.EXECUTING
    assert row.cancel_request == {"actor": "bob", "reason": "wrong broker"}
    store.request_cancel(running, "bob", "again")  # asking twice asks once
    assert sum("cancel requested" in a.reason for a in store.audit(running)) == 1
    store.transition(running, State.VERIFYING, "executor", "moved")
    with pytest.raises(IllegalTransition, match="the data has moved already"):
        store.request_cancel(running, "bob", "too late")


def test_the_journal_merges_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    with ActionStore(path) as store:
        aid = store.propose(parse_action(fix_offline())).row.id
        store.update_journal(aid, throttles={"saved": {"broker:1": {"x": None}}})
        assert store.update_journal(aid, submitted=True) == {
            "throttles": {"saved": {"broker:1": {"x": None}}}, "submitted": True}
    with ActionStore(path) as store:
        assert store.get(aid).journal["submitted"] is True  # type: ignore[union-attr]


def test_notes_are_audited_but_are_not_state_changes(store: ActionStore) -> None:
    aid = store.propose(parse_action(fix_offline())).row.id
    store.note(aid, "executor", "throttle set on brokers [1, 2]")
    store.reject("{bad", "not JSON", source="selfheal.actions[0]@7")
    lines = store.audit_since(0)
    assert [e.is_change for e in lines] == [True, False, False]
    assert lines[0].cluster == "c1" and lines[2].source == "selfheal.actions[0]@7"


def test_outbox_cursors_only_move_forward(store: ActionStore) -> None:
    assert store.cursor("status") == 0
    store.advance_cursor("status", 5)
    store.advance_cursor("status", 3)  # a late delivery report from an older batch
    assert store.cursor("status") == 5


def test_a_generated_setting_is_made_once_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with ActionStore(path) as a, ActionStore(path) as b:
        first = a.setting("link_secret", lambda: "one")
        assert b.setting("link_secret", lambda: "two") == first == "one"


def test_bytes_moved_count_actions_that_started_in_the_window(tmp_path: Path) -> None:
    clock = Clock()
    store = ActionStore(tmp_path / "b.db", clock=clock)
    start = clock.t
    aid = store.propose(parse_action(fix_offline(bytes_=700))).row.id
    store.transition(aid, State.APPROVED, "policy", "auto")
    clock.t += timedelta(minutes=5)
    store.transition(aid, State.EXECUTING, "executor", "started")
    store.note(aid, "executor", "still executing")
    assert store.moved_bytes_since(start) == 700
    assert store.moved_bytes_since(clock.t + timedelta(seconds=1)) == 0


def test_counts_list_every_state(store: ActionStore) -> None:
    store.propose(parse_action(fix_offline()))
    counts = store.counts()
    assert counts["proposed"] == 1 and counts["succeeded"] == 0 and len(counts) == len(State)


def test_a_schema_1_file_is_migrated_in_place(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE actions (id TEXT PRIMARY KEY, cluster TEXT NOT NULL, type TEXT NOT NULL,
            state TEXT NOT NULL, record TEXT NOT NULL, created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, error TEXT);
        CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, action_id TEXT,
            at TEXT NOT NULL, from_state TEXT, to_state TEXT NOT NULL, actor TEXT NOT NULL,
            reason TEXT NOT NULL, raw TEXT);
        CREATE TABLE used_links (nonce TEXT PRIMARY KEY, action_id TEXT NOT NULL,
            used_at TEXT NOT NULL);
        CREATE TABLE alerts (fingerprint TEXT NOT NULL, group_key TEXT NOT NULL,
            status TEXT NOT NULL, labels TEXT NOT NULL, received_at TEXT NOT NULL,
            action_id TEXT, PRIMARY KEY (group_key, fingerprint, status));
        INSERT INTO alerts VALUES ('f', 'g', 'firing', '{}', '2026-11-22T00:00:00Z', NULL);
        PRAGMA user_version=1;
    """)
    db.close()
    with ActionStore(path) as store:
        aid = store.propose(parse_action(fix_offline())).row.id
        assert store.update_journal(aid, submitted=True) == {"submitted": True}
        assert store.audit(aid)[0].source is None
        assert store.alerts()[0].annotations == {}
