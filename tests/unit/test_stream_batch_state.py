"""The detector's state between micro-batches (streams/batch_state.py): kept per batch in
the checkpoint, so a batch Spark runs again, or the job restarted, decides the same."""

from __future__ import annotations

from types import SimpleNamespace

from streams.batch_state import STATE_DIR, BatchState
from streams.detect_types import FIX_OFFLINE, Decision, DetectSettings
from streams.stateful import DECISION, KEEP
from tests.unit.test_stream_signals import signals
from tests.unit.test_stream_validate import EVENT
from tests.unit.test_stream_validate import SNAPSHOT as SNAPSHOT_DOC

FAILED = {**SNAPSHOT_DOC, "taken_at": "2026-11-22T03:51:00Z",
          "brokers": [{"id": 0, "rack": "r1", "alive": True,
                       "log_dirs": [{"path": "/d1", "online": False}]}]}
DELAY_MS = 60_000


def rows(*records):
    return list(signals(*records).itertuples(index=False))


def fixes(outcomes):
    return sorted((d.type, d.broker, d.log_dir) for d in
                  (Decision.from_json(body) for _, kind, body in outcomes if kind == DECISION)
                  if d.type == FIX_OFFLINE)


def test_a_batch_run_again_starts_from_the_state_the_batch_before_it_left(tmp_path):
    state = BatchState(tmp_path, DetectSettings(), DELAY_MS)
    state.commit(0, state.step(0, rows(("s", SNAPSHOT_DOC)))[1])
    failure = rows(("e", EVENT), ("s", FAILED))
    first, after = state.step(1, failure)
    state.commit(1, after)  # then Spark failed before its commit: batch 1 again
    again, _ = state.step(1, failure)
    assert fixes(first) == fixes(again) == [(FIX_OFFLINE, 0, "/d1")]
    # a restarted job (a new driver) reads the same from the checkpoint
    restarted, _ = BatchState(tmp_path, DetectSettings(), DELAY_MS).step(1, failure)
    assert fixes(restarted) == fixes(first)


def test_a_batch_changes_no_state_until_it_is_committed(tmp_path):
    state = BatchState(tmp_path, DetectSettings(), DELAY_MS)
    snapshot = rows(("s", SNAPSHOT_DOC))
    first, _ = state.step(0, snapshot)  # its sink failed: never committed
    again, _ = state.step(0, snapshot)
    # still a new snapshot to keep, the second time too
    assert [k for _, k, _ in first] == [k for _, k, _ in again] == [KEEP]
    assert not (tmp_path / STATE_DIR).exists()


def at(ms, key="c1"):
    """A signal row of a broker coming back, at ``ms``: it moves only the clock."""
    return SimpleNamespace(key=key, kind="back", event_ts=ms, broker=1, log_dir=None,
                           source=None, body=None, topic="e", partition=0, offset=0)


def test_the_watermark_is_the_latest_event_time_less_the_delay_and_never_goes_back(
        tmp_path):
    state = BatchState(tmp_path, DetectSettings(), DELAY_MS)
    _, first = state.step(0, [at(100_000), at(500_000)])
    assert first.watermark_ms == 500_000 - DELAY_MS
    state.commit(0, first)
    _, later = state.step(1, [at(200_000)])  # late records: the watermark stays
    assert later.watermark_ms == first.watermark_ms
    _, empty = state.step(1, [])
    assert empty.watermark_ms == first.watermark_ms and empty.clusters == first.clusters


def test_only_the_last_two_batches_states_are_kept(tmp_path):
    state = BatchState(tmp_path, DetectSettings(), DELAY_MS)
    for batch in range(5):
        state.commit(batch, state.step(batch, [at(1000 * batch)])[1])
    assert sorted(p.name for p in (tmp_path / STATE_DIR).iterdir()) == ["3.json", "4.json"]
