"""What the live cluster says about an action: bad input, still applies, how far, verified.

Pure functions over a `LiveView` (a live snapshot's model, the reassignments in flight and
the replicas being moved between dirs), so every rule is testable without Kafka:

- `problems`: the action cannot be for this cluster (another cluster id, a broker the
  cluster does not have, a log dir its broker does not have): refused, never stored.
- `applies`: re-read before acting. A plan whose premises no longer hold (the replica it
  replaces is online again, replicas moved, someone else's reassignment runs on its
  partitions, it is already in its target state) is stale and is superseded, never run.
- `status`: while executing, which partitions are done, in flight, or not started.
- `verify`: the target state, checked after the moves: the executor's last word.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from core.model import ClusterModel
from core.plan.disks import DEFAULT_THRESHOLD, broker_usage, is_skewed, skew
from schemas.plans import PartitionAssignment
from schemas.records import Action
from schemas.snapshot import Partition

TP = tuple[str, int]
MAX_REASONS = 5  # a verdict names this many partitions, then "and N more"


@dataclass(frozen=True, slots=True)
class Reassigning:
    """One partition reassignment in flight (ListPartitionReassignments)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True)
class LiveView:
    """The cluster as the executor just read it."""

    model: ClusterModel
    reassigning: Mapping[TP, Reassigning] = field(default_factory=dict)
    # (topic, partition, broker) -> the dir a replica is being moved to (a future replica)
    future: Mapping[tuple[str, int, int], str] = field(default_factory=dict)
    # Whole-cluster figures when `model` holds only some topics (KafkaCluster.read):
    # bytes per (broker, dir) and partitions led per broker; None: from `model`.
    all_dir_bytes: Mapping[tuple[int, str], int] | None = None
    all_leaders: Mapping[int, int] | None = None

    @property
    def dir_bytes(self) -> Mapping[tuple[int, str], int]:
        return self.model.dir_bytes if self.all_dir_bytes is None else self.all_dir_bytes

    @cached_property
    def leaders(self) -> Mapping[int, int]:
        if self.all_leaders is not None:
            return self.all_leaders
        return leader_counts(p.leader for p in self.model.partitions)

    @property
    def cluster_id(self) -> str:
        return self.model.snapshot.cluster_id

    @cached_property
    def _index(self) -> dict[TP, int]:
        return self.model.partition_index()

    def partition(self, topic: str, number: int) -> Partition | None:
        i = self._index.get((topic, number))
        return None if i is None else self.model.partitions[i]

    def reassignments_per_broker(self) -> dict[int, int]:
        """Reassignments in flight that touch each broker (the policy's concurrency limit)."""
        out: dict[int, int] = {}
        for r in self.reassigning.values():
            for b in set(r.replicas) | set(r.adding) | set(r.removing):
                out[b] = out.get(b, 0) + 1
        return out

    def online_dir(self, broker: int, path: str) -> bool:
        d = self.model.dirs.get(broker, {}).get(path)
        return d is not None and d.online


@dataclass(frozen=True, slots=True)
class Verdict:
    applies: bool
    reason: str


@dataclass(frozen=True, slots=True)
class Status:
    """Partitions of an executing action by progress; names with a few words each."""

    done: tuple[str, ...] = ()
    in_flight: tuple[str, ...] = ()
    not_started: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        return not self.in_flight and not self.not_started


def summarise(items: Iterable[str], limit: int = MAX_REASONS) -> str:
    """'a; b; c' cut to `limit` items, saying how many more there are."""
    items = list(items)
    shown = "; ".join(items[:limit])
    return shown + (f"; and {len(items) - limit} more" if len(items) > limit else "")


def _brokers_named(action: Action) -> set[int]:
    named = {b for t in action.targets() for b in t.replicas}
    if action.is_page:
        named |= set(action.plan["brokers"])
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


def leader_counts(leaders: Iterable[int]) -> dict[int, int]:
    """Partitions led per broker (-1, no leader, is not counted)."""
    out: dict[int, int] = {}
    for b in leaders:
        if b >= 0:
            out[b] = out.get(b, 0) + 1
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
            r = view.reassigning[(t.topic, t.partition)]
            stale.append(f"a reassignment of {t.name} is already in progress (adding "
                         f"{list(r.adding)}, removing {list(r.removing)}); not racing it")
            continue
        why = check(t, p, view)
        if why == _DONE:
            done += 1
        elif why is not None:
            stale.append(why)
    targets = action.targets()
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


_DONE = "done"


def _replicas(p: Partition) -> tuple[int, ...]:
    return tuple(r.broker for r in p.replicas)


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
    current = _replicas(p)
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
    if set(_replicas(p)) != set(t.replicas):
        return f"the replicas of {t.name} changed to {list(_replicas(p))} since the plan"
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
    current = _replicas(p)
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
    """Why the brokers this plan moves replicas on are not skewed; None when they are."""
    movers = sorted({b for (_, _, b) in dir_moves(action, view)})
    even = []
    for b in movers:
        dirs = broker_usage(view.model, b, view.dir_bytes)
        if not is_skewed(dirs, threshold):
            even.append(f"broker {b} is not skewed (its fullest dir is at {skew(dirs):.2f}x "
                        f"its mean usage, the threshold is {threshold:.2f}x)")
    return summarise(even) + "; nothing to even out" if even else None


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


def page_resolved(action: Action, view: LiveView) -> str | None:
    """How the live cluster shows a page's problem gone (every broker it names is up, every
    dir it names is online, or no longer one of its broker's dirs); None while it is not."""
    model = view.model
    brokers = [int(b) for b in action.plan["brokers"]]
    down = [b for b in brokers if b not in model.alive]
    offline = [f"{path} on broker {b}" for b in brokers for path in action.plan["log_dirs"]
               if path in model.dirs.get(b, {}) and not model.dirs[b][path].online]
    if down or offline:
        return None
    named = [f"broker {b}" for b in brokers] + list(action.plan["log_dirs"])
    return ("resolved: the live cluster no longer shows the problem ("
            + (", ".join(named) or "nothing named") + " up and online)")


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
        elif _replicas(p) == t.replicas:
            done.append(f"{t.name}: replicas {list(t.replicas)}")
        elif set(_replicas(p)) > set(t.replicas):
            # The controller is done (or about to be) but this broker's metadata still
            # lists the replicas being removed: it catches up within moments.
            flying.append(f"{t.name}: finishing, metadata still lists {list(_replicas(p))}")
        else:
            waiting.append(f"{t.name}: replicas {list(_replicas(p))}, target {list(t.replicas)}, "
                           "no reassignment in flight")
    return Status(tuple(done), tuple(flying), tuple(waiting))


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


def dir_moves(action: Action, view: LiveView) -> dict[tuple[str, int, int], str]:
    """Replicas not yet in the dir the plan names: (topic, partition, broker) -> dir.

    For a fix, only replicas that exist already and whose broker takes intra-broker
    moves (none of its dirs offline); the others are placed by the reassignment itself.
    """
    model = view.model
    out: dict[tuple[str, int, int], str] = {}
    for t in action.targets():
        p = view.partition(t.topic, t.partition)
        if p is None:
            continue
        dirs = {r.broker: r.log_dir for r in p.replicas}
        for b in t.replicas:
            path = t.dir_of(b)
            if (path is None or b not in dirs or dirs[b] == path
                    or b in model.brokers_with_offline_dir or b not in model.alive):
                continue
            if view.future.get((t.topic, t.partition, b)) == path:
                continue  # already on its way
            out[(t.topic, t.partition, b)] = path
    return out


def verify(action: Action, view: LiveView) -> list[str]:
    """What still differs from the plan's target state; empty when it is reached."""
    if action.is_page or action.type == "assign_consumers":
        return []
    model = view.model
    out: list[str] = []
    elect = set(action.elections())
    for t in action.targets():
        p = view.partition(t.topic, t.partition)
        if p is None:
            out.append(f"{t.name} no longer exists")
            continue
        current = _replicas(p)
        if (t.topic, t.partition) in view.reassigning:
            out.append(f"{t.name} is still being reassigned")
        if action.type == "move_replica_dirs":
            if set(current) != set(t.replicas):
                out.append(f"{t.name} has replicas {list(current)}, the plan {list(t.replicas)}")
        elif current != t.replicas:
            out.append(f"{t.name} has replicas {list(current)}, the plan {list(t.replicas)}")
        offline = sorted(r.broker for r in p.replicas if model.is_offline(r))
        if offline:
            out.append(f"{t.name} has offline replicas on brokers {offline}")
        if action.type == "fix_offline_replicas":
            behind = sorted(set(t.replicas) - set(p.isr))
            if behind:
                out.append(f"{t.name}: brokers {behind} are not in the ISR yet")
        if action.type in ("move_replica_dirs", "fix_offline_replicas"):
            out.extend(_misplaced(t, p, view))
        if (t.topic, t.partition) in elect and p.leader != t.replicas[0]:
            out.append(f"{t.name} is led by broker {p.leader}, the plan wants {t.replicas[0]}")
    return out


def _misplaced(t: PartitionAssignment, p: Partition, view: LiveView) -> list[str]:
    model = view.model
    dirs = {r.broker: r.log_dir for r in p.replicas}
    out = []
    for b in t.replicas:
        path = t.dir_of(b)
        # A broker with an offline dir cannot say where a replica sits, nor move it.
        if path is None or b in model.brokers_with_offline_dir:
            continue
        if (t.topic, t.partition, b) in view.future:
            out.append(f"{t.name} on broker {b} is still moving to {path}")
        elif dirs.get(b) != path:
            out.append(f"{t.name} on broker {b} is in {dirs.get(b)}, the plan says {path}")
    return out
