"""What the live cluster says about an action: bad input, still applies, how far, verified.

Pure functions over a `LiveView` (a live snapshot's model, the reassignments in flight and
the replicas being moved between dirs), so every rule is testable without Kafka:

- `problems`: the action cannot be for this cluster (another cluster id, a broker the
  cluster does not have, a log dir its broker does not have): refused, never stored.
- `applies`: re-read before acting. A plan whose premises no longer hold (the replica it
  replaces is online again, replicas moved, someone else's reassignment runs on its
  partitions, it is already in its target state) is stale and is superseded, never run.
  One that an operator's reassignment can never let finish pages them (`sharing.py`).
- `returned_broker`, `page_resolved`: a dead broker back, a page's problem gone.

How far an executing action is and whether it verifies: `progress.py`; the view itself
and the tallies: `view.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from core.plan.disks import DEFAULT_THRESHOLD, broker_usage, is_skewed, skew
from remediation.executor import sharing
from remediation.executor.view import (
    LiveView,
    dir_moves,
    replicas_of,
    summarise,
)
from schemas.plans import PartitionAssignment
from schemas.records import Action
from schemas.snapshot import Partition


@dataclass(frozen=True, slots=True)
class Verdict:
    applies: bool
    reason: str
    page: bool = False  # not to run now, and an operator must decide (sharing.NEVER)
    trimmed: tuple[str, ...] = ()  # partitions left to their operator; it runs on the rest


def _brokers_named(action: Action) -> set[int]:
    named = {b for t in action.targets() for b in t.replicas}
    if action.is_page:
        named |= set(action.plan["brokers"])
    if action.type in CORDON_TYPES:
        named.add(action.plan["broker"])
    return named


def problems(action: Action, view: LiveView) -> list[str]:
    """Why the action cannot be meant for this cluster; empty when it can."""
    model = view.model
    if action.cluster_id != view.cluster_id:
        return [f"the action is for cluster {action.cluster_id!r}; this executor serves "
                f"{view.cluster_id!r}"]
    out: list[str] = []
    known = sorted(model.brokers)
    for b in sorted(_brokers_named(action) - set(known)):
        out.append(f"the plan names broker {b}, which cluster {view.cluster_id} does not have "
                   f"(its brokers: {', '.join(map(str, known))})")
    for t in action.targets():
        for b in t.replicas:
            path = t.dir_of(b)
            if path is None or b not in model.dirs or path in model.dirs[b]:
                continue
            out.append(f"the plan puts {t.name} on broker {b} in {path}, which is not one of "
                       f"its log dirs ({', '.join(sorted(model.dirs[b]))})")
    return out


def applies(action: Action, view: LiveView,
            skew_threshold: float = DEFAULT_THRESHOLD) -> Verdict:
    """Whether the plan still fits the live cluster; the reason either way, in plain words.

    Beyond each partition's own state, the action's premise must hold: a dir move only on
    a broker whose dirs are skewed now (above ``skew_threshold`` x its mean), a leader
    plan only when its elections even out leaders. A record that merely looks right (a
    replay, or a correctly signed plan for a healthy cluster) touches nothing.
    """
    if action.is_page or action.type == "assign_consumers":
        return Verdict(True, "nothing on the cluster to re-check")
    if action.type in CORDON_TYPES:
        return _cordon_applies(action, view)
    check = {"fix_offline_replicas": _fix_offline_stale,
             "move_replica_dirs": _move_dirs_stale,
             "rebalance_leaders": _leaders_stale}[action.type]
    stale: list[str] = []
    done = 0
    for t in action.targets():
        p = view.partition(t.topic, t.partition)
        if p is None:
            stale.append(f"{t.name} no longer exists")
            continue
        if (t.topic, t.partition) in view.reassigning:
            continue  # someone else's: sharing.py says what it means, below
        why = check(t, p, view)
        if why == _DONE:
            done += 1
        elif why is not None:
            stale.append(why)
    targets = action.targets()
    others = sharing.theirs(action, view)
    never = [o.reason for o in others if o.kind == sharing.NEVER]
    if never:
        return Verdict(False, summarise(never), page=True)
    names = {o.name for o in others}
    if others and not stale and len(names) < len(_partitions(action)):
        return _trimmed(action, view, skew_threshold, others)
    stale += [o.reason for o in others]
    if stale:
        return Verdict(False, "the plan is stale: " + summarise(stale))
    if targets and done == len(targets):
        return Verdict(False, "the cluster is already in the plan's target state")
    false = (_skew_premise(action, view, skew_threshold) if action.type == "move_replica_dirs"
             else _leader_premise(action, view) if action.type == "rebalance_leaders"
             else None)
    if false is not None:
        return Verdict(False, "the plan's premise does not hold: " + false)
    return Verdict(True, f"re-read: the plan still applies to {len(targets) - done} of "
                         f"{len(targets)} partitions" if targets else "re-read: applies")


def _partitions(action: Action) -> set[tuple[str, int]]:
    return {(t.topic, t.partition) for t in action.targets()} | set(action.elections())


def _trimmed(action: Action, view: LiveView, skew_threshold: float,
             others: list[sharing.Theirs]) -> Verdict:
    """The action less the partitions an operator is reassigning, when the rest still
    applies as a plan of its own (its premise re-checked without them)."""
    left = "; left to the operator: " + summarise(o.reason for o in others)
    rest = applies(sharing.without(action, {o.name for o in others}), view, skew_threshold)
    if not rest.applies:
        return Verdict(False, rest.reason + left)
    return Verdict(True, rest.reason + left, trimmed=tuple(sorted(o.name for o in others)))


_DONE = "done"
CORDON_TYPES = frozenset({"cordon_log_dir", "uncordon_log_dir"})


def _cordon_applies(action: Action, view: LiveView) -> Verdict:
    """A cordon applies to an online, uncordoned dir of an alive broker; lifting one, to a
    dir that shows cordoned (whether the cordon is ours the executor checks itself)."""
    broker, path = action.plan["broker"], action.plan["log_dir"]
    model = view.model
    d = model.dirs.get(broker, {}).get(path)
    if d is None:
        return Verdict(False, f"broker {broker} has no log dir {path}")
    if broker not in model.alive:
        return Verdict(False, f"broker {broker} is down; a config change cannot reach it")
    if action.type == "cordon_log_dir":
        if d.cordoned:
            return Verdict(False, f"log dir {path} on broker {broker} is cordoned already")
        if not d.online:
            return Verdict(False, f"log dir {path} on broker {broker} is offline; nothing is "
                                  "placed there anyway")
        return Verdict(True, f"re-read: log dir {path} on broker {broker} is not cordoned")
    if not d.cordoned:
        return Verdict(False, f"log dir {path} on broker {broker} is not cordoned")
    return Verdict(True, f"re-read: log dir {path} on broker {broker} is cordoned")


def _can_take(view: LiveView, broker: int, t: PartitionAssignment) -> str | None:
    model = view.model
    if broker not in model.alive:
        return f"broker {broker}, which the plan copies {t.name} to, is down"
    if not model.can_host(broker):
        return f"broker {broker}, which the plan copies {t.name} to, has no online log dir"
    path = t.dir_of(broker)
    if path is not None and not view.online_dir(broker, path):
        return f"log dir {path} on broker {broker}, which the plan puts {t.name} in, is offline"
    return None


def _fix_offline_stale(t: PartitionAssignment, p: Partition, view: LiveView) -> str | None:
    model = view.model
    current = replicas_of(p)
    offline = {r.broker for r in p.replicas if model.is_offline(r)}
    if current == t.replicas and not offline:
        return _DONE
    if not offline:
        return f"{t.name} has no offline replica any more (replicas {list(current)})"
    dropped = set(current) - set(t.replicas)
    online_dropped = sorted(dropped - offline)
    if online_dropped:
        return (f"the plan drops the replica of {t.name} on broker {online_dropped[0]}, which "
                "is online now")
    kept_offline = sorted((set(current) & set(t.replicas)) & offline)
    if kept_offline:
        return (f"the plan keeps the replica of {t.name} on broker {kept_offline[0]}, which is "
                "offline now")
    for b in t.replicas:
        if b not in current:
            why = _can_take(view, b, t)
            if why is not None:
                return why
    return None


def _move_dirs_stale(t: PartitionAssignment, p: Partition, view: LiveView) -> str | None:
    model = view.model
    if set(replicas_of(p)) != set(t.replicas):
        return f"the replicas of {t.name} changed to {list(replicas_of(p))} since the plan"
    pending = 0
    dirs = {r.broker: r.log_dir for r in p.replicas}
    for b in t.replicas:
        path = t.dir_of(b)
        if path is None:
            continue
        if b not in model.alive:
            return f"broker {b}, whose replica of {t.name} the plan moves, is down"
        if b in model.brokers_with_offline_dir:
            return (f"broker {b} has an offline log dir; intra-broker moves are refused until "
                    "it is fixed or removed from log.dirs")
        if not view.online_dir(b, path):
            return f"log dir {path} on broker {b} is offline"
        moving = view.future.get((t.topic, t.partition, b))
        if moving is not None:
            return (f"the replica of {t.name} on broker {b} is already being moved to "
                    f"{moving}; not racing it")
        if dirs.get(b) != path:
            pending += 1
    return None if pending else _DONE


def _leaders_stale(t: PartitionAssignment, p: Partition, view: LiveView) -> str | None:
    model = view.model
    current = replicas_of(p)
    if set(current) != set(t.replicas):
        return f"the replicas of {t.name} changed to {list(current)} since the plan"
    preferred = t.replicas[0]
    if preferred not in model.alive:
        return f"broker {preferred}, the new preferred leader of {t.name}, is down"
    if preferred not in p.isr:
        return (f"broker {preferred} is not in the ISR of {t.name} (ISR {list(p.isr)}); the "
                "preferred election would fail")
    if current == t.replicas and p.leader == preferred:
        return _DONE
    return None


def _skew_premise(action: Action, view: LiveView, threshold: float) -> str | None:
    """Why none of the brokers this plan moves replicas on is skewed any more; None when
    one still is. A plan for several brokers (a scheduled rebalance) still runs when one
    of them evened out by itself meanwhile: its moves there were sized on a broker just
    over the threshold, and superseding the whole plan left a really skewed broker as it
    was until the next run (seen in a full test run: broker 1 at 2.0x kept, because
    broker 0 had gone from 1.15x to 1.00x)."""
    movers = sorted({b for (_, _, b) in dir_moves(action, view)})
    even = []
    for b in movers:
        dirs = broker_usage(view.model, b, view.dir_bytes)
        if not is_skewed(dirs, threshold):
            even.append(f"broker {b} is not skewed (its fullest dir is at {skew(dirs):.2f}x "
                        f"its mean usage, the threshold is {threshold:.2f}x)")
    return summarise(even) + "; nothing to even out" if even and len(even) == len(movers) \
        else None


def _leader_premise(action: Action, view: LiveView) -> str | None:
    """Why this plan's elections do not even out leaders; None when they do."""
    before = dict(view.leaders)
    after = dict(before)
    preferred = {(t.topic, t.partition): t.replicas[0] for t in action.targets()}
    for tp in action.elections():
        p = view.partition(*tp)
        new = preferred.get(tp)
        if p is None or new is None or p.leader == new:
            continue
        if p.leader >= 0:
            after[p.leader] -= 1
        after[new] = after.get(new, 0) + 1
    rack_of = view.model.rack_of

    def spread(counts: Mapping[int, int]) -> tuple[int, int]:
        racks: dict[str | None, int] = {}
        for b, n in counts.items():
            racks[rack_of.get(b)] = racks.get(rack_of.get(b), 0) + n
        return (sum(n * n for n in counts.values()), sum(n * n for n in racks.values()))

    if spread(after) < spread(before):
        return None
    shown = ", ".join(f"{b}: {before.get(b, 0)} -> {after.get(b, 0)}"
                      for b in sorted(set(before) | set(after)))
    return (f"its elections do not even out leaders by broker or rack (leaders per broker "
            f"now -> after: {shown})")


def returned_broker(action: Action, view: LiveView) -> int | None:
    """The broker a dead-broker fix is about, when the live cluster has it back."""
    broker = action.trigger.broker
    if action.trigger.kind == "broker_left" and broker is not None and broker in view.model.alive:
        return broker
    return None


def page_resolved(action: Action, view: LiveView) -> str | None:
    """How the live cluster shows a page's problem gone (every broker it names is up, every
    dir it names is online, or no longer one of its broker's dirs); None while it is not,
    and always for a page about neither dirs nor a departed broker ("no plan could be
    made": only a person can say it is over)."""
    model = view.model
    brokers = [int(b) for b in action.plan["brokers"]]
    dirs = list(action.plan["log_dirs"])
    if not dirs and not (brokers and action.trigger.kind == "broker_left"):
        return None  # its problem is not one the live cluster can show gone: for a person
    down = [b for b in brokers if b not in model.alive]
    offline = [f"{path} on broker {b}" for b in brokers for path in action.plan["log_dirs"]
               if path in model.dirs.get(b, {}) and not model.dirs[b][path].online]
    if down or offline:
        return None
    named = [f"broker {b}" for b in brokers] + list(action.plan["log_dirs"])
    return ("resolved: the live cluster no longer shows the problem ("
            + (", ".join(named) or "nothing named") + " up and online)")


