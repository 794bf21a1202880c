"""Kafka's rack-aware RangeAssignor (Java client 3.5+, KIP-881), the same assignment.

Per topic, members in Java's order (static members by group.instance.id first, then
dynamic ones by member id, compared as Java compares strings), each with a quota of
floor or ceil of the topic's partitions over its subscribers. When racks can help
(some member has a rack, some partition's replicas do not cover every rack), members
first take up to their quota of partitions with a replica on their rack: topics with
the same members and partition count together, partition p of each to one member (to
keep co-partitioning), other topics one member after the other, each taking the
first unassigned partitions on its rack. The rest go out as plain ranges.

Java rescans the unassigned partitions (and, for co-partitioned topics, the remaining
members) on every step; that is quadratic at 1,000 members x 10,000 partitions. Here
each rack keeps its partitions (and members) in order with a cursor that only moves
forward, past the ones already taken (or full): a taken partition stays taken and a
member's quota only shrinks, so what the cursor passed never comes back.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, groupby, starmap

from core.plan.formats import TopicPartition
from schemas.snapshot import Member

# topic -> partition number -> racks holding a replica (ordered by partition number)
TopicRacks = Mapping[str, Mapping[int, frozenset[str]]]


def _java_order(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def member_order(member: Member) -> tuple[int, bytes]:
    """Java's MemberInfo order: static members (by instance id) before dynamic ones."""
    if member.group_instance_id is not None:
        return (0, _java_order(member.group_instance_id))
    return (1, _java_order(member.member_id))


def client_rack(member: Member) -> str | None:
    """The member's rack as the assignors see it (Java drops an empty client.rack)."""
    return member.rack or None


class _Topic:
    """One topic's progress (Java's TopicAssignmentState); members are indexes into the
    group's members in Java order."""

    __slots__ = (
        "topic", "consumers", "numbers", "racks", "taken", "left", "cursor",
        "per_consumer", "extra_left", "needs_rack_aware", "assigned",
    )  # fmt: skip

    def __init__(
        self,
        topic: str,
        consumers: list[int],
        member_racks: list[str | None],
        partitions: Mapping[int, frozenset[str]],
    ) -> None:
        self.topic = topic
        self.consumers = consumers
        self.numbers = sorted(partitions)
        n, count = len(consumers), len(self.numbers)
        racked = {r for c in consumers if (r := member_racks[c]) is not None}
        # Racks are only read when some member has one, as in Java.
        self.racks = [partitions[p] for p in self.numbers] if racked else []
        every = frozenset().union(*self.racks) if self.racks else frozenset()
        self.needs_rack_aware = (
            bool(racked)
            and not racked.isdisjoint(every)
            and not all(r == every for r in self.racks)
        )
        self.taken = bytearray(count)
        self.left = count
        self.cursor = 0  # every partition before it is taken
        self.per_consumer = count // n if n else 0
        self.extra_left = count % n if n else 0
        self.assigned = dict.fromkeys(consumers, 0)

    def max_assignable(self, member: int) -> int:
        quota = self.per_consumer + (1 if self.extra_left > 0 else 0)
        return max(0, quota - self.assigned[member])

    def give(self, member: int, indexes: list[int], out: list[list[tuple[str, int]]]) -> None:
        topic, numbers, taken = self.topic, self.numbers, self.taken
        out[member] += [(topic, numbers[i]) for i in indexes]
        for i in indexes:
            taken[i] = 1
        self.left -= len(indexes)
        self.assigned[member] += len(indexes)
        if self.assigned[member] > self.per_consumer:
            self.extra_left -= 1


def _ranges(
    state: _Topic,
    member_racks: list[str | None] | None,
    out: list[list[tuple[str, int]]],
) -> None:
    """Each member in order takes up to its quota of the first unassigned partitions:
    with a replica on its rack when `member_racks` is given (any partition for a member
    without a rack), any of them otherwise. (Inlined: it runs once per member and topic.)"""
    taken, numbers, topic = state.taken, state.numbers, state.topic
    assigned, per = state.assigned, state.per_consumer
    extra, left = state.extra_left, state.left
    everything = range(len(taken))
    orders: dict[str | None, Sequence[int]] = {None: everything}
    if member_racks is not None:
        wanted = {member_racks[c] for c in state.consumers} - {None}
        # Partitions grouped by their replica racks' object (topic_racks shares one per
        # replica set; a stable sort keeps each group in order), then each rack's groups
        # merged back into partition order: no Python loop per partition.
        racks_of = state.racks
        ids = list(map(id, racks_of))
        by_object = groupby(sorted(everything, key=ids.__getitem__), ids.__getitem__)
        groups = [list(indexes) for _, indexes in by_object]
        for rack in wanted:
            orders[rack] = sorted(chain.from_iterable(g for g in groups if rack in racks_of[g[0]]))
    cursors = dict.fromkeys(orders, 0)
    cursors[None] = state.cursor
    for member in state.consumers:
        if not left or (extra <= 0 and not per):
            break  # nothing left, or no member may take any more
        limit = (per + 1 if extra > 0 else per) - assigned[member]
        if limit <= 0:
            continue
        rack = member_racks[member] if member_racks is not None else None
        order = orders[rack]
        cursor, end = cursors[rack], len(order)
        picked: list[int] = []
        while cursor < end:
            i = order[cursor]
            cursor += 1
            if not taken[i]:
                picked.append(i)
                if len(picked) == limit:
                    break
        cursors[rack] = cursor
        if picked:
            mine = out[member]
            for i in picked:
                taken[i] = 1
                mine.append((topic, numbers[i]))
            left -= len(picked)
            assigned[member] += len(picked)
            if assigned[member] > per:
                extra -= 1
    state.extra_left, state.left, state.cursor = extra, left, cursors[None]


def _co_partitioned_on_racks(
    states: list[_Topic], member_racks: list[str | None], out: list[list[tuple[str, int]]]
) -> None:
    """Partition p of every topic to the first member (in order) with room on a rack
    holding a replica of p in each topic (any rack for a member without one).

    The topics share members and partition count and move in step (each gets one
    partition per member per step), so one topic's quota stands for all of them."""
    lead = states[0]
    queues: dict[str | None, list[int]] = defaultdict(list)
    for member in lead.consumers:
        queues[member_racks[member]].append(member)
    heads = dict.fromkeys(queues, 0)
    racked = set(queues) - {None}
    where = [{p: i for i, p in enumerate(t.numbers)} for t in states]
    for p in range(len(lead.racks)):
        indexes = [w.get(p) for w in where]
        if None in indexes:
            continue  # a partition number the snapshot lacks in one of the topics
        common = set(racked)
        for t, i in zip(states, indexes, strict=True):
            common &= t.racks[i]  # type: ignore[index]
        quota = lead.per_consumer + (1 if lead.extra_left > 0 else 0)
        best: int | None = None
        for rack in (None, *common):
            queue = queues.get(rack)
            if queue is None:
                continue
            head = heads[rack]
            while head < len(queue) and lead.assigned[queue[head]] >= quota:
                head += 1  # full for good: quotas never grow back
            heads[rack] = head
            if head < len(queue) and (best is None or queue[head] < best):
                best = queue[head]
        if best is None:
            continue
        for t, i in zip(states, indexes, strict=True):
            t.give(best, [i], out)  # type: ignore[list-item]


def assign_range(
    members: Iterable[Member], racks: TopicRacks
) -> dict[str, tuple[TopicPartition, ...]]:
    """The Java client's rack-aware RangeAssignor (3.5+) on these members and replicas."""
    ordered = sorted(members, key=member_order)
    member_racks = [client_rack(m) for m in ordered]
    by_topic: dict[str, list[int]] = defaultdict(list)
    for k, m in enumerate(ordered):
        for topic in dict.fromkeys(m.topics):
            by_topic[topic].append(k)
    states = [
        _Topic(topic, subscribers, member_racks, racks[topic])
        for topic, subscribers in sorted(by_topic.items())
        if racks.get(topic)
    ]
    out: list[list[tuple[str, int]]] = [[] for _ in ordered]
    if any(s.needs_rack_aware for s in states):
        same_members: dict[tuple[tuple[int, ...], int], list[_Topic]] = defaultdict(list)
        for s in states:
            # Java groups by the member -> rack map, then by how many partitions' racks
            # it read (none when no member has a rack).
            same_members[(tuple(s.consumers), len(s.racks))].append(s)
        for group in same_members.values():
            if len(group) > 1:
                _co_partitioned_on_racks(group, member_racks, out)
            elif group[0].needs_rack_aware:
                _ranges(group[0], member_racks, out)
    for s in states:
        _ranges(s, None, out)
    return {
        m.member_id: tuple(starmap(TopicPartition, sorted(tps)))
        for m, tps in zip(ordered, out, strict=True)
    }
