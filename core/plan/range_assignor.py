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
each rack keeps its partitions (and members) in order behind a cursor that only moves
forward, past the ones already taken (or full): a taken partition stays taken and a
member's quota only shrinks, so what the cursor passed never comes back. The cursors
are itertools iterators over partitions numbered once across the group, and the
TopicPartitions are built once at the end, so the partitions are walked in C and Python
steps once per member and topic (per partition number for co-partitioned topics).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain, compress, filterfalse, islice, repeat
from operator import contains

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


def _text_order(member: Member) -> str:
    # member_order as one str: Python compares code points where Java compares UTF-16
    # code units, the same order as long as no id goes past U+FFFF (checked: ASCII).
    instance = member.group_instance_id
    return "1" + member.member_id if instance is None else "0" + instance


def _in_java_order(members: Iterable[Member]) -> list[Member]:
    """The members sorted by member_order, five times quicker when every id is ASCII."""
    found = list(members)
    if all(m.member_id.isascii() and (m.group_instance_id or "").isascii() for m in found):
        return sorted(found, key=_text_order)
    return sorted(found, key=member_order)


def client_rack(member: Member) -> str | None:
    """The member's rack as the assignors see it (Java drops an empty client.rack)."""
    return member.rack or None


class _Topic:
    """One topic's progress (Java's TopicAssignmentState). Members are indexes into the
    group's members in Java order; partitions are numbered across the group, the
    topic's from `base` on in partition order (so numbers sort as TopicPartitions do)."""

    __slots__ = (
        "topic", "consumers", "numbers", "racks", "base", "left", "per_consumer",
        "extra_left", "assigned", "unassigned", "needs_rack_aware",
    )  # fmt: skip

    def __init__(
        self,
        topic: str,
        consumers: list[int],
        racked: frozenset[str],
        partitions: Mapping[int, frozenset[str]],
        base: int,
        taken: set[int],
        group_size: int,
    ) -> None:
        self.topic = topic
        self.consumers = consumers
        self.numbers = sorted(partitions)
        self.base = base
        n, count = len(consumers), len(self.numbers)
        # Racks are only read when some member has one, as in Java.
        self.racks: list[frozenset[str]] = []
        if racked:
            in_order = list(partitions) == self.numbers  # as topic_racks hands them over
            self.racks = list(
                partitions.values() if in_order else map(partitions.__getitem__, self.numbers)
            )
        # Java's useRackAwareAssignment: some member's rack holds a replica, and some
        # partition's racks are not the union of all of them (so: not all the same).
        self.needs_rack_aware = not all(map(racked.isdisjoint, self.racks)) and any(
            map(self.racks[0].__ne__, self.racks)
        )
        self.left = count
        self.per_consumer, self.extra_left = divmod(count, n)
        self.assigned = [0] * group_size  # by member index
        # The first unassigned partitions, in order; whoever takes any rack's moves it.
        self.unassigned: Iterator[int] = filterfalse(taken.__contains__, range(base, base + count))

    def quota(self) -> int:
        return self.per_consumer + (1 if self.extra_left > 0 else 0)

    def give(self, member: int, index: int, taken: set[int], out: list[list[int]]) -> None:
        taken.add(index)
        out[member].append(index)
        self.left -= 1
        self.assigned[member] += 1
        if self.assigned[member] > self.per_consumer:
            self.extra_left -= 1


def _ranges_on_racks(
    state: _Topic, member_racks: list[str | None], taken: set[int], out: list[list[int]]
) -> None:
    """A topic alone in its group: each member in order takes up to its quota of the
    first unassigned partitions with a replica on its rack (any, for a member without
    one). Nothing is assigned yet, so a member's limit is the quota itself."""
    indexes = range(state.base, state.base + len(state.numbers))
    free: dict[str | None, Iterator[int]] = {None: state.unassigned}
    for rack in {member_racks[c] for c in state.consumers} - {None}:
        on_rack = compress(indexes, map(contains, state.racks, repeat(rack)))
        free[rack] = filterfalse(taken.__contains__, on_rack)
    per, extra, left, assigned = state.per_consumer, state.extra_left, state.left, state.assigned
    if not per:
        # Fewer partitions than members (most topics of a big group): one each until
        # they are all out; this plainer loop takes half the time.
        for member in state.consumers:
            got = next(free[member_racks[member]], None)
            if got is not None:
                taken.add(got)
                out[member].append(got)
                assigned[member] = 1
                extra -= 1
                if not extra:
                    break
        state.extra_left = state.left = extra
        return
    for member in state.consumers:
        if not left:
            break
        quota = per + 1 if extra > 0 else per
        picked = list(islice(free[member_racks[member]], quota))
        if picked:
            taken.update(picked)
            out[member] += picked
            left -= len(picked)
            assigned[member] = len(picked)
            if len(picked) > per:
                extra -= 1
    state.extra_left, state.left = extra, left


def _ranges(state: _Topic, out: list[list[int]]) -> None:
    """Each member in order takes up to its quota of the first unassigned partitions.
    Nothing is taken from here on, so those are consecutive in what is left."""
    rest = list(state.unassigned)
    per, extra, assigned = state.per_consumer, state.extra_left, state.assigned
    at, end = 0, len(rest)
    for member in state.consumers:
        if at >= end:
            break
        has = assigned[member]
        limit = (per + 1 if extra > 0 else per) - has
        if limit <= 0:
            continue
        picked = rest[at : at + limit]
        out[member] += picked
        at += len(picked)
        assigned[member] = has + len(picked)
        if has + len(picked) > per:
            extra -= 1
    state.extra_left, state.left = extra, 0


def _co_partitioned_on_racks(
    states: list[_Topic], member_racks: list[str | None], taken: set[int], out: list[list[int]]
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
        quota = lead.quota()
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
            t.give(best, t.base + i, taken, out)  # type: ignore[operator]


# A frozen dataclass's __init__ sets each field through object.__setattr__, ~0.6 us an
# object: at 10,000 partitions a third of the planner. Setting the slots from C (map over
# the slot descriptors) builds the same objects three times quicker; TopicPartition has
# no __post_init__ to skip.
_NEW = object.__new__
_SET_TOPIC = vars(TopicPartition)["topic"].__set__
_SET_PARTITION = vars(TopicPartition)["partition"].__set__


def _topic_partitions(states: list[_Topic]) -> list[TopicPartition]:
    """Every partition of the states as a TopicPartition, in the group's numbering."""
    topics = chain.from_iterable(repeat(s.topic, len(s.numbers)) for s in states)
    numbers = chain.from_iterable(s.numbers for s in states)
    made = list(map(_NEW, repeat(TopicPartition, sum(len(s.numbers) for s in states))))
    deque(map(_SET_TOPIC, made, topics), maxlen=0)
    deque(map(_SET_PARTITION, made, numbers), maxlen=0)
    return made


def _subscribers(ordered: list[Member]) -> dict[str, list[int]]:
    """Topic -> its subscribers (indexes in Java order), by distinct subscription: in a
    group most members subscribe alike."""
    alike: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for k, m in enumerate(ordered):
        alike[m.topics].append(k)
    parts: dict[str, list[list[int]]] = defaultdict(list)
    for topics, members in alike.items():
        for topic in dict.fromkeys(topics):
            parts[topic].append(members)
    return {t: p[0] if len(p) == 1 else sorted(chain.from_iterable(p)) for t, p in parts.items()}


def _topics(
    ordered: list[Member], member_racks: list[str | None], racks: TopicRacks, taken: set[int]
) -> list[_Topic]:
    """A state for each topic with subscribers and partitions, in name order."""
    states: list[_Topic] = []
    racked: dict[int, frozenset[str]] = {}  # by distinct subscriber list
    for topic, subscribers in sorted(_subscribers(ordered).items()):
        if racks.get(topic):
            if id(subscribers) not in racked:
                found = filter(None, map(member_racks.__getitem__, subscribers))
                racked[id(subscribers)] = frozenset(found)
            base = states[-1].base + len(states[-1].numbers) if states else 0
            states.append(
                _Topic(topic, subscribers, racked[id(subscribers)], racks[topic], base, taken,
                       len(ordered))
            )  # fmt: skip
    return states


def assign_range(
    members: Iterable[Member], racks: TopicRacks
) -> dict[str, tuple[TopicPartition, ...]]:
    """The Java client's rack-aware RangeAssignor (3.5+) on these members and replicas."""
    ordered = _in_java_order(members)
    member_racks = [client_rack(m) for m in ordered]
    taken: set[int] = set()
    states = _topics(ordered, member_racks, racks, taken)
    out: list[list[int]] = [[] for _ in ordered]
    if any(s.needs_rack_aware for s in states):
        same_members: dict[tuple[tuple[int, ...], int], list[_Topic]] = defaultdict(list)
        for s in states:
            # Java groups by the member -> rack map, then by how many partitions' racks
            # it read (none when no member has a rack).
            same_members[(tuple(s.consumers), len(s.racks))].append(s)
        for group in same_members.values():
            if len(group) > 1:
                _co_partitioned_on_racks(group, member_racks, taken, out)
            elif group[0].needs_rack_aware:
                _ranges_on_racks(group[0], member_racks, taken, out)
    for s in states:
        _ranges(s, out)
    tps = _topic_partitions(states)
    return {
        m.member_id: tuple(map(tps.__getitem__, sorted(mine)))
        for m, mine in zip(ordered, out, strict=True)
    }
