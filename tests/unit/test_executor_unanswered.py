"""serve decides nothing on a read in which a registered broker did not answer
DescribeLogDirs, for a while: that broker's dirs are only the last known ones (a broker
just restarted with a replaced disk still shows the old one offline)."""

from __future__ import annotations

import pytest

from core.live import PlacementMemory, read_snapshot
from remediation.executor import cluster as module
from remediation.executor.cluster import ClusterError, KafkaCluster
from tests.unit.test_live_reuse import Admin


class Silent(Admin):
    """Broker 2 does not answer DescribeLogDirs while ``silent``."""

    def __init__(self) -> None:
        super().__init__({"t": {0: [0, 1], 1: [1, 2], 2: [2, 0]}})
        self.silent = True

    def describe_log_dirs(self, brokers: list[int]) -> list[dict]:
        if self.silent and brokers == [2]:
            raise ConnectionError("connection refused by a restarting broker")
        return super().describe_log_dirs(brokers)

    def list_partition_reassignments(self) -> dict:
        return {}


@pytest.fixture(autouse=True)
def no_pause(monkeypatch):
    import core.live

    monkeypatch.setattr(core.live.time, "sleep", lambda _s: None)


def test_a_read_says_which_registered_brokers_did_not_answer():
    admin = Silent()
    memory = PlacementMemory()
    read_snapshot(admin, "c", memory)
    assert memory.unanswered == {2}
    admin.silent = False
    read_snapshot(admin, "c", memory)
    assert memory.unanswered == frozenset()


def test_serve_waits_for_a_silent_broker_then_uses_its_last_known_dirs(monkeypatch):
    admin = Silent()
    admin.silent = False
    kafka = KafkaCluster(admin, "c")
    assert kafka.read().model.alive == {0, 1, 2}  # known once
    admin.silent = True
    now = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    with pytest.raises(ClusterError, match=r"broker 2 did not answer DescribeLogDirs"):
        kafka.read()
    now[0] += module.UNANSWERED_WAIT_SECONDS - 1
    with pytest.raises(ClusterError):
        kafka.read()
    now[0] += 2  # silent for longer than the wait: decide on what was known
    view = kafka.read()
    assert {d.path for d in view.model.snapshot.brokers[2].log_dirs} == {"/d2"}
    admin.silent = False  # it answers again: a later silence waits again
    kafka.read()
    admin.silent = True
    with pytest.raises(ClusterError):
        kafka.read()


def test_a_silent_broker_is_kept_even_when_the_reassignment_list_fails_too():
    # A broker killed in KRaft may be the one the admin asks for the reassignments: that
    # call fails too, and the silence must still be on record (`KafkaCluster.silent`).
    admin = Silent()

    def dead_controller() -> dict:
        raise ConnectionError("NodeNotReadyError: 2")

    admin.list_partition_reassignments = dead_controller  # type: ignore[method-assign]
    kafka = KafkaCluster(admin, "c")
    with pytest.raises(ClusterError, match=r"broker 2 did not answer DescribeLogDirs"):
        kafka.read()
    assert kafka.silent() == {2}
    admin.silent = False
    with pytest.raises(ClusterError, match=r"ListPartitionReassignments failed"):
        kafka.read()
    assert kafka.silent() == frozenset()
