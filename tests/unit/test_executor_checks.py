"""Live checks: what is refused, what is stale, how far a move is, and what verifies."""

from __future__ import annotations

from typing import Any

from remediation.executor.actions import parse_action
from remediation.executor.checks import applies, page_resolved, problems, returned_broker
from remediation.executor.progress import status, verify
from remediation.executor.view import LiveView, Reassigning, dir_moves
from schemas.records import Action
from tests.unit.action_records import with_id
from tests.unit.plan_snapshots import GIB, broker, doc, model, partition

DIRS = ("/d1", "/d2")
OFF = {"path": "/d2", "online": False}


def cluster(*partitions: dict[str, Any], dead: int | None = None,
            offline: tuple[int, ...] = ()) -> LiveView:
    """Brokers 1-4 on racks r1-r4 with dirs /d1, /d2; `offline` brokers lost /d2."""
    brokers = [broker(b, f"r{b}", ("/d1", OFF) if b in offline else DIRS, alive=b != dead)
               for b in (1, 2, 3, 4)]
    return LiveView(model(doc(brokers, list(partitions))))


def action(type_: str, plan: dict[str, Any], cluster_id: str = "test") -> Action:
    return parse_action(with_id({
        "version": 1, "cluster_id": cluster_id, "action_id": "", "type": type_,
        "created_at": "2026-11-22T03:00:00Z", "event_time": "2026-11-22T03:00:00Z",
        "reason": "test", "trigger": {"kind": "manual"}, "plan": plan,
        "summary": {"partitions": 1, "bytes": 0, "brokers": []}}))


def fix(replicas: list[int], dirs: list[str] | None = None) -> Action:
    target: dict[str, Any] = {"topic": "t", "partition": 0, "replicas": replicas}
    if dirs is not None:
        target["log_dirs"] = dirs
    return action("fix_offline_replicas", {"version": 1, "partitions": [target]})


def leaders(replicas: list[int]) -> Action:
    return action("rebalance_leaders", {
        "reassignment": {"version": 1, "partitions": [
            {"topic": "t", "partition": 0, "replicas": replicas}]},
        "election": {"partitions": [{"topic": "t", "partition": 0}]}})


def move(broker_id: int, path: str, replicas: list[int]) -> Action:
    dirs = [path if b == broker_id else "any" for b in replicas]
    return action("move_replica_dirs", {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": replicas, "log_dirs": dirs}]})


# A partition on brokers 1 and 3 whose replica on broker 3 sat on its failed dir /d2.
BROKEN = partition("t", 0, [(1, "/d1", GIB), (3, "/d2", GIB)], leader=1, isr=[1])


def test_a_plan_for_another_cluster_or_unknown_brokers_and_dirs_is_refused() -> None:
    view = cluster(BROKEN, offline=(3,))
    assert problems(fix([1, 4]), view) == []
    assert problems(action("fix_offline_replicas", fix([1, 4]).plan, "other"), view) == [
        "the action is for cluster 'other'; this executor serves 'test'"]
    assert problems(fix([1, 9]), view) == [
        "the plan names broker 9, which cluster test does not have (its brokers: 1, 2, 3, 4)"]
    assert problems(fix([1, 4], ["any", "/d7"]), view) == [
        "the plan puts t-0 on broker 4 in /d7, which is not one of its log dirs (/d1, /d2)"]


def test_a_fix_applies_while_the_replica_it_replaces_is_offline() -> None:
    verdict = applies(fix([1, 4], ["any", "/d2"]), cluster(BROKEN, offline=(3,)))
    assert verdict.applies and "1 of 1 partitions" in verdict.reason


def test_a_fix_is_stale_once_healed_or_moved_or_raced() -> None:
    healed = applies(fix([1, 4]), cluster(BROKEN))
    assert not healed.applies and "t-0 has no offline replica any more" in healed.reason
    done = applies(fix([1, 4]), cluster(partition("t", 0, [1, 4])))
    assert not done.applies and "already in the plan's target state" in done.reason
    moved = applies(fix([1, 4]), cluster(partition("t", 0, [(2, "/d1", GIB), (3, "/d2", GIB)]),
                                         offline=(3,)))
    assert "drops the replica of t-0 on broker 2, which is online now" in moved.reason
    raced = LiveView(cluster(BROKEN, offline=(3,)).model,
                     reassigning={("t", 0): Reassigning((1, 3, 2), (2,), (3,))})
    assert ("t-0 is being repaired by a reassignment in flight (to [1, 2], dropping the "
            "offline replica on broker(s) [3]); nothing proposed for it") in \
        applies(fix([1, 4]), raced).reason
    gone = applies(fix([1, 4]), cluster(partition("u", 0, [1, 2])))
    assert "t-0 no longer exists" in gone.reason


def test_a_fix_onto_a_broker_that_cannot_take_it_is_stale() -> None:
    down = applies(fix([1, 4]), cluster(BROKEN, offline=(3,), dead=4))
    assert "broker 4, which the plan copies t-0 to, is down" in down.reason
    bad_dir = applies(fix([1, 4], ["any", "/d2"]), cluster(BROKEN, offline=(3, 4)))
    assert "log dir /d2 on broker 4, which the plan puts t-0 in, is offline" in bad_dir.reason
    assert applies(fix([1, 4], ["any", "/d1"]), cluster(BROKEN, offline=(3, 4))).applies


# Broker 1 leads a second partition too, so electing broker 2 for t-0 evens leaders out.
BUSY = partition("u", 0, [1, 3, 4])


def test_leader_plans_need_the_same_replicas_and_an_electable_leader() -> None:
    assert applies(leaders([2, 1, 3]), cluster(partition("t", 0, [1, 2, 3]), BUSY)).applies
    changed = applies(leaders([2, 1, 3]), cluster(partition("t", 0, [1, 2, 4]), BUSY))
    assert "the replicas of t-0 changed to [1, 2, 4]" in changed.reason
    behind = applies(leaders([2, 1, 3]), cluster(partition("t", 0, [1, 2, 3], isr=[1, 3]),
                                                 BUSY))
    assert "broker 2 is not in the ISR of t-0" in behind.reason
    done = applies(leaders([2, 1, 3]), cluster(partition("t", 0, [2, 1, 3]), BUSY))
    assert not done.applies and "already in the plan's target state" in done.reason


def test_a_leader_plan_that_does_not_even_out_leaders_is_superseded() -> None:
    # Brokers 1 and 2 lead one partition each: moving t-0's leader to 2 makes it worse.
    even = cluster(partition("t", 0, [1, 2, 3]), partition("u", 0, [2, 3, 4]))
    verdict = applies(leaders([2, 1, 3]), even)
    assert not verdict.applies
    assert verdict.reason == (
        "the plan's premise does not hold: its elections do not even out leaders by broker "
        "or rack (leaders per broker now -> after: 1: 1 -> 0, 2: 1 -> 2)")


def test_a_dir_move_on_a_broker_that_is_not_skewed_is_superseded() -> None:
    # Broker 1 holds 1 GiB on each dir: nothing to even out, whatever the plan says.
    even = cluster(partition("t", 0, [(1, "/d1", GIB), (2, "/d1", GIB)]),
                   partition("t", 1, [(1, "/d2", GIB), (2, "/d2", GIB)]))
    verdict = applies(move(1, "/d2", [1, 2]), even)
    assert not verdict.applies
    assert verdict.reason == (
        "the plan's premise does not hold: broker 1 is not skewed (its fullest dir is at "
        "1.00x its mean usage, the threshold is 1.10x); nothing to even out")
    # The same move on a skewed broker applies; a higher threshold makes it not worth it.
    skewed = cluster(partition("t", 0, [(1, "/d1", 3 * GIB), (2, "/d1", GIB)]),
                     partition("t", 1, [(1, "/d2", GIB), (2, "/d2", GIB)]))
    assert applies(move(1, "/d2", [1, 2]), skewed).applies
    assert not applies(move(1, "/d2", [1, 2]), skewed, skew_threshold=1.6).applies


def test_a_plan_for_two_brokers_runs_while_one_of_them_is_still_skewed() -> None:
    # Broker 1 evened out since the plan; broker 2 (3 GiB on /d1, 1 GiB on /d2) did not.
    view = cluster(partition("t", 0, [(1, "/d1", GIB), (2, "/d1", 3 * GIB)]),
                   partition("t", 1, [(1, "/d2", GIB), (2, "/d2", GIB)]))
    both = action("move_replica_dirs", {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/d2", "/d2"]}]})
    assert applies(both, view).applies
    # Both even: nothing to do, and the reason names both.
    even = cluster(partition("t", 0, [(1, "/d1", GIB), (2, "/d1", GIB)]),
                   partition("t", 1, [(1, "/d2", GIB), (2, "/d2", GIB)]))
    verdict = applies(both, even)
    assert not verdict.applies
    assert "broker 1 is not skewed" in verdict.reason and "broker 2 is not skewed" in \
        verdict.reason


def test_the_premise_counts_the_whole_cluster_not_only_the_actions_topics() -> None:
    only_t = cluster(partition("t", 0, [(1, "/d1", GIB), (2, "/d1", GIB)]))
    assert applies(move(1, "/d2", [1, 2]), only_t).applies  # /d1 full, /d2 empty
    whole = LiveView(only_t.model, all_dir_bytes={(1, "/d1"): GIB, (1, "/d2"): GIB})
    assert not applies(move(1, "/d2", [1, 2]), whole).applies


def test_dir_moves_are_refused_on_a_broker_with_an_offline_dir() -> None:
    on = partition("t", 0, [(1, "/d1", GIB), (2, "/d1", GIB)])
    assert applies(move(1, "/d2", [1, 2]), cluster(on)).applies
    refused = applies(move(1, "/d2", [1, 2]), cluster(on, offline=(1,)))
    assert "broker 1 has an offline log dir; intra-broker moves are refused" in refused.reason
    there = applies(move(1, "/d1", [1, 2]), cluster(on))
    assert "already in the plan's target state" in there.reason
    racing = LiveView(cluster(on).model, future={("t", 0, 1): "/d2"})
    assert "already being moved to /d2" in applies(move(1, "/d2", [1, 2]), racing).reason


def test_status_sorts_partitions_by_progress() -> None:
    two = action("fix_offline_replicas", {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 4]},
        {"topic": "t", "partition": 1, "replicas": [1, 4]},
        {"topic": "t", "partition": 2, "replicas": [1, 4]}]})
    view = LiveView(cluster(partition("t", 0, [1, 4]), partition("t", 1, [1, 3, 4]),
                            partition("t", 2, [1, 3])).model,
                    reassigning={("t", 1): Reassigning((1, 3, 4), (4,), (3,))})
    st = status(two, view)
    assert st.done == ("t-0: replicas [1, 4]",)
    assert st.in_flight == ("t-1: adding [4], removing [3]",)
    assert st.not_started == ("t-2: replicas [1, 3], target [1, 4], no reassignment in flight",)
    assert not st.finished


def test_dir_moves_name_only_replicas_not_yet_in_place() -> None:
    on = cluster(partition("t", 0, [(1, "/d1", GIB), (2, "/d1", GIB)]))
    assert dir_moves(move(1, "/d2", [1, 2]), on) == {("t", 0, 1): "/d2"}
    assert dir_moves(move(1, "/d1", [1, 2]), on) == {}
    moving = LiveView(on.model, future={("t", 0, 1): "/d2"})
    assert dir_moves(move(1, "/d2", [1, 2]), moving) == {}
    assert status(move(1, "/d2", [1, 2]), moving).in_flight == ("t-0: broker 1 -> /d2",)


def test_verify_wants_the_target_replicas_all_in_sync_and_in_their_dirs() -> None:
    target = fix([1, 4], ["any", "/d2"])
    good = cluster(partition("t", 0, [(1, "/d1", GIB), (4, "/d2", GIB)]))
    assert verify(target, good) == []
    lagging = cluster(partition("t", 0, [(1, "/d1", GIB), (4, "/d2", GIB)], isr=[1]))
    assert verify(target, lagging) == ["t-0: brokers [4] are not in the ISR yet"]
    elsewhere = cluster(partition("t", 0, [(1, "/d1", GIB), (4, "/d1", GIB)]))
    assert verify(target, elsewhere) == ["t-0 on broker 4 is in /d1, the plan says /d2"]
    unled = cluster(partition("t", 0, [2, 1, 3], leader=1))
    assert verify(leaders([2, 1, 3]), unled) == [
        "t-0 is led by broker 1, the plan wants 2"]


def test_a_replica_list_still_holding_the_removed_replica_counts_as_in_flight() -> None:
    # The controller finished, but the broker answering Metadata has not caught up yet.
    lagging = LiveView(cluster(partition("t", 0, [1, 4, 3])).model)
    st = status(fix([1, 4]), lagging)
    assert st.in_flight == ("t-0: finishing, metadata still lists [1, 4, 3]",)
    assert not st.not_started


def test_a_page_resolves_when_the_live_cluster_no_longer_shows_its_problem() -> None:
    page = action("page_operator", {"message": "replace the disk behind /d2 on broker 3",
                                    "brokers": [3], "log_dirs": ["/d2"]})
    assert page_resolved(page, cluster(offline=(3,))) is None  # the dir is still offline
    assert page_resolved(page, cluster(dead=3)) is None  # the broker is down
    assert page_resolved(page, cluster()) == (
        "resolved: the live cluster no longer shows the problem (broker 3, /d2 up and online)")
    gone = action("page_operator", {"message": "m", "brokers": [3], "log_dirs": ["/d9"]})
    assert page_resolved(gone, cluster()) is not None  # the dir left log.dirs: nothing to page
    by_hand = action("page_operator", {"message": "no plan could be made; look by hand",
                                       "brokers": [3], "log_dirs": []})
    assert page_resolved(by_hand, cluster()) is None  # nothing the cluster can show gone


def test_a_dead_broker_fix_knows_when_its_broker_is_back() -> None:
    record = with_id({
        "version": 1, "cluster_id": "test", "action_id": "", "type": "fix_offline_replicas",
        "created_at": "2026-11-22T03:00:00Z", "event_time": "2026-11-22T03:00:00Z",
        "reason": "test", "trigger": {"kind": "broker_left", "broker": 3},
        "plan": {"version": 1, "partitions": [{"topic": "t", "partition": 0,
                                               "replicas": [1, 2]}]},
        "summary": {"partitions": 1, "bytes": 0, "brokers": [1, 2]}})
    fix = parse_action(record)
    assert returned_broker(fix, cluster(dead=3)) is None
    assert returned_broker(fix, cluster()) == 3
    dir_fix = parse_action(with_id({**record, "trigger": {"kind": "logdir_event", "broker": 3}}))
    assert returned_broker(dir_fix, cluster()) is None  # only a broker's death is undone
