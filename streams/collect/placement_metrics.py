"""Placement gauges only kafka-selfheal knows, computed from a cluster snapshot.

Kafka's JMX metrics say how many dirs are offline and how many partitions are
under-replicated; they do not say what sits on each dir, how full the dirs of one broker
are compared with each other, or how replicas and leaders spread over racks. The snapshot
collector knows all of that after every snapshot, so it exports it on its own `/metrics`
(`placement_samples` is the pure part: a snapshot in, samples out).

The collector watches one cluster; Prometheus attaches the ``cluster`` label to the
target, as it does to the brokers' exporters, so no sample carries it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from core import clock
from core.model import ClusterModel
from core.plan.disks import broker_usage, mean_ratio
from schemas.snapshot import NO_LEADER, Snapshot

# name -> help text; every gauge this module exports, in base units.
METRICS: dict[str, str] = {
    "selfheal_snapshot_timestamp_seconds": "When the snapshot these gauges come from was "
    "taken (Unix time)",
    "selfheal_broker_alive": "1 while the broker is registered and not fenced",
    "selfheal_broker_replicas": "Replicas assigned to the broker (offline ones included)",
    "selfheal_broker_leaders": "Partitions the broker leads",
    "selfheal_broker_offline_replicas": "Replicas on the broker that are offline (dir "
    "offline or broker down); Kafka's OfflineReplicaCount is always 0 on Kafka 3.7+",
    "selfheal_broker_log_dir_skew_ratio": "Fullest online dir's usage over the broker's "
    "mean (the disk planner's measure; 1 is even); only brokers the planner can touch",
    "selfheal_broker_log_dir_spread_bytes": "Replica bytes on the broker's fullest online "
    "dir minus those on its emptiest",
    "selfheal_log_dir_online": "1 while the log dir is online, 0 once Kafka took it offline",
    "selfheal_log_dir_replicas": "Replicas on the log dir (the last known ones when "
    "it is offline)",
    "selfheal_log_dir_replica_bytes": "Bytes of the replicas on the log dir",
    "selfheal_log_dir_capacity_bytes": "Size of the log dir's volume (DescribeLogDirs "
    "total_bytes; absent when offline)",
    "selfheal_log_dir_usable_bytes": "Free bytes on the log dir's volume (DescribeLogDirs "
    "usable_bytes; absent when offline)",
    "selfheal_log_dir_usage_ratio": "Used share of the log dir's volume, 0..1",
    "selfheal_rack_brokers": "Alive brokers in the rack",
    "selfheal_rack_replicas": "Replicas on the rack's brokers",
    "selfheal_rack_leaders": "Partitions led from the rack",
    "selfheal_partitions": "Partitions in the cluster",
    "selfheal_partitions_without_leader": "Partitions with no leader (offline)",
    "selfheal_partitions_with_offline_replicas": "Partitions with at least one offline "
    "replica",
    "selfheal_partitions_sharing_rack": "Partitions with two replicas in one rack although "
    "the cluster has a rack for each replica (KIP-36 placement violated)",
    "selfheal_broker_follower_fetching": "1 when the broker's replica.selector.class is the "
    "rack-aware one (KIP-392: consumers with client.rack may read from a replica on their "
    "rack)",
    "selfheal_consumer_group_members": "Members of the classic consumer group",
    "selfheal_consumer_group_members_without_rack": "Members of the group that set no "
    "client.rack (KIP-881 cannot place them)",
    "selfheal_consumer_group_rack_locality_ratio": "Share of the group's assigned partitions "
    "(by bytes where known) its members read from their own rack, 0..1",
    "selfheal_consumer_group_planned_rack_locality_ratio": "The same share under the group's "
    "KIP-881 rack-aware plan (its assignor if range or cooperative-sticky, else "
    "cooperative-sticky)",
}

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: Labels
    value: float


def _rack(rack: str | None) -> str:
    return rack if rack is not None else ""


def placement_samples(snapshot: Snapshot) -> list[Sample]:
    """Every gauge of `METRICS` for ``snapshot``, one sample per label set."""
    model = ClusterModel(snapshot)
    out: list[Sample] = [Sample("selfheal_snapshot_timestamp_seconds", (),
                                clock.epoch_seconds(snapshot.taken_at))]

    def add(name: str, value: float, **labels: str) -> None:
        out.append(Sample(name, tuple(labels.items()), float(value)))

    # The per-dir gauges need the model's per-dir index; built first, it also gives the
    # per-broker counts (asked first, those would take a pass of their own).
    by_dir = model.replicas_by_dir
    leaders = Counter(p.leader for p in snapshot.partitions if p.leader != NO_LEADER)
    offline = Counter(r.broker for p in snapshot.partitions for r in p.replicas
                      if model.is_offline(r))
    for b in snapshot.brokers:
        who = {"broker": str(b.id), "rack": _rack(b.rack)}
        add("selfheal_broker_alive", b.alive, **who)
        add("selfheal_broker_replicas", model.replica_counts[b.id], **who)
        add("selfheal_broker_leaders", leaders[b.id], **who)
        add("selfheal_broker_offline_replicas", offline[b.id], **who)
        for d in b.log_dirs:
            where = {**who, "log_dir": d.path}
            add("selfheal_log_dir_online", d.online, **where)
            add("selfheal_log_dir_replicas", len(by_dir[(b.id, d.path)].sizes), **where)
            add("selfheal_log_dir_replica_bytes", model.dir_bytes[(b.id, d.path)], **where)
            if d.total_bytes is not None:
                add("selfheal_log_dir_capacity_bytes", d.total_bytes, **where)
            if d.usable_bytes is not None:
                add("selfheal_log_dir_usable_bytes", d.usable_bytes, **where)
            if d.total_bytes and d.usable_bytes is not None:
                add("selfheal_log_dir_usage_ratio",
                    (d.total_bytes - d.usable_bytes) / d.total_bytes, **where)
        if b.alive and b.id not in model.brokers_with_offline_dir:
            dirs = broker_usage(model, b.id)
            if len(dirs) >= 2:
                mean = mean_ratio(dirs)
                if mean > 0:
                    add("selfheal_broker_log_dir_skew_ratio",
                        max(d.ratio for d in dirs) / mean, **who)
                used = [d.used for d in dirs]
                add("selfheal_broker_log_dir_spread_bytes", max(used) - min(used), **who)

    racks = sorted({b.rack for b in snapshot.brokers if b.rack is not None})
    rack_brokers = Counter(b.rack for b in snapshot.brokers if b.alive and b.rack is not None)
    rack_replicas: Counter[str] = Counter()
    rack_leaders: Counter[str] = Counter()
    sharing = 0
    for p in snapshot.partitions:
        replica_racks = [model.rack_of.get(r.broker) for r in p.replicas]
        known = [r for r in replica_racks if r is not None]
        rack_replicas.update(known)
        leader_rack = model.rack_of.get(p.leader) if p.leader != NO_LEADER else None
        if leader_rack is not None:
            rack_leaders[leader_rack] += 1
        if len(known) != len(set(known)) and len(racks) >= len(p.replicas):
            sharing += 1
    for rack in racks:
        add("selfheal_rack_brokers", rack_brokers[rack], rack=rack)
        add("selfheal_rack_replicas", rack_replicas[rack], rack=rack)
        add("selfheal_rack_leaders", rack_leaders[rack], rack=rack)

    add("selfheal_partitions", len(snapshot.partitions))
    add("selfheal_partitions_without_leader",
        sum(1 for p in snapshot.partitions if p.leader == NO_LEADER))
    add("selfheal_partitions_with_offline_replicas",
        len(model.partitions_with_offline_replicas))
    add("selfheal_partitions_sharing_rack", sharing)
    for b in snapshot.brokers:
        if b.alive:
            add("selfheal_broker_follower_fetching", b.follower_fetching,
                broker=str(b.id), rack=_rack(b.rack))
    _group_samples(model, add)
    return out


def _group_samples(model: ClusterModel, add: Any) -> None:
    """Each consumer group's members and locality, now and planned. Per-member shares
    stay out of Prometheus: a label per member id would grow without bound."""
    from core.locality import locality, planned_locality

    for group in model.snapshot.consumer_groups:
        name = group.group
        add("selfheal_consumer_group_members", len(group.members), group=name)
        if group.racks_known:  # else a member's rack is unknown, not unset
            add("selfheal_consumer_group_members_without_rack",
                sum(1 for m in group.members if m.rack is None), group=name)
        now = locality(model, group)
        if now.ratio is not None:
            add("selfheal_consumer_group_rack_locality_ratio", now.ratio, group=name)
        try:
            planned, _strategy = planned_locality(model, group)
        except Exception:  # noqa: BLE001 - PlanError or a planner bug: never the gauges
            continue  # a group the planner refuses has no planned figure
        if planned.ratio is not None:
            add("selfheal_consumer_group_planned_rack_locality_ratio", planned.ratio,
                group=name)


class PlacementMetrics:
    """The latest snapshot's samples, served by a prometheus-client registry.

    A custom collector rather than labelled Gauges: a broker or dir that leaves the
    cluster leaves `/metrics` with the next snapshot instead of lingering at its last value.
    """

    def __init__(self, registry: Any) -> None:
        self._lock = threading.Lock()
        self._samples: list[Sample] = []
        registry.register(self)

    def update(self, snapshot: Snapshot) -> None:
        """Replace every gauge with ``snapshot``'s figures."""
        samples = placement_samples(snapshot)
        with self._lock:
            self._samples = samples

    def describe(self) -> list[Any]:
        return list(self._families([]))

    def collect(self) -> Iterator[Any]:
        with self._lock:
            samples = list(self._samples)
        return self._families(samples)

    @staticmethod
    def _families(samples: list[Sample]) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        by_name: dict[str, list[Sample]] = {name: [] for name in METRICS}
        for s in samples:
            by_name[s.name].append(s)
        for name, help_text in METRICS.items():
            keys = [k for k, _ in by_name[name][0].labels] if by_name[name] else []
            family = GaugeMetricFamily(name, help_text, labels=keys)
            for s in by_name[name]:
                family.add_metric([v for _, v in s.labels], s.value)
            yield family
