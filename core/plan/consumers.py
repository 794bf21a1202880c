"""KIP-881 rack-aware consumer assignment for one group of the snapshot.

`range` is the Java client's rack-aware `RangeAssignor` (Kafka 3.5+), step for step:
per topic, members in order (static members by group.instance.id first, then dynamic
ones by member id, compared as Java compares strings); when racks can help, each member
first takes up to its range quota of partitions with a replica on its rack (topics with
the same members and partition count are handed out together, partition p of each to
one member, to keep co-partitioning), then the rest go out as plain ranges.

`cooperative-sticky` has no previous assignment to stick to in a snapshot, so it is a
fresh balanced assignment: every member gets floor or ceil of the partitions when all
subscribe to the same topics (otherwise the most even counts the subscriptions allow:
no partition can pass, directly or along a chain, to an eligible member with two
fewer), and among the assignments with those counts
one with the fewest cross-rack partitions, found as a min-cost flow over classes of
interchangeable partitions and members. The Java assignor reaches balance by a
different search, so the two can differ partition by partition; the counts and the
cross-rack total are what both optimise.

A replica's rack is its broker's rack if the broker is alive: the Java client only knows
the racks of brokers in the metadata, which lists live brokers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from core.model import ClusterModel
from core.plan.errors import PlanError
from core.plan.flow import MinCostFlow
from core.plan.formats import ConsumerPlan, TopicPartition
from schemas.snapshot import ConsumerGroup, Member

STRATEGIES = ("range", "cooperative-sticky")

# topic -> partition number -> racks holding a replica (ordered by partition number)
TopicRacks = Mapping[str, Mapping[int, frozenset[str]]]


def _java_order(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def member_order(member: Member) -> tuple[int, bytes]:
    """Java's MemberInfo order: static members (by instance id) before dynamic ones."""
    if member.group_instance_id is not None:
        return (0, _java_order(member.group_instance_id))
    return (1, _java_order(member.member_id))


def topic_racks(model: ClusterModel, topics: Iterable[str]) -> dict[str, dict[int, frozenset[str]]]:
    """Replica racks per partition of the given topics (those in the snapshot)."""
    wanted = set(topics)
    found: dict[str, dict[int, frozenset[str]]] = {}
    alive, rack_of = model.alive, model.rack_of
    for p in model.partitions:
        if p.topic in wanted:
            racks = frozenset(
                rack
                for r in p.replicas
                if r.broker in alive and (rack := rack_of[r.broker]) is not None
            )
            found.setdefault(p.topic, {})[p.partition] = racks
    return {t: dict(sorted(parts.items())) for t, parts in found.items()}


def plan_consumers(model: ClusterModel, group: str, strategy: str = "range") -> ConsumerPlan:
    """A rack-aware assignment for `group`'s members over the snapshot's partitions."""
    groups = {g.group: g for g in model.snapshot.consumer_groups}
    if group not in groups:
        known = ", ".join(sorted(groups)) or "none"
        raise PlanError(f"group {group} is not in the snapshot's consumer_groups (found: {known})")
    if strategy not in STRATEGIES:
        raise PlanError(f"unknown strategy {strategy}; use one of {', '.join(STRATEGIES)}")
    members = groups[group].members
    racks = topic_racks(model, {t for m in members for t in m.topics})
    if strategy == "range":
        assignment = assign_range(members, racks)
    else:
        assignment = assign_cooperative_sticky(members, racks)
    return ConsumerPlan(group, assignment, cross_rack(members, assignment, racks))


def cross_rack(
    members: Iterable[Member],
    assignment: Mapping[str, Iterable[TopicPartition]],
    racks: TopicRacks,
) -> int:
    """Partitions given to a member with a rack where no replica sits on that rack."""
    rack_of = {m.member_id: m.rack for m in members}
    return sum(
        1
        for member, tps in assignment.items()
        if rack_of[member] is not None
        for tp in tps
        if rack_of[member] not in racks[tp.topic][tp.partition]
    )


# --- range --------------------------------------------------------------------------


@dataclass
class _TopicState:
    """One topic's progress, as the Java assignor's TopicAssignmentState."""

    topic: str
    consumers: dict[str, str | None]  # member -> rack, in assignment order
    partition_racks: dict[int, frozenset[str]]  # empty when no member has a rack
    unassigned: dict[int, None]  # an ordered set of partition numbers
    per_consumer: int
    extra_left: int
    needs_rack_aware: bool
    assigned: dict[str, int] = field(default_factory=dict)

    def max_assignable(self, member: str) -> int:
        quota = self.per_consumer + (1 if self.extra_left > 0 else 0)
        return max(0, quota - self.assigned[member])

    def racks_match(self, member: str, partition: int) -> bool:
        rack = self.consumers[member]
        return rack is None or rack in self.partition_racks.get(partition, ())

    def give(
        self, member: str, partitions: list[int], out: dict[str, list[TopicPartition]]
    ) -> None:
        out[member].extend(TopicPartition(self.topic, p) for p in partitions)
        self.assigned[member] += len(partitions)
        if self.assigned[member] > self.per_consumer:
            self.extra_left -= 1
        for p in partitions:
            del self.unassigned[p]


def _topic_state(
    topic: str, members: list[Member], partitions: Mapping[int, frozenset[str]]
) -> _TopicState:
    consumers = {m.member_id: m.rack for m in sorted(members, key=member_order)}
    n, count = len(consumers), len(partitions)
    member_racks = {r for r in consumers.values() if r is not None}
    partition_racks = dict(partitions) if member_racks else {}
    all_racks = frozenset().union(*partition_racks.values()) if partition_racks else frozenset()
    needs = (
        bool(member_racks)
        and not member_racks.isdisjoint(all_racks)
        and not all(r == all_racks for r in partition_racks.values())
    )
    return _TopicState(
        topic=topic,
        consumers=consumers,
        partition_racks=partition_racks,
        unassigned=dict.fromkeys(partitions),
        per_consumer=count // n if n else 0,
        extra_left=count % n if n else 0,
        needs_rack_aware=needs,
        assigned=dict.fromkeys(consumers, 0),
    )


def _assign_ranges(
    state: _TopicState, out: dict[str, list[TopicPartition]], rack_match: bool
) -> None:
    for member in state.consumers:
        if not state.unassigned:
            break
        limit = state.max_assignable(member)
        take: list[int] = []
        for p in state.unassigned:
            if len(take) >= limit:
                break
            if not rack_match or state.racks_match(member, p):
                take.append(p)
        if take:
            state.give(member, take, out)


def _assign_co_partitioned(
    consumers: list[str],
    count: int,
    states: list[_TopicState],
    out: dict[str, list[TopicPartition]],
) -> None:
    remaining = list(consumers)
    for p in range(count):
        match = next(
            (
                c
                for c in remaining
                if all(
                    p in t.unassigned and t.racks_match(c, p) and t.max_assignable(c) > 0
                    for t in states
                )
            ),
            None,
        )
        if match is None:
            continue
        for t in states:
            t.give(match, [p], out)
        if not any(t.max_assignable(match) > 0 for t in states):
            remaining.remove(match)
            if not remaining:
                break


def assign_range(
    members: Iterable[Member], racks: TopicRacks
) -> dict[str, tuple[TopicPartition, ...]]:
    """The Java client's rack-aware RangeAssignor (3.5+) on these members and replicas."""
    members = list(members)
    out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
    by_topic: dict[str, list[Member]] = defaultdict(list)
    for m in members:
        for topic in dict.fromkeys(m.topics):
            by_topic[topic].append(m)
    states = [
        _topic_state(topic, subscribers, racks[topic])
        for topic, subscribers in sorted(by_topic.items())
        if racks.get(topic)
    ]
    if any(s.needs_rack_aware for s in states):
        groups: dict[frozenset[tuple[str, str | None]], list[_TopicState]] = defaultdict(list)
        for s in states:
            groups[frozenset(s.consumers.items())].append(s)
        for same_members in groups.values():
            by_count: dict[int, list[_TopicState]] = defaultdict(list)
            for s in same_members:
                by_count[len(s.partition_racks)].append(s)
            for count, co_partitioned in by_count.items():
                if len(co_partitioned) > 1:
                    consumers = list(co_partitioned[0].consumers)
                    _assign_co_partitioned(consumers, count, co_partitioned, out)
                elif co_partitioned[0].needs_rack_aware:
                    _assign_ranges(co_partitioned[0], out, rack_match=True)
    for s in states:
        _assign_ranges(s, out, rack_match=False)
    return {m: tuple(sorted(tps)) for m, tps in out.items()}


# --- cooperative-sticky -------------------------------------------------------------


def assign_cooperative_sticky(
    members: Iterable[Member], racks: TopicRacks
) -> dict[str, tuple[TopicPartition, ...]]:
    """A fresh balanced assignment with the fewest cross-rack partitions for its counts."""
    members = sorted(members, key=member_order)
    if not members:
        return {}
    topics_of = {m.member_id: frozenset(t for t in m.topics if racks.get(t)) for m in members}
    partitions = sorted(
        TopicPartition(t, p) for t in set().union(*topics_of.values()) for p in racks[t]
    )
    homogeneous = len(set(topics_of.values())) == 1
    if homogeneous:
        base, extra = divmod(len(partitions), len(members))
        counts = dict.fromkeys(topics_of, base)
    else:
        counts, extra = _balanced_counts(members, topics_of, partitions), 0
    return _most_local(members, topics_of, partitions, racks, counts, extra)


def _balanced_counts(
    members: list[Member], topics_of: dict[str, frozenset[str]], partitions: list[TopicPartition]
) -> dict[str, int]:
    """Per-member counts for mixed subscriptions: greedy by fewest eligible members, then
    shortest chains of hand-offs from a member to an eligible one with two fewer, until
    there is none (the most even counts the subscriptions allow)."""
    eligible = {
        t: [m.member_id for m in members if t in topics_of[m.member_id]]
        for t in {tp.topic for tp in partitions}
    }
    owned: dict[str, set[TopicPartition]] = {m: set() for m in topics_of}
    for tp in sorted(partitions, key=lambda tp: (len(eligible[tp.topic]), tp)):
        owned[min(eligible[tp.topic], key=lambda c: len(owned[c]))].add(tp)

    def chain_from(a: str) -> list[tuple[TopicPartition, str, str]]:
        parent: dict[str, tuple[str, TopicPartition] | None] = {a: None}
        frontier = [a]
        while frontier:
            nxt: list[str] = []
            for x in frontier:
                for tp in sorted(owned[x]):
                    for y in eligible[tp.topic]:
                        if y in parent:
                            continue
                        parent[y] = (x, tp)
                        if len(owned[y]) <= len(owned[a]) - 2:
                            steps: list[tuple[TopicPartition, str, str]] = []
                            node = y
                            while (step := parent[node]) is not None:
                                steps.append((step[1], step[0], node))
                                node = step[0]
                            return steps
                        nxt.append(y)
            frontier = nxt
        return []

    improved = True
    while improved:
        improved = False
        for a in sorted(owned, key=lambda m: -len(owned[m])):
            for tp, giver, taker in chain_from(a):
                owned[giver].discard(tp)
                owned[taker].add(tp)
                improved = True
            if improved:
                break
    return {m: len(tps) for m, tps in owned.items()}


def _most_local(
    members: list[Member],
    topics_of: dict[str, frozenset[str]],
    partitions: list[TopicPartition],
    racks: TopicRacks,
    counts: dict[str, int],
    extra: int,
) -> dict[str, tuple[TopicPartition, ...]]:
    """Fill the member counts (plus `extra` single spare slots, one per member at most)
    with the fewest cross-rack partitions: a min-cost flow over member classes (same
    topics, same rack) and partition classes (same topic subscribers, same racks)."""
    member_class: dict[tuple[frozenset[str], str | None], list[str]] = defaultdict(list)
    for m in members:
        member_class[(topics_of[m.member_id], m.rack)].append(m.member_id)
    classes = list(member_class)
    part_class: dict[tuple[frozenset[int], frozenset[str]], list[TopicPartition]] = defaultdict(
        list
    )
    for tp in partitions:
        who = frozenset(k for k, (topics, _) in enumerate(classes) if tp.topic in topics)
        part_class[(who, racks[tp.topic][tp.partition])].append(tp)
    pclasses = list(part_class)

    # Nodes: source, sink, spare, member classes, partition classes.
    source, sink, spare = 0, 1, 2
    flow = MinCostFlow(3 + len(classes) + len(pclasses))
    m_node = {k: 3 + k for k in range(len(classes))}
    p_node = {k: 3 + len(classes) + k for k in range(len(pclasses))}
    spare_edge: dict[int, int] = {}
    for k, key in enumerate(classes):
        ids = member_class[key]
        flow.add(m_node[k], sink, sum(counts[m] for m in ids), 0)
        if extra:
            spare_edge[k] = flow.add(m_node[k], spare, min(len(ids), extra), 0)
    if extra:
        flow.add(spare, sink, extra, 0)
    link: dict[tuple[int, int], int] = {}
    for j, (who, where) in enumerate(pclasses):
        flow.add(source, p_node[j], len(part_class[(who, where)]), 0)
        for k in who:
            rack = classes[k][1]
            cost = 0 if rack is None or rack in where else 1
            link[(j, k)] = flow.add(p_node[j], m_node[k], len(partitions), cost)
    flow.run(source, sink)

    out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
    for k, key in enumerate(classes):
        ids = member_class[key]
        spares = flow.used(spare_edge[k]) if k in spare_edge else 0
        room = {m: counts[m] + (1 if n < spares else 0) for n, m in enumerate(ids)}
        given: list[TopicPartition] = []
        for j, pkey in enumerate(pclasses):
            if (j, k) in link and (n := flow.used(link[(j, k)])):
                pool = part_class[pkey]
                given += pool[:n]
                del pool[:n]
        # Round robin over the class so each member sees a spread of topics.
        turn = 0
        for tp in sorted(given):
            while room[ids[turn % len(ids)]] == 0:
                turn += 1
            member_id = ids[turn % len(ids)]
            out[member_id].append(tp)
            room[member_id] -= 1
            turn += 1
    return {m: tuple(sorted(tps)) for m, tps in out.items()}


def explain(model: ClusterModel, plan: ConsumerPlan) -> str:
    """Partitions per member, and how many of them have no replica on the member's rack."""
    group: ConsumerGroup = next(g for g in model.snapshot.consumer_groups if g.group == plan.group)
    racks = topic_racks(model, {t for m in group.members for t in m.topics})
    total = sum(len(v) for v in plan.assignment.values())
    lines = [
        f"group {plan.group}: {total} partitions over {len(plan.assignment)} members, "
        + f"{plan.cross_rack} cross-rack"
    ]
    for m in sorted(group.members, key=member_order):
        tps = plan.assignment.get(m.member_id, ())
        remote = (
            0
            if m.rack is None
            else sum(1 for tp in tps if m.rack not in racks[tp.topic][tp.partition])
        )
        lines.append(
            f"  {m.member_id} ({m.rack or 'no rack'}): {len(tps)} partitions, {remote} cross-rack"
        )
    return "\n".join(lines)
