"""Even out the log dirs of each broker with intra-broker moves (KIP-113).

A dir's usage ratio is the bytes of its replicas over its `total_bytes`; on a broker
where some dir has no `total_bytes`, every dir there counts bytes alone. The target:
no dir above `threshold` x the broker's mean ratio (total bytes over total capacity, the
ratio every dir would have if perfectly even). Replicas move out of each dir above its
limit, into the dir with the most room below its own limit: the smallest replica that
clears the rest of the excess if one fits, else the largest that fits without
overshooting, repeated. That is a greedy answer to a subset-sum problem: per source dir
it moves less than the excess plus one replica.

Brokers with an offline dir are never touched (Kafka refuses AlterReplicaLogDirs there
until the dir is fixed or removed from log.dirs), nor brokers that are down.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import repeat
from math import ceil, floor
from operator import add, attrgetter, mul

from core.model import ClusterModel
from core.plan.errors import PlanError
from core.plan.formats import (
    DirMove,
    DiskPlan,
    Reassignment,
    SkippedBroker,
    first_lines,
    human_bytes,
)
from schemas import native
from schemas.plans import ANY_DIR, PartitionAssignment
from schemas.snapshot import DirReplicas
from schemas.snapshot_columns import PartitionColumns

DEFAULT_THRESHOLD = 1.10
# Limits are floats over byte counts; a dir within this share of its limit is at it, so
# float rounding never makes a balanced broker move a replica.
TOLERANCE = 1e-9


def over_limit(used: float, limit: float) -> bool:
    return used > limit * (1 + TOLERANCE)


@dataclass(slots=True)
class DirUsage:
    """One online dir of one broker as the planner sees it."""

    path: str
    capacity: float  # total_bytes, or 1 when the broker's dirs are compared by bytes alone
    used: int

    @property
    def ratio(self) -> float:
        return self.used / self.capacity


def broker_usage(model: ClusterModel, broker: int,
                 used: Mapping[tuple[int, str], int] | None = None) -> list[DirUsage]:
    """Usage of a broker's online dirs, in the units the threshold applies to; ``used``
    (bytes per dir) defaults to the model's own replicas."""
    dirs = [d for d in model.dirs[broker].values() if d.online]
    by_bytes = any(not d.total_bytes for d in dirs)  # null (or 0) capacity: compare bytes
    used = model.dir_bytes if used is None else used
    return [
        DirUsage(d.path, 1.0 if by_bytes else float(d.total_bytes or 1),
                 used.get((broker, d.path), 0))
        for d in dirs
    ]


def mean_ratio(dirs: list[DirUsage]) -> float:
    return sum(d.used for d in dirs) / sum(d.capacity for d in dirs)


Moves = list[tuple[int, int, str, str, int]]  # (partition index, broker, from, to, bytes)


def plan_disks(model: ClusterModel, threshold: float = DEFAULT_THRESHOLD) -> DiskPlan:
    """Intra-broker moves so that no dir is above `threshold` x its broker's mean ratio."""
    skipped = _skipped(model, threshold)
    found = _native(model, threshold, text=False)
    late, planned = _reference(model, threshold) if found is None else found
    if isinstance(planned, str):  # text is written only when asked for
        raise AssertionError("the core wrote text unasked")
    moves: list[DirMove] = []
    targets: dict[int, dict[int, str]] = {}  # partition index -> broker -> new dir
    for i, broker, source, target, size in planned:
        p = model.partitions[i]
        moves.append(DirMove(p.topic, p.partition, broker, source, target, size))
        targets.setdefault(i, {})[broker] = target
    return DiskPlan(_reassignment(model, targets), tuple(skipped + late), tuple(moves))


def plan_json(model: ClusterModel, threshold: float = DEFAULT_THRESHOLD) -> str:
    """`plan_disks(model, threshold)`'s JSON text, as `json.dumps(plan.to_json(),
    check_circular=False)` writes it. Over columns with the core built, the core plans
    and writes the reassignment (no record, dict or plan object), Python the skipped
    brokers; where it refuses (a topic or dir json.dumps would escape), Python writes
    that plan."""
    skipped = _skipped(model, threshold)
    found = _native(model, threshold, text=True)
    if found is not None and isinstance(found[1], str):
        late, text = found
        return f'{text}, "skipped": {json.dumps([s.to_json() for s in skipped + late])}}}'
    return json.dumps(plan_disks(model, threshold).to_json(), check_circular=False)


def _skipped(model: ClusterModel, threshold: float) -> list[SkippedBroker]:
    """The brokers nothing can move on, and why."""
    if not threshold >= 1.0:
        raise PlanError(f"--threshold must be 1.0 or more (got {threshold})")
    skipped: list[SkippedBroker] = []
    for broker in sorted(model.brokers):
        if broker not in model.alive:
            skipped.append(SkippedBroker(broker, "broker is down; nothing can move on it"))
        elif broker in model.brokers_with_offline_dir:
            bad = sorted(p for b, p in model.offline_dirs if b == broker)
            skipped.append(
                SkippedBroker(
                    broker,
                    f"log dir {', '.join(bad)} on broker {broker} is offline; intra-broker "
                    "moves are refused until it is fixed or removed from log.dirs",
                )
            )
    return skipped


def _movable(model: ClusterModel) -> list[int]:
    """The brokers `_skipped` leaves, in order."""
    return [b for b in sorted(model.brokers)
            if b in model.alive and b not in model.brokers_with_offline_dir]


def _reference(model: ClusterModel, threshold: float) -> tuple[list[SkippedBroker], Moves]:
    """The brokers left over the threshold, and the moves, planned in Python."""
    todo: dict[int, list[DirUsage]] = {}
    for broker in _movable(model):
        dirs = broker_usage(model, broker)
        if len(dirs) > 1 and _over(dirs, threshold):
            todo[broker] = dirs
    moves = [(i, broker, source, target, size)
             for broker, dirs in todo.items()
             for i, source, target, size in _balance(model, broker, dirs, threshold)]
    return _unreachable(todo, threshold), moves


def _unreachable(todo: dict[int, list[DirUsage]], threshold: float) -> list[SkippedBroker]:
    """The balanced brokers still over the threshold after their moves."""
    out: list[SkippedBroker] = []
    for broker, dirs in todo.items():
        if _over(dirs, threshold):
            worst = max(dirs, key=lambda d: d.ratio)
            out.append(
                SkippedBroker(
                    broker,
                    f"threshold not reachable: {worst.path} stays at "
                    f"{worst.ratio / mean_ratio(dirs):.2f}x the mean; no replica there fits "
                    "in another dir's room (the moves that help are planned)",
                )
            )
    return out


def _native(
    model: ClusterModel, threshold: float, text: bool
) -> tuple[list[SkippedBroker], str | Moves] | None:
    """`_reference`'s answer by the core over columns, with the reassignment's JSON text
    in place of the moves where `text` is asked and the names are plain; None where the
    core is absent or refuses."""
    parts, plan = model.partitions, native.function("disk_plan")
    if plan is None or not isinstance(parts, PartitionColumns):
        return None
    brokers = _movable(model)
    dirs = [[d for d in model.dirs[b].values() if d.online] for b in brokers]
    listed = [(b, [(d.path, d.total_bytes, d.cordoned) for d in mine])
              for b, mine in zip(brokers, dirs, strict=True)]
    try:
        found = plan(parts.columns, listed, threshold, TOLERANCE, text)
    except OverflowError:  # a figure over 64 bits: the reference handles any int
        return None
    if found is None:
        return None
    over, written, moves = found
    still = {
        brokers[k]: broker_usage(
            model, brokers[k], {(brokers[k], d.path): u for d, u in zip(dirs[k], used, strict=True)}
        )
        for k, used in over
    }
    late = _unreachable(still, threshold)
    if written is not None:
        return late, str(written)
    return late, [(i, brokers[k], dirs[k][s].path, dirs[k][t].path, size)
                  for i, k, s, t, size in moves]


def skew(dirs: list[DirUsage]) -> float:
    """The fullest dir's usage ratio over its broker's mean (1.0: even; 0 dirs or bytes: 1.0)."""
    if not dirs or not any(d.used for d in dirs):
        return 1.0
    return max(d.ratio for d in dirs) / mean_ratio(dirs)


def _over(dirs: list[DirUsage], threshold: float) -> bool:
    mean = mean_ratio(dirs)
    return any(over_limit(d.used, threshold * mean * d.capacity) for d in dirs)


def is_skewed(dirs: list[DirUsage], threshold: float) -> bool:
    """Some dir sits above `threshold` x its broker's mean ratio (what a plan evens out)."""
    return len(dirs) > 1 and any(d.used for d in dirs) and _over(dirs, threshold)


def _balance(
    model: ClusterModel, broker: int, dirs: list[DirUsage], threshold: float
) -> list[tuple[int, str, str, int]]:
    """Move replicas between the dirs of one broker; returns (partition, from, to, bytes)."""
    limit = _limits(model, broker, dirs, threshold)
    moved: list[tuple[int, str, str, int]] = []
    for source in sorted(dirs, key=lambda d: limit[d.path] - d.used):
        if not over_limit(source.used, limit[source.path]):
            break  # sorted by room: the rest are within their limits
        bucket = model.replicas_by_dir[(broker, source.path)]
        moved.extend(_drain(bucket, source, dirs, limit))
    return moved


def _limits(
    model: ClusterModel, broker: int, dirs: list[DirUsage], threshold: float
) -> dict[str, float]:
    """Each dir's most bytes: `threshold` x the broker's mean ratio x its capacity."""
    mean = mean_ratio(dirs)
    limit = {d.path: threshold * mean * d.capacity for d in dirs}
    for d in dirs:  # Kafka refuses a move into a cordoned dir (KIP-1066): it has no room
        if model.dirs[broker][d.path].cordoned:
            limit[d.path] = min(limit[d.path], d.used)
    return limit


def _drain(
    bucket: DirReplicas, source: DirUsage, dirs: list[DirUsage], limit: dict[str, float]
) -> list[tuple[int, str, str, int]]:
    """Move replicas out of `source` until it is within its limit or nothing fits."""
    fast = native.core()
    if fast is not None:
        at = next(k for k, d in enumerate(dirs) if d is source)
        try:
            done = fast.drain_dir(bucket.sizes, at, [d.used for d in dirs],
                                  [limit[d.path] for d in dirs], TOLERANCE)
        except OverflowError:  # a figure over 64 bits: the reference handles any int
            done = None
        if done is not None:
            taken, after = done
            for d, used in zip(dirs, after, strict=True):
                d.used = used
            return [(bucket.partitions[k], source.path, dirs[t].path, size)
                    for k, t, size in taken]
    return _drain_reference(bucket, source, dirs, limit)


def _drain_reference(
    bucket: DirReplicas, source: DirUsage, dirs: list[DirUsage], limit: dict[str, float]
) -> list[tuple[int, str, str, int]]:
    # A replica is one int, size x n + its place k in the dir's list (n replicas there,
    # listed by partition index): sorting those sorts by size, then partition index,
    # as plain ints (about twice as fast as sorting places by a key, and the partition
    # numbers are read only for the replicas that move). Size >= x or <= x for a
    # float x are bisections at ceil(x) x n and floor(x) x n + n - 1.
    moved: list[tuple[int, str, str, int]] = []
    n = len(bucket.sizes)
    keys = sorted(map(add, map(mul, bucket.sizes, repeat(n)), range(n)))
    while over_limit(source.used, limit[source.path]):
        excess = source.used - limit[source.path]
        target, room = source, float("-inf")  # the other dir with the most room
        for d in dirs:
            if d is not source and limit[d.path] - d.used > room:
                target, room = d, limit[d.path] - d.used
        # The smallest replica that clears the excess, if it fits.
        j = bisect_left(keys, ceil(excess) * n)
        if j == len(keys) or keys[j] // n > room:
            # No single replica clears the excess and fits: move the largest that fits
            # without overshooting, and look again.
            j = bisect_right(keys, floor(min(excess, room)) * n + n - 1) - 1
            if j < 0 or keys[j] < n:  # none, or one of 0 bytes
                break
        size, k = divmod(keys.pop(j), n)
        source.used -= size
        target.used += size
        moved.append((bucket.partitions[k], source.path, target.path, size))
    return moved


def _reassignment(model: ClusterModel, targets: dict[int, dict[int, str]]) -> Reassignment:
    # One entry per partition: its replica list unchanged, the moved replicas' new dirs.
    out: list[PartitionAssignment] = []
    broker_of = attrgetter("broker")
    for i in sorted(targets):
        p = model.partitions[i]
        brokers = tuple(map(broker_of, p.replicas))
        dirs = tuple(map(targets[i].get, brokers, repeat(ANY_DIR)))
        out.append(PartitionAssignment(p.topic, p.partition, brokers, dirs))
    return Reassignment(tuple(out))


def explain(model: ClusterModel, plan: DiskPlan, threshold: float = DEFAULT_THRESHOLD) -> str:
    """Fullest dir against its broker's mean, before and after, per broker and overall;
    the moves; the brokers skipped."""
    by_broker: dict[int, list[DirMove]] = {}
    for m in plan.moves:
        by_broker.setdefault(m.broker, []).append(m)
    total = sum(m.size_bytes for m in plan.moves)
    brokers: list[str] = []
    moves: list[str] = []
    worst_before = worst_after = 0.0
    for broker in sorted(by_broker):
        before = broker_usage(model, broker)
        after = {d.path: d for d in broker_usage(model, broker)}
        for m in by_broker[broker]:
            after[m.source].used -= m.size_bytes
            after[m.target].used += m.size_bytes
        mean = mean_ratio(before)
        peak_before = max(d.ratio for d in before) / mean
        peak_after = max(d.ratio for d in after.values()) / mean
        worst_before, worst_after = max(worst_before, peak_before), max(worst_after, peak_after)
        brokers.append(
            f"  broker {broker}: fullest dir {peak_before:.2f}x -> {peak_after:.2f}x the mean, "
            f"{len(by_broker[broker])} moves"
        )
        for m in by_broker[broker]:
            size = human_bytes(m.size_bytes)
            moves.append(
                f"  {m.topic}-{m.partition} on {broker}: {m.source} -> {m.target} ({size})"
            )
    head = [
        f"{len(plan.moves)} replicas move between dirs on {len(by_broker)} brokers, "
        + f"{human_bytes(total)} in all; target: fullest dir <= {threshold:.2f}x the broker mean",
    ]
    if by_broker:
        head.append(
            f"worst fullest dir on those brokers: {worst_before:.2f}x -> {worst_after:.2f}x "
            "the mean"
        )
    skipped = [f"  skipped broker {s.broker}: {s.reason}" for s in plan.skipped]
    return "\n".join(head + first_lines(brokers) + first_lines(moves) + first_lines(skipped))
