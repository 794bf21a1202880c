"""`selfheal collect snapshots` puts real consumer groups in the snapshot: each member's
client.rack (decoded from its subscription metadata), topics and assignment, the group's
assignor, and the brokers' replica selectors; locality is measured on that snapshot."""

from __future__ import annotations

import re
import threading
import uuid

import pytest

from core.locality import diagnose, locality
from core.model import ClusterModel
from sandbox.status import kafka_admin
from schemas.snapshot import ConsumerGroup, parse_snapshot
from tests.integration.collect_support import Collector, TopicReader, snapshots
from tests.integration.serve_harness import placed_topic
from tests.polling import wait_until

pytestmark = pytest.mark.integration

SNAPSHOTS = "selfheal.cluster-snapshots"


class Consumer:
    """One real confluent-kafka group member (client.rack when given), polling on a thread;
    ``strategy`` None: a KIP-848 member (`group.protocol=consumer`, the broker assigns)."""

    def __init__(self, servers: str, group: str, topic: str, client_id: str,
                 rack: str | None, strategy: str | None = "range") -> None:
        from confluent_kafka import Consumer as Client

        config: dict[str, object] = {"bootstrap.servers": servers, "group.id": group,
                                     "client.id": client_id, "enable.auto.commit": False}
        if strategy is None:
            config["group.protocol"] = "consumer"  # no client assignor or session timeout
        else:
            config |= {"partition.assignment.strategy": strategy, "session.timeout.ms": 10000}
        if rack is not None:
            config["client.rack"] = rack
        self.client_id = client_id
        self.consumer = Client(config)
        self.consumer.subscribe([topic])
        self.assigned: list[int] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            self.consumer.poll(0.2)
            self.assigned = sorted(tp.partition for tp in self.consumer.assignment())
        self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)


def test_a_real_group_appears_in_the_snapshot_with_its_members_racks_and_assignment(sandbox):
    racks = {b.node_id: b.rack for b in sandbox.brokers}  # 0: rack1, 1: rack2, 2: rack3
    # Leaders on brokers 1, 0, 0 and 2; every partition also has a replica on broker 0.
    placement = {0: [1, 0], 1: [0, 2], 2: [0, 1], 3: [2, 0]}
    topic = placed_topic(sandbox, "groups-snapshot", placement)
    group = f"groups-snapshot-{uuid.uuid4().hex[:6]}"
    wanted = {"near-rack2": racks[1], "near-rack3": racks[2], "no-rack": None}
    members = [Consumer(sandbox.bootstrap_servers, group, topic, client_id, rack)
               for client_id, rack in wanted.items()]
    try:
        wait_until(lambda: sorted(p for m in members for p in m.assigned) == [0, 1, 2, 3]
                   and all(m.assigned for m in members[:2]),
                   "the group consuming every partition", 90)

        def group_in(messages):
            for message in reversed(snapshots(messages)):
                snapshot = parse_snapshot(message.value)  # loads and validates
                found = {g.group: g for g in snapshot.consumer_groups}.get(group)
                if found is not None:
                    return snapshot, found
            return None

        # librdkafka's range assignor turns rack-aware once its metadata carries the
        # racks, so the group may rebalance once more after its first assignment: a
        # snapshot taken across that is taken again (the members' assignment read after
        # it must be the one it recorded).
        for _ in range(3):
            with TopicReader(sandbox, SNAPSHOTS) as reader, \
                    Collector(sandbox, ["snapshots", "--once"]) as once:
                assert once.proc.wait(timeout=180) == 0, once.text()
                snapshot, found = reader.wait_for(group_in,
                                                  what=f"snapshot with group {group}")
            held = {m.client_id: m.assigned for m in members}
            if _held(found) == held and found.state == "Stable":
                break
        assert _held(found) == held, (_held(found), held)
        assert re.search(r"partitions, \d+ offline dirs, [1-9]\d* consumer groups",
                         once.text()), once.text()
        assert "WARNING" not in once.text(), once.text()
    finally:
        for m in members:
            m.stop()

    assert (found.protocol_type, found.protocol, found.state) == ("consumer", "range", "Stable")
    by_client = {m.client_id: m for m in found.members}
    assert set(by_client) == set(wanted)
    for client_id, rack in wanted.items():
        member = by_client[client_id]
        assert member.rack == rack, client_id  # decoded from the subscription (v3)
        assert member.topics == (topic,)
        assert member.member_id.startswith(client_id)
    # The sandbox sets no replica selector: consumers read from leaders.
    assert all(b.replica_selector is None and not b.follower_fetching
               for b in snapshot.brokers if b.alive)

    # Locality on the real snapshot, against a count made here from the placement.
    model = ClusterModel(snapshot)
    local = sum(1 for client_id, parts in held.items() for p in parts
                if wanted[client_id] is not None and racks[placement[p][0]] == wanted[client_id])
    measured = locality(model, found)
    assert (measured.local, measured.partitions) == (local, 4)
    assert measured.ratio == pytest.approx(local / 4)
    diagnosis = diagnose(model, found)
    assert [m for m, _ in diagnosis.members_without_rack] == [by_client["no-rack"].member_id]
    assert set(diagnosis.brokers_without_selector) == {placement[p][0] for p in range(4)}


def _held(group: ConsumerGroup) -> dict[str, list[int]]:
    return {m.client_id: sorted(p for _t, p in m.assigned()) for m in group.members}


def test_the_groups_the_collector_reads_match_describe_groups(sandbox):
    """The reader the DAG and the collector share, on a group it is asked for by name."""
    from core.groups import (
        current_assignment,
        read_broker_config,
        read_groups,
        read_replica_selectors,
    )

    topic = placed_topic(sandbox, "groups-read", {0: [0, 1], 1: [1, 2]})
    group = f"groups-read-{uuid.uuid4().hex[:6]}"
    member = Consumer(sandbox.bootstrap_servers, group, topic, "solo", "rack1")
    try:
        wait_until(lambda: member.assigned == [0, 1], "the member holding both partitions", 90)
        with kafka_admin(sandbox) as admin:
            (record,) = read_groups(admin, [group, "nobody-home"])
            now = current_assignment(admin, group)
    finally:
        member.stop()
    with kafka_admin(sandbox) as admin:
        # Every broker answers DescribeConfigs: the selector is unset on the sandbox, and
        # the same read returns a config that is set (broker.rack).
        selectors = read_replica_selectors(admin, [b.node_id for b in sandbox.brokers])
        racks = read_broker_config(admin, [b.node_id for b in sandbox.brokers], "broker.rack")
    assert selectors == {b.node_id: None for b in sandbox.brokers}
    assert racks == {b.node_id: b.rack for b in sandbox.brokers}
    (m,) = record["members"]
    assert (m["client_id"], m["rack"], m["topics"]) == ("solo", "rack1", [topic])
    assert m["assignment"] == [{"topic": topic, "partitions": [0, 1]}]
    assert now == {m["member_id"]: [(topic, 0), (topic, 1)]}
