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
    LinkAlreadyUsed,
    UnknownAction,
)
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
    assert "unknown action type 'reboot'" in rejected[0].reason
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
