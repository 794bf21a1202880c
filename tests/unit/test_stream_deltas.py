"""A failure's delta in the detector (streams/deltas.py): the fix is planned from the
snapshot + the delta at once; a stale delta, a delta before any snapshot and a delta for
an unknown broker are each handled."""

from __future__ import annotations

import json

from streams.detect_types import FIX_OFFLINE, LOGDIR_EVENT, DeltaSeen, Failure, SnapshotRef
from tests.unit.test_stream_detect import DIRS, T0, Run, snap


def delta(t: int, offline=(), brokers=(1,), offset=None) -> DeltaSeen:
    """A delta at ``t`` for ``brokers`` with the (broker, dir) pairs in ``offline`` offline."""
    ref = SnapshotRef("selfheal.cluster-snapshots", 0, offset if offset is not None else t, t)
    seen = {b: (True, {d: (b, d) not in offline for d in DIRS.get(b, ("/x/d0",))})
            for b in brokers}
    return DeltaSeen(t, ref, seen, json.dumps({"brokers": sorted(seen)}))


def test_a_delta_after_the_failure_plans_the_fix_without_waiting_for_a_snapshot():
    run = Run()
    run.batch(snap(T0 - 60_000))
    (fix,) = run.batch(Failure(T0, LOGDIR_EVENT), delta(T0 + 300, offline={(1, "/b1/d1")}))
    assert (fix.type, fix.broker, fix.log_dir, fix.event_time) == (FIX_OFFLINE, 1, "/b1/d1", T0)
    # Planned from the full snapshot it follows, with the delta applied.
    assert fix.snapshot.taken_at == T0 - 60_000 and fix.delta.taken_at == T0 + 300
    # The full snapshot taken next says the same: nothing more, and the delta is done.
    assert run.batch(snap(T0 + 1000, offline={(1, "/b1/d1")})) == []
    assert run.state.delta is None


def test_a_delta_saying_the_dir_is_back_ends_the_episode():
    run = Run()
    run.batch(snap(T0 - 60_000))
    run.batch(Failure(T0, LOGDIR_EVENT), delta(T0 + 300, offline={(1, "/b1/d1")}))
    run.batch(delta(T0 + 9000))
    assert run.state.episodes == {}
    # back from its failure: held as returned, as a snapshot saying so would hold it
    assert run.state.returned == {(1, "/b1/d1"): T0 + 9000}


def test_a_stale_delta_is_ignored():
    run = Run()
    run.batch(snap(T0))
    before = run.state.to_json()
    assert run.batch(delta(T0 - 1000, offline={(1, "/b1/d1")})) == []
    assert run.batch(delta(T0, offline={(1, "/b1/d1")})) == []  # as old as the snapshot
    assert run.state.to_json() == before and run.notes == []


def test_a_delta_before_any_snapshot_is_evidence_and_the_fix_waits_for_a_snapshot():
    run = Run()
    assert run.batch(Failure(T0, LOGDIR_EVENT), delta(T0 + 300, offline={(1, "/b1/d1")})) == []
    assert (1, "/b1/d1") in run.state.episodes and run.state.delta is None
    (fix,) = run.batch(snap(T0 + 1000, offline={(1, "/b1/d1")}))
    assert (fix.broker, fix.log_dir, fix.event_time) == (1, "/b1/d1", T0)
    assert fix.snapshot.taken_at == T0 + 1000 and fix.delta is None


def test_a_delta_for_a_broker_the_snapshot_does_not_list_is_a_dead_letter():
    run = Run()
    run.batch(snap(T0 - 60_000))
    detector_notes = run.detector.step(
        "c1", run.state, [delta(T0 + 300, offline={(7, "/x/d0")}, brokers=(1, 7))])[1]
    (note,) = detector_notes
    assert note.letter is not None and note.letter[0].offset == T0 + 300
    assert "broker(s) 7" in note.text and "does not list" in note.text
    assert run.state.episodes == {} and run.state.delta is None  # nothing of it used
