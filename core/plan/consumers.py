"""KIP-881 rack-aware consumer assignment for one group of the snapshot.

`range` is the Java client's rack-aware RangeAssignor (Kafka 3.5+), the same
assignment (core/plan/range_assignor.py). `cooperative-sticky` is the most even
assignment the subscriptions allow, with the fewest cross-rack partitions among those
and, when the snapshot knows what each member consumes now, the fewest partitions
moved among those (core/plan/sticky_assignor.py): never less even nor less local than
Kafka's CooperativeStickyAssignor, which puts the goals in the same order.

A replica's rack is its broker's rack if the broker is alive: the Java client only knows
the racks of brokers in the metadata, which lists live brokers.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping

from core.model import ClusterModel
from core.plan.errors import PlanError
from core.plan.formats import ConsumerPlan, TopicPartition
from core.plan.range_assignor import TopicRacks, assign_range, member_order
from core.plan.sticky_assignor import assign_cooperative_sticky
from schemas.snapshot import ConsumerGroup, Member

__all__ = [
    "STRATEGIES",
    "TopicRacks",
    "assign_cooperative_sticky",
    "assign_range",
    "cross_rack",
    "current_assignment",
    "explain",
    "member_order",
    "plan_consumers",
    "topic_racks",
]

STRATEGIES = ("range", "cooperative-sticky")


def topic_racks(model: ClusterModel, topics: Iterable[str]) -> dict[str, dict[int, frozenset[str]]]:
    """Replica racks per partition of the given topics (those in the snapshot)."""
    return model.replica_racks(topics)


def plan_consumers(model: ClusterModel, group: str, strategy: str = "range") -> ConsumerPlan:
    """A rack-aware assignment for `group`'s members over the snapshot's partitions."""
    groups = {g.group: g for g in model.snapshot.consumer_groups}
    if group not in groups:
        known = ", ".join(sorted(groups)) or "none"
        raise PlanError(f"group {group} is not in the snapshot's consumer_groups (found: {known})")
    if strategy not in STRATEGIES:
        raise PlanError(f"unknown strategy {strategy}; use one of {', '.join(STRATEGIES)}")
    members = groups[group].members
    topics = {t for m in members for t in m.topics}
    if strategy == "range":
        # Range builds a TopicPartition per partition and little else, none in a cycle:
        # at 10,000 partitions the collector's passes over them (and a full one now and
        # then) were a sixth of the plan. Paused for these few ms, as the loader does.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            racks = topic_racks(model, topics)
            assignment = assign_range(members, racks)
            return ConsumerPlan(group, assignment, cross_rack(members, assignment, racks))
        finally:
            if was_enabled:
                gc.enable()
    racks = topic_racks(model, topics)
    assignment = assign_cooperative_sticky(members, racks, current_assignment(members))
    return ConsumerPlan(group, assignment, cross_rack(members, assignment, racks))


def current_assignment(members: Iterable[Member]) -> dict[str, list[TopicPartition]]:
    """What each member consumes now, as the snapshot read it from the group (nothing
    when the snapshot was written without it)."""
    return {
        m.member_id: [TopicPartition(a.topic, p) for a in m.assignment for p in a.partitions]
        for m in members
    }


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
