"""The action lifecycle: legal moves pass, every other move is refused with a reason."""

from __future__ import annotations

from itertools import pairwise

import pytest

from remediation.executor.lifecycle import (
    TERMINAL,
    IllegalTransition,
    State,
    allowed,
    is_terminal,
    reopen_refusal,
    transition,
)

S = State

REMEDIATION_PATH = [S.PROPOSED, S.AWAITING_APPROVAL, S.APPROVED, S.EXECUTING, S.VERIFYING,
                    S.SUCCEEDED]


def test_the_happy_path_with_approval_is_legal() -> None:
    for cur, nxt in pairwise(REMEDIATION_PATH):
        assert transition(cur, nxt, "fix_offline_replicas") is nxt


def test_auto_actions_skip_approval() -> None:
    assert transition("proposed", "approved", "move_replica_dirs") is S.APPROVED


@pytest.mark.parametrize("cur,nxt", [
    (S.AWAITING_APPROVAL, S.CANCELLED), (S.AWAITING_APPROVAL, S.EXPIRED),
    (S.AWAITING_APPROVAL, S.SUPERSEDED), (S.APPROVED, S.CANCELLED), (S.APPROVED, S.SUPERSEDED),
    (S.EXECUTING, S.FAILED), (S.EXECUTING, S.CANCELLED), (S.VERIFYING, S.FAILED),
    (S.PROPOSED, S.SUPERSEDED),
])
def test_every_listed_exit_is_legal(cur: State, nxt: State) -> None:
    assert transition(cur, nxt) is nxt


@pytest.mark.parametrize("cur,nxt", [
    (S.PROPOSED, S.EXECUTING), (S.AWAITING_APPROVAL, S.EXECUTING), (S.APPROVED, S.SUCCEEDED),
    (S.VERIFYING, S.CANCELLED), (S.EXECUTING, S.EXPIRED), (S.PROPOSED, S.PROPOSED),
])
def test_skipping_a_step_is_refused_with_the_allowed_next_states(cur: State, nxt: State) -> None:
    with pytest.raises(IllegalTransition, match=f"{cur} -> {nxt}: allowed next"):
        transition(cur, nxt, "fix_offline_replicas")


@pytest.mark.parametrize("terminal", sorted(TERMINAL))
def test_terminal_states_have_no_exit(terminal: State) -> None:
    assert is_terminal(terminal)
    assert allowed(terminal) == frozenset()
    with pytest.raises(IllegalTransition, match="is terminal; propose a new action"):
        transition(terminal, S.APPROVED)


def test_a_page_waits_for_an_operator_and_ends_only_by_one() -> None:
    assert transition(S.PROPOSED, S.AWAITING_APPROVAL, "page_operator") is S.AWAITING_APPROVAL
    assert allowed(S.AWAITING_APPROVAL, "page_operator") == {S.SUCCEEDED, S.CANCELLED}
    for refused in (S.APPROVED, S.EXPIRED, S.SUPERSEDED):
        with pytest.raises(IllegalTransition, match="ends only by an operator"):
            transition(S.AWAITING_APPROVAL, refused, "page_operator")
    with pytest.raises(IllegalTransition):
        transition(S.PROPOSED, S.APPROVED, "page_operator")


def test_unknown_state_names_are_refused_by_name() -> None:
    with pytest.raises(IllegalTransition, match="unknown target state 'done'"):
        transition("proposed", "done")


@pytest.mark.parametrize("state", [S.SUCCEEDED, S.FAILED, S.EXPIRED, S.SUPERSEDED])
def test_a_finished_action_may_be_reopened_by_a_new_detection(state: State) -> None:
    assert reopen_refusal(state) is None


def test_a_cancelled_or_open_action_is_not_reopened() -> None:
    assert "an operator cancelled this exact plan" in str(reopen_refusal(S.CANCELLED))
    assert reopen_refusal(S.EXECUTING) == "it is still open (executing)"
