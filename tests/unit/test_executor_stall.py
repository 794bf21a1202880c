"""An executing action that moves no bytes for the stall time is reported stalled, once,
in its audit and journal (the gauge's source); moving again is said too. Bytes moved are
the sizes of the replicas its reassignments add and of its future replicas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from core.signing import ActionSigner
from remediation.executor.ending import Timeouts
from remediation.executor.lifecycle import State
from remediation.executor.policy import Policy
from remediation.executor.runner import Executor
from remediation.executor.stall import copied
from remediation.executor.store import ActionStore
from remediation.executor.view import LiveView, Reassigning
from tests.unit.plan_snapshots import GIB, partition
from tests.unit.test_executor_checks import BROKEN, cluster, fix, move
from tests.unit.test_executor_midway import SKEWED, Cluster

FLYING = {("t", 0): Reassigning((1, 4, 3), (4,), (3,))}


def copying(size: int) -> LiveView:
    p = partition("t", 0, [(1, "/d1", GIB), (4, "/d1", size), (3, "/d2", GIB)], isr=[1])
    return LiveView(cluster(p, offline=(3,)).model, reassigning=FLYING)


def test_bytes_moved_are_the_added_replicas_and_the_future_ones() -> None:
    assert copied(fix([1, 4]), copying(5_000)) == 5_000
    assert copied(fix([1, 4]), cluster(BROKEN, offline=(3,))) == 0  # nothing in flight
    view = LiveView(cluster(*SKEWED).model, future={("t", 0, 1): "/d2"},
                    future_bytes={("t", 0, 1): 7_000})
    assert copied(move(1, "/d2", [1, 2]), view) == 7_000


def test_a_copy_that_stops_is_said_stalled_once_and_moving_again_when_it_resumes(
        tmp_path: Path) -> None:
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    action = fix([1, 4])
    store = ActionStore(tmp_path / "actions.db")
    store.propose(action)
    store.transition(action.action_id, State.APPROVED, "test", "approved for the test")
    kafka = Cluster(cluster(BROKEN, offline=(3,)))
    ex = Executor(store, kafka, Policy(), signer=ActionSigner("k"),  # type: ignore[arg-type]
                  timeouts=Timeouts(stall_seconds=60), clock=lambda: now[0],
                  log=lambda _m: None)
    ex.tick()

    def after(seconds: float, size: int) -> list[str]:
        now[0] += timedelta(seconds=seconds)
        kafka.view = copying(size)
        ex.tick()
        row = store.get(action.action_id)
        assert row is not None and row.state is State.EXECUTING
        return [a.reason for a in store.audit(row.id)]

    after(0, 1_000)
    after(30, 2_000)
    assert not any(a.startswith("stalled") for a in after(59, 2_000))  # 59 s idle
    audit = after(2, 2_000)
    assert audit[-1] == ("stalled: no bytes moved for 61 s (stall time 60 s; 2.0 KiB copied "
                         "so far); its targets are alive, so it waits for its source or its "
                         "throttle")
    assert store.get(action.action_id).journal["stalled"]["bytes"] == 2_000  # type: ignore[union-attr]
    assert sum(a.startswith("stalled") for a in after(120, 2_000)) == 1  # said once
    audit = after(1, 3_000)
    assert audit[-1] == "moving again (2.9 KiB copied so far)"
    assert store.get(action.action_id).journal["stalled"] is None  # type: ignore[union-attr]
