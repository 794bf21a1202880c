"""The cooperative-sticky plan: the best balance, then the fewest cross-rack partitions,
then the fewest partitions taken from their current owner.

Kafka's CooperativeStickyAssignor (3.5+) puts balance before rack alignment and rack
alignment before stickiness; so does this planner, but exactly where Java searches
greedily (its general builder, used for mixed subscriptions, can end less local or
less even). All three goals are one min-cost flow:

- balance: the member counts with the smallest sum of squares, which are the most even
  counts the subscriptions allow (no partition can pass, directly or along a chain,
  to an eligible member with two fewer) and make every spread measure (max - min,
  Java's sum of pairwise differences) as small as it can be. A member's k-th partition
  costs BIG * (2k - 1), k^2 in all, with BIG above every other cost in the plan;
- cross-rack: a partition given to a member with a rack where it has no replica costs
  MOVE_WEIGHT (more than all moves together);
- movement: a partition given to another member than its current owner costs 1.

Members with the same topics and rack that own nothing are one node (interchangeable),
partitions with the same subscribers and replica racks one pool; a member that owns
partitions is a node of its own, reached from its own partitions directly and from
the pools at the cost of a move. A node's k-th level edge (its members' k-th
partitions) is added only when the level below is full: a dearer level is never
used while a cheaper one has room, so the flow is the same as with all of them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from core.plan.flow import MinCostFlow
from core.plan.formats import TopicPartition
from core.plan.range_assignor import TopicRacks, client_rack, member_order
from schemas import native
from schemas.snapshot import Member

Part = tuple[str, int]

# Up to this many members, every owner is a node of its own and the moves are the
# fewest possible; above it, owners share their class's node (the flow's size then
# grows with the classes, not the members) and a partition kept in its owner's class
# goes back to its owner when the class's even split leaves the owner room.
EXACT_MEMBERS = 64


def current_owners(
    ordered: list[Member],
    topics_of: Mapping[str, frozenset[str]],
    racks: TopicRacks,
    current: Mapping[str, Iterable[TopicPartition]],
) -> dict[Part, str]:
    """The owner of each partition in `current` that its owner may keep (still
    subscribed, partition still there); a partition claimed twice (mid-rebalance)
    goes to the first claimant in Java's member order."""
    owner: dict[Part, str] = {}
    for m in ordered:
        for tp in current.get(m.member_id, ()):
            if tp.topic in topics_of[m.member_id] and tp.partition in racks[tp.topic]:
                owner.setdefault((tp.topic, tp.partition), m.member_id)
    return owner


def assign_cooperative_sticky(
    members: Iterable[Member],
    racks: TopicRacks,
    current: Mapping[str, Iterable[TopicPartition]] | None = None,
) -> dict[str, tuple[TopicPartition, ...]]:
    """The most even assignment, with the fewest cross-rack partitions among those, and
    the fewest moves from `current` (member -> partitions it consumes) among those."""
    ordered = sorted(members, key=member_order)
    if not ordered:
        return {}
    topics_of = {m.member_id: frozenset(t for t in m.topics if racks.get(t)) for m in ordered}
    owner = current_owners(ordered, topics_of, racks, current or {})
    owners = set(owner.values()) if len(ordered) <= EXACT_MEMBERS else set()

    # Member nodes: (topics, rack, the member itself when it owns partitions and the
    # group is small enough for every owner to be a node of its own).
    node_of: dict[tuple[frozenset[str], str | None, str | None], int] = {}
    node_members: list[list[str]] = []
    node_rack: list[str | None] = []
    member_node: dict[str, int] = {}
    for m in ordered:
        mid = m.member_id
        node = (topics_of[mid], client_rack(m), mid if mid in owners else None)
        if node not in node_of:
            node_of[node] = len(node_members)
            node_members.append([])
            node_rack.append(node[1])
        member_node[mid] = node_of[node]
        node_members[node_of[node]].append(mid)
    subscribers: dict[str, tuple[int, ...]] = {}
    for k, node in enumerate(node_of):
        for t in node[0]:
            subscribers.setdefault(t, ())
            subscribers[t] += (k,)

    # Partition pools (subscribers, racks) and, per owner, its own partitions.
    pooled: dict[tuple[tuple[int, ...], frozenset[str]], list[Part]] = defaultdict(list)
    owned: dict[tuple[tuple[int, ...], frozenset[str], int], list[Part]] = defaultdict(list)
    total = 0
    for t in sorted(subscribers):
        who = subscribers[t]
        for p, where in racks[t].items():
            total += 1
            o = owner.get((t, p))
            if o is None:
                pooled[(who, where)].append((t, p))
            else:
                owned[(who, where, member_node[o])].append((t, p))
    for who, where, _ in owned:
        pooled.setdefault((who, where), [])

    move_weight = total + 1
    big = move_weight * (total + 1)

    def cross(k: int, where: frozenset[str]) -> int:
        rack = node_rack[k]
        return 0 if rack is None or rack in where else move_weight

    flow = MinCostFlow(2)
    source, sink = 0, 1
    nodes = [flow.node() for _ in node_members]
    pool_node = {key: flow.node() for key in pooled}
    pool_links: dict[tuple[tuple[int, ...], frozenset[str]], list[tuple[int, int]]] = {}
    for key, parts in pooled.items():
        who, where = key
        if parts:
            flow.add(source, pool_node[key], len(parts), 0)
        costs = [cross(k, where) for k in who]
        edges = flow.fan_out(pool_node[key], [nodes[k] for k in who], total, costs)
        pool_links[key] = list(zip(who, edges, strict=True))
    keep_edge: dict[tuple[tuple[int, ...], frozenset[str], int], int] = {}
    for okey, parts in owned.items():
        who, where, k = okey
        mine = flow.node()
        flow.add(source, mine, len(parts), 0)
        keep_edge[okey] = flow.add(mine, nodes[k], len(parts), cross(k, where))
        flow.add(mine, pool_node[(who, where)], len(parts), 1)

    _fill(flow, nodes, [len(ids) for ids in node_members], big, source, sink)

    got: list[list[Part]] = [[] for _ in node_members]
    keep: list[list[Part]] = [[] for _ in node_members]  # kept in the owner's node
    for okey, parts in owned.items():
        kept = flow.used(keep_edge[okey])
        keep[okey[2]].extend(parts[:kept])
        pooled[(okey[0], okey[1])].extend(parts[kept:])
    for key, links in pool_links.items():
        parts = sorted(pooled[key])
        for k, e in links:
            n = flow.used(e)
            got[k].extend(parts[:n])
            del parts[:n]

    out: dict[str, list[Part]] = {m.member_id: [] for m in ordered}
    for k, ids in enumerate(node_members):
        _split(ids, keep[k], got[k], owner, out)
    return {m: tuple(TopicPartition(t, p) for t, p in sorted(parts)) for m, parts in out.items()}


def _fill(
    flow: MinCostFlow, nodes: list[int], sizes: list[int], big: int, source: int, sink: int
) -> None:
    """The cheapest flow, member node k's j-th level (its members' (j+1)-th partitions,
    BIG * (2j + 1) each) added only when level j - 1 is full. The compiled core, when
    there, takes the same paths in the same order; the levels it adds stay its own."""
    compiled = native.function("sticky_flow")
    if compiled is not None:
        left = compiled(
            len(flow.graph), flow.to, flow.cap, flow.cost, nodes, sizes, big, source, sink
        )
        if left is not None:
            flow.cap[:] = left
            return
    top: dict[int, tuple[int, int]] = {}  # level edge -> (node, level)

    def add_level(k: int, level: int) -> None:
        e = flow.add(nodes[k], sink, sizes[k], big * (2 * level + 1))
        top[e] = (k, level)

    for k in range(len(nodes)):
        add_level(k, 0)
    while path := flow.augment(source, sink):
        last = path[0]  # the edge into the sink
        if last in top and flow.cap[last] == 0:
            k, level = top.pop(last)
            add_level(k, level + 1)


def _split(
    ids: list[str],
    keep: list[Part],
    got: list[Part],
    owner: Mapping[Part, str],
    out: dict[str, list[Part]],
) -> None:
    """A node's partitions over its members, floor or ceil each (what the flow charged):
    the ceil to the members keeping the most, each keeping its own up to its share,
    the rest round robin so each member sees a spread of topics."""
    base, extra = divmod(len(keep) + len(got), len(ids))
    mine: dict[str, list[Part]] = {m: [] for m in ids}
    for part in sorted(keep):
        mine[owner[part]].append(part)
    by_keeping = sorted(ids, key=lambda m: -len(mine[m]))  # stable: Java order on ties
    room = {m: base + (1 if n < extra else 0) for n, m in enumerate(by_keeping)}
    rest = list(got)
    for m in ids:
        kept = mine[m][: room[m]]
        out[m].extend(kept)
        room[m] -= len(kept)
        rest.extend(mine[m][len(kept) :])
    turn = 0
    for part in sorted(rest):
        while room[ids[turn % len(ids)]] == 0:
            turn += 1
        m = ids[turn % len(ids)]
        out[m].append(part)
        room[m] -= 1
        turn += 1
