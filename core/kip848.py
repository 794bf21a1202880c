"""Read KIP-848 consumer groups (`group.protocol=consumer`) into the snapshot.

Such a group is described by ConsumerGroupDescribe, not DescribeGroups (which answers
GROUP_ID_NOT_FOUND for it on 4.x). kafka-python 3.0 has no ConsumerGroupDescribe;
confluent-kafka does (`describe_consumer_groups`): the group's type, the broker's
assignor and each member's assignment. Kafka's answer carries each member's RackId,
but librdkafka 2.16 does not surface it, so these groups are recorded with
`racks_known: false` and no member rack: unknown, not unset (docs/facts.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

BROKER_PROTOCOL = "consumer"  # ListGroups v5 GroupType / the client's group.protocol
# confluent-kafka's ConsumerGroupState names -> Kafka's state strings. A KIP-848 group's
# Assigning and Reconciling come through librdkafka as UNKNOWN.
_STATES = {"STABLE": "Stable", "EMPTY": "Empty", "DEAD": "Dead",
           "PREPARING_REBALANCING": "PreparingRebalance",
           "COMPLETING_REBALANCING": "CompletingRebalance"}


def client_config(admin: Any) -> dict[str, Any]:
    """A confluent-kafka client config reaching the cluster a kafka-python admin does, with
    the [cluster.security] that admin was opened with (core.live.open_admin keeps it)."""
    from core.security import KafkaSecurity, confluent_settings

    config = getattr(admin, "config", {}) or {}
    servers = config.get("bootstrap_servers", "")
    security = getattr(admin, "selfheal_security", None) or KafkaSecurity()
    return {"bootstrap.servers": servers if isinstance(servers, str) else ",".join(servers),
            "client.id": str(config.get("client_id") or "selfheal"),
            **confluent_settings(security)}


def member_record(member: Any) -> dict[str, Any]:
    """One confluent-kafka MemberDescription as a snapshot member. Its subscription is
    not in the answer either: `topics` are the topics it is assigned."""
    assigned: dict[str, set[int]] = {}
    for tp in getattr(member.assignment, "topic_partitions", None) or []:
        assigned.setdefault(tp.topic, set()).add(int(tp.partition))
    return {
        "member_id": member.member_id,
        "group_instance_id": member.group_instance_id or None,
        "client_id": member.client_id or "",
        "rack": None,
        "topics": sorted(assigned),
        "assignment": [{"topic": t, "partitions": sorted(ps)}
                       for t, ps in sorted(assigned.items())],
    }


def group_record(description: Any) -> dict[str, Any] | None:
    """One ConsumerGroupDescription of a KIP-848 group as a snapshot group; None when it
    is of another type or has no members."""
    kind = getattr(getattr(description, "type", None), "name", "")
    if kind != "CONSUMER":
        return None
    members = [member_record(m) for m in description.members or [] if m.member_id]
    if not members:
        return None
    state = getattr(getattr(description, "state", None), "name", "UNKNOWN")
    return {
        "group": description.group_id,
        "protocol_type": "consumer",
        "protocol": description.partition_assignor or None,
        "state": _STATES.get(state, "Unknown"),
        "group_protocol": BROKER_PROTOCOL,
        "racks_known": False,
        "members": members,
    }


def read_groups(client: Mapping[str, Any], groups: Sequence[str],
                timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """ConsumerGroupDescribe of ``groups`` (KIP-848 groups), as snapshot groups, in the
    order given; a group gone since it was listed, or without members, is left out."""
    if not groups:
        return []
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(dict(client))  # must outlive its futures
    futures = admin.describe_consumer_groups(list(groups), request_timeout=timeout_s)
    out = []
    for name in groups:
        try:
            description = futures[name].result(timeout=timeout_s + 5)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.GROUP_ID_NOT_FOUND:
                continue  # left between the listing and the description
            raise
        record = group_record(description)
        if record is not None:
            out.append(record)
    return out
