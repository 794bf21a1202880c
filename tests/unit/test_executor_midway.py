"""A move's target that dies mid-way ends the action at once, `failed`, naming it and
saying what was done; never `succeeded`. On a cluster whose views the test sets, one
step at a time: the faults (a broker gone, a dir failed mid-move) at a chosen moment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.signing import ActionSigner
from remediation.executor.lifecycle import State
from remediation.executor.policy import Policy
from remediation.executor.runner import Executor
from remediation.executor.store import ActionStore
from remediation.executor.targets import dead
from remediation.executor.view import LiveView, Reassigning
from schemas.records import Action
from tests.unit.plan_snapshots import GIB, broker, doc, model, partition
from tests.unit.test_executor_checks import BROKEN, DIRS, OFF, cluster, fix, move


class Cluster:
    """Answers every read with `view`; records each change the executor asks for."""

    def __init__(self, view: LiveView) -> None:
        self.view = view
        self.calls: list[tuple[str, dict[Any, Any]]] = []
        self.set: dict[str, dict[str, str | None]] = {}

    def read(self, future_of: Any = (), topics: Any = None) -> LiveView:
        return self.view

    @property
    def last_view(self) -> LiveView:
        return self.view

    def up_brokers(self) -> set[str]:
        return {f"broker:{b}" for b in self.view.model.alive}

    def reassign(self, targets: dict[Any, Any]) -> dict[Any, str]:
        self.calls.append(("reassign", dict(targets)))
        return {}

    def move_dirs(self, moves: dict[Any, str]) -> dict[Any, str]:
        if moves:
            self.calls.append(("move_dirs", dict(moves)))
        return {}

    def configs(self, resources: Any, keys: Any) -> dict[str, dict[str, str | None]]:
        return {r: {k: self.set.get(r, {}).get(k) for k in keys} for r in resources}

    def alter_configs(self, configs: dict[str, dict[str, str | None]]) -> None:
        for r, values in configs.items():
            self.set.setdefault(r, {}).update(values)

    def beneath(self, brokers: Any, keys: Any) -> dict[str, dict[str, tuple[str, str]]]:
        return {}  # no cluster-wide default, no rate in server.properties

    def elect_preferred(self, partitions: Any) -> dict[Any, str]:
        return {}


def started(tmp_path: Path, action: Action, view: LiveView) -> tuple[Executor, Cluster]:
    store = ActionStore(tmp_path / "actions.db")
    store.propose(action)
    store.transition(action.action_id, State.APPROVED, "test", "approved for the test")
    kafka = Cluster(view)
    executor = Executor(store, kafka, Policy(), signer=ActionSigner("k"),  # type: ignore[arg-type]
                        log=lambda _m: None)
    executor.tick()
    assert store.get(action.action_id).state is State.EXECUTING  # type: ignore[union-attr]
    return executor, kafka


def ended(executor: Executor, action: Action) -> tuple[State, str, list[str]]:
    executor.tick()
    row = executor.store.get(action.action_id)
    assert row is not None
    return row.state, row.error or "", [a.reason for a in executor.store.audit(row.id)]


# Broker 1 is skewed (3 GiB in /d1, 1 GiB in /d2): the plan moves t-0's replica to /d2.
SKEWED = (partition("t", 0, [(1, "/d1", 3 * GIB), (2, "/d1", GIB)]),
          partition("t", 1, [(1, "/d2", GIB), (2, "/d2", GIB)]))


def test_a_disk_move_whose_target_dir_fails_ends_failed_never_succeeded(tmp_path: Path) -> None:
    action = move(1, "/d2", [1, 2])
    executor, kafka = started(tmp_path, action, cluster(*SKEWED))
    assert kafka.calls == [("move_dirs", {("t", 0, 1): "/d2"})]
    kafka.view = LiveView(cluster(*SKEWED).model, future={("t", 0, 1): "/d2"})
    executor.tick()
    assert executor.store.get(action.action_id).state is State.EXECUTING  # type: ignore[union-attr]
    # /d2 fails: the future replica goes with it; the replica is still in /d1, online.
    kafka.view = cluster(*SKEWED, offline=(1,))
    state, error, audit = ended(executor, action)
    assert state is State.FAILED
    assert error.startswith("a target died mid-way: log dir /d2 on broker 1, which the plan "
                            "puts replicas of t-0 in, is offline; 1 replica moves into it "
                            "lost (the replicas stay in their old dirs): t-0 on broker 1")
    assert not any("succeeded" in a or "target dirs" in a for a in audit), audit
    assert kafka.set == {"broker:1": {"replica.alter.log.dirs.io.max.bytes.per.second": None}}
    row = executor.store.get(action.action_id)
    assert row is not None and row.journal["target_died"]["targets"] == [
        {"broker": 1, "log_dir": "/d2", "partitions": [["t", 0]]}]


def test_a_copy_onto_a_broker_that_dies_is_cancelled_failed_and_planned_again_at_once(
        tmp_path: Path) -> None:
    # t-0 lost its replica on broker 3's failed /d2; the fix copies it to broker 4.
    action = fix([1, 4])
    executor, kafka = started(tmp_path, action, cluster(BROKEN, offline=(3,)))
    assert ("reassign", {("t", 0): [1, 4]}) in kafka.calls
    flying = {("t", 0): Reassigning((1, 4, 3), (4,), (3,))}
    copying = partition("t", 0, [(1, "/d1", GIB), (4, "/d1", 0), (3, "/d2", GIB)], isr=[1])
    kafka.view = LiveView(cluster(copying, offline=(3,)).model, reassigning=flying)
    executor.tick()
    kafka.calls.clear()
    kafka.view = LiveView(cluster(copying, offline=(3,), dead=4).model, reassigning=flying)
    state, error, audit = ended(executor, action)
    assert state is State.FAILED
    assert kafka.calls == [("reassign", {("t", 0): None})]  # cancelled once, not twice
    assert error == (
        "a target died mid-way: broker 4, which the plan adds replicas of t-0 to, is down; "
        "1 reassignments onto it cancelled, their original replicas back; still short of "
        "a copy: t-0 is back on [1, 3], its replica on broker 3 offline; nothing else was "
        "in flight")
    # Every throttle put back but the dead broker's, which takes no config change: named.
    assert all(v is None for r, values in kafka.set.items() if r != "broker:4"
               for v in values.values())
    assert set(kafka.set["broker:4"].values()) == {str(Policy().limits.
                                                       inter_broker_throttle_bytes_per_s)}
    assert any(a.startswith("broker down, its throttle left as set until it returns, then "
                            "put back: broker:4 ") for a in audit), audit

    # Planned again at once, once the cancel has landed: onto a live broker, no grace.
    executor.tick()  # Kafka still lists the reassignment: wait
    assert executor.store.get(action.action_id).journal.get("replanned") is None  # type: ignore[union-attr]
    kafka.view = cluster(BROKEN, offline=(3,), dead=4)
    executor.tick()
    old = executor.store.get(action.action_id)
    assert old is not None and old.state is State.FAILED
    new = executor.store.get(old.journal["replanned"])
    assert new is not None and new.state is State.AWAITING_APPROVAL  # policy: a fix is approved
    assert new.record["plan"]["partitions"] == [{"topic": "t", "partition": 0,
                                                 "replicas": [1, 2], "log_dirs": ["any", "/d1"]}]
    assert new.record["reason"].startswith(f"planned again at once for action "
                                           f"{action.action_id[:12]}, whose target died")
    assert [a.reason for a in executor.store.audit(old.id)][-1].startswith(
        f"planned again at once as action {new.id[:12]} (proposed: policy: "
        "fix_offline_replicas needs approval")


def test_a_target_that_dies_while_its_copy_is_verified_fails_at_once(tmp_path: Path) -> None:
    action = fix([1, 4])
    executor, kafka = started(tmp_path, action, cluster(BROKEN, offline=(3,)))
    kafka.view = cluster(partition("t", 0, [1, 4], isr=[1]), offline=(3,))  # catching up
    executor.tick()
    assert executor.store.get(action.action_id).state is State.VERIFYING  # type: ignore[union-attr]
    kafka.view = cluster(partition("t", 0, [1, 4], isr=[1]), offline=(3,), dead=4)
    state, error, _ = ended(executor, action)
    assert (state, error) == (State.FAILED, "a target died: broker 4, which the plan adds "
                                            "replicas of t-0 to, is down")


@pytest.mark.parametrize("answered", [None, frozenset({1, 2, 3})])
def test_only_a_target_seen_gone_is_dead(answered: frozenset[int] | None) -> None:
    view = cluster(*SKEWED, offline=(4,))  # another broker's dir: not this action's target
    assert dead(move(1, "/d2", [1, 2]), LiveView(view.model, answered=answered), {}) == []
    # A broker that did not answer is not called dead on its last known dirs.
    silent = LiveView(cluster(*SKEWED, offline=(1,)).model, answered=frozenset({2, 3, 4}))
    assert dead(move(1, "/d2", [1, 2]), silent, {}) == []
    # Journaled as added at the start: dead even once no reassignment lists it.
    gone = cluster(partition("t", 0, [1, 4]), dead=4)
    assert [g.broker for g in dead(fix([1, 4]), gone, {"adding": [["t", 0, 4]]})] == [4]
    assert dead(fix([1, 4]), gone, {}) == []
    # A dir move on a broker that died cannot finish either.
    down = cluster(*SKEWED, dead=1)
    assert [g.describe() for g in dead(move(1, "/d2", [1, 2]), down, {})] == [
        "broker 1, which the plan moves replicas of t-0 on, is down"]


def test_a_partition_no_live_broker_can_take_is_left_to_the_operator_and_said(
        tmp_path: Path) -> None:
    action = fix([1, 4])
    executor, kafka = started(tmp_path, action, cluster(BROKEN, offline=(3,)))
    # Brokers 2 and 4 go down; broker 3 holds the offline copy: no broker is left.
    brokers = [broker(b, f"r{b}", ("/d1", OFF) if b == 3 else DIRS, alive=b in (1, 3))
               for b in (1, 2, 3, 4)]
    kafka.view = LiveView(model(doc(brokers, [BROKEN])))
    state, _, audit = ended(executor, action)
    assert state is State.FAILED
    assert audit[-1].startswith("not planned again: no live broker can take them, for the "
                                "operator: t-0: only 0 of the 1 replacement replicas fit")


def test_a_target_that_stops_answering_and_returns_is_on_record(tmp_path: Path) -> None:
    from remediation.executor.cluster import ClusterError

    action = fix([1, 4])
    executor, kafka = started(tmp_path, action, cluster(BROKEN, offline=(3,)))
    flying = {("t", 0): Reassigning((1, 4, 3), (4,), (3,))}
    copying = partition("t", 0, [(1, "/d1", GIB), (4, "/d1", 0), (3, "/d2", GIB)], isr=[1])
    good = LiveView(cluster(copying, offline=(3,)).model, reassigning=flying)

    def silent_read(future_of: Any = (), topics: Any = None) -> LiveView:
        raise ClusterError("broker 4 did not answer DescribeLogDirs (just restarted?)")

    kafka.read = silent_read  # type: ignore[method-assign]
    kafka.silent = lambda: frozenset({4, 2})  # type: ignore[attr-defined]  # 2: no target
    executor.tick()
    executor.tick()  # said once
    kafka.read = lambda future_of=(), topics=None: good  # type: ignore[method-assign]
    executor.tick()
    row = executor.store.get(action.action_id)
    assert row is not None and row.state is State.EXECUTING
    said = [a.reason for a in executor.store.audit(row.id) if "target broker" in a.reason]
    assert said == ["target broker 4 stopped answering (down or restarting?): nothing is "
                    "decided for this action until it answers again or is gone",
                    "target broker 4 answers again (0 s after it stopped): its copies go on"]
    assert row.journal["silent"] is None


def test_a_page_check_that_meets_a_silent_broker_is_retried_like_any_read(
        tmp_path: Path) -> None:
    # The pass's page check (its own read) once raised out of the pass: serve said
    # "executor stopped", waited and rebuilt the executor, which then told every running
    # action it was "picked up after a restart or a takeover".
    from remediation.executor.cluster import ClusterError
    from tests.unit.test_executor_checks import action as make

    action = fix([1, 4])
    executor, kafka = started(tmp_path, action, cluster(BROKEN, offline=(3,)))
    page = make("page_operator", {"message": "replace the disk behind /d2 on broker 3",
                                  "brokers": [3], "log_dirs": ["/d2"]})
    executor.store.propose(page)
    executor.store.transition(page.action_id, State.AWAITING_APPROVAL, "test", "paged")
    said: list[str] = []
    executor._log = said.append  # type: ignore[method-assign]

    def silent_read(future_of: Any = (), topics: Any = None) -> LiveView:
        raise ClusterError("broker 3 did not answer DescribeLogDirs (just restarted?)")

    kafka.read = silent_read  # type: ignore[method-assign]
    executor._next_page_check = 0.0  # due now
    executor.tick()  # no exception out of the pass
    assert executor.errors == 1 and said == [
        "broker 3 did not answer DescribeLogDirs (just restarted?); retrying"]
    row = executor.store.get(page.action_id)
    assert row is not None and row.state is State.AWAITING_APPROVAL
