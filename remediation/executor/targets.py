"""Whether an executing action's targets are still alive, checked on every step.

A target is a broker the action adds replicas to, or a log dir it puts replicas in. A
broker that died takes the reassignments onto it nowhere (Kafka waits for it for ever);
a dir that failed takes the future replicas being moved into it with it, and the
replicas stay where they were. Either way that part of the action cannot end well, and
waiting for the execution timeout (an hour) leaves a partition short of copies all the
while: `dead` names such targets so the executor ends the action at once.

A broker that is registered but does not answer is not called dead here: the read
itself waits for it (`KafkaCluster.read`), as it may be restarting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from remediation.executor.view import TP, LiveView, replicas_of, summarise
from schemas.records import Action


@dataclass(frozen=True, slots=True)
class DeadTarget:
    """A broker (path None) or one of its dirs an action still needed, gone."""

    broker: int
    path: str | None
    partitions: tuple[TP, ...]
    adds: bool = True  # a dead broker the plan copies to; else one it moves dirs on

    def describe(self) -> str:
        names = summarise(f"{t}-{p}" for t, p in self.partitions)
        if self.path is None:
            verb = "adds replicas of {} to" if self.adds else "moves replicas of {} on"
            return f"broker {self.broker}, which the plan {verb.format(names)}, is down"
        return (f"log dir {self.path} on broker {self.broker}, which the plan puts replicas "
                f"of {names} in, is offline")


def adding(action: Action, view: LiveView) -> list[list[Any]]:
    """[topic, partition, broker] of each replica the action adds, from the cluster as
    found before it starts (kept in the journal: once a reassignment is done, the view
    no longer says which replicas were new)."""
    out: list[list[Any]] = []
    for t in action.targets():
        p = view.partition(t.topic, t.partition)
        have = set(replicas_of(p)) if p is not None else set()
        out.extend([t.topic, t.partition, b] for b in t.replicas if b not in have)
    return out


def dead(action: Action, view: LiveView, journal: Mapping[str, Any]) -> list[DeadTarget]:
    """The targets of an executing action that died, with the partitions each one had."""
    model = view.model
    found: dict[tuple[int, str | None], list[TP]] = {}
    added = _added(action, view, journal.get("adding"))
    for (topic, partition, broker) in added:
        if broker not in model.alive:
            found.setdefault((broker, None), []).append((topic, partition))
    moved_on: dict[int, list[TP]] = {}
    for t in action.targets():
        for b in t.replicas:
            path = t.dir_of(b)
            if path is None or (b, None) in found:
                continue
            if b not in model.alive:
                if (t.topic, t.partition, b) not in added:
                    moved_on.setdefault(b, []).append((t.topic, t.partition))
            elif (view.heard(b) and path in model.dirs.get(b, {})
                  and not view.online_dir(b, path)):
                found.setdefault((b, path), []).append((t.topic, t.partition))
    out = [DeadTarget(b, path, tuple(sorted(set(tps)))) for (b, path), tps in found.items()]
    out += [DeadTarget(b, None, tuple(sorted(set(tps))), adds=False)
            for b, tps in moved_on.items() if (b, None) not in found]
    return sorted(out, key=lambda g: (g.broker, g.path or ""))


def _added(action: Action, view: LiveView,
           kept: Iterable[Iterable[Any]] | None) -> set[tuple[str, int, int]]:
    """The replicas the action adds: as the journal kept them, and any a reassignment in
    flight on its partitions is adding now (an action started before the journal kept
    them, or an executor that crashed before writing it)."""
    out = {(str(t), int(p), int(b)) for t, p, b in (kept or ())}
    for t in action.targets():
        r = view.reassigning.get((t.topic, t.partition))
        if r is not None:
            out |= {(t.topic, t.partition, b) for b in r.adding}
    return out


def back_to_broken(action: Action, view: LiveView, cancelled: Iterable[TP]) -> list[str]:
    """Cancelled partitions whose original replicas include one that is offline (a fix
    of a failed dir or a dead broker): the cancel puts them back short of a copy, and
    the audit says so, so nobody reads "cancelled" as "as good as before the fault"."""
    model = view.model
    out = []
    for tp in sorted(cancelled):
        r = view.reassigning.get(tp)
        p = view.partition(*tp)
        if r is None or p is None:
            continue
        original = [b for b in r.replicas if b not in r.adding]
        bad = sorted(rep.broker for rep in p.replicas
                     if rep.broker in original and model.is_offline(rep))
        if bad:
            out.append(f"{tp[0]}-{tp[1]} is back on {original}, its replica on broker "
                       f"{bad[0]} offline")
    return out
