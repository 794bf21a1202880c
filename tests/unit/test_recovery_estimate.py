"""How long a re-replication takes: the estimate on the pages, and as the executor goes."""

from __future__ import annotations

from core.plan import recovery
from remediation.executor.progress import time_left
from remediation.executor.view import LiveView, Reassigning
from schemas.actions import build_action
from schemas.records import Trigger
from tests.unit.plan_snapshots import GIB, broker, doc, model, partition


def test_the_estimate_reads_like_a_person_wrote_it():
    got = recovery.tally([(3, 9 * GIB), (4, 2 * GIB), (3, 9 * GIB)])
    assert got == (recovery.Received(3, 18 * GIB, 2), recovery.Received(4, 2 * GIB, 1))
    assert recovery.estimate(got, 50 << 20) == (
        "about 6 min at 50 MiB/s; broker 3 copies the most (18.0 GiB, 2 replicas)")
    assert recovery.estimate(got, 0).startswith("no estimate: the replication throttle is off")
    assert recovery.estimate((), 50 << 20) == "nothing to copy"
    assert recovery.duration(30) == "about 30 s"
    assert recovery.duration(3 * 3600 + 300) == "about 3 h 5 min"


def test_the_executor_says_how_long_is_left_from_what_the_new_replicas_hold():
    brokers = [broker(b, f"r{b}") for b in range(4)]
    # t-0 copies to broker 3 and holds 2 of 12 GiB there; t-1 has not started: 6 GiB to 3.
    now = model(doc(brokers, [
        partition("t", 0, [(0, "/d1", 12 * GIB), (1, "/d1", 12 * GIB), (3, "/d1", 2 * GIB)]),
        partition("t", 1, [(0, "/d1", 6 * GIB), (1, "/d1", 6 * GIB)])]))
    plan = {"version": 1, "partitions": [
        {"topic": "t", "partition": p, "replicas": [0, 1, 3]} for p in (0, 1)]}
    action = build_action("c1", "fix_offline_replicas", plan, reason="r",
                          trigger=Trigger("manual"), event_time="2026-11-22T00:00:00Z",
                          created_at="2026-11-22T00:00:00Z")
    view = LiveView(now, {("t", 0): Reassigning((0, 1, 3, 2), (3,), (2,))})
    assert time_left(action, view, 50 << 20) == (
        "; about 5 min left at 50 MiB/s, broker 3 has the most to copy (16.0 GiB)")
    assert time_left(action, view, 0) == ""
