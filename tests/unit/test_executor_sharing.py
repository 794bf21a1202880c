"""Reassignments the executor did not make: repaired by theirs, blocked for good (paged,
the fix waits for the operator), or busy; never raced."""

from __future__ import annotations

from pathlib import Path

from core.signing import ActionSigner
from remediation.executor.checks import applies
from remediation.executor.lifecycle import State
from remediation.executor.policy import Policy
from remediation.executor.runner import Executor
from remediation.executor.sharing import BUSY, REPAIRING, electable, theirs
from remediation.executor.store import ActionStore
from remediation.executor.throttle import FOLLOWER_REPLICAS, LEADER_REPLICAS
from remediation.executor.view import LiveView, Reassigning
from tests.unit.plan_snapshots import GIB
from tests.unit.test_executor_checks import BROKEN, action, cluster, fix, leaders, partition
from tests.unit.test_executor_midway import Cluster


def under(view: LiveView, r: Reassigning) -> LiveView:
    return LiveView(view.model, reassigning={("t", 0): r})


def test_an_operators_reassignment_that_drops_the_failed_replica_is_the_repair() -> None:
    # t-0 on 1 and 3 (3's replica on its failed /d2); the operator moves it to [1, 2].
    view = under(cluster(BROKEN, offline=(3,)), Reassigning((1, 3, 2), (2,), (3,)))
    [one] = theirs(fix([1, 4]), view)
    assert one.kind == REPAIRING
    verdict = applies(fix([1, 4]), view)
    assert not verdict.applies and not verdict.page
    assert "t-0 is being repaired by a reassignment in flight (to [1, 2]" in verdict.reason


def test_one_that_adds_a_replica_on_a_dead_broker_can_never_finish_and_pages() -> None:
    dead = under(cluster(BROKEN, offline=(3,), dead=4), Reassigning((1, 3, 4), (4,), (3,)))
    verdict = applies(fix([1, 2]), dead)
    assert not verdict.applies and verdict.page
    assert ("the operator's reassignment of t-0 in flight (to [1, 4], adding [4]) can never "
            "finish: broker 4, which it adds, is down. Cancel it (kafka-reassign-partitions "
            "--cancel --preserve-throttles, as a broker it names is down") in verdict.reason
    # One that keeps the failed replica finishes once what it adds is in sync (Kafka 4.4
    # on the sandbox): not raced, not paged.
    kept = under(cluster(BROKEN, offline=(3,)), Reassigning((1, 3, 2), (2,), ()))
    assert [o.kind for o in theirs(fix([1, 4]), kept)] == [BUSY]


def test_any_other_reassignment_is_left_alone() -> None:
    view = under(cluster(partition("t", 0, [1, 2, 3])), Reassigning((1, 2, 3, 4), (4,), (1,)))
    [one] = theirs(leaders([2, 1, 3]), view)
    assert one.kind == BUSY
    verdict = applies(leaders([2, 1, 3]), view)
    assert not verdict.applies and not verdict.page and "not racing it" in verdict.reason


def test_a_blocked_fix_waits_for_the_operator_and_runs_only_once_theirs_is_gone(
        tmp_path: Path) -> None:
    signer = ActionSigner("k")
    action = signer.sign_action(fix([1, 4]))  # theirs adds broker 2, which is down
    kafka = Cluster(under(cluster(BROKEN, offline=(3,), dead=2),
                          Reassigning((1, 3, 2), (2,), (3,))))
    paged = []
    executor = Executor(ActionStore(tmp_path / "a.db"), kafka, Policy(),  # type: ignore[arg-type]
                        signer=signer, log=lambda _m: None,
                        notify=lambda row, ruling: paged.append((row.id, ruling.page)))
    got = executor.receive(action.to_json())
    assert got.state is State.AWAITING_APPROVAL and "can never finish" in got.reason
    assert paged == [(action.action_id, True)]
    # Approved while theirs is still there: re-read before acting, nothing submitted.
    executor.store.transition(action.action_id, State.APPROVED, "alice", "go")
    executor.tick()
    row = executor.store.get(action.action_id)
    assert row is not None and row.state is State.SUPERSEDED
    assert "re-read before acting" in (row.error or "") + " ".join(
        a.reason for a in executor.store.audit(row.id))
    assert not [c for c in kafka.calls if c[0] == "reassign"]


def test_no_election_on_a_partition_an_operator_is_reassigning() -> None:
    # The plan reorders t-0 and elects t-0 and u-0; the operator reassigns u-0.
    plan = action("rebalance_leaders", {
        "reassignment": {"version": 1, "partitions": [
            {"topic": "t", "partition": 0, "replicas": [2, 1, 3]}]},
        "election": {"partitions": [{"topic": "t", "partition": 0},
                                    {"topic": "u", "partition": 0}]}})
    view = LiveView(cluster(partition("t", 0, [1, 2, 3]), partition("u", 0, [1, 3, 4])).model,
                    reassigning={("u", 0): Reassigning((1, 3, 4, 2), (2,), (1,))})
    # Decided or started with theirs in flight: u-0 is trimmed, the rest still evens out.
    verdict = applies(plan, view)
    assert verdict.applies and verdict.trimmed == ("u-0",)
    assert "left to the operator: a reassignment of u-0 in flight" in verdict.reason
    # Started after ours was decided: checked again right before the election.
    assert electable(plan, view) == ([("t", 0)], ["u-0"])


# t-0 lost its replica on broker 3's failed /d2, and so did t-1; the fix copies both to 4.
BOTH = (BROKEN, partition("t", 1, [(1, "/d1", GIB), (3, "/d2", GIB)], leader=1, isr=[1]))
FIX_BOTH = action("fix_offline_replicas", {"version": 1, "partitions": [
    {"topic": "t", "partition": p, "replicas": [1, 4]} for p in (0, 1)]})


def test_a_partition_an_operator_reassigns_before_the_submit_is_trimmed_the_rest_runs(
        tmp_path: Path) -> None:
    signer = ActionSigner("k")
    fixing = signer.sign_action(FIX_BOTH)
    kafka = Cluster(cluster(*BOTH, offline=(3,)))
    executor = Executor(ActionStore(tmp_path / "a.db"), kafka, Policy(),  # type: ignore[arg-type]
                        signer=signer, log=lambda _m: None)
    assert executor.receive(fixing.to_json()).state is State.AWAITING_APPROVAL
    # Between plan and submit the operator moves t-1 off broker 3 themselves.
    kafka.view = LiveView(kafka.view.model,
                          reassigning={("t", 1): Reassigning((1, 3, 2), (2,), (3,))})
    executor.store.transition(fixing.action_id, State.APPROVED, "alice", "go")
    executor.tick()
    row = executor.store.get(fixing.action_id)
    assert row is not None and row.state is State.EXECUTING
    assert row.journal["trimmed"] == ["t-1"]
    assert [c for c in kafka.calls if c[0] == "reassign"] == [("reassign", {("t", 0): [1, 4]})]
    # t-1 is left out of the throttles too: its replicas are the operator's to throttle.
    assert kafka.set["topic:t"] == {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: "0:4"}
    reasons = [a.reason for a in executor.store.audit(row.id)]
    assert any(r.startswith("trimmed, left to the operator: t-1 (re-read: the plan still "
                            "applies to 1 of 1 partitions; left to the operator: t-1 is being "
                            "repaired by a reassignment in flight (to [1, 2]")
               for r in reasons), reasons

    # t-0 reaches its target; t-1 is still theirs: the trimmed action verifies and succeeds.
    done = partition("t", 0, [(1, "/d1", GIB), (4, "/d1", GIB)], leader=1, isr=[1, 4])
    kafka.view = LiveView(cluster(done, BOTH[1], offline=(3,)).model,
                          reassigning={("t", 1): Reassigning((1, 3, 2), (2,), (3,))})
    executor.tick()
    executor.tick()
    row = executor.store.get(fixing.action_id)
    assert row is not None and row.state is State.SUCCEEDED, [
        a.reason for a in executor.store.audit(row.id)]


def test_an_action_every_partition_of_which_is_theirs_is_superseded_whole() -> None:
    flying = {("t", p): Reassigning((1, 3, 2), (2,), (3,)) for p in (0, 1)}
    verdict = applies(FIX_BOTH, LiveView(cluster(*BOTH, offline=(3,)).model, reassigning=flying))
    assert not verdict.applies and not verdict.trimmed
    assert "t-0 is being repaired" in verdict.reason and "t-1 is being repaired" in verdict.reason


def test_trimmed_only_when_the_rest_is_fresh_a_stale_partition_supersedes_all() -> None:
    # t-0's replica on broker 3 is back online: the plan is stale, nothing trimmed.
    healed = partition("t", 0, [(1, "/d1", GIB), (3, "/d1", GIB)], leader=1, isr=[1, 3])
    view = LiveView(cluster(healed, BOTH[1], offline=(3,)).model,
                    reassigning={("t", 1): Reassigning((1, 3, 2), (2,), (3,))})
    verdict = applies(FIX_BOTH, view)
    assert not verdict.applies and not verdict.trimmed
    assert "the plan is stale: t-0 has no offline replica any more" in verdict.reason


def test_one_already_under_an_operators_reassignment_when_decided_is_trimmed_there(
        tmp_path: Path) -> None:
    signer = ActionSigner("k")
    fixing = signer.sign_action(FIX_BOTH)
    kafka = Cluster(LiveView(cluster(*BOTH, offline=(3,)).model,
                             reassigning={("t", 1): Reassigning((1, 3, 2), (2,), (3,))}))
    executor = Executor(ActionStore(tmp_path / "a.db"), kafka, Policy(),  # type: ignore[arg-type]
                        signer=signer, log=lambda _m: None)
    assert executor.receive(fixing.to_json()).state is State.AWAITING_APPROVAL
    row = executor.store.get(fixing.action_id)
    assert row is not None and row.journal["trimmed"] == ["t-1"]
    reasons = [a.reason for a in executor.store.audit(row.id)]
    assert any(r.startswith("trimmed, left to the operator: t-1 (") and "nothing proposed" in r
               for r in reasons), reasons
