"""How far an executing action is, and whether the live cluster shows its target state.

- `status`: while executing, which partitions are done, in flight, or not started.
- `verify`: the target state, checked after the moves: the executor's last word.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.plan import recovery
from core.plan.formats import human_bytes
from remediation.executor.view import LiveView, replicas_of
from schemas.plans import PartitionAssignment
from schemas.records import Action
from schemas.snapshot import Partition


@dataclass(frozen=True, slots=True)
class Status:
    """Partitions of an executing action by progress; names with a few words each."""

    done: tuple[str, ...] = ()
    in_flight: tuple[str, ...] = ()
    not_started: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        return not self.in_flight and not self.not_started


def status(action: Action, view: LiveView) -> Status:
    """Progress of an executing action's moves, partition by partition."""
    done: list[str] = []
    flying: list[str] = []
    waiting: list[str] = []
    for t in action.targets():
        p = view.partition(t.topic, t.partition)
        if p is None:
            waiting.append(f"{t.name}: the partition is gone")
            continue
        r = view.reassigning.get((t.topic, t.partition))
        if r is not None:
            flying.append(f"{t.name}: adding {list(r.adding)}, removing {list(r.removing)}")
            continue
        if action.type == "move_replica_dirs":
            state = _dir_progress(t, p, view)
            {"done": done, "moving": flying, "waiting": waiting}[state[0]].append(state[1])
        elif replicas_of(p) == t.replicas:
            done.append(f"{t.name}: replicas {list(t.replicas)}")
        elif set(replicas_of(p)) > set(t.replicas):
            # The controller is done (or about to be) but this broker's metadata still
            # lists the replicas being removed: it catches up within moments.
            flying.append(f"{t.name}: finishing, metadata still lists {list(replicas_of(p))}")
        else:
            waiting.append(f"{t.name}: replicas {list(replicas_of(p))}, target {list(t.replicas)}, "
                           "no reassignment in flight")
    return Status(tuple(done), tuple(flying), tuple(waiting))


def time_left(action: Action, view: LiveView, rate: int) -> str:
    """A re-replication's estimate as it goes, from the sizes just read: '; about 4 min
    left at 50 MiB/s, broker 3 has the most to copy (12.0 GiB)'; "" for other actions or
    when the throttle is off. A new replica has copied what it holds so far."""
    if action.type != "fix_offline_replicas" or rate <= 0:
        return ""
    left: dict[int, int] = {}
    for t in action.targets():
        p = view.partition(t.topic, t.partition)
        if p is None:
            continue
        moving = view.reassigning.get((t.topic, t.partition))
        new = set(moving.adding) if moving is not None else set(t.replicas) - set(
            replicas_of(p))
        sizes = {r.broker: r.size_bytes for r in p.replicas}
        full = max((v for b, v in sizes.items() if b not in new), default=0)
        for b in new:
            left[b] = left.get(b, 0) + max(0, full - sizes.get(b, 0))
    if not left or max(left.values()) == 0:
        return ""
    most = max(left.values())
    b = min(x for x, v in left.items() if v == most)
    return (f"; {recovery.duration(most / rate)} left at {recovery.rate_text(rate)}, broker "
            f"{b} has the most to copy ({human_bytes(most)})")


def _dir_progress(t: PartitionAssignment, p: Partition, view: LiveView) -> tuple[str, str]:
    dirs = {r.broker: r.log_dir for r in p.replicas}
    moving, waiting = [], []
    for b in t.replicas:
        path = t.dir_of(b)
        if path is None:
            continue
        future = view.future.get((t.topic, t.partition, b))
        if future is not None:
            moving.append(f"broker {b} -> {future}")
        elif dirs.get(b) != path:
            waiting.append(f"broker {b} in {dirs.get(b)}, target {path}")
    if moving:
        return "moving", f"{t.name}: " + ", ".join(moving)
    if waiting:
        return "waiting", f"{t.name}: " + ", ".join(waiting)
    return "done", f"{t.name}: in its target dirs"


def verify(action: Action, view: LiveView) -> list[str]:
    """What still differs from the plan's target state; empty when it is reached.

    Reached means healthy, not merely listed: every target replica on an alive broker
    that answered this read (another's dirs are only the last known ones), online, in
    the ISR (for reassignments), and where the plan names a dir, in that dir with the
    dir online and no future replica left. A replica list alone can be stale: an offline
    dir keeps its replicas' last known paths, and a move whose future replica vanished
    leaves the replica where it was.
    """
    if action.is_page or action.type == "assign_consumers":
        return []
    out: list[str] = []
    elect = set(action.elections())
    for t in action.targets():
        p = view.partition(t.topic, t.partition)
        if p is None:
            out.append(f"{t.name} no longer exists")
            continue
        current = replicas_of(p)
        if (t.topic, t.partition) in view.reassigning:
            out.append(f"{t.name} is still being reassigned")
        if action.type == "move_replica_dirs":
            if set(current) != set(t.replicas):
                out.append(f"{t.name} has replicas {list(current)}, the plan {list(t.replicas)}")
        elif current != t.replicas:
            out.append(f"{t.name} has replicas {list(current)}, the plan {list(t.replicas)}")
        out.extend(_unhealthy(action, t, p, view))
        if (t.topic, t.partition) in elect and p.leader != t.replicas[0]:
            out.append(f"{t.name} is led by broker {p.leader}, the plan wants {t.replicas[0]}")
    return out


def _unhealthy(action: Action, t: PartitionAssignment, p: Partition,
               view: LiveView) -> list[str]:
    """Why the target replicas of one partition are not all online, in sync and placed."""
    model = view.model
    out: list[str] = []
    silent = sorted(b for b in t.replicas if b in model.alive and not view.heard(b))
    if silent:
        out.append(f"{t.name}: brokers {silent} did not answer DescribeLogDirs; where their "
                   "replicas are is not known")
    down = sorted(b for b in t.replicas if b not in model.alive)
    if down:
        out.append(f"{t.name}: brokers {down} are down")
    offline = sorted(r.broker for r in p.replicas
                     if model.is_offline(r) and r.broker in model.alive)
    if offline:
        out.append(f"{t.name} has offline replicas on brokers {offline}")
    if action.type != "move_replica_dirs":
        behind = sorted(set(t.replicas) - set(p.isr))
        if behind:
            out.append(f"{t.name}: brokers {behind} are not in the ISR yet")
    if action.type in ("move_replica_dirs", "fix_offline_replicas"):
        out.extend(_misplaced(action, t, p, view))
    return out


def _misplaced(action: Action, t: PartitionAssignment, p: Partition,
               view: LiveView) -> list[str]:
    model = view.model
    dirs = {r.broker: r.log_dir for r in p.replicas}
    out = []
    for b in t.replicas:
        path = t.dir_of(b)
        if path is None or not view.heard(b):
            continue  # said above
        if not view.online_dir(b, path):
            out.append(f"{t.name} on broker {b}: its target dir {path} is offline")
        elif (t.topic, t.partition, b) in view.future:
            out.append(f"{t.name} on broker {b} is still moving to {path}")
        elif dirs.get(b) != path:
            # A fix cannot place a replica on a broker with an offline dir (Kafka refuses
            # intra-broker moves there): healthy elsewhere on that broker is its best.
            if action.type == "fix_offline_replicas" and b in model.brokers_with_offline_dir:
                continue
            out.append(f"{t.name} on broker {b} is in {dirs.get(b)}, the plan says {path}")
    return out
