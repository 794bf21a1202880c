"""Replace offline replicas (dead broker, failed dir) by new ones on healthy brokers.

For each partition with an offline replica, its online replicas stay where they are and
each offline one is replaced by a replica on another alive broker with an online dir:
first on racks the partition does not span yet, then by least load (replica count,
then bytes), into that broker's online dir with the most free space. A broker with an
offline dir is taken only when no healthy broker serves as well (a rack the partition
lacks still beats a healthy broker on a rack it has), and with log dir "any": Kafka
refuses to place a replica in a named dir there.
"""

from __future__ import annotations

import heapq
from collections import Counter

from core.model import ClusterModel
from core.plan.formats import OfflinePlan, Reassignment, Unrecoverable, first_lines, human_bytes
from schemas.plans import ANY_DIR, PartitionAssignment
from schemas.snapshot import NO_LEADER, Partition

_Entry = tuple[int, int, int]  # (replica count, bytes, broker)


class _Load:
    """Replica count and bytes per candidate broker, with one lazy heap per rack."""

    def __init__(self, model: ClusterModel, brokers: list[int]) -> None:
        self.count = {b: model.replica_counts[b] for b in brokers}
        self.bytes = {b: model.broker_bytes[b] for b in brokers}
        self.rack = {b: model.rack_of[b] for b in brokers}
        self.heaps: dict[str | None, list[_Entry]] = {}
        for b in brokers:
            self.heaps.setdefault(self.rack[b], []).append((self.count[b], self.bytes[b], b))
        for heap in self.heaps.values():
            heapq.heapify(heap)

    def best_in(self, rack: str | None, exclude: set[int]) -> _Entry | None:
        """The least loaded broker of a rack, not in `exclude`."""
        heap = self.heaps[rack]
        held: list[_Entry] = []
        found: _Entry | None = None
        while heap:
            count, size, b = heap[0]
            if count != self.count[b] or size != self.bytes[b]:
                heapq.heappop(heap)  # stale: the broker was pushed again with its new load
            elif b in exclude:
                held.append(heapq.heappop(heap))
            else:
                found = heap[0]
                break
        for entry in held:
            heapq.heappush(heap, entry)
        return found

    def add(self, broker: int, size: int) -> None:
        self.count[broker] += 1
        self.bytes[broker] += size
        heapq.heappush(
            self.heaps[self.rack[broker]], (self.count[broker], self.bytes[broker], broker)
        )


class _Dirs:
    """Free space per online dir of the brokers that get new replicas."""

    def __init__(self, model: ClusterModel) -> None:
        self.model = model
        self.free: dict[int, dict[str, int]] = {}

    def take(self, broker: int, size: int) -> str:
        if broker not in self.free:
            model = self.model
            online = [path for path, d in model.dirs[broker].items() if d.online]
            known = {path: model.free_bytes(broker, path) for path in online}
            if all(v is not None for v in known.values()):
                self.free[broker] = {path: v or 0 for path, v in known.items()}
            else:  # no free space known on some dir: the least used dir has most room
                self.free[broker] = {path: -model.dir_bytes[(broker, path)] for path in online}
        free = self.free[broker]
        path = max(sorted(free), key=lambda p: free[p])
        free[path] -= size
        return path


def plan_offline(model: ClusterModel) -> OfflinePlan:
    """A reassignment for every partition with an offline replica; RF is kept."""
    candidates = [b for b in sorted(model.alive) if model.can_host(b)]
    healthy = [b for b in candidates if b not in model.brokers_with_offline_dir]
    degraded = [b for b in candidates if b in model.brokers_with_offline_dir]
    primary, fallback = _Load(model, healthy), _Load(model, degraded)
    dirs = _Dirs(model)

    planned: list[PartitionAssignment] = []
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
        size = max(r.size_bytes for r in p.replicas)
        exclude = {r.broker for r in p.replicas}
        racks = {model.rack_of[r.broker] for r in kept}
        picks: list[tuple[int, _Load]] = []
        for _ in range(len(p.replicas) - len(kept)):
            found = _pick((primary, fallback), racks, exclude)
            if found is None:
                break
            picks.append(found)
            exclude.add(found[0])
            racks.add(model.rack_of[found[0]])
        if len(kept) + len(picks) < len(p.replicas):
            unrecoverable.append(
                _unrecoverable(
                    p,
                    f"only {len(picks)} of the {len(p.replicas) - len(kept)} replacement "
                    "replicas fit: too few alive brokers with an online dir outside the "
                    "partition; add brokers or lower the replication factor",
                )
            )
            continue  # nothing booked: the brokers' load stays as it was
        new: list[tuple[int, str]] = []
        for pick, load in picks:
            load.add(pick, size)
            new.append((pick, dirs.take(pick, size) if load is primary else ANY_DIR))
        planned.append(_assignment(p, [r.broker for r in kept], new))
    return OfflinePlan(Reassignment(tuple(planned)), tuple(unrecoverable))


def _pick(
    loads: tuple[_Load, _Load], racks: set[str | None], exclude: set[int]
) -> tuple[int, _Load] | None:
    """Least loaded broker: on a rack the partition does not span yet if there is one,
    healthy before degraded (rack diversity wins over avoiding degraded brokers)."""
    best: dict[tuple[bool, int], tuple[_Entry, _Load]] = {}
    for rank, load in enumerate(loads):
        for rack in load.heaps:
            entry = load.best_in(rack, exclude)
            if entry is None:
                continue
            key = (rack is None or rack in racks, rank)
            if key not in best or entry < best[key][0]:
                best[key] = (entry, load)
    if not best:
        return None
    entry, load = best[min(best)]
    return entry[2], load


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


def explain(model: ClusterModel, plan: OfflinePlan) -> str:
    """What moves where, bytes to copy, offline replicas and rack spans before and after."""
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
    ]
    tail = [f"  unrecoverable {u.topic}-{u.partition}: {u.reason}" for u in plan.unrecoverable]
    return "\n".join(head + first_lines(lines) + first_lines(tail))


def _offline_count(model: ClusterModel) -> int:
    return sum(
        1
        for i in model.partitions_with_offline_replicas
        for r in model.partitions[i].replicas
        if model.is_offline(r)
    )


def _spans(counts: Counter[int]) -> str:
    return ", ".join(f"{k} racks x {n}" for k, n in sorted(counts.items())) or "none"
