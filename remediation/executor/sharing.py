"""Reassignments the executor did not make: what an action does about each one.

Before an action is decided and again before it starts (its reassignment is submitted in
the same pass), the executor reads ListPartitionReassignments. No action of ours has
submitted anything then (one action executes at a time), so every reassignment in flight
on its partitions is someone else's, and it is never raced or cancelled. For each such
partition this says which of three it is:

- `REPAIRING`: the failure the action answers is being repaired by it (its target drops
  every offline replica and every broker it keeps or adds can hold the partition);
  nothing is proposed for that partition.
- `NEVER`: it can never finish (it adds a replica on a dead broker or on one with no
  online dir); the operator is paged with exactly that, and the fix waits for their
  decision (cancel theirs, then approve ours).
- `BUSY`: anything else (say a decommission under way); the action does not race it.

A `REPAIRING` or `BUSY` partition is trimmed from the action (`without`), which runs on
the rest when their premises hold; the journal's `trimmed` names what it left out, and
every later step reads the action as `in_force` (the stored record less those).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from remediation.executor.actions import stored_action
from remediation.executor.store import ActionRow
from remediation.executor.view import LiveView, Reassigning
from schemas.plans import REASSIGNMENT_TYPES
from schemas.records import Action
from schemas.snapshot import Partition

REPAIRING = "repairing"
NEVER = "never"
BUSY = "busy"


@dataclass(frozen=True, slots=True)
class Theirs:
    """One partition of an action under someone else's reassignment."""

    name: str
    kind: str  # REPAIRING, NEVER or BUSY
    reason: str


def target(r: Reassigning) -> list[int]:
    """The replica list a reassignment in flight ends at (ListPartitionReassignments'
    replicas hold the old and the new ones; the removing ones go)."""
    return [b for b in r.replicas if b not in r.removing]


def theirs(action: Action, view: LiveView) -> list[Theirs]:
    """Each of the action's partitions someone else is reassigning (its replica lists
    and its elections), and what it means."""
    out = []
    wanted = [(t.topic, t.partition) for t in action.targets()]
    wanted += [tp for tp in action.elections() if tp not in set(wanted)]
    for topic, partition in wanted:
        r = view.reassigning.get((topic, partition))
        p = view.partition(topic, partition)
        if r is not None and p is not None:
            out.append(classify(f"{topic}-{partition}", p, r, view))
    return out


def electable(action: Action, view: LiveView) -> tuple[list[tuple[str, int]], list[str]]:
    """The action's elections that may run now, and those left out: a partition someone
    is reassigning is never elected (its replica lists are done, so the reassignment in
    flight is not ours)."""
    busy = [tp for tp in action.elections() if tp in view.reassigning]
    return ([tp for tp in action.elections() if tp not in busy],
            [f"{t}-{p}" for t, p in busy])


def classify(name: str, p: Partition, r: Reassigning, view: LiveView) -> Theirs:
    model = view.model
    ends_at = target(r)
    shown = f"reassignment of {name} in flight (to {ends_at}, adding {list(r.adding)})"
    stuck = []
    # Kafka 4.4 ends a reassignment once its adding replicas are in the ISR (seen on the
    # sandbox: a target keeping a replica on a failed dir finished, that replica still
    # offline). Only a replica it adds on a broker that cannot hold it blocks it for good.
    for b in r.adding:
        if b not in model.alive:
            stuck.append(f"broker {b}, which it adds, is down")
        elif not model.can_host(b):
            stuck.append(f"broker {b}, which it adds, has no online log dir")
    if stuck:
        # The tool's --cancel cancels, then clears the rates of every broker its plan
        # names: against a down one that call times out and the tool exits 1 (Kafka 4.4).
        keep = (" --preserve-throttles, as a broker it names is down: its rates are cleared "
                "by hand once it is back" if set(r.adding) - model.alive else "")
        return Theirs(name, NEVER, f"the operator's {shown} can never finish: "
                      f"{'; '.join(stuck)}. Cancel it (kafka-reassign-partitions --cancel"
                      f"{keep}) or change its target; this fix waits for your decision")
    offline = [x.broker for x in p.replicas if model.is_offline(x)]
    if offline and not set(offline) & set(ends_at):
        return Theirs(name, REPAIRING, f"{name} is being repaired by a reassignment in "
                      f"flight (to {ends_at}, dropping the offline replica on broker(s) "
                      f"{offline}); nothing proposed for it")
    return Theirs(name, BUSY, f"a {shown} is the operator's (removing {list(r.removing)}); "
                  "not racing it")


def without(action: Action, names: Collection[str]) -> Action:
    """The action less the partitions named ('t-0'): their targets and their elections."""
    if not names:
        return action

    def keep(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [p for p in parts if f"{p['topic']}-{p['partition']}" not in names]

    plan = dict(action.plan)
    if action.type in REASSIGNMENT_TYPES:
        plan["partitions"] = keep(plan["partitions"])
    elif action.type == "rebalance_leaders":
        for part in ("reassignment", "election"):
            plan[part] = {**plan[part], "partitions": keep(plan[part]["partitions"])}
    return dataclasses.replace(action, plan=plan)


def in_force(row: ActionRow) -> Action:
    """The stored action less the partitions trimmed from it (left to their operator)."""
    return without(stored_action(row.record), row.journal.get("trimmed", ()))
