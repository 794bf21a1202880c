"""Consumer rack locality: how much of what a group reads comes from its members' racks.

A member reads a partition from its own rack when it has a `client.rack` and either the
partition's leader sits on that rack, or the leader's broker runs the rack-aware replica
selector (KIP-392 follower fetching) and an in-sync replica sits on that rack. Shares
are weighted by the partition's bytes (its largest replica) when the snapshot knows
them, by partition count otherwise. Pure: a snapshot model in, figures out; the
collector exports them and the detector compares them with the group's KIP-881 plan.

A KIP-848 group (`group.protocol=consumer`) is measured the same way when its members'
racks are known; when the reader could not see them (`racks_known` false) its locality
is unknown (None), not zero, and the diagnosis says so. Its assignment is the broker's
to make: the diagnosis names what the operator can set instead of a plan to apply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from core.model import ClusterModel
from core.plan.consumers import STRATEGIES, plan_consumers
from core.plan.formats import TopicPartition
from schemas.snapshot import NO_LEADER, ConsumerGroup, Partition

# The assignor a plan uses for a group whose own is neither rack-aware assignor.
DEFAULT_STRATEGY = "cooperative-sticky"
# Partitions named in a diagnosis, at most (the count is always given).
SHOWN = 5
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True, slots=True)
class Locality:
    """One assignment's locality: ``ratio`` None when it assigns nothing the snapshot
    knows; ``members`` member id -> its own share (None: it reads nothing)."""

    ratio: float | None
    local: int  # partitions read from the member's rack
    partitions: int  # partitions assigned (those the snapshot knows)
    by_bytes: bool
    members: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """Why a group reads across racks, in the terms an operator acts on."""

    members_without_rack: tuple[tuple[str, str], ...]  # (member id, client id)
    brokers_without_selector: tuple[int, ...]  # alive leaders of its partitions
    one_rack_partitions: tuple[str, ...]  # assigned partitions with every replica in one rack
    assignor: str | None  # the group's assignor when it is not a rack-aware one
    racks: tuple[str, ...]  # the cluster's racks (the values client.rack may take)
    # A KIP-848 group: the broker's assignor ("" when the reader did not say), else None
    broker_assignor: str | None = None
    racks_unknown: bool = False  # the reader could not see the members' client.rack

    def text(self) -> str:
        """One sentence per cause; empty when there is none."""
        parts = []
        if self.racks_unknown:
            parts.append("its members' client.rack cannot be read (librdkafka drops the "
                         "RackId of ConsumerGroupDescribe), so its locality is not measured")
        if self.members_without_rack:
            names = ", ".join(f"{m} (client.id {c})" if c else m
                              for m, c in self.members_without_rack[:SHOWN])
            more = len(self.members_without_rack) - SHOWN
            parts.append(f"{len(self.members_without_rack)} member(s) set no client.rack: "
                         f"{names}{f' and {more} more' if more > 0 else ''}")
        if self.brokers_without_selector:
            parts.append("broker(s) " + ", ".join(map(str, self.brokers_without_selector))
                         + f" lead its partitions without replica.selector.class={SELECTOR}, "
                         "so consumers read from leaders only")
        if self.one_rack_partitions:
            shown = ", ".join(self.one_rack_partitions[:SHOWN])
            more = len(self.one_rack_partitions) - SHOWN
            parts.append(f"{len(self.one_rack_partitions)} partition(s) have every replica "
                         f"in one rack ({shown}{f' and {more} more' if more > 0 else ''}); "
                         "members on other racks read them across")
        if self.assignor:
            parts.append(f"the group's assignor {self.assignor} is not rack-aware (KIP-881 "
                         f"covers {' and '.join(STRATEGIES)})")
        if self.broker_assignor is not None:
            parts.append(broker_assigned_text(self.broker_assignor))
        return "; ".join(parts)


def broker_assigned_text(assignor: str) -> str:
    """What an operator can set for a KIP-848 group, whose assignment nothing outside
    the group can steer."""
    named = f"assignor {assignor}" if assignor else "assignor"
    return (f"it uses group.protocol=consumer (KIP-848): the broker assigns its partitions "
            f"with its {named}, and the broker's assignors (uniform, range) are not "
            "rack-aware (KAFKA-16694), while client-side assignors do not apply to such a "
            "group (KAFKA-18327), so no assign_consumers is proposed; what can be set: "
            "the brokers' group.consumer.assignors (a rack-aware ConsumerGroupPartition"
            "Assignor), each consumer's client.rack with replica.selector.class="
            f"{SELECTOR} on the brokers (follower fetching, KIP-392: each consumer reads "
            "from a replica on its rack whatever it is assigned), or group.protocol=classic "
            "with a rack-aware assignor (KIP-881)")


def strategy_for(group: ConsumerGroup) -> str:
    """The planner strategy for ``group``: its own assignor when the planner has it."""
    return group.protocol if group.protocol in STRATEGIES else DEFAULT_STRATEGY


def _weight(p: Partition) -> int:
    return max((r.size_bytes for r in p.replicas), default=0)


def local_racks(model: ClusterModel, p: Partition) -> frozenset[str]:
    """The racks a consumer reads ``p`` locally from: the leader's, or with follower
    fetching on the leader, every alive in-sync replica's."""
    if p.leader == NO_LEADER or p.leader not in model.alive:
        return frozenset()
    leader = model.brokers[p.leader]
    if leader.follower_fetching:
        return frozenset(rack for b in p.isr if b in model.alive
                         and (rack := model.rack_of.get(b)) is not None)
    return frozenset({leader.rack}) if leader.rack is not None else frozenset()


def locality(model: ClusterModel, group: ConsumerGroup,
             assignment: Mapping[str, Iterable[TopicPartition]] | None = None) -> Locality:
    """The share of ``group``'s assigned partitions its members read from their own
    racks: its current assignment (the snapshot's), or ``assignment`` (a plan's)."""
    index = model.partition_index()
    rack = {m.member_id: m.rack for m in group.members}
    if assignment is None:
        assignment = {m.member_id: [TopicPartition(t, p) for t, p in m.assigned()]
                      for m in group.members}
    rows: list[tuple[str, int, bool]] = []  # (member, weight, local)
    for member, tps in assignment.items():
        for tp in tps:
            i = index.get((tp.topic, tp.partition))
            if i is None:
                continue  # a topic deleted since the assignment
            p = model.partitions[i]
            mine = rack.get(member)
            rows.append((member, _weight(p), mine is not None and mine in local_racks(model, p)))
    by_bytes = sum(w for _, w, _ in rows) > 0
    if not group.racks_known:  # unknown racks: neither local nor remote
        return Locality(None, 0, len(rows), by_bytes, dict.fromkeys(rack))
    total: dict[str, int] = {}
    near: dict[str, int] = {}
    for member, w, local in rows:
        w = w if by_bytes else 1
        total[member] = total.get(member, 0) + w
        near[member] = near.get(member, 0) + (w if local else 0)
    whole = sum(total.values())
    return Locality(
        ratio=sum(near.values()) / whole if whole else None,
        local=sum(1 for _, _, local in rows if local),
        partitions=len(rows),
        by_bytes=by_bytes,
        members={m.member_id: (near[m.member_id] / total[m.member_id]
                               if total.get(m.member_id) else None) for m in group.members},
    )


def planned_locality(model: ClusterModel, group: ConsumerGroup) -> tuple[Locality, str]:
    """The locality of ``group``'s KIP-881 plan (`plan_consumers`), and the strategy."""
    strategy = strategy_for(group)
    plan = plan_consumers(model, group.group, strategy)
    return locality(model, group, plan.assignment), strategy


def diagnose(model: ClusterModel, group: ConsumerGroup) -> Diagnosis:
    """What keeps ``group`` from reading on its own racks."""
    index = model.partition_index()
    assigned = sorted({tp for m in group.members for tp in m.assigned()})
    member_racks = {m.rack for m in group.members if m.rack is not None}
    leaders: set[int] = set()
    one_rack: list[str] = []
    for key in assigned:
        i = index.get(key)
        if i is None:
            continue
        p = model.partitions[i]
        if p.leader in model.alive:
            leaders.add(p.leader)
        racks = {model.rack_of.get(r.broker) for r in p.replicas if r.broker in model.alive}
        racks.discard(None)
        if len(racks) == 1 and member_racks - racks:
            one_rack.append(p.name)
    return Diagnosis(
        members_without_rack=tuple((m.member_id, m.client_id) for m in group.members
                                   if m.rack is None and group.racks_known),
        brokers_without_selector=tuple(sorted(
            b for b in leaders if not model.brokers[b].follower_fetching)),
        one_rack_partitions=tuple(one_rack),
        assignor=(group.protocol if group.protocol is not None and not group.broker_assigned
                  and group.protocol not in STRATEGIES else None),
        racks=tuple(sorted({r for b in model.alive if (r := model.rack_of.get(b)) is not None})),
        broker_assignor=(group.protocol or "") if group.broker_assigned else None,
        racks_unknown=not group.racks_known,
    )
