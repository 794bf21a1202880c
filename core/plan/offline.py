"""Replace offline replicas (dead broker, failed dir) by new ones on healthy brokers.

For each partition with an offline replica, its online replicas stay where they are and
each offline one is replaced by a replica on another alive broker with an online dir,
keeping the rules: first on racks the partition does not span yet (KIP-36's spread), a
broker with an offline dir only when no healthy broker serves as well (and with log dir
"any": Kafka refuses to place a replica in a named dir there), the leader first. Among
the plans that keep them, `core.plan.spread` picks the one whose busiest receiver copies
the least (docs/planning.md); on a healthy broker a new replica goes into the online
dir with the most free space that is not cordoned (KIP-1066: the broker refuses a new
replica or a move into a cordoned dir, so a plan naming one never completes), and a
broker whose online dirs are all cordoned receives nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from core.model import ClusterModel
from core.plan import recovery
from core.plan.bounds import lower_bounds
from core.plan.formats import OfflinePlan, Reassignment, Unrecoverable, first_lines, human_bytes
from core.plan.jbod import NO_OTHER_BROKER
from core.plan.spread import Job, Receiver, order, spread
from schemas.plans import ANY_DIR, PartitionAssignment
from schemas.snapshot import NO_LEADER, Partition

OBJECTIVE = (
    "objective: among plans that keep KIP-36's rack spread, the leader first and new "
    "replicas on online dirs, the busiest receiver copies the fewest bytes, then gets the "
    "fewest replicas, then holds the least after (docs/planning.md)"
)


def open_dirs(model: ClusterModel, broker: int) -> list[str]:
    """The dirs of ``broker`` a new replica may land in: online and not cordoned."""
    return [path for path, d in model.dirs[broker].items() if d.online and not d.cordoned]


class _Dirs:
    """Free space per open dir (`open_dirs`) of the brokers that get new replicas."""

    def __init__(self, model: ClusterModel) -> None:
        self.model = model
        self.free: dict[int, dict[str, int]] = {}

    def take(self, broker: int, size: int) -> str:
        if broker not in self.free:
            model = self.model
            online = open_dirs(model, broker)
            known = {path: model.free_bytes(broker, path) for path in online}
            if all(v is not None for v in known.values()):
                self.free[broker] = {path: v or 0 for path, v in known.items()}
            else:  # no free space known on some dir: the least used dir has most room
                self.free[broker] = {path: -model.dir_bytes[(broker, path)] for path in online}
        free = self.free[broker]
        path = max(sorted(free), key=lambda p: free[p])
        free[path] -= size
        return path


def work(model: ClusterModel) -> tuple[list[Job], list[Receiver], list[Unrecoverable]]:
    """The jobs (partitions to repair), the receivers, and what cannot be repaired."""
    candidates = [b for b in sorted(model.alive) if model.can_host(b) and open_dirs(model, b)]
    hosts = frozenset(candidates)
    degraded = model.brokers_with_offline_dir
    sizes = model.broker_bytes
    receivers = [Receiver(b, model.rack_of[b], b in degraded, sizes[b]) for b in candidates]
    jobs: list[Job] = []
    unrecoverable: list[Unrecoverable] = []
    for index in model.partitions_with_offline_replicas:
        p = model.partitions[index]
        kept = [r for r in p.replicas if not model.is_offline(r)]
        if not kept:
            unrecoverable.append(_unrecoverable(p, "no online replica: every copy is offline"))
            continue
        if p.leader == NO_LEADER and not set(p.isr).intersection(r.broker for r in kept):
            # A new replica copies from the leader, and none can be elected: the only
            # in-sync copies are offline. A reassignment would wait for ever.
            unrecoverable.append(_unrecoverable(
                p, "no leader, and every in-sync replica is offline (the online ones are "
                   "behind): bring the failed disk or broker back, or allow an unclean "
                   "leader election for this partition (what it had not copied is lost)"))
            continue
        exclude = frozenset(r.broker for r in p.replicas)
        need = len(p.replicas) - len(kept)
        free = len(hosts) - len(exclude & hosts)
        if free < need:
            unrecoverable.append(
                _unrecoverable(
                    p,
                    f"only {free} of the {need} replacement replicas fit: {NO_OTHER_BROKER}; "
                    "recover on the broker itself, add brokers or lower the replication "
                    "factor",
                )
            )
            continue
        racks = frozenset(rack for r in kept if (rack := model.rack_of[r.broker]) is not None)
        jobs.append(Job(index, max(r.size_bytes for r in p.replicas), need, racks, exclude))
    return jobs, receivers, unrecoverable


def plan_offline(model: ClusterModel) -> OfflinePlan:
    """A reassignment for every partition with an offline replica; RF is kept."""
    jobs, receivers, unrecoverable = work(model)
    new = spread(jobs, receivers)
    dirs = _Dirs(model)
    degraded = model.brokers_with_offline_dir
    # Dirs are taken in the greedy's order: the largest replicas get the roomiest dirs.
    placed: dict[int, list[tuple[int, str]]] = {}
    for job in order(jobs):
        placed[job.index] = [(b, ANY_DIR if b in degraded else dirs.take(b, job.size))
                             for b in new[job.index]]
    planned: list[PartitionAssignment] = []
    for job in jobs:
        p = model.partitions[job.index]
        kept = [r.broker for r in p.replicas if not model.is_offline(r)]
        planned.append(_assignment(p, kept, placed[job.index]))
    return OfflinePlan(Reassignment(tuple(planned)), tuple(unrecoverable))


def _assignment(p: Partition, kept: list[int], new: list[tuple[int, str]]) -> PartitionAssignment:
    # The preferred (first) replica must be able to lead now: the current leader if it
    # survives, else a survivor in the ISR; new replicas join at the end.
    isr = set(p.isr)
    order = sorted(kept, key=lambda b: (b != p.leader, b not in isr))
    replicas = tuple(order) + tuple(b for b, _ in new)
    log_dirs = (ANY_DIR,) * len(order) + tuple(d for _, d in new)
    return PartitionAssignment(p.topic, p.partition, replicas, log_dirs)


def _unrecoverable(p: Partition, reason: str) -> Unrecoverable:
    return Unrecoverable(p.topic, p.partition, tuple(r.broker for r in p.replicas), reason)


def received(model: ClusterModel, targets: Iterable[PartitionAssignment],
             index: dict[tuple[str, int], int] | None = None) -> tuple[recovery.Received, ...]:
    """Bytes and new replicas per receiving broker (a new replica copies the partition's
    largest replica), by broker id; ``index``: where the targets are in the model, when
    the caller knows (else every partition is indexed)."""
    index = index if index is not None else model.partition_index()
    new: list[tuple[int, int]] = []
    for a in targets:
        p = model.partitions[index[(a.topic, a.partition)]]
        before = {r.broker for r in p.replicas}
        size = max(r.size_bytes for r in p.replicas)
        new.extend((b, size) for b in a.replicas if b not in before)
    return recovery.tally(new)


def explain(model: ClusterModel, plan: OfflinePlan, rate: int = recovery.DEFAULT_RATE) -> str:
    """The objective, what each receiver copies and how long at `rate` (bytes/s per broker),
    what moves where, offline replicas and rack spans before and after."""
    index = model.partition_index()
    lines: list[str] = []
    copied = 0
    spans_before: Counter[int] = Counter()
    spans_after: Counter[int] = Counter()
    for a in plan.reassignment.partitions:
        p = model.partitions[index[(a.topic, a.partition)]]
        before = {r.broker for r in p.replicas}
        gone = [r for r in p.replicas if model.is_offline(r)]
        added = [
            (b, d) for b, d in zip(a.replicas, a.log_dirs or (), strict=True) if b not in before
        ]
        size = max(r.size_bytes for r in p.replicas)
        copied += size * len(added)
        online = [r.broker for r in p.replicas if not model.is_offline(r)]
        spans_before[len({model.rack_of[b] for b in online} - {None})] += 1
        spans_after[len({model.rack_of[b] for b in a.replicas} - {None})] += 1
        where = ", ".join(f"{r.broker}:{r.log_dir or '?'}" for r in gone)
        to = ", ".join(f"{b}:{d} ({model.rack_of[b] or 'no rack'})" for b, d in added)
        lines.append(
            f"  {a.topic}-{a.partition}: replace {where} with {to} ({human_bytes(size)} each)"
        )
    head = [
        (
            f"{len(plan.reassignment.partitions)} partitions repaired, "
            f"{len(plan.unrecoverable)} left to the operator, {human_bytes(copied)} to copy"
        ),
        f"offline replicas: {_offline_count(model)} before, 0 after in the planned partitions",
        "racks spanned by online replicas (before -> after): "
        + _spans(spans_before)
        + " -> "
        + _spans(spans_after),
        OBJECTIVE,
        *_receivers(model, plan, rate),
    ]
    tail = [f"  unrecoverable {u.topic}-{u.partition}: {u.reason}" for u in plan.unrecoverable]
    return "\n".join(head + first_lines(lines) + first_lines(tail))


def _receivers(model: ClusterModel, plan: OfflinePlan, rate: int) -> list[str]:
    got = received(model, plan.reassignment.partitions)
    top = recovery.busiest(got)
    if top is None:
        return []
    jobs, receivers, _ = work(model)
    least, fewest = lower_bounds(jobs, receivers)
    return [
        f"busiest receiver: broker {top.broker} copies {human_bytes(top.bytes)}; at most "
        f"{max(r.replicas for r in got)} new replicas on one broker; no plan does with less "
        f"than {human_bytes(least)} and {fewest} (the lower bounds)",
        f"recovery: {recovery.estimate(got, rate)}",
        "copied per broker (replicas): " + recovery.per_broker(got, limit=12),
    ]


def _offline_count(model: ClusterModel) -> int:
    return sum(
        1
        for i in model.partitions_with_offline_replicas
        for r in model.partitions[i].replicas
        if model.is_offline(r)
    )


def _spans(counts: Counter[int]) -> str:
    return ", ".join(f"{k} racks x {n}" for k, n in sorted(counts.items())) or "none"
