"""A micro-batch in two parts (streams/fast_first.py): a failure's event and delta are
decided, and their fix sent, before the batch's full snapshots are decoded; the two parts
decide as the detector would had Spark cut the batch there."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pandas as pd

from schemas.snapshot_chunks import split as chunked
from streams.batch_state import BatchState
from streams.detect_types import FIX_OFFLINE, Decision, DetectSettings
from streams.facts import FactLimits
from streams.fast_first import parts, split
from streams.signals import to_signals
from streams.stateful import DECISION, KEEP
from tests.unit.test_stream_delta_signals import FAILED, NOTIFIED, delta
from tests.unit.test_stream_signals import TOPICS
from tests.unit.test_stream_validate import METRIC
from tests.unit.test_stream_validate import SNAPSHOT as BASE

# the snapshot the collector takes after the failure, a second after its delta
AFTER = {**FAILED, "taken_at": "2026-11-22T03:51:01Z"}


def record(topic: str, offset: int, value: Any) -> SimpleNamespace:
    """A collected Kafka row as the sink reads it (``value`` a dict is JSON)."""
    raw = json.dumps(value).encode() if isinstance(value, dict) else value
    return SimpleNamespace(topic=topic, partition=0, offset=offset, ms=0,
                           value=None if raw is None else bytearray(raw))


def chunks_of(doc: dict[str, Any], first_offset: int) -> list[SimpleNamespace]:
    """``doc`` as the collector sends a large snapshot: chunks, then the manifest."""
    parts, manifest = chunked(doc, "sid1", 200)
    assert len(parts) > 1
    return [record("s", first_offset + i, v) for i, v in enumerate([*parts, manifest])]


def signal_rows(rows: list[SimpleNamespace]) -> list[Any]:
    if not rows:
        return []
    frame = pd.DataFrame({"topic": [r.topic for r in rows],
                          "partition": [r.partition for r in rows],
                          "offset": [r.offset for r in rows],
                          "timestamp": pd.to_datetime([r.ms for r in rows], unit="ms"),
                          "value": [None if r.value is None else bytes(r.value)
                                    for r in rows]})
    return [row for out in to_signals(iter([frame]), TOPICS, FactLimits())
            for row in out.itertuples(index=False)]


def run(state: BatchState, batch: int, rows: list[SimpleNamespace], cut: bool = True,
        pieces: list[list[SimpleNamespace]] | None = None
        ) -> list[list[tuple[str, str, str]]]:
    """One batch through the detector as the sink runs it (in parts, or whole as before;
    ``pieces``: collected in those pieces, ``rows`` unused): each part's outcomes; the
    state is committed after the last part."""
    out, after = [], None
    for part in parts(pieces or [rows], "s") if cut else [rows]:
        outcomes, after = state.step(batch, signal_rows(part), after)
        out.append(outcomes)
    if after is None:
        out.append((after := state.step(batch, [], None))[0])
    state.commit(batch, after)
    return out


def fixes(outcomes: list[tuple[str, str, str]]) -> list[Decision]:
    return [d for d in (Decision.from_json(b) for _, k, b in outcomes if k == DECISION)
            if d.type == FIX_OFFLINE]


def test_the_snapshot_topic_is_cut_at_its_first_record_that_is_not_a_delta():
    rows = [record("m", 0, METRIC), record("s", 3, delta()), *chunks_of(AFTER, 4),
            record("e", 0, NOTIFIED)]
    rows.append(record("s", rows[-2].offset + 1, delta()))  # a delta behind the snapshot
    first, rest = split(rows, "s")
    assert [(r.topic, r.offset) for r in first] == [("m", 0), ("s", 3), ("e", 0)]
    assert [r.offset for r in rest] == list(range(4, rows[-1].offset + 1))


def test_a_batch_without_a_full_snapshot_is_one_part():
    rows = [record("e", 0, NOTIFIED), record("s", 0, delta()), record("s", 1, delta())]
    assert split(rows, "s") == (rows, [])


def test_the_fix_goes_out_in_the_first_part_from_the_kept_snapshot_and_the_delta(tmp_path):
    state = BatchState(tmp_path, DetectSettings(), 60_000)
    run(state, 0, [record("s", 0, BASE)])
    # the notification, the failed broker's delta, then the full snapshot after it
    first, rest = run(state, 1, [record("e", 0, NOTIFIED), record("s", 1, delta()),
                                 *chunks_of(AFTER, 2)])
    (fix,) = fixes(first)
    assert (fix.broker, fix.log_dir) == (0, "/d1")
    assert fix.snapshot is not None and fix.snapshot.offset == 0  # the base, kept
    assert fix.delta is not None and fix.delta.offset == 1
    # the full snapshot is kept for the next failure and proposes nothing more
    assert fixes(rest) == [] and [k for _, k, _ in rest] == [KEEP]


def test_in_one_part_the_same_batch_proposes_the_same_fix_once(tmp_path):
    state = BatchState(tmp_path, DetectSettings(), 60_000)
    run(state, 0, [record("s", 0, BASE)], cut=False)
    (whole,) = run(state, 1, [record("e", 0, NOTIFIED), record("s", 1, delta()),
                              *chunks_of(AFTER, 2)], cut=False)
    (fix,) = fixes(whole)
    assert (fix.broker, fix.log_dir, fix.delta) == (0, "/d1", None)  # from the snapshot


def test_a_batch_run_again_sends_its_first_part_s_fix_again_alike(tmp_path):
    state = BatchState(tmp_path, DetectSettings(), 60_000)
    run(state, 0, [record("s", 0, BASE)])
    batch = [record("e", 0, NOTIFIED), record("s", 1, delta()), *chunks_of(AFTER, 2)]
    first, _ = split(batch, "s")
    once, _ = state.step(1, signal_rows(first))  # then the second part failed
    again = run(state, 1, batch)[0]
    assert [d.to_json() for d in fixes(once)] == [d.to_json() for d in fixes(again)]


def test_a_delta_behind_a_newer_snapshot_stays_behind_it_and_is_stale(tmp_path):
    state = BatchState(tmp_path, DetectSettings(), 60_000)
    run(state, 0, [record("s", 0, BASE)])
    # the snapshot (03:51:01) first on the topic, then a delta taken before it
    (whole,) = run(state, 1, [record("s", 1, AFTER), record("s", 2, delta())])
    (fix,) = fixes(whole)
    assert fix.delta is None and fix.snapshot is not None and fix.snapshot.offset == 1


def test_a_delta_ahead_of_its_base_in_the_batch_is_evidence_until_a_newer_snapshot(
        tmp_path):
    state = BatchState(tmp_path, DetectSettings(), 60_000)
    # no full snapshot yet: the delta opens the episode; its base, after it on the
    # topic, was taken before the failure, so the fix waits for a newer snapshot
    first, rest = run(state, 0, [record("s", 0, delta()), record("s", 1, BASE)])
    assert fixes(first) == fixes(rest) == []
    (later,) = run(state, 1, [record("s", 2, AFTER)])
    (fix,) = fixes(later)
    assert (fix.broker, fix.log_dir, fix.snapshot.offset) == (0, "/d1", 2)


def test_each_valid_snapshot_s_assembled_value_is_handed_over_for_the_keeper():
    snapshots: dict[tuple[str, int, int], bytes] = {}
    bad = record("s", 9, {**BASE, "brokers": 1})
    frame = pd.DataFrame([{"topic": r.topic, "partition": 0, "offset": r.offset,
                           "timestamp": pd.Timestamp(0), "value": bytes(r.value)}
                          for r in [*chunks_of(AFTER, 0), bad]])
    list(to_signals(iter([frame]), TOPICS, FactLimits(), None, snapshots))
    manifest = len(chunks_of(AFTER, 0)) - 1
    assert list(snapshots) == [("s", 0, manifest)]  # not the chunks, not the bad one
    assembled = json.loads(snapshots["s", 0, manifest])
    assert {k: assembled[k] for k in AFTER} == AFTER


def test_a_fix_reads_its_delta_from_the_batch_and_only_an_earlier_one_from_the_bus():
    from streams.detect_types import SnapshotRef
    from streams.sink import BatchSink

    read: list[int] = []
    sink = SimpleNamespace(deltas={("s", 0, 1): delta()}, reader=SimpleNamespace(
        delta=lambda ref, cluster: read.append(ref.offset) or b"from the bus"))
    assert BatchSink._delta(sink, SnapshotRef("s", 0, 1, 0), "c1") == delta()
    assert BatchSink._delta(sink, SnapshotRef("s", 0, 0, 0), "c1") == b"from the bus"
    assert read == [0]


def test_a_batch_in_pieces_runs_each_first_part_then_the_snapshot_s_rest():
    event, late = record("e", 0, NOTIFIED), record("s", 1, delta())
    snapshot = chunks_of(AFTER, 2)
    metric = record("m", 0, METRIC)
    got = list(parts([[event, late, *snapshot], [metric]], "s"))
    assert got == [[event, late], [metric], snapshot]
    assert list(parts([[], [metric]], "s")) == [[metric]]
    assert list(parts([[], []], "s")) == []


def test_the_next_piece_is_collected_only_once_the_part_before_it_has_run():
    collected: list[int] = []

    def pieces() -> Any:
        for n, rows in enumerate([[record("e", 0, NOTIFIED)], [record("m", 0, METRIC)]]):
            collected.append(n)
            yield rows

    each = parts(pieces(), "s")
    assert [r.topic for r in next(each)] == ["e"] and collected == [0]
    assert [r.topic for r in next(each)] == ["m"] and collected == [0, 1]


def test_in_pieces_the_fix_goes_out_before_the_metrics_are_read_and_decides_alike(
        tmp_path):
    batch = [record("e", 0, NOTIFIED), record("s", 1, delta()), *chunks_of(AFTER, 2)]
    # the round's gauges: the failed broker's other dir, online
    healthy = {**METRIC, "broker": 0, "value": 0}
    metrics = [record("m", 0, healthy), record("m", 1, healthy)]
    decided = []
    for n, pieces in enumerate([None, [batch, metrics]]):
        state = BatchState(tmp_path / str(n), DetectSettings(), 60_000)
        run(state, 0, [record("s", 0, BASE)])
        out = run(state, 1, [*metrics, *batch], pieces=pieces)
        (fix,) = fixes(out[0])  # the first part's, in either
        assert [fixes(o) for o in out[1:]] == [[]] * (len(out) - 1)
        decided.append((fix.to_json(), sorted(k for o in out for _, k, _ in o)))
    assert decided[0] == decided[1]
