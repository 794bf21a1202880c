"""Which approved action may start while others run: no fix waits behind a stuck one.

Two actions run side by side when they cannot get in each other's way: they touch
different partitions (two reassignments of one partition would replace each other), and
they set different throttle configs. The second rule is for the restore: each action
saves the values it finds and puts exactly those back at its end, so two actions setting
the same key on the same broker or topic would each restore the other's throttle (the
one that ends last leaves the first one's rate behind for good). The per-broker limit on
reassignments in flight is the policy's, ruled when the action was decided.

A throttle config is named as (resource, key), e.g. ("broker:3", leader rate). An action
in flight holds the keys its journal saved (set, not yet restored) and those it may still
set; a candidate would set the keys its plan needs on the live cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from remediation.executor import throttle
from remediation.executor.view import TP, LiveView, dir_moves
from schemas.records import Action

Key = tuple[str, str]  # (resource, config key)
INTER = (throttle.LEADER_RATE, throttle.FOLLOWER_RATE)
TOPIC_LISTS = (throttle.LEADER_REPLICAS, throttle.FOLLOWER_REPLICAS)


def partitions(action: Action) -> set[TP]:
    return {(t.topic, t.partition) for t in action.targets()}


def may_set(action: Action) -> set[Key]:
    """Every throttle key the action may set, from its plan alone (no read): the rates on
    each broker its targets name, its topics' replica lists, and the dir-move rate."""
    into_dirs = {(throttle.resource("broker", b), throttle.DIR_RATE) for t in action.targets()
                 for b in t.replicas if t.dir_of(b) is not None}
    if action.type == "move_replica_dirs":
        return into_dirs
    if action.type != "fix_offline_replicas":
        return set()  # leaders, consumers, pages: no data moves, no throttle
    brokers = {b for t in action.targets() for b in t.replicas}
    return (into_dirs | {(throttle.resource("broker", b), k) for b in brokers for k in INTER}
            | {(throttle.resource("topic", t.topic), k) for t in action.targets()
               for k in TOPIC_LISTS})


def held(action: Action, journal: Mapping[str, Any]) -> set[Key]:
    """The throttle keys an action in flight holds: those its journal saved and has not
    restored yet (sources outside its targets among them), and those it may still set."""
    out = may_set(action)
    for entry in dict(journal.get("throttles", {})).values():
        if not entry.get("restored"):
            out |= {(res, k) for res, keys in entry.get("saved", {}).items() for k in keys}
    return out


def wanted(action: Action, view: LiveView) -> set[Key]:
    """The throttle keys a candidate needs on the live cluster (the replicas serving its
    copies included), and those its plan alone names."""
    out = may_set(action)
    if action.type == "fix_offline_replicas":
        rate = 1  # any positive rate: only which keys, not their values
        out |= {(res, k) for res, keys in throttle.inter_broker(action, view, rate).items()
                for k in keys}
    if action.type in ("move_replica_dirs", "fix_offline_replicas"):
        out |= {(res, k) for res, keys in throttle.intra_broker(dir_moves(action, view),
                                                                1).items() for k in keys}
    return out


def blocker(candidate: Action, view: LiveView,
            running: Iterable[tuple[str, Action, Mapping[str, Any]]]) -> str | None:
    """Why `candidate` must wait for an action in flight; None when it may start now.
    `running` holds (id, action, journal) of each action executing or verifying."""
    mine, keys = partitions(candidate), wanted(candidate, view)
    for action_id, action, journal in running:
        shared = sorted(mine & partitions(action))
        if shared:
            return (f"action {action_id[:12]} is moving {shared[0][0]}-{shared[0][1]}"
                    + (f" and {len(shared) - 1} more of its partitions" if len(shared) > 1
                       else ""))
        both = sorted(keys & held(action, journal))
        if both:
            res, key = both[0]
            return (f"action {action_id[:12]} holds the throttle {key} on {res} (each "
                    "restores what it found: the later end would leave the other's behind)")
    return None
