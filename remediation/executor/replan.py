"""A fresh plan at once for the partitions a dead target was to receive.

A fix whose target broker or dir died ends `failed` (`ending.py`) with its partitions
still short of a copy. The job would plan them again only after the dead-broker grace,
which protects against re-copying the data of a broker that may restart; it does not
apply to new copies aimed at a broker already gone. So the executor plans those
partitions again itself, from the live cluster, once no reassignment of theirs is in
flight any more (the cancel takes a moment), and proposes the plan through its own
intake (signed, checked and decided by policy like any action), linked both ways.
"""

from __future__ import annotations

from typing import Any

from core import clock
from core.plan.offline import plan_offline
from core.signing import ActionSigner
from remediation.executor.actions import stored_action
from remediation.executor.lifecycle import State
from remediation.executor.store import ActionRow, ActionStore
from remediation.executor.throttling import ACTOR
from remediation.executor.view import LiveView, summarise
from schemas.actions import build_action
from schemas.records import Action


def pending(row: ActionRow) -> list[tuple[str, int]]:
    """The partitions a failed action still has to have planned again; [] when none."""
    if row.state is not State.FAILED or row.journal.get("replanned") is not None:
        return []
    return [(str(t), int(p)) for t, p in row.journal.get("replan", ())]


def fresh_plan(row: ActionRow, view: LiveView, signer: ActionSigner) -> Action | str:
    """The re-plan of `row`'s pending partitions, signed; or why there is none (yet)."""
    wanted = set(pending(row))
    busy = sorted(tp for tp in wanted if tp in view.reassigning)
    if busy:
        return "wait"  # the cancel is still being applied
    plan = plan_offline(view.model)
    chosen = [t for t in plan.reassignment.partitions if (t.topic, t.partition) in wanted]
    if not chosen:
        stuck = [f"{u.topic}-{u.partition}: {u.reason}" for u in plan.unrecoverable
                 if (u.topic, u.partition) in wanted]
        return ("no live broker can take them, for the operator: " + summarise(stuck)
                if stuck else "nothing to plan again: "
                + summarise(f"{t}-{p}" for t, p in sorted(wanted)) + " have no offline "
                "replica now")
    sizes = {(p.topic, p.partition): max((r.size_bytes for r in p.replicas), default=0)
             for p in view.model.partitions}
    old = stored_action(row.record)
    body: dict[str, Any] = {"version": 1, "partitions": [t.to_json() for t in chosen]}
    now = clock.text()
    action = build_action(
        old.cluster_id, "fix_offline_replicas", body,
        reason=f"planned again at once for action {row.id[:12]}, whose target died "
               f"mid-way (no dead-broker grace: new copies were aimed at a broker or dir "
               f"already gone): {row.error or ''}"[:900],
        trigger=old.trigger, event_time=now, created_at=now,
        bytes_moved=sum(sizes.get((t.topic, t.partition), 0) for t in chosen))
    return signer.sign_action(action)


def link(store: ActionStore, row: ActionRow, new_id: str | None, what: str) -> None:
    """Mark `row` planned again (as `new_id`, and what became of it), once."""
    store.update_journal(row.id, replanned=new_id or "")
    store.note(row.id, ACTOR, f"planned again at once as action {new_id[:12]} ({what})"
               if new_id else f"not planned again: {what}")
