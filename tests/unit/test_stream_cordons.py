"""Log-dir cordons in the job (streams/detect_cordons.py, streams/propose.py): what the
detector decides and what the proposer makes of it on a snapshot."""

from __future__ import annotations

import msgspec

from core.live import metadata_level
from schemas import snapshot_chunks as chunking
from schemas.registry import validate
from schemas.snapshot import snapshot_from_dict
from streams.detect_types import (
    CORDON_DIR,
    MOVE_DIRS,
    SNAPSHOT,
    UNCORDON_DIR,
    DetectSettings,
    DirOnline,
    Failure,
    SnapshotFacts,
    SnapshotRef,
    SnapshotSeen,
)
from streams.facts import FactLimits, snapshot_facts
from streams.propose import Proposer
from tests.unit.test_stream_detect import DIRS, T0, Run
from tests.unit.test_stream_propose import Reads, decision, skewed

LEVEL = 30  # metadata.version 4.3-IV0
SETTINGS = DetectSettings(skew_window_ms=60_000, returned_trust_ms=300_000)


def seen(t: int, offline=(), skew=None, over=None, cordoned=None, level=LEVEL,
         dead=()) -> SnapshotSeen:
    facts = SnapshotFacts(
        dirs={b: {d: (b, d) not in offline for d in dirs} for b, dirs in DIRS.items()},
        alive={b: b not in dead for b in DIRS}, skewed=skew or {}, over=over or {},
        cordoned=cordoned or {}, metadata_level=level)
    return SnapshotSeen(t, SnapshotRef("selfheal.cluster-snapshots", 0, t, t), facts)


def test_a_skewed_dir_is_cordoned_with_its_move_and_lifted_once_even_again():
    run = Run(SETTINGS)
    over = {2: ["/b2/d1"]}
    assert run.batch(seen(T0, skew={2: 1.5}, over=over)) == []
    move, cordon = run.batch(seen(T0 + 61_000, skew={2: 1.5}, over=over))
    assert move.type == MOVE_DIRS
    assert (cordon.type, cordon.broker, cordon.log_dir, cordon.trigger_kind) == (
        CORDON_DIR, 2, "/b2/d1", SNAPSHOT)
    assert "past the skew limit" in cordon.reason
    # Cordoned and still skewed: nothing more; even again: our cordon is lifted, once.
    cordoned = {2: ["/b2/d1"]}
    assert run.batch(seen(T0 + 90_000, skew={2: 1.4}, over=over, cordoned=cordoned)) == []
    (lift,) = run.batch(seen(T0 + 120_000, cordoned=cordoned))
    assert (lift.type, lift.broker, lift.log_dir) == (UNCORDON_DIR, 2, "/b2/d1")
    assert run.batch(seen(T0 + 150_000, cordoned=cordoned)) == []
    assert run.batch(seen(T0 + 180_000)) == [] and run.state.cordons == {}


def test_an_operators_cordon_is_neither_proposed_again_nor_lifted():
    run = Run(SETTINGS)
    theirs = {2: ["/b2/d1"]}
    run.batch(seen(T0, skew={2: 1.5}, over={2: ["/b2/d1"]}, cordoned=theirs))
    (move,) = run.batch(seen(T0 + 61_000, skew={2: 1.5}, over={2: ["/b2/d1"]},
                             cordoned=theirs))
    assert move.type == MOVE_DIRS
    assert run.batch(seen(T0 + 120_000, cordoned=theirs)) == []


def test_a_dir_back_from_a_failure_is_cordoned_until_trusted():
    run = Run(SETTINGS)
    run.batch(seen(T0))
    run.batch(Failure(T0 + 1000, "metric", 1, "/b1/d0"), seen(T0 + 1000, offline={(1, "/b1/d0")}))
    (cordon,) = run.batch(DirOnline(T0 + 20_000, 1, "/b1/d0"), seen(T0 + 21_000))
    assert (cordon.type, cordon.broker, cordon.log_dir) == (CORDON_DIR, 1, "/b1/d0")
    assert "failed and is back online" in cordon.reason
    cordoned = {1: ["/b1/d0"]}
    assert run.batch(seen(T0 + 200_000, cordoned=cordoned)) == []  # not trusted yet
    (lift,) = run.batch(seen(T0 + 330_000, cordoned=cordoned))
    assert (lift.type, lift.log_dir) == (UNCORDON_DIR, "/b1/d0")


def test_a_snapshot_older_than_the_return_neither_forgets_it_nor_reopens_the_failure():
    # The disk replaced, the broker restarts: its new JVM's gauge says the dir is online
    # (T0+11 s) before the job reads the snapshot taken while it was down (T0+10 s), in
    # which its dirs are the last known ones, the failed one offline. A fresh run met it:
    # the return was dropped as "failed again" and the dir never cordoned.
    run = Run(SETTINGS)
    run.batch(seen(T0))
    run.batch(Failure(T0 + 1000, "metric", 1, "/b1/d0"), seen(T0 + 1000, offline={(1, "/b1/d0")}))
    assert run.batch(DirOnline(T0 + 11_000, 1, "/b1/d0")) == []
    assert run.batch(seen(T0 + 10_000, offline={(1, "/b1/d0")}, dead={1})) == []
    assert run.batch(seen(T0 + 10_500, offline={(1, "/b1/d0")})) == []  # older, broker up
    assert run.state.episodes == {}
    (cordon,) = run.batch(seen(T0 + 18_000))
    assert (cordon.type, cordon.broker, cordon.log_dir) == (CORDON_DIR, 1, "/b1/d0")
    # Failed again after it came back, on a live broker: no longer held as returned.
    run.batch(seen(T0 + 40_000, offline={(1, "/b1/d0")}))
    assert run.state.returned == {} and list(run.state.episodes) == [(1, "/b1/d0")]


def test_a_cluster_too_old_to_cordon_gets_one_line_and_no_cordon():
    run = Run(SETTINGS)
    over = {2: ["/b2/d1"]}
    run.batch(seen(T0, skew={2: 1.5}, over=over, level=None))
    (move,) = run.batch(seen(T0 + 61_000, skew={2: 1.5}, over=over, level=None))
    assert move.type == MOVE_DIRS
    assert run.batch(seen(T0 + 90_000, skew={2: 1.5}, over=over, level=21)) == []
    (note,) = run.notes
    assert "metadata.version 4.3-IV0" in note and "ZooKeeper" in note


def with_level(document, level):
    return {**document, "metadata_level": level}


def test_the_proposer_cordons_the_skewed_dir_and_lifts_only_when_even():
    document = with_level(skewed(), LEVEL)
    facts = snapshot_facts(snapshot_from_dict(document))
    (path,) = facts.over[0]
    d = decision(CORDON_DIR, 0, path, (), trigger_kind=SNAPSHOT, reason="past the limit")
    (cordon,) = Proposer(Reads(document), 1.10).actions(d)
    validate("action", cordon.to_dict())
    assert (cordon.type, cordon.plan) == (CORDON_DIR, {"broker": 0, "log_dir": path})
    # Not cordoned in the snapshot: there is nothing to lift; still skewed: not lifted.
    lift = decision(UNCORDON_DIR, 0, path, (), trigger_kind=SNAPSHOT)
    assert Proposer(Reads(document), 1.10).actions(lift) == []
    for b in document["brokers"]:
        for x in b["log_dirs"]:
            x["cordoned"] = b["id"] == 0 and x["path"] == path
    assert Proposer(Reads(document), 1.10).actions(lift) == []
    assert Proposer(Reads(document), 9.0).actions(lift)[0].type == UNCORDON_DIR


def test_the_proposer_proposes_nothing_on_a_cluster_too_old():
    document = with_level(skewed(), 21)
    (path,) = snapshot_facts(snapshot_from_dict(document)).over[0]
    d = decision(CORDON_DIR, 0, path, (), trigger_kind=SNAPSHOT, reason="past the limit")
    assert Proposer(Reads(document), 1.10).actions(d) == []


def test_metadata_level_survives_the_schema_and_the_chunks():
    document = with_level(skewed(), LEVEL)
    validate(chunking.SNAPSHOT, document)
    assert snapshot_from_dict(document).metadata_level == LEVEL
    chunks, manifest = chunking.split(document, "s1", target=600)
    assert len(chunks) > 1
    for chunk in chunks:
        chunking.check_chunk(chunk)
    parsed = chunking.check_manifest(manifest)
    whole = msgspec.json.decode(chunking.assemble(parsed, {chunking.digest(c): c
                                                           for c in chunks}))
    assert whole["metadata_level"] == LEVEL
    assert snapshot_from_dict(whole).metadata_level == LEVEL


class Features:
    def __init__(self, answer):
        self.answer = answer

    def describe_features(self):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_metadata_level_reads_the_finalized_feature():
    assert metadata_level(Features({"metadata.version": {"supported": (1, 30),
                                                         "finalized": (1, 30)}})) == 30
    assert metadata_level(Features({"finalized_features": {"metadata.version": (1, 27)}})) == 27
    assert metadata_level(Features({})) is None  # ZooKeeper: nothing finalized
    assert metadata_level(Features(OSError("down"))) is None


def test_facts_name_the_dirs_past_the_threshold_even_below_the_bytes_worth_a_move():
    snapshot = snapshot_from_dict(with_level(skewed(), LEVEL))
    facts = snapshot_facts(snapshot)
    # broker 1: 3 GiB vs 1 GiB, past the threshold but not the bytes worth a move
    assert list(facts.skewed) == [0] and facts.over == {0: ["/d1"], 1: ["/d1"]}
    small = snapshot_facts(snapshot, FactLimits(disk_skew_min_bytes=1 << 50))
    # not worth a move, but not even either: a cordon of ours there is not lifted yet
    assert small.skewed == {} and small.over == facts.over
    assert facts.metadata_level == LEVEL and facts.cordoned == {}


def test_an_uncordon_not_done_is_proposed_again_with_backoff_while_the_dir_stays_healthy():
    run = Run(SETTINGS)
    over = {2: ["/b2/d1"]}
    run.batch(seen(T0, skew={2: 1.5}, over=over))
    run.batch(seen(T0 + 61_000, skew={2: 1.5}, over=over))
    cordoned = {2: ["/b2/d1"]}
    t = T0 + 120_000
    (lift,) = run.batch(seen(t, cordoned=cordoned))
    assert lift.type == UNCORDON_DIR
    # Rejected (or expired): the dir stays cordoned. Asked again 10 min on, then 20.
    assert run.batch(seen(t + 599_000, cordoned=cordoned)) == []
    (again,) = run.batch(seen(t + 600_000, cordoned=cordoned))
    assert (again.type, again.broker, again.log_dir) == (UNCORDON_DIR, 2, "/b2/d1")
    assert "proposed 1 time(s) before" in again.reason
    assert run.batch(seen(t + 600_000 + 1_199_000, cordoned=cordoned)) == []
    (third,) = run.batch(seen(t + 1_800_000, cordoned=cordoned))
    assert third.type == UNCORDON_DIR
    # The state survives the job's checkpoint (JSON) with its count.
    from streams.detect_types import ClusterState
    assert ClusterState.from_json(run.state.to_json()).lifts == {(2, "/b2/d1"): (t + 1_800_000, 3)}
    # Skewed again meanwhile: not asked while unhealthy; done at last: nothing of ours left.
    assert run.batch(seen(t + 9_000_000, skew={2: 1.5}, over=over, cordoned=cordoned)) == []
    assert run.batch(seen(t + 9_100_000)) == []
    assert run.state.cordons == {} and run.state.lifts == {}


def test_the_uncordon_wait_doubles_up_to_its_cap():
    s = DetectSettings(uncordon_retry_ms=1000, uncordon_retry_max_ms=5000)
    assert [s.uncordon_wait(n) for n in (1, 2, 3, 4, 50)] == [1000, 2000, 4000, 5000, 5000]


def test_a_dir_a_delta_says_is_back_is_cordoned_by_the_next_snapshot():
    # The collector's delta for the restarted broker reaches the job before the gauge
    # and the full snapshot: it ends the episode, and the dir is still cordoned.
    from tests.unit.test_stream_deltas import delta

    run = Run(SETTINGS)
    run.batch(seen(T0))
    run.batch(Failure(T0 + 1000, "metric", 1, "/b1/d0"), seen(T0 + 1000, offline={(1, "/b1/d0")}))
    assert run.batch(delta(T0 + 20_000)) == []
    (cordon,) = run.batch(seen(T0 + 21_000))
    assert (cordon.type, cordon.broker, cordon.log_dir) == (CORDON_DIR, 1, "/b1/d0")
    assert run.batch(DirOnline(T0 + 22_000, 1, "/b1/d0"), seen(T0 + 23_000)) == []
