"""Decisions to action records (streams/propose.py): the planners on a snapshot read back
by reference, each action naming only what its trigger is about."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import msgspec

from core.plan.disks import broker_usage, mean_ratio, over_limit
from schemas.registry import validate
from schemas.snapshot import snapshot_from_dict
from streams.detect_types import (
    BROKER_LEFT,
    DEAD_BROKER,
    FIX_OFFLINE,
    LOGDIR_EVENT,
    METRIC,
    MOVE_DIRS,
    PAGE,
    REBALANCE_LEADERS,
    SNAPSHOT,
    Decision,
    SnapshotRef,
)
from streams.propose import Proposer, mark_offline
from tests.unit.plan_snapshots import GIB, broker, doc, model, partition

T0 = 1_800_000_000_000
REF = SnapshotRef("selfheal.cluster-snapshots", 0, 42, T0)
DIRS = ("/d1", "/d2")


def cluster(offline: tuple[tuple[int, str], ...] = (), unknown_dirs: bool = False
            ) -> dict[str, Any]:
    """4 brokers on 4 racks, two dirs each; 8 partitions of RF 2, one of RF 1."""
    bs = [broker(b, f"r{b}", DIRS) for b in range(4)]
    ps = []
    for i in range(8):
        a, b = i % 4, (i + 1) % 4
        ps.append(partition("t", i, [(a, DIRS[i % 2], GIB), (b, DIRS[(i + 1) % 2], GIB)]))
    ps.append(partition("solo", 0, [(1, "/d2", GIB)]))
    document = doc(bs, ps)
    mark_offline(document, offline)
    if unknown_dirs:  # as DescribeLogDirs reports a failed dir: its replicas' dir unknown
        for p in document["partitions"]:
            for r in p["replicas"]:
                if (r["broker"], r["log_dir"]) in offline:
                    r["log_dir"] = None
    return document


class Reads:
    """The snapshot reader: serves one document, counts reads."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.raw = msgspec.json.encode(document)
        self.calls = 0

    def __call__(self, ref: SnapshotRef, cluster_id: str) -> bytes:
        assert (ref, cluster_id) == (REF, "c1")
        self.calls += 1
        return self.raw


def decision(type: str = FIX_OFFLINE, broker_id: int | None = 1, log_dir: str | None = "/d2",
             offline: tuple[tuple[int, str], ...] = ((1, "/d2"),), **over: Any) -> Decision:
    values: dict[str, Any] = dict(
        type=type, cluster_id="c1", event_time=T0, trigger_kind=LOGDIR_EVENT,
        broker=broker_id, log_dir=log_dir, snapshot=REF, offline_dirs=offline,
        reason=f"log dir {log_dir} on broker {broker_id} is offline")
    values.update(over)
    return Decision(**values)


def on_dir(document: dict[str, Any], b: int, path: str) -> set[tuple[str, int]]:
    return {(p["topic"], p["partition"]) for p in document["partitions"]
            for r in p["replicas"] if r["broker"] == b and r["log_dir"] == path}


def named(action: Any) -> set[tuple[str, int]]:
    plan = action.plan
    return {(p["topic"], p["partition"]) for p in plan["partitions"] + plan["unrecoverable"]}


def test_fix_names_exactly_the_partitions_on_the_failed_dir_and_moves_them_off_it():
    document = cluster(offline=((1, "/d2"),))
    fix, page = Proposer(Reads(document)).actions(decision(), "2026-11-22T04:00:00Z")
    validate("action", fix.to_dict())
    assert fix.type == FIX_OFFLINE and named(fix) == on_dir(cluster(), 1, "/d2")
    for target in fix.plan["partitions"]:
        assert 1 not in target["replicas"] and len(target["replicas"]) == 2
    assert [u["topic"] for u in fix.plan["unrecoverable"]] == ["solo"]
    assert (fix.trigger.kind, fix.trigger.broker, fix.trigger.log_dir) == (
        LOGDIR_EVENT, 1, "/d2")
    assert fix.event_time == "2027-01-15T08:00:00.000Z"
    assert fix.summary.bytes == GIB * len(fix.plan["partitions"])
    # What each new replica's broker copies, for the recovery time on the pages.
    new = Counter(b for t in fix.plan["partitions"] for b in t["replicas"][1:])
    assert fix.summary.received is not None
    assert {(r.broker, r.bytes, r.replicas) for r in fix.summary.received} == {
        (b, GIB * n, n) for b, n in new.items()}
    # The RF-1 partition lost its only copy: that is for a person.
    assert page.type == PAGE and page.plan["partitions"] == [{"topic": "solo", "partition": 0}]
    assert "solo (1 partition)" in page.plan["message"] and page.summary.partitions == 1
    assert page.plan["brokers"] == [1] and page.plan["log_dirs"] == ["/d2"]


def test_a_fix_names_no_dir_the_detector_cordoned_though_the_snapshot_shows_it_open():
    # The snapshot predates serve running the cordon; Kafka would refuse a replica there.
    document = cluster(offline=((1, "/d2"),))
    open_fix, _ = Proposer(Reads(document)).actions(decision(), "2026-11-22T04:00:00Z")
    targets = {(b, d) for p in open_fix.plan["partitions"]
               for b, d in zip(p["replicas"], p["log_dirs"], strict=True) if d != "any"}
    assert targets, "the plan names dirs on the receivers"
    # one a broker: the detector never holds a broker's last open dir cordoned
    cordoned = tuple(sorted({b: (b, d) for b, d in sorted(targets)}.values()))
    fix, _ = Proposer(Reads(document)).actions(decision(cordoned=cordoned),
                                               "2026-11-22T04:00:00Z")
    named_dirs = {(b, d) for p in fix.plan["partitions"]
                  for b, d in zip(p["replicas"], p["log_dirs"], strict=True)}
    assert named_dirs.isdisjoint(cordoned), named_dirs
    assert named(fix) == named(open_fix)
    assert Decision.from_json(decision(cordoned=cordoned).to_json()).cordoned == cordoned


def test_a_dir_the_detector_holds_cordoned_stays_open_to_a_fix_when_it_is_the_last():
    # An operator cordoned every broker's /d1; the detector holds every /d2 as returned
    # (to be cordoned). The cordon planner refuses a broker's last open dir, so the fix
    # may still use /d2; marking it too would leave no open dir and page every partition.
    document = cluster(offline=((1, "/d2"),))
    for b in document["brokers"]:
        b["log_dirs"] = [{**d, "cordoned": d["path"] == "/d1"} for d in b["log_dirs"]]
    held = tuple((b, "/d2") for b in range(4))
    fix, page = Proposer(Reads(document)).actions(decision(cordoned=held),
                                                  "2026-11-22T04:00:00Z")
    assert fix.type == FIX_OFFLINE and named(fix) == on_dir(cluster(), 1, "/d2")
    assert [u["topic"] for u in fix.plan["unrecoverable"]] == ["solo"]
    assert page.type == PAGE and page.plan["partitions"] == [{"topic": "solo", "partition": 0}]
    named_dirs = {d for p in fix.plan["partitions"] for d in p["log_dirs"]}
    assert "/d1" not in named_dirs, named_dirs


def test_a_snapshot_from_before_the_failure_plans_the_same_once_the_dir_is_marked():
    before = Proposer(Reads(cluster())).actions(decision(), "2026-11-22T04:00:00Z")
    after = Proposer(Reads(cluster(offline=((1, "/d2"),)))).actions(
        decision(), "2026-11-22T04:00:00Z")
    assert [a.action_id for a in before] == [a.action_id for a in after]


def test_replicas_whose_dir_is_unknown_on_the_broker_count_as_on_the_failed_dir():
    document = cluster(offline=((1, "/d2"),), unknown_dirs=True)
    fix, _ = Proposer(Reads(document)).actions(decision())
    assert named(fix) == on_dir(cluster(), 1, "/d2")


def test_with_two_failed_dirs_each_action_names_only_its_own():
    offline = ((1, "/d2"), (2, "/d1"))
    document = cluster(offline=offline)
    reads = Reads(document)
    proposer = Proposer(reads)
    fix, page = proposer.actions(decision(broker_id=2, log_dir="/d1", offline=offline))
    assert named(fix) == on_dir(cluster(), 2, "/d1")
    # t-1 had its two replicas on the two failed dirs: nothing left to copy from.
    assert {"topic": "t", "partition": 1} in page.plan["partitions"]
    assert "no online replica" in page.plan["message"]
    first = proposer.actions(decision(offline=offline))
    assert named(first[0]) == on_dir(cluster(), 1, "/d2")
    assert reads.calls == 1  # one read for both decisions


def test_the_same_decision_twice_proposes_the_same_action_ids():
    proposer = Proposer(Reads(cluster()))
    one = proposer.actions(decision(), "2026-11-22T04:00:00Z")
    two = Proposer(Reads(cluster())).actions(decision(), "2026-11-22T04:09:00Z")
    assert [a.action_id for a in one] == [a.action_id for a in two]


def test_an_empty_failed_dir_proposes_nothing():
    document = doc([broker(0, "r0", DIRS), broker(1, "r1", DIRS)],
                   [partition("t", 0, [(0, "/d1", 1), (1, "/d1", 1)])])
    assert Proposer(Reads(document)).actions(decision()) == []


def skewed() -> dict[str, Any]:
    bs = [broker(0, "r0", DIRS), broker(1, "r1", DIRS)]
    ps = [partition("big", i, [(0, "/d1", 10 * GIB)]) for i in range(6)]
    ps += [partition("small", i, [(0, "/d2", GIB), (1, "/d1", GIB)]) for i in range(2)]
    ps += [partition("other", i, [(1, DIRS[i % 2], GIB)]) for i in range(2)]
    return doc(bs, ps)


def test_move_dirs_moves_only_on_the_skewed_broker_and_brings_it_under_the_threshold():
    document = skewed()
    d = decision(MOVE_DIRS, 0, None, (), trigger_kind=SNAPSHOT, reason="broker 0 is skewed")
    (move,) = Proposer(Reads(document), 1.10).actions(d)
    validate("action", move.to_dict())
    assert move.type == MOVE_DIRS and move.plan["partitions"]
    before = model(document)
    after = copy.deepcopy(document)
    targets = {(p["topic"], p["partition"]): p for p in move.plan["partitions"]}
    for p in after["partitions"]:
        target = targets.get((p["topic"], p["partition"]))
        if target is None:
            continue
        assert target["replicas"] == [r["broker"] for r in p["replicas"]]
        for r, path in zip(p["replicas"], target["log_dirs"], strict=True):
            if r["broker"] == 0:
                r["log_dir"] = path
            else:
                assert path == "any"
    dirs = broker_usage(model(after), 0)
    mean = mean_ratio(dirs)
    assert not any(over_limit(x.used, 1.10 * mean * x.capacity) for x in dirs)
    assert max(x.ratio for x in broker_usage(before, 0)) > 1.10 * mean
    assert move.summary.bytes == sum(10 * GIB for p in move.plan["partitions"])


def test_leader_imbalance_proposes_a_reorder_and_election():
    bs = [broker(b, f"r{b}", DIRS) for b in range(3)]
    ps = [partition("t", i, [0, 1 + i % 2], leader=0) for i in range(6)]
    d = decision(REBALANCE_LEADERS, None, None, (), trigger_kind=SNAPSHOT,
                 reason="broker 0 leads 6 partitions; its fair share is 2.0")
    (action,) = Proposer(Reads(doc(bs, ps))).actions(d)
    validate("action", action.to_dict())
    assert action.plan["election"]["partitions"] and action.summary.bytes == 0
    assert action.reason.startswith("broker 0 leads 6 partitions")


def test_a_page_needs_no_snapshot():
    d = decision(PAGE, 0, "/d1", ((0, "/d1"), (0, "/d2"), (1, "/d2")), trigger_kind=METRIC,
                 snapshot=None, reason="every log dir of broker 0 is offline")

    def unread(ref: SnapshotRef, cluster_id: str) -> bytes:
        raise AssertionError("a page reads no snapshot")

    (page,) = Proposer(unread).actions(d)
    assert page.plan == {"message": "every log dir of broker 0 is offline", "brokers": [0],
                         "log_dirs": ["/d1", "/d2"]}


def test_a_snapshot_gone_from_the_bus_becomes_a_page_not_a_batch_failing_forever():
    def gone(ref: SnapshotRef, cluster_id: str) -> bytes:
        raise LookupError("no snapshot of cluster c1 at or after offset 42")

    (page,) = Proposer(gone).actions(decision())
    assert page.type == PAGE and "no snapshot of cluster c1" in page.plan["message"]


def test_a_snapshot_the_planner_cannot_read_becomes_a_page_not_a_crash():
    broken = {**cluster(), "partitions": [partition("t", 0, [9])]}
    (page,) = Proposer(Reads(broken)).actions(decision())
    assert page.type == PAGE and "no plan could be made" in page.plan["message"]
    assert "broker 9 is not in brokers" in page.plan["message"]


def test_what_cannot_be_repaired_is_one_line_per_cause_naming_the_topics():
    from types import SimpleNamespace as U

    from streams.propose import _lost_message

    lost = tuple(U(topic=t, partition=p, reason=r) for t, p, r in [
        ("__consumer_offsets", 0, "no broker left to take a replica"),
        ("__consumer_offsets", 3, "no broker left to take a replica"),
        ("orders", 1, "no broker left to take a replica"),
        ("solo", 0, "no online replica: every copy is offline")])
    assert _lost_message("log dir /d2 on broker 1 is offline", lost) == (
        "log dir /d2 on broker 1 is offline and reassignment cannot repair 4 partition(s) "
        "there; no broker left to take a replica: __consumer_offsets (2 partitions), orders "
        "(1 partition); no online replica: every copy is offline: solo (1 partition). Replace "
        "the disk and restart the broker, or add brokers")


def test_a_dead_broker_gets_one_fix_for_every_replica_it_held_and_a_page_for_the_rest():
    document = cluster()
    for b in document["brokers"]:
        if b["id"] == 2:
            b["alive"] = False
    held = {(p["topic"], p["partition"]) for p in document["partitions"]
            if any(r["broker"] == 2 for r in p["replicas"])}
    (fix,) = Proposer(Reads(document)).actions(decision(
        DEAD_BROKER, 2, None, (), trigger_kind=BROKER_LEFT,
        reason="broker 2 left the cluster and has not come back in 60 s"))
    validate("action", fix.to_dict())
    assert fix.type == FIX_OFFLINE and named(fix) == held
    for target in fix.plan["partitions"]:
        assert 2 not in target["replicas"] and len(target["replicas"]) == 2
    assert (fix.trigger.kind, fix.trigger.broker, fix.trigger.log_dir) == (BROKER_LEFT, 2, None)
    assert fix.reason.startswith("broker 2 left the cluster and has not come back in 60 s; "
                                 f"{len(held)} partition(s) lost their replica there")


DELTA_REF = SnapshotRef("selfheal.cluster-snapshots", 0, 50, T0 + 500)


def test_a_fix_with_a_delta_plans_from_the_snapshot_in_memory_plus_the_delta():
    from schemas.snapshot_delta import make_delta

    base = cluster()
    # Since the snapshot: a partition created on broker 1's /d2, then the dir failed.
    now = copy.deepcopy(base)
    now["taken_at"] = "2027-01-15T08:00:00.500Z"
    now["partitions"].append(partition("new", 0, [(1, "/d2", GIB), (2, "/d1", GIB)]))
    mark_offline(now, ((1, "/d2"),))
    delta = msgspec.json.encode(make_delta(now, {1}, base["taken_at"], "log_dir_failure"))
    reads = Reads(base)
    deltas: list[SnapshotRef] = []

    def read_delta(ref: SnapshotRef, cluster_id: str) -> bytes:
        deltas.append(ref)
        return delta

    proposer = Proposer(reads, read_delta=read_delta)
    fix, _ = proposer.actions(decision(delta=DELTA_REF))
    assert named(fix) == on_dir(now, 1, "/d2") and ("new", 0) in named(fix)
    # Another failure's delta on the same snapshot: the snapshot is not read again.
    proposer.actions(decision(delta=DELTA_REF, offline=((1, "/d2"), (2, "/d1")),
                              broker_id=2, log_dir="/d1"))
    assert reads.calls == 1 and deltas == [DELTA_REF, DELTA_REF]
    kept = proposer.base(REF, "c1")  # the kept snapshot is as it was read
    read = snapshot_from_dict(base)
    assert (kept.brokers, tuple(kept.partitions)) == (read.brokers, read.partitions)


def test_a_delta_that_cannot_be_read_back_is_a_page():
    proposer = Proposer(Reads(cluster()), read_delta=lambda ref, cluster_id: b"{}")
    (page,) = proposer.actions(decision(delta=DELTA_REF))
    assert page.type == PAGE and "the delta at offset 50" in page.plan["message"]


def test_a_replica_no_other_broker_may_take_gets_the_same_broker_steps_with_free_space():
    # Two brokers, RF 2: the replica lost with broker 1's /d2 has nowhere else to go.
    bs = [broker(0, "r0", DIRS), broker(1, "r1", DIRS)]
    ps = [partition("t", 0, [(0, "/d1", 3 * GIB), (1, "/d2", 3 * GIB)], leader=0),
          partition("t", 1, [(1, "/d1", 5 * GIB), (0, "/d2", 5 * GIB)], leader=1)]
    (page,) = Proposer(Reads(doc(bs, ps))).actions(decision())
    assert page.type == PAGE
    message = page.plan["message"]
    assert "only 0 of the 1 replacement replicas fit" in message
    assert "recover them on broker 1 itself" in message
    assert "replace the failed disk, mount it at /d2 again" in message
    assert "kafka-storage.sh format --ignore-formatted" in message
    assert "remove /d2 from log.dirs in broker 1's server.properties and restart it" in message
    # 3 GiB to copy; broker 1's /d1 (100 GiB, 5 GiB held) has 95 GiB free.
    assert "(3.0 GiB to copy; healthy dirs: /d1 95.0 GiB free)" in message
    assert "no healthy dir has room" not in message
    assert "add brokers" not in message.split("recover them")[1]


def test_a_dead_broker_or_a_partition_with_no_copy_left_keeps_the_old_advice():
    from types import SimpleNamespace as U

    from streams.propose import _same_broker

    gone = (U(topic="solo", partition=0, reason="no online replica: every copy is offline"),)
    assert _same_broker(model(cluster(((1, "/d2"),))), 1, ["/d2"], gone, {}) == ""


def test_the_steps_say_when_no_healthy_dir_has_room_for_what_was_lost():
    from core.plan.jbod import same_broker_steps

    full = {"path": "/d1", "online": True, "total_bytes": 100 * GIB, "usable_bytes": GIB}
    m = model(doc([broker(0, "r0", DIRS), broker(1, "r1", (full, "/d2"))],
                  [partition("t", 0, [(0, "/d1", GIB), (1, "/d2", GIB)], leader=0)]))
    steps = same_broker_steps(m, 1, ["/d2"], 3 * GIB)
    assert "healthy dirs: /d1 1.0 GiB free) (no healthy dir has room for all of it" in steps


def two_dead(pairs: list[tuple[int, int]]) -> dict[str, Any]:
    """The chaos test's 4-broker, 2-rack sandbox (rack of b: b % 2) after brokers 1 and 2
    were fenced: its 8-partition RF-2 topic on ``pairs`` (Kafka's striped placer pairs the
    racks' brokers in lockstep, so a topic holds one pairing or the other), a bus topic of
    RF 3; leaders and ISRs as the controller leaves them."""
    dead = {1, 2}
    bs = [broker(b, f"rack{b % 2 + 1}", ("/d1",), alive=b not in dead) for b in (1, 2, 3, 4)]
    ps = []
    for topic, layouts in (("t", pairs * 4), ("bus", [(1, 2, 3), (2, 3, 4), (3, 4, 1)])):
        for i, replicas in enumerate(layouts):
            live = [b for b in replicas if b not in dead]
            ps.append(partition(topic, i, list(replicas), leader=live[0] if live else -1,
                                isr=live or [replicas[0]]))
    return doc(bs, ps)


def test_two_dead_brokers_paired_in_every_partition_leave_nothing_to_move_only_a_page():
    # Why the chaos test of two dead brokers once saw two pages and no fix for its breaker
    # to stop: Kafka had paired brokers 1 and 2 in every partition of its topic; each
    # partition lost both copies, and an RF-3 topic cannot be whole again on two brokers.
    dead_one = decision(DEAD_BROKER, 1, None, (), trigger_kind=BROKER_LEFT,
                        reason="broker 1 left the cluster and has not come back in 20 s")
    (page,) = Proposer(Reads(two_dead([(1, 2), (3, 4)]))).actions(dead_one)
    assert page.type == PAGE and page.trigger.kind == BROKER_LEFT
    assert "no online replica: every copy is offline: t (4 partitions)" in page.plan["message"]
    # The other pairing: broker 1's partner survives in every partition it held.
    fix, page = Proposer(Reads(two_dead([(1, 4), (3, 2)]))).actions(dead_one)
    assert fix.type == FIX_OFFLINE and {(p["topic"], p["partition"])
                                         for p in fix.plan["partitions"]} == {
        ("t", 0), ("t", 2), ("t", 4), ("t", 6)}
    assert page.type == PAGE and {u["topic"] for u in page.plan["partitions"]} == {"bus"}
