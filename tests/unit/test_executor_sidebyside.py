"""No fix waits behind a slow or stuck one: an approved action starts beside the actions
in flight unless they share a partition or a throttle config (`sidebyside.py`); one that
waits says for what, once, and starts when the way is clear."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.signing import ActionSigner
from remediation.executor.lifecycle import State
from remediation.executor.policy import Policy
from remediation.executor.runner import Executor
from remediation.executor.sidebyside import blocker, held, wanted
from remediation.executor.store import ActionStore
from remediation.executor.view import LiveView
from schemas.records import Action
from tests.unit.plan_snapshots import GIB, partition
from tests.unit.test_executor_checks import action, cluster, move
from tests.unit.test_executor_midway import SKEWED, Cluster

# u-0 lost its replica on broker 3's failed /d2; broker 1's dirs are skewed (SKEWED).
LOST = partition("u", 0, [(2, "/d1", GIB), (3, "/d2", GIB)], leader=2, isr=[2])
LOST_TOO = partition("u", 1, [(2, "/d1", GIB), (3, "/d2", GIB)], leader=2, isr=[2])


def fix_u(partition_: int, replicas: list[int]) -> Action:
    return action("fix_offline_replicas", {"version": 1, "partitions": [
        {"topic": "u", "partition": partition_, "replicas": replicas}]})


def approve(store: ActionStore, *actions: Action) -> None:
    for a in actions:
        store.propose(a)
        store.transition(a.action_id, State.APPROVED, "test", "approved for the test")


def executor(tmp_path: Path, view: LiveView) -> tuple[Executor, Cluster]:
    kafka = Cluster(view)
    return Executor(ActionStore(tmp_path / "actions.db"), kafka, Policy(),  # type: ignore[arg-type]
                    signer=ActionSigner("k"), log=lambda _m: None), kafka


def state(ex: Executor, a: Action) -> State:
    row = ex.store.get(a.action_id)
    assert row is not None
    return row.state


def audit(ex: Executor, a: Action) -> list[str]:
    return [x.reason for x in ex.store.audit(a.action_id)]


def test_a_fix_starts_beside_a_disk_move_that_is_still_running(tmp_path: Path) -> None:
    slow, fix = move(1, "/d2", [1, 2]), fix_u(0, [2, 4])
    view = cluster(*SKEWED, LOST, offline=(3,))
    ex, kafka = executor(tmp_path, view)
    approve(ex.store, slow)
    ex.tick()
    kafka.view = LiveView(view.model, future={("t", 0, 1): "/d2"})  # crawling, not done
    ex.tick()
    assert state(ex, slow) is State.EXECUTING
    approve(ex.store, fix)
    ex.tick()
    assert state(ex, slow) is State.EXECUTING and state(ex, fix) is State.EXECUTING
    assert ("reassign", {("u", 0): [2, 4]}) in kafka.calls
    assert not any(a.startswith("waits to start") for a in audit(ex, fix))


def test_an_action_on_a_partition_in_flight_waits_and_says_for_which_once(
        tmp_path: Path) -> None:
    first, second = fix_u(0, [2, 4]), fix_u(0, [2, 1])
    ex, kafka = executor(tmp_path, cluster(LOST, offline=(3,)))
    approve(ex.store, first)
    ex.tick()
    approve(ex.store, second)
    ex.tick()
    ex.tick()
    assert state(ex, first) is State.EXECUTING and state(ex, second) is State.APPROVED
    waits = [a for a in audit(ex, second) if a.startswith("waits to start")]
    assert waits == [f"waits to start: action {first.action_id[:12]} is moving u-0"]
    assert [c for c in kafka.calls if c[0] == "reassign"] == [("reassign", {("u", 0): [2, 4]})]


def test_actions_that_would_set_the_same_throttle_wait_until_the_first_restores_it(
        tmp_path: Path) -> None:
    first, second = fix_u(0, [2, 4]), fix_u(1, [2, 4])
    view = cluster(LOST, LOST_TOO, offline=(3,))
    ex, kafka = executor(tmp_path, view)
    approve(ex.store, first)
    ex.tick()
    approve(ex.store, second)
    ex.tick()
    assert state(ex, second) is State.APPROVED
    (why,) = [a for a in audit(ex, second) if a.startswith("waits to start")]
    assert why == (f"waits to start: action {first.action_id[:12]} holds the throttle "
                   "follower.replication.throttled.rate on broker:2 (each restores what it "
                   "found: the later end would leave the other's behind)")
    # The first is done and restores its throttles: the second starts, finding none of them.
    done = partition("u", 0, [(2, "/d1", GIB), (4, "/d1", GIB)], leader=2, isr=[2, 4])
    kafka.view = cluster(done, LOST_TOO, offline=(3,))
    ex.tick()
    assert state(ex, first) is State.SUCCEEDED and state(ex, second) is State.EXECUTING
    rate = str(Policy().limits.inter_broker_throttle_bytes_per_s)
    assert kafka.set["broker:4"]["leader.replication.throttled.rate"] == rate
    row = ex.store.get(second.action_id)
    assert row is not None
    saved: dict[str, Any] = row.journal["throttles"]["inter"]["saved"]
    assert saved["broker:4"] == {"leader.replication.throttled.rate": None,
                                 "follower.replication.throttled.rate": None}


def test_the_keys_held_include_the_sources_the_journal_saved_outside_the_targets() -> None:
    a = fix_u(0, [2, 4])
    journal = {"throttles": {"inter": {"restored": False, "saved": {
        "broker:7": {"leader.replication.throttled.rate": None}}}}}
    assert ("broker:7", "leader.replication.throttled.rate") in held(a, journal)
    restored = {"throttles": {"inter": {**journal["throttles"]["inter"], "restored": True}}}
    assert ("broker:7", "leader.replication.throttled.rate") not in held(a, restored)
    view = cluster(LOST, offline=(3,))
    assert wanted(move(1, "/d2", [1, 2]), view) == {
        ("broker:1", "replica.alter.log.dirs.io.max.bytes.per.second")}
    assert blocker(a, view, []) is None


def test_a_dead_broker_fix_starts_in_the_pass_that_ends_the_copy_stuck_on_that_broker(
        tmp_path: Path) -> None:
    # t-0's fix copies onto broker 4; broker 4 dies, and u-0 loses its replica there too.
    stuck = action("fix_offline_replicas", {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 4]}]})
    broken_t = partition("t", 0, [(1, "/d1", GIB), (3, "/d2", GIB)], leader=1, isr=[1])
    on_4 = partition("u", 0, [(2, "/d1", GIB), (4, "/d1", GIB)], leader=2, isr=[2])
    ex, kafka = executor(tmp_path, cluster(broken_t, on_4, offline=(3,)))
    approve(ex.store, stuck)
    ex.tick()
    assert state(ex, stuck) is State.EXECUTING
    dead_fix = fix_u(0, [2, 1])
    approve(ex.store, dead_fix)
    kafka.view = cluster(broken_t, on_4, offline=(3,), dead=4)
    ex.tick()
    assert state(ex, stuck) is State.FAILED
    assert state(ex, dead_fix) is State.EXECUTING
    assert ("reassign", {("u", 0): [2, 1]}) in kafka.calls
    assert not any(a.startswith("waits to start") for a in audit(ex, dead_fix))
