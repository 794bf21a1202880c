"""The action state machine: which state may follow which, and nothing else.

Remediations run proposed -> (awaiting_approval ->) approved -> executing -> verifying ->
succeeded. Pages for the operator (`page_operator`) cannot be executed by software: they
wait for a human, who resolves them (succeeded) or cancels them; they never expire or
get superseded, so a page is never silently closed.

A terminal action is never moved on. The same problem detected again has the same id
(the id hashes the target state); such an action is *re-opened* as a new attempt
(terminal -> proposed, audited) when the live cluster shows it applies again, except
after an operator cancelled it: a cancel says "not this", and stays.
"""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    PROPOSED = "proposed"
    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    EXECUTING = "executing"
    VERIFYING = "verifying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"


PAGE_OPERATOR = "page_operator"

TERMINAL: frozenset[State] = frozenset(
    {State.SUCCEEDED, State.FAILED, State.CANCELLED, State.EXPIRED, State.SUPERSEDED}
)
# Approved but not finished: the executor owns these and must resume them after a restart.
IN_FLIGHT: frozenset[State] = frozenset({State.APPROVED, State.EXECUTING, State.VERIFYING})

# Terminal states a re-detection may re-open (see the module docstring).
REOPENABLE: frozenset[State] = frozenset(
    {State.SUCCEEDED, State.FAILED, State.EXPIRED, State.SUPERSEDED}
)

_S = State
_REMEDIATION: dict[State, frozenset[State]] = {
    # superseded straight from proposed: the re-read on arrival found the plan stale.
    _S.PROPOSED: frozenset({_S.AWAITING_APPROVAL, _S.APPROVED, _S.SUPERSEDED}),
    _S.AWAITING_APPROVAL: frozenset({_S.APPROVED, _S.CANCELLED, _S.EXPIRED, _S.SUPERSEDED}),
    _S.APPROVED: frozenset({_S.EXECUTING, _S.CANCELLED, _S.SUPERSEDED}),
    _S.EXECUTING: frozenset({_S.VERIFYING, _S.FAILED, _S.CANCELLED}),
    _S.VERIFYING: frozenset({_S.SUCCEEDED, _S.FAILED}),
}
_PAGE: dict[State, frozenset[State]] = {
    _S.PROPOSED: frozenset({_S.AWAITING_APPROVAL}),
    _S.AWAITING_APPROVAL: frozenset({_S.SUCCEEDED, _S.CANCELLED}),
}


class IllegalTransition(ValueError):
    """A state change the lifecycle does not allow; the action keeps its current state."""

    def __init__(self, current: str, target: str, action_type: str | None, message: str) -> None:
        super().__init__(message)
        self.current = current
        self.target = target
        self.action_type = action_type


def _state(value: str | State, role: str) -> State:
    try:
        return State(value)
    except ValueError:
        known = ", ".join(s.value for s in State)
        raise IllegalTransition(
            str(value), str(value), None, f"unknown {role} state {value!r}; known: {known}"
        ) from None


def allowed(current: str | State, action_type: str | None = None) -> frozenset[State]:
    """The states that may follow `current` for an action of `action_type`."""
    edges = _PAGE if action_type == PAGE_OPERATOR else _REMEDIATION
    return edges.get(_state(current, "current"), frozenset())


def is_terminal(state: str | State) -> bool:
    return _state(state, "current") in TERMINAL


def reopen_refusal(state: str | State) -> str | None:
    """Why an action in `state` cannot be re-opened by a new detection; None if it can."""
    cur = _state(state, "current")
    if cur in REOPENABLE:
        return None
    if cur is State.CANCELLED:
        return ("an operator cancelled this exact plan; it is not re-proposed (a changed "
                "cluster gives a new plan with a new id)")
    return f"it is still open ({cur})"


def transition(
    current: str | State, target: str | State, action_type: str | None = None
) -> State:
    """Return `target` as a State if the move is legal, else raise IllegalTransition."""
    cur = _state(current, "current")
    tgt = _state(target, "target")
    nxt = allowed(cur, action_type)
    if tgt in nxt:
        return tgt
    kind = f"a {action_type} action" if action_type else "an action"
    if cur in TERMINAL:
        why = f"{cur} is terminal; propose a new action instead"
    elif not nxt:
        why = "no state may follow it"
    else:
        why = "allowed next: " + ", ".join(sorted(s.value for s in nxt))
    if action_type == PAGE_OPERATOR and tgt not in nxt and cur not in TERMINAL:
        why += " (a page ends only by an operator resolving or cancelling it)"
    raise IllegalTransition(cur, tgt, action_type, f"{kind} cannot go {cur} -> {tgt}: {why}")
