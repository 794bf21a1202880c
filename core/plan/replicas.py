"""KIP-36 rack-aware replica assignment, as Kafka's `AdminUtils.assignReplicasToBrokers`.

Leaders go round robin over a rack-alternated broker list (racks sorted, brokers sorted
within each rack, one broker per rack in turn); followers start next to the leader,
shifted by `nextReplicaShift * numRacks` (rack-unaware: `nextReplicaShift`), and the
shift grows by one each time the leaders wrap around the list. A follower candidate is
skipped while its rack already holds a replica of the partition and some rack holds none
(and likewise for a broker already holding one). A fixed start index fixes both the
first leader's position and the initial shift; without one both are random, as in Kafka.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping

from core.plan.errors import PlanError
from core.plan.formats import Reassignment
from schemas.plans import PartitionAssignment


def _java_order(text: str) -> bytes:
    # Java sorts strings by UTF-16 code units; big-endian UTF-16 bytes sort the same way.
    return text.encode("utf-16-be", "surrogatepass")


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers taking one per rack in turn: racks in sorted order, ids sorted in a rack."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    queues = [by_rack[r] for r in sorted(by_rack, key=_java_order)]
    out: list[int] = []
    for turn in range(max((len(q) for q in queues), default=0)):
        out.extend(q[turn] for q in queues if turn < len(q))
    return out


def _follower_index(first: int, shift: int, k: int, n: int) -> int:
    return (first + 1 + (shift + k) % (n - 1)) % n


def assign_replicas(
    brokers: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    topic: str = "topic",
    ignore_racks: bool = False,
    rng: random.Random | None = None,
) -> Reassignment:
    """Replica lists for a new topic of `partitions` partitions, as Kafka would create them.

    `brokers` maps broker id to rack (None: no rack). Mixed racks are refused unless
    `ignore_racks`, as `kafka-topics.sh` does without `--disable-rack-aware`.
    """
    if partitions <= 0:
        raise PlanError("the number of partitions must be at least 1")
    if replication_factor <= 0:
        raise PlanError("the replication factor must be at least 1")
    if replication_factor > len(brokers):
        raise PlanError(
            f"replication factor {replication_factor} is larger than the "
            f"{len(brokers)} brokers given"
        )
    if start_index is not None and start_index < 0:
        raise PlanError("--start-index must be 0 or more")
    with_rack = {b: r for b, r in brokers.items() if r is not None}
    if ignore_racks:
        with_rack = {}
    elif with_rack and len(with_rack) < len(brokers):
        missing = sorted(b for b, r in brokers.items() if r is None)
        which = (
            f"broker {missing[0]} has"
            if len(missing) == 1
            else "brokers " + ", ".join(map(str, missing)) + " have"
        )
        raise PlanError(
            f"{which} no rack while others have one; give every broker a rack, "
            "or pass --ignore-racks to assign without racks"
        )

    if with_rack:
        arranged = rack_alternated(with_rack)
        num_racks = len(set(with_rack.values()))
    else:
        arranged = sorted(brokers)  # as Kafka's callers sort the metadata by id
        num_racks = 1
    n = len(arranged)
    if start_index is None:
        rng = rng or random.Random()
        start, shift = rng.randrange(n), rng.randrange(n)
    else:
        start = shift = start_index

    out: list[PartitionAssignment] = []
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [arranged[first]]
        if with_rack:
            _add_rack_aware_followers(
                replicas,
                arranged,
                with_rack,
                first,
                shift * num_racks,  # rack-aware: the follower shift grows by whole racks
                replication_factor,
                num_racks,
            )
        else:
            replicas += [
                arranged[_follower_index(first, shift, k, n)] for k in range(replication_factor - 1)
            ]
        out.append(PartitionAssignment(topic, p, tuple(replicas)))
    return Reassignment(tuple(out))


def _add_rack_aware_followers(
    replicas: list[int],
    arranged: list[int],
    racks: Mapping[int, str],
    first: int,
    shift: int,
    replication_factor: int,
    num_racks: int,
) -> None:
    n = len(arranged)
    used_racks = {racks[replicas[0]]}
    k = 0
    while len(replicas) < replication_factor:
        broker = arranged[_follower_index(first, shift, k, n)]
        k += 1
        rack = racks[broker]
        if rack in used_racks and len(used_racks) < num_racks:
            continue  # a rack with no replica yet comes first
        if broker in replicas and len(replicas) < n:
            continue
        replicas.append(broker)
        used_racks.add(rack)


def explain(plan: Reassignment, brokers: Mapping[int, str | None]) -> str:
    """Leaders and replicas per broker, racks per partition."""
    leaders = Counter(p.replicas[0] for p in plan.partitions)
    replicas = Counter(b for p in plan.partitions for b in p.replicas)
    spans = Counter(len({brokers[b] for b in p.replicas}) for p in plan.partitions)
    lines = [f"{len(plan.partitions)} partitions over {len(brokers)} brokers"]
    for b in sorted(brokers):
        rack = brokers[b] or "no rack"
        lines.append(f"  broker {b} ({rack}): {leaders[b]} leaders, {replicas[b]} replicas")
    lines.append(
        "racks per partition: "
        + ", ".join(f"{span} racks x {count}" for span, count in sorted(spans.items()))
    )
    return "\n".join(lines)
