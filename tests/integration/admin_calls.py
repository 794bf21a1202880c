"""Every Admin call the product makes, made through the product's own code on one real
sandbox: the same body runs on each Kafka line and mode (test_admin_calls*.py), so a
request version a broker no longer serves (KIP-896 removed the oldest in 4.0) fails here
first. Each call is checked by what it did on the cluster, not by its reply alone."""

from __future__ import annotations

import uuid

from core import groups
from core.live import open_admin, read_snapshot
from remediation.executor.cluster import KafkaCluster
from sandbox import traffic, versions
from sandbox.state import SandboxState
from tests.polling import wait_until

# DescribeCluster, Metadata, DescribeLogDirs, ListPartitionReassignments,
# AlterPartitionReassignments, ElectLeaders, AlterReplicaLogDirs, DescribeConfigs,
# IncrementalAlterConfigs, ListGroups, DescribeGroups, ConsumerGroupDescribe (4.x)
THROTTLED = "leader.replication.throttled.replicas"


def _placement(state: SandboxState, topic: str) -> dict:
    with open_admin(state.bootstrap_servers) as admin:
        doc = read_snapshot(admin, "admin-calls")
    return next(p for p in doc["partitions"] if p["topic"] == topic and p["partition"] == 0)


def check_every_admin_call(state: SandboxState) -> None:
    topic = f"admin-calls-{uuid.uuid4().hex[:6]}"
    traffic.create_topic(state, topic, partitions=1, replication_factor=2)
    traffic.produce(state, topic, 20)
    try:
        # DescribeCluster + Metadata + DescribeLogDirs: every broker, every dir, sized
        with open_admin(state.bootstrap_servers) as admin:
            doc = read_snapshot(admin, "admin-calls")
        assert sorted(b["id"] for b in doc["brokers"]) == [b.node_id for b in state.brokers]
        for b in doc["brokers"]:
            dirs = b["log_dirs"]
            assert sorted(d["path"] for d in dirs) == sorted(state.broker(b["id"]).log_dirs)
            # DescribeLogDirs v4 (Kafka 3.3+): each dir's capacity, no exporter needed
            assert all(d["online"] and d["total_bytes"] > 0 and
                       0 < d["usable_bytes"] <= d["total_bytes"] for d in dirs), dirs
        before = _placement(state, topic)
        replicas = [r["broker"] for r in before["replicas"]]

        with open_admin(state.bootstrap_servers) as admin:
            kafka = KafkaCluster(admin)
            # AlterPartitionReassignments (a reorder, no data moves) + List...
            assert kafka.reassign({(topic, 0): replicas[::-1]}) == {}
            assert isinstance(kafka.reassignments(), dict)
            wait_until(lambda: [r["broker"] for r in _placement(state, topic)["replicas"]]
                       == replicas[::-1], "the reorder applied", timeout=30)
            # ElectLeaders (preferred): the new first replica leads
            wait_until(lambda: kafka.elect_preferred([(topic, 0)]) == {}
                       and traffic.leader_of(state, topic, 0) == replicas[-1],
                       "the preferred leader elected", timeout=30)
            # AlterReplicaLogDirs: the replica moves to the broker's other dir
            broker = replicas[0]
            here = next(r["log_dir"] for r in _placement(state, topic)["replicas"]
                        if r["broker"] == broker)
            there = next(d for d in state.broker(broker).log_dirs if d != here)
            assert kafka.move_dirs({(topic, 0, broker): there}) == {}
            wait_until(lambda: next(r["log_dir"] for r in _placement(state, topic)["replicas"]
                                    if r["broker"] == broker) == there,
                       "the replica in its new dir", timeout=60)
            # DescribeConfigs + IncrementalAlterConfigs: set, read back, delete
            resource = f"topic:{topic}"
            assert kafka.configs([resource], [THROTTLED]) == {resource: {THROTTLED: None}}
            # In KRaft a change reaches each broker through the metadata log: a read right
            # after the write may be answered by a broker that has not applied it yet (a
            # 4.4 run read the deleted value back once), so the reads wait for it.
            kafka.alter_configs({resource: {THROTTLED: f"0:{broker}"}})
            wait_until(lambda: kafka.configs([resource], [THROTTLED])
                       == {resource: {THROTTLED: f"0:{broker}"}}, "the config set", timeout=15)
            kafka.alter_configs({resource: {THROTTLED: None}})
            wait_until(lambda: kafka.configs([resource], [THROTTLED])
                       == {resource: {THROTTLED: None}}, "the config deleted", timeout=15)

        # ListGroups + DescribeGroups: a classic consumer group with its member's rack
        group = f"admin-calls-{uuid.uuid4().hex[:6]}"
        from confluent_kafka import Consumer

        consumer = Consumer({**traffic.client_config(state), "group.id": group,
                             "client.rack": "rack1", "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        try:
            def described() -> list:
                consumer.poll(0.2)
                with open_admin(state.bootstrap_servers) as admin:
                    return [g for g in groups.read_groups(admin) if g["group"] == group]
            (found,) = wait_until(described, "the consumer group described", timeout=60)
            assert [m["rack"] for m in found["members"]] == ["rack1"]
            assert found["members"][0]["assignment"] == [{"topic": topic, "partitions": [0]}]
            assert found["group_protocol"] == "classic"
        finally:
            consumer.close()
        if versions.line(state.kafka).consumer_protocol:
            _check_consumer_group_describe(state, topic)
    finally:
        traffic.delete_topic(state, topic)


def _check_consumer_group_describe(state: SandboxState, topic: str) -> None:
    """ListGroups v5 + ConsumerGroupDescribe: a KIP-848 group, its type and the broker's
    assignor (confluent-kafka: kafka-python has no ConsumerGroupDescribe)."""
    from confluent_kafka import Consumer

    group = f"admin-calls-848-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({**traffic.client_config(state), "group.id": group,
                         "group.protocol": "consumer", "client.rack": "rack1",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        def described() -> list:
            consumer.poll(0.2)
            with open_admin(state.bootstrap_servers) as admin:
                return [g for g in groups.read_groups(admin) if g["group"] == group
                        and g["members"][0]["assignment"]]
        (found,) = wait_until(described, "the KIP-848 group described", timeout=60)
        assert (found["group_protocol"], found["protocol"]) == ("consumer", "uniform")
        assert found["members"][0]["assignment"] == [{"topic": topic, "partitions": [0]}]
        assert found["racks_known"] is False  # librdkafka drops the member's RackId
    finally:
        consumer.close()
