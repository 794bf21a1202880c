"""Log-dir cordoning (KIP-1066) on Kafka 4.4 through the executor's cordon step: no new
replica lands on the cordoned dir, the snapshot records it, and the undo takes only our
dir away, giving back exactly the value an operator had set by hand."""

from __future__ import annotations

import uuid

import pytest

from core.live import open_admin, read_snapshot
from core.plan.cordon import unsupported
from remediation.executor import cordoning
from remediation.executor.cluster import ClusterError, KafkaCluster
from remediation.executor.cordon import KEY
from sandbox import traffic
from sandbox.state import SandboxState
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def _snapshot(state: SandboxState) -> dict:
    with open_admin(state.bootstrap_servers) as admin:
        return read_snapshot(admin, "cordon-test")


def _cordoned(state: SandboxState) -> set[tuple[int, str]]:
    return {(b["id"], d["path"]) for b in _snapshot(state)["brokers"]
            for d in b["log_dirs"] if d.get("cordoned")}


def _dirs_of(state: SandboxState, topic: str, broker: int) -> set[str]:
    """The dirs of the broker's replicas of `topic`, once the broker reports each of them
    (a follower's log is created moments after its leader is elected: its dir is None in
    DescribeLogDirs until then)."""
    def found() -> set[str | None]:
        return {r["log_dir"] for p in _snapshot(state)["partitions"] if p["topic"] == topic
                for r in p["replicas"] if r["broker"] == broker}
    return wait_until(lambda: (dirs := found()) and None not in dirs and dirs,
                      f"every replica of {topic} on broker {broker} in a dir", timeout=30)


def _own_value(kafka: KafkaCluster, broker: int) -> str | None:
    return kafka.cordon_config(broker).dynamic


def test_a_cordoned_dir_gets_no_new_replica_and_the_undo_restores_the_operators_value(
        kraft_sandbox: SandboxState) -> None:
    state = kraft_sandbox
    broker = state.brokers[0].node_id
    closed, open_ = state.broker(broker).log_dirs[:2]
    others = [b.node_id for b in state.brokers if b.node_id != broker]
    topics = [f"cordon-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    created: list[str] = []
    with open_admin(state.bootstrap_servers) as admin:
        kafka = KafkaCluster(admin)
        assert unsupported(kafka.metadata_level()) is None  # 4.4: 4.3-IV0 or later
        # the snapshot carries the same level, so the job proposes cordons here
        assert _snapshot(state)["metadata_level"] == kafka.metadata_level()
        try:
            # An operator's own cordon first, by hand: the dir the test keeps open.
            kafka.alter_configs({f"broker:{broker}": {KEY: open_}})
            wait_until(lambda: kafka.cordoned_dirs(broker) == {open_},
                       "the operator's cordon applied", timeout=30)
            entry = cordoning.cordon(kafka, broker, closed)
            assert entry == {"broker": broker, "path": closed, "added": True,
                             "dynamic_before": open_}
            assert kafka.cordoned_dirs(broker) == {closed, open_}
            assert {(broker, closed), (broker, open_)} <= _cordoned(state)
            # cordoning a dir that is cordoned already adds nothing, so undoes nothing
            again = cordoning.cordon(kafka, broker, open_)
            assert again["added"] is False and cordoning.uncordon(kafka, again) is False
            assert cordoning.uncordon(kafka, entry) is True
            assert _own_value(kafka, broker) == open_  # the operator's value, exactly
            assert kafka.cordoned_dirs(broker) == {open_}

            # The operator lifts theirs; ours alone: the broker's other dir stays open.
            kafka.alter_configs({f"broker:{broker}": {KEY: None}})
            wait_until(lambda: not kafka.cordoned_dirs(broker), "the operator's cordon lifted",
                       timeout=30)
            entry = cordoning.cordon(kafka, broker, closed)
            assert entry["added"] is True and entry["dynamic_before"] is None
            assert _cordoned(state) & {(broker, closed), (broker, open_)} == {(broker, closed)}
            # A new topic on every broker: broker's replicas all land in the open dir.
            created.append(topics[0])
            traffic.create_topic(state, topics[0], partitions=6,
                                 replication_factor=len(state.brokers))
            assert _dirs_of(state, topics[0], broker) == {open_}
            # A reassignment bringing replicas onto the broker: they land there too.
            created.append(topics[1])
            traffic.create_topic(state, topics[1], partitions=4, replication_factor=1)
            moving = {(topics[1], p): [broker] for p in range(4)}
            placed = {p["partition"] for p in _snapshot(state)["partitions"]
                      if p["topic"] == topics[1] and p["replicas"][0]["broker"] in others}
            assert kafka.reassign(moving) == {}
            wait_until(lambda: all(r["broker"] == broker for p in _snapshot(state)["partitions"]
                                   if p["topic"] == topics[1] for r in p["replicas"]),
                       "the reassignment onto the cordoned broker done", timeout=60)
            assert placed and _dirs_of(state, topics[1], broker) == {open_}
            # And a disk move into the cordoned dir is refused by the broker.
            refused = kafka.move_dirs({(topics[0], 0, broker): closed})
            # (Kafka's InvalidReplicaAssignmentException, as kafka-python names it)
            assert refused == {(topics[0], 0, broker): "InvalidReplicationAssignmentError"}
            # The undo deletes the dynamic value it added: the broker is as it was.
            assert cordoning.uncordon(kafka, entry) is True
            assert _own_value(kafka, broker) is None
            assert not kafka.cordoned_dirs(broker) and not _cordoned(state)
        finally:
            try:
                kafka.alter_configs({f"broker:{broker}": {KEY: None}})
            except ClusterError:
                pass
            for topic in created:
                traffic.delete_topic(state, topic)


def test_a_client_clamped_to_3_9_still_sees_a_cordon(kraft_sandbox: SandboxState) -> None:
    """kafka-python keeps the versions of the first broker it reached: a serve started
    before an upgrade speaks DescribeLogDirs v4 to 4.4 brokers (no IsCordoned). The
    executor asks at the broker's own version (core.api_support.cordoned_dirs)."""
    from kafka import KafkaAdminClient

    from core.api_support import behind, read_versions, used_versions

    state = kraft_sandbox
    broker = state.brokers[0].node_id
    path = state.broker(broker).log_dirs[0]
    old = KafkaAdminClient(bootstrap_servers=state.bootstrap_servers, api_version=(3, 9))
    with open_admin(state.bootstrap_servers) as admin:
        kafka = KafkaCluster(admin)
        try:
            kafka.alter_configs({f"broker:{broker}": {KEY: path}})
            wait_until(lambda: kafka.cordoned_dirs(broker) == {path}, "the cordon applied",
                       timeout=30)
            (reply,) = old.describe_log_dirs(brokers=[broker])
            assert not any(d.get("is_cordoned") for d in reply["log_dirs"])  # v4: unseen
            assert behind(used_versions(old), read_versions(old, [broker])) == [
                "DescribeLogDirs v5"]
            assert KafkaCluster(old).cordoned_dirs(broker) == {path}
        finally:
            old.close()
            kafka.alter_configs({f"broker:{broker}": {KEY: None}})
