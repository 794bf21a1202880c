"""Verification means healthy: each way the live cluster could fool a check into a false
`succeeded` is shown here, on the hand-built views of test_executor_checks."""

from __future__ import annotations

import pytest

from remediation.executor import cluster as module
from remediation.executor.cluster import KafkaCluster
from remediation.executor.progress import verify
from remediation.executor.view import LiveView
from tests.unit.plan_snapshots import GIB, partition
from tests.unit.test_executor_checks import cluster, fix, move
from tests.unit.test_executor_unanswered import Silent


def test_an_offline_dir_still_listing_its_replicas_is_not_their_target_state() -> None:
    # Broker 4's /d2 failed after the copy: the memory keeps the replica's last path there.
    stale = cluster(partition("t", 0, [(1, "/d1", GIB), (4, "/d2", GIB)]), offline=(4,))
    assert verify(fix([1, 4], ["any", "/d2"]), stale) == [
        "t-0 has offline replicas on brokers [4]",
        "t-0 on broker 4: its target dir /d2 is offline"]
    moved = cluster(partition("t", 0, [(1, "/d2", GIB), (2, "/d1", GIB)]), offline=(1,))
    assert verify(move(1, "/d2", [1, 2]), moved) == [
        "t-0 has offline replicas on brokers [1]",
        "t-0 on broker 1: its target dir /d2 is offline"]


def test_a_move_whose_future_replica_vanished_is_not_done() -> None:
    # The target dir failed mid-move: the future replica went with it, the replica is
    # still in /d1 and online, and the broker now has an offline dir.
    lost = cluster(partition("t", 0, [(1, "/d1", GIB), (2, "/d1", GIB)]), offline=(1,))
    assert verify(move(1, "/d2", [1, 2]), lost) == [
        "t-0 on broker 1: its target dir /d2 is offline"]
    # The dir is fine but the move ended without arriving.
    dropped = cluster(partition("t", 0, [(1, "/d1", GIB), (2, "/d1", GIB)]))
    assert verify(move(1, "/d2", [1, 2]), dropped) == [
        "t-0 on broker 1 is in /d1, the plan says /d2"]
    # Still a future replica: not done either.
    moving = LiveView(dropped.model, future={("t", 0, 1): "/d2"})
    assert verify(move(1, "/d2", [1, 2]), moving) == ["t-0 on broker 1 is still moving to /d2"]


def test_a_broker_absent_from_the_answer_is_not_taken_on_its_last_known_dirs() -> None:
    there = cluster(partition("t", 0, [(1, "/d2", GIB), (2, "/d1", GIB)]))
    assert verify(move(1, "/d2", [1, 2]), there) == []
    silent = LiveView(there.model, answered=frozenset({2, 3, 4}))
    assert verify(move(1, "/d2", [1, 2]), silent) == [
        "t-0: brokers [1] did not answer DescribeLogDirs; where their replicas are is not "
        "known"]
    gone = cluster(partition("t", 0, [1, 4]), dead=4)
    assert "t-0: brokers [4] are down" in verify(fix([1, 4]), gone)


def test_a_fix_tolerates_a_replica_it_cannot_place_only_while_it_is_online() -> None:
    # Broker 3 has an offline dir, so Kafka refuses to move its replica into /d1.
    placed = cluster(partition("t", 0, [(1, "/d1", GIB), (3, "/d1", GIB)]), offline=(3,))
    assert verify(fix([1, 3], ["any", "/d1"]), placed) == []
    on_failed = cluster(partition("t", 0, [(1, "/d1", GIB), (3, "/d2", GIB)]), offline=(3,))
    assert verify(fix([1, 3], ["any", "/d1"]), on_failed) == [
        "t-0 has offline replicas on brokers [3]"]


def test_a_read_says_which_brokers_answered_and_takes_their_moves_from_that_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import core.live

    monkeypatch.setattr(core.live.time, "sleep", lambda _s: None)
    admin = Silent()
    admin.silent = False
    kafka = KafkaCluster(admin, "c")
    assert kafka.read(future_of=[0, 1, 2]).answered == {0, 1, 2}
    admin.silent = True
    now = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    with pytest.raises(module.ClusterError):
        kafka.read()
    now[0] += module.UNANSWERED_WAIT_SECONDS + 1  # past the wait: last known dirs used
    view = kafka.read(future_of=[0, 1, 2])
    assert view.answered == {0, 1} and not view.heard(2)
