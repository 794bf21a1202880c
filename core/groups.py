"""Read a live cluster's consumer groups into the snapshot's `consumer_groups`.

ListGroups (v5 on 4.x) says each group's type. A classic group is described here:
DescribeGroups answers with each member's subscription and assignment as the raw bytes
its client sent; kafka-python decodes them (ConsumerProtocolSubscription v3 carries the
member's `client.rack`, KIP-881). confluent-kafka's `MemberDescription` has neither
the bytes nor the rack, so classic groups are read with kafka-python's admin client, as
the rest of core/live.py does. A KIP-848 group (`group.protocol=consumer`) is described
by ConsumerGroupDescribe, which kafka-python lacks: core/kip848.py reads it with
confluent-kafka (docs/architecture.md, "Which client reads which group").

Also read here: each broker's `replica.selector.class` (DescribeConfigs), which says
whether a consumer may read from a replica on its own rack (KIP-392, follower fetching).

Lag is not read: it needs an OffsetFetch per group and a ListOffsets per partition leader
on every snapshot, for a figure locality does not use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from core import kip848

CONSUMER_PROTOCOL = "consumer"  # DescribeGroups' protocol type of a classic consumer group
SELECTOR_CONFIG = "replica.selector.class"


def _field(obj: Any, name: str, default: Any = None) -> Any:
    """kafka-python hands back dicts or ApiData objects depending on the call."""
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


def member_record(member: Any) -> dict[str, Any]:
    """One DescribeGroups member (kafka-python's decoded form) as a snapshot member."""
    meta = _field(member, "member_metadata")
    meta = meta if not isinstance(meta, (bytes, bytearray, memoryview)) else None
    assignment = _field(member, "member_assignment")
    assignment = (assignment if not isinstance(assignment, (bytes, bytearray, memoryview))
                  else None)
    assigned: dict[str, set[int]] = {}
    for item in _field(assignment, "assigned_partitions", []) or []:
        if isinstance(item, (tuple, list)):  # older kafka-python: (topic, [partitions])
            topic, numbers = item[0], item[1]
        else:
            topic, numbers = _field(item, "topic"), _field(item, "partitions", [])
        if topic:
            assigned.setdefault(topic, set()).update(int(p) for p in numbers or [])
    return {
        "member_id": _field(member, "member_id"),
        "group_instance_id": _field(member, "group_instance_id") or None,
        "client_id": _field(member, "client_id") or "",
        "rack": _field(meta, "rack_id") or None,
        "topics": sorted(set(_field(meta, "topics", []) or [])),
        "assignment": [{"topic": t, "partitions": sorted(ps)}
                       for t, ps in sorted(assigned.items())],
    }


def group_record(name: str, info: Any) -> dict[str, Any] | None:
    """One DescribeGroups answer as a snapshot group; None when it is not a classic
    consumer group with members (an error, an empty or dead group, Connect workers)."""
    if info is None or _field(info, "error"):
        return None
    protocol_type = _field(info, "protocol_type") or None
    if protocol_type != CONSUMER_PROTOCOL:
        return None
    members = [member_record(m) for m in _field(info, "members", []) or []]
    members = [m for m in members if m["member_id"]]
    if not members:
        return None
    return {
        "group": name,
        "protocol_type": protocol_type,
        "protocol": _field(info, "protocol_data") or _field(info, "protocol") or None,
        "state": _field(info, "group_state") or _field(info, "state") or None,
        "group_protocol": "classic",
        "members": members,
    }


def list_groups(admin: Any) -> dict[str, str]:
    """Every consumer group the brokers coordinate: group id -> its protocol, "classic"
    or "consumer" (KIP-848; ListGroups v5's group type, absent before Kafka 3.7)."""
    out = {}
    for g in admin.list_groups():
        if isinstance(g, (tuple, list)):  # older kafka-python: (group_id, protocol_type)
            group_id, protocol_type, group_type = g[0], g[1], None
        else:
            group_id, protocol_type = _field(g, "group_id"), _field(g, "protocol_type")
            group_type = _field(g, "group_type")
        if group_id and protocol_type == CONSUMER_PROTOCOL:
            out[group_id] = (kip848.BROKER_PROTOCOL if group_type == kip848.BROKER_PROTOCOL
                             else "classic")
    return dict(sorted(out.items()))


def describe(admin: Any, groups: Sequence[str]) -> dict[str, Any]:
    """DescribeGroups of ``groups``, keyed by group id."""
    if not groups:
        return {}
    found = admin.describe_groups(list(groups))
    if isinstance(found, dict):
        return found
    return {_field(g, "group_id"): g for g in found}


def read_groups(admin: Any, groups: Iterable[str] | None = None,
                client: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The snapshot's `consumer_groups`: ``groups`` (every consumer group when None),
    classic and KIP-848, with their members, client racks (where they can be read),
    topics and assignment; groups with no members are left out. ``client``: the
    confluent-kafka config for ConsumerGroupDescribe (default: the admin's servers)."""
    kinds = list_groups(admin)
    wanted = list(kinds) if groups is None else list(dict.fromkeys(groups))
    broker_assigned = [g for g in wanted if kinds.get(g) == kip848.BROKER_PROTOCOL]
    classic = [g for g in wanted if g not in broker_assigned]
    described = describe(admin, classic)
    records = {}
    for name in classic:
        record = group_record(name, described.get(name))
        if record is not None:
            records[name] = record
    if broker_assigned:
        timeout_s = _field(getattr(admin, "config", {}), "request_timeout_ms", 10000) / 1000
        found = kip848.read_groups(client or kip848.client_config(admin), broker_assigned,
                                   timeout_s)
        records.update((r["group"], r) for r in found)
    return [records[g] for g in wanted if g in records]


def current_assignment(admin: Any, group: str) -> dict[str, list[tuple[str, int]]]:
    """What each member of ``group`` consumes now: member id -> (topic, partition)."""
    info = describe(admin, [group]).get(group)
    out: dict[str, list[tuple[str, int]]] = {}
    for m in _field(info, "members", []) or []:
        record = member_record(m)
        out[record["member_id"]] = [(a["topic"], p) for a in record["assignment"]
                                    for p in a["partitions"]]
    return out


def read_broker_config(admin: Any, brokers: Iterable[int], name: str) -> dict[int, str | None]:
    """Broker -> the value of its config ``name`` (None: not set); brokers that do not
    answer are left out."""
    from kafka.admin import ConfigResource, ConfigResourceType

    out: dict[int, str | None] = {}
    for broker in brokers:
        try:
            reply = admin.describe_configs(
                [ConfigResource(ConfigResourceType.BROKER, str(broker), configs={name: None})],
                config_filter="all")
        except Exception:
            continue  # down or unreachable: the snapshot says it is not alive anyway
        configs = (reply.get("broker", {}) if isinstance(reply, dict) else {}).get(
            str(broker), {})
        entry = configs.get(name)
        value = _field(entry, "value") if entry is not None else None
        out[broker] = value or None
    return out


def read_replica_selectors(admin: Any, brokers: Iterable[int]) -> dict[int, str | None]:
    """Broker -> its `replica.selector.class` (None: not set, consumers read from
    leaders); brokers that do not answer are left out."""
    return read_broker_config(admin, brokers, SELECTOR_CONFIG)


def add_groups(admin: Any, doc: dict[str, Any],
               client: Mapping[str, Any] | None = None) -> None:
    """Fill a snapshot document (core.live.read_snapshot's) with every consumer group
    and the alive brokers' replica selectors."""
    selectors = read_replica_selectors(admin, [b["id"] for b in doc["brokers"] if b["alive"]])
    for b in doc["brokers"]:
        if selectors.get(b["id"]):
            b["replica_selector"] = selectors[b["id"]]
    doc["consumer_groups"] = read_groups(admin, client=client)
