"""The least-privilege ACLs each process needs, from Kafka's own checks (KafkaApis,
ControllerApis). One table: docs/security.md prints it, `selfheal doctor` probes it.

Names are shown with the default topic prefix ``selfheal.``; a PREFIXED row grants every
name starting with it. ``*`` is Kafka's wildcard (every topic or group of the monitored
cluster: the snapshot and the planners read all of them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Acl:
    process: str  # collect-metrics, collect-zk, collect-snapshots, stream, serve, airflow, consumer
    resource: str  # Cluster, Topic, Group
    name: str
    pattern: str  # LITERAL or PREFIXED
    operation: str
    why: str
    on: str = "cluster"  # "cluster" (the monitored one) or "bus"


_P = "selfheal."
TABLE: tuple[Acl, ...] = (
    # every process that writes the bus: its records (idempotent producer: Write suffices
    # since Kafka 3.0, KIP-679)
    Acl("collect-metrics", "Topic", _P + "broker-metrics", "LITERAL", "Write",
        "produce samples", "bus"),
    Acl("collect-metrics", "Topic", "*", "LITERAL", "Describe",
        "discovery's metadata (which brokers, racks)"),
    Acl("collect-zk", "Topic", _P + "logdir-events", "LITERAL", "Write",
        "produce ZooKeeper log-dir events", "bus"),
    Acl("collect-snapshots", "Cluster", "kafka-cluster", "LITERAL", "Describe",
        "DescribeLogDirs (denied: an EMPTY answer, read as an error)"),
    Acl("collect-snapshots", "Topic", "*", "LITERAL", "Describe",
        "Metadata of every topic in the snapshot"),
    Acl("collect-snapshots", "Group", "*", "LITERAL", "Describe",
        "consumer groups' members and racks (locality)"),
    Acl("collect-snapshots", "Topic", _P + "cluster-snapshots", "LITERAL", "Write",
        "produce snapshots", "bus"),
    Acl("collect-snapshots", "Topic", _P + "logdir-events", "LITERAL", "Write",
        "produce KRaft log-dir events", "bus"),
    Acl("stream", "Topic", _P, "PREFIXED", "Read", "Spark's Kafka source", "bus"),
    Acl("stream", "Group", "spark-kafka-source", "PREFIXED", "Read",
        "Spark's source group ids (spark-kafka-source-<uuid>)", "bus"),
    Acl("stream", "Group", "selfheal-stream-chunks", "LITERAL", "Read",
        "a snapshot's chunks outside its batch", "bus"),
    Acl("stream", "Topic", _P + "actions", "LITERAL", "Write", "proposed actions", "bus"),
    Acl("stream", "Topic", _P + "dead-letter", "LITERAL", "Write", "bad records", "bus"),
    Acl("serve", "Cluster", "kafka-cluster", "LITERAL", "Alter",
        "AlterPartitionReassignments, AlterReplicaLogDirs, ElectLeaders"),
    Acl("serve", "Cluster", "kafka-cluster", "LITERAL", "Describe",
        "ListPartitionReassignments, DescribeLogDirs"),
    Acl("serve", "Cluster", "kafka-cluster", "LITERAL", "AlterConfigs",
        "replication throttle rates on brokers"),
    Acl("serve", "Cluster", "kafka-cluster", "LITERAL", "DescribeConfigs",
        "the throttles an operator set (restored exactly)"),
    Acl("serve", "Topic", "*", "LITERAL", "AlterConfigs",
        "throttled-replica lists on the topics moved"),
    Acl("serve", "Topic", "*", "LITERAL", "DescribeConfigs", "the topic throttles found"),
    Acl("serve", "Topic", "*", "LITERAL", "Describe", "Metadata before each step"),
    Acl("serve", "Topic", _P + "actions", "LITERAL", "Read", "intake", "bus"),
    Acl("serve", "Group", "selfheal-executor", "LITERAL", "Read",
        "intake group ([serve] intake_group)", "bus"),
    Acl("serve", "Topic", _P + "action-status", "LITERAL", "Write", "state changes", "bus"),
    Acl("serve", "Topic", _P + "consumer-assignments", "LITERAL", "Write",
        "consumer targets", "bus"),
    Acl("serve", "Topic", _P + "executor-lock", "LITERAL", "Read",
        "KRaft lease (no ZooKeeper)", "bus"),
    Acl("serve", "Group", "selfheal-executor-lock-", "PREFIXED", "Read",
        "KRaft lease group", "bus"),
    Acl("serve", "Cluster", "kafka-cluster", "LITERAL", "Create",
        "only to create the selfheal.* topics itself (else create them beforehand)", "bus"),
    Acl("airflow", "Cluster", "kafka-cluster", "LITERAL", "Describe",
        "DescribeLogDirs for the periodic plans"),
    Acl("airflow", "Topic", "*", "LITERAL", "Describe", "Metadata"),
    Acl("airflow", "Group", "*", "LITERAL", "Describe", "consumer groups for locality plans"),
    Acl("consumer", "Topic", _P + "consumer-assignments", "LITERAL", "Read",
        "the helper's targets", "bus"),
    Acl("consumer", "Group", "<group>.selfheal-targets", "LITERAL", "Read",
        "the helper's target reader", "bus"),
    Acl("consumer", "Group", "<group>", "LITERAL", "Describe",
        "the application's own group (with its usual Read)"),
)

PROCESSES = tuple(dict.fromkeys(a.process for a in TABLE))


def for_process(process: str) -> list[Acl]:
    return [a for a in TABLE if a.process == process]
