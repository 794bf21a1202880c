"""Kafka rows to signals and dead letters (streams/signals.py) and through the stateful
step (streams/stateful.py), on frames shaped as Spark hands them over."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from schemas.records import RAW_LIMIT
from schemas.registry import validate
from streams.batch_state import BatchState
from streams.detect_types import FIX_OFFLINE, PAGE, Decision, DetectSettings, SnapshotFacts
from streams.facts import FactLimits
from streams.signals import BACK, FAILURE, GONE, ONLINE, REJECT, SNAPSHOT, to_signals
from streams.stateful import DEAD_LETTER, DECISION, KEEP
from tests.unit.test_stream_validate import EVENT, METRIC
from tests.unit.test_stream_validate import SNAPSHOT as SNAPSHOT_DOC

TOPICS = {"m": "broker-metric", "e": "logdir-event", "s": "cluster-snapshot"}


def kafka_frame(*records: tuple[str, Any]) -> pd.DataFrame:
    """(topic, value) pairs as Spark's Kafka source rows; dict values are JSON-encoded."""
    rows = []
    for offset, (topic, value) in enumerate(records):
        raw = json.dumps(value).encode() if isinstance(value, (dict, list)) else value
        rows.append({"topic": topic, "partition": 0, "offset": offset,
                     "timestamp": pd.Timestamp("2026-11-22T04:00:00"), "value": raw})
    return pd.DataFrame(rows)


def signals(*records: tuple[str, Any]) -> pd.DataFrame:
    out = list(to_signals(iter([kafka_frame(*records)]), TOPICS, FactLimits()))
    return out[0] if out else pd.DataFrame()


def test_nothing_to_say_yields_no_frame_at_all():
    # pyspark's Arrow path fails on an empty frame of these columns.
    assert list(to_signals(iter([]), TOPICS, FactLimits())) == []
    assert signals(("m", metric("kafka_log_size", 1, topic="t", partition="0"))).empty


def metric(name: str, value: float, **labels: str) -> dict[str, Any]:
    return {**METRIC, "metric": name, "value": value, "labels": labels}


def test_only_what_detection_reads_goes_on():
    out = signals(
        ("m", metric("kafka_log_size", 4096, topic="t", partition="0")),
        ("m", metric("kafka_log_log_directory_offline", 1, log_dir="/d2")),
        ("m", metric("kafka_log_log_directory_offline", 0, log_dir="/d1")),
        ("m", metric("kafka_log_offline_log_directory_count", 2)),
        ("m", metric("kafka_log_offline_log_directory_count", 0)),
        ("e", EVENT),
        ("e", {**EVENT, "kind": "broker_deregistered", "broker": 3}),
        ("e", {**EVENT, "kind": "broker_registered", "broker": 3}),
    )
    got = [(r.kind, None if pd.isna(r.broker) else int(r.broker), r.log_dir, r.source)
           for r in out.itertuples()]
    assert got == [(FAILURE, 1, "/d2", "metric"), (ONLINE, 1, "/d1", "metric"),
                   (FAILURE, 1, None, "metric"), (FAILURE, None, None, "logdir_event"),
                   (GONE, 3, None, "logdir_event"), (BACK, 3, None, "logdir_event")]
    assert set(out["key"]) == {"c1"}
    assert out["event_ts"].iloc[0] == pd.Timestamp("2026-11-22T03:50:54.123Z")


def test_a_snapshot_becomes_its_facts_with_its_coordinates():
    out = signals(("m", metric("kafka_log_size", 1, topic="t", partition="0")),
                  ("s", SNAPSHOT_DOC))
    (row,) = out.itertuples()
    assert (row.kind, row.key, row.topic, row.partition, row.offset) == (
        SNAPSHOT, "c1", "s", 0, 1)
    assert SnapshotFacts.from_json(row.body).dirs == {0: {"/d1": True}}


def test_every_bad_record_becomes_a_valid_dead_letter_with_its_origin():
    out = signals(("m", b"\xff\xfe garbage"), ("m", None), ("e", {**EVENT, "broker": -4}),
                  ("s", {**SNAPSHOT_DOC, "brokers": "none"}), ("m", [1]))
    assert list(out["kind"]) == [REJECT] * 5 and set(out["key"]) == {""}
    letters = sorted((json.loads(body) for body in out["body"]),
                     key=lambda letter: letter["source_offset"])
    for offset, letter in enumerate(letters):
        validate("dead-letter", letter)
        assert letter["source_partition"] == 0 and letter["source_offset"] == offset
    assert letters[0]["raw"] == "\ufffd\ufffd garbage" and letters[0]["cluster_id"] is None
    assert letters[0]["reason"].startswith("$: not UTF-8 text: invalid start byte at byte 0")
    assert letters[1]["reason"].startswith("$: no value (a tombstone)")
    assert letters[2]["reason"].startswith("broker: -4 is less than the minimum of 0")
    assert letters[2]["cluster_id"] == "c1" and letters[2]["source_topic"] == "e"
    assert letters[3]["reason"].startswith("brokers: expected array, got string")
    assert letters[3]["reason"].endswith("(suite cluster-snapshot)")


def test_a_huge_bad_record_keeps_its_head_and_says_where_the_rest_is():
    huge = {**SNAPSHOT_DOC, "partitions": [{"topic": "t" * 100, "partition": i, "leader": 9,
                                           "isr": [], "replicas": [{"broker": 9, "size_bytes": 1}]}
                                          for i in range(3000)]}
    (row,) = signals(("s", huge)).itertuples()
    letter = json.loads(row.body)
    validate("dead-letter", letter)
    assert len(letter["raw"]) == RAW_LIMIT and letter["raw"].startswith('{"version": 1')
    assert "the whole record is at s[0]@0" in letter["reason"]
    assert letter["reason"].startswith("partitions[0].replicas[0].broker: broker 9 is not in")


def test_a_topic_the_job_does_not_know_is_an_error_not_a_silent_drop():
    with pytest.raises(ValueError, match="does not know"):
        signals(("other", METRIC))


class Batches:
    """The driver's stateful step (streams/batch_state.py) over frames, one batch each,
    its state kept in ``checkpoint`` as the job keeps it."""

    def __init__(self, checkpoint: Path) -> None:
        self.state = BatchState(checkpoint, DetectSettings(), 60_000)
        self.batch = 0

    def __call__(self, *frames: pd.DataFrame) -> dict[str, list[str]]:
        rows = [r for f in frames for r in f.itertuples(index=False)]
        outcomes, after = self.state.step(self.batch, rows)
        self.state.commit(self.batch, after)
        self.batch += 1
        return {"cluster_id": [c for c, _, _ in outcomes], "kind": [k for _, k, _ in outcomes],
                "body": [b for _, _, b in outcomes]}


def test_the_stateful_step_keeps_state_per_cluster_and_passes_dead_letters_through(tmp_path):
    step = Batches(tmp_path)
    failed = {**SNAPSHOT_DOC, "taken_at": "2026-11-22T03:51:00Z",
              "brokers": [{"id": 0, "rack": "r1", "alive": True,
                           "log_dirs": [{"path": "/d1", "online": False}]}]}
    kept = step(signals(("s", SNAPSHOT_DOC)))
    # Only the new snapshot's place, for the driver to read it ahead (streams/keeper.py).
    assert kept["kind"] == [KEEP]
    assert json.loads(kept["body"][0])["offset"] == 0
    out = step(signals(("e", EVENT), ("s", failed)))
    decisions = [Decision.from_json(b) for k, b in zip(out["kind"], out["body"], strict=True)
                 if k == DECISION]
    # Broker 0's only dir failed: a fix for its replicas, and a page for the broker.
    assert sorted((d.type, d.broker, d.log_dir) for d in decisions) == [
        (FIX_OFFLINE, 0, "/d1"), (PAGE, 0, "/d1")]
    rejects = signals(("m", b"nope"))
    out = step(rejects)
    assert out["kind"] == [DEAD_LETTER] and out["body"][0] == rejects["body"][0]


def test_a_record_from_the_far_future_is_a_dead_letter_not_a_signal():
    from datetime import timedelta

    from core import clock

    soon = clock.text(clock.now() + timedelta(seconds=60))
    late = clock.text(clock.now() + timedelta(hours=1))
    ok = metric("kafka_log_log_directory_offline", 1, log_dir="/d1") | {"event_time": soon}
    ahead = metric("kafka_log_log_directory_offline", 1, log_dir="/d1") | {"event_time": late}
    out = signals(("m", ok), ("m", ahead))
    assert list(out["kind"]) == [FAILURE, REJECT]
    letter = json.loads(out["body"][1])
    assert letter["reason"].startswith(f"event_time: {late} is in the future, ")
    assert "[detect] max_clock_ahead_seconds" in letter["reason"]


def test_the_typed_fast_path_gives_what_the_checking_path_gives(monkeypatch):
    from bench import synthetic
    from streams import signals as module

    docs = [synthetic.generate(brokers=9, partitions=120, dead_brokers=1, seed=s)
            for s in range(3)]
    records = [("s", {**d, "taken_at": "2026-11-22T03:50:54.123Z"}) for d in docs]
    records.append(("s", {**SNAPSHOT_DOC, "extra_field": {"kept": True}}))
    assert module._typed(json.dumps(records[0][1]).encode()) is not None  # taken fast
    fast = signals(*records)
    monkeypatch.setattr(module, "_typed", lambda value, cap=None: None)  # the walker only
    slow = signals(*records)
    assert list(fast["kind"]) == [SNAPSHOT] * 3 + [REJECT]

    def undated(frame: pd.DataFrame) -> pd.DataFrame:  # a dead letter is dated when made
        out = frame.copy()
        out["body"] = [json.dumps({**json.loads(b), "event_time": None}) if k == REJECT else b
                       for k, b in zip(out["kind"], out["body"], strict=True)]
        return out

    pd.testing.assert_frame_equal(undated(fast), undated(slow))
    facts = SnapshotFacts.from_json(fast["body"].iloc[0])
    assert facts.alive[8] is False and facts.groups  # dead broker and groups carried


@pytest.mark.parametrize("raw", [
    b"[" * 60_000, b'{"cluster_id": "\xff\xfe"}', b"\xff", b'"' + b"x" * (5 << 20) + b'"',
    b'{"version": "one", "cluster_id": 7}', b"", b"null", b'{"a":' * 40 + b"1" + b"}" * 40,
], ids=["deep", "invalid UTF-8 inside", "invalid UTF-8", "5 MB string", "wrong types",
        "empty", "null", "deep object"])
def test_poison_on_the_snapshot_topic_is_a_dead_letter_not_a_failed_task(raw):
    (row,) = signals(("s", raw)).itertuples()
    assert row.kind == REJECT
    validate("dead-letter", json.loads(row.body))


# --- chunked snapshots (schemas/snapshot_chunks.py) ----------------------------------


def chunked(seed: int = 0, target: int = 8 << 10) -> tuple[dict[str, Any], list[bytes], bytes]:
    from bench import synthetic
    from schemas import snapshot_chunks as chunking

    whole = {**synthetic.generate(brokers=9, partitions=200, seed=seed),
             "taken_at": "2026-11-22T03:50:54.123Z"}
    chunks, manifest = chunking.split(whole, f"snap-{seed}", target)
    return whole, chunks, manifest


def test_a_chunked_snapshot_becomes_the_facts_of_the_whole_at_its_manifest():
    whole, chunks, manifest = chunked()
    assert len(chunks) > 3
    out = signals(*[("s", c) for c in chunks], ("s", manifest))
    (row,) = out.itertuples()
    assert (row.kind, row.offset) == (SNAPSHOT, len(chunks))  # the manifest's coordinates
    reference = signals(("s", whole))
    assert row.body == reference["body"].iloc[0]


def test_chunks_found_on_the_bus_complete_a_manifest_whose_chunks_came_earlier():
    from schemas import snapshot_chunks as chunking

    whole, chunks, manifest = chunked()
    asked = []

    def bus(topic, partition, offset, wanted, found):
        asked.append((topic, partition, offset, sorted(found)))
        return {**found, **{chunking.digest(c): c for c in chunks[:2]}}

    frame = kafka_frame(*[("s", c) for c in chunks[2:]], ("s", manifest))
    (out,) = to_signals(iter([frame]), TOPICS, FactLimits(), bus)
    assert list(out["kind"]) == [SNAPSHOT]
    assert asked == [("s", 0, len(chunks) - 2,
                      sorted(chunking.digest(c) for c in chunks[2:]))]
    assert out["body"].iloc[0] == signals(("s", whole))["body"].iloc[0]


def test_a_bad_chunk_is_a_dead_letter_and_its_snapshot_is_never_assembled():
    _, chunks, manifest = chunked()
    poisoned = chunks[1].replace(b'"leader":', b'"leader":"x","x":', 1)
    out = signals(*[("s", c) for c in (chunks[:1] + [poisoned] + chunks[2:])],
                  ("s", manifest))
    assert list(out["kind"]) == [REJECT, REJECT]
    chunk_letter, manifest_letter = (json.loads(b) for b in out["body"])
    for letter in (chunk_letter, manifest_letter):
        validate("dead-letter", letter)
    assert chunk_letter["source_offset"] == 1
    assert "partitions[0].leader: Expected `int`, got `str`" in chunk_letter["reason"]
    assert manifest_letter["source_offset"] == len(chunks)
    assert "is incomplete: chunk 1 of" in manifest_letter["reason"]  # not that digest
    assert manifest_letter["cluster_id"] == json.loads(manifest)["cluster_id"]
    assert manifest_letter["raw"] == manifest.decode()  # the manifest, not an assembly


def test_a_manifest_listing_a_refused_chunk_is_refused_without_searching_the_bus():
    from schemas.snapshot_chunks import manifest_of

    whole, chunks, _ = chunked()
    chunks[2] = chunks[2].replace(b'"leader":', b'"leader":"x","x":', 1)
    listed = manifest_of(whole["cluster_id"], whole["taken_at"], "snap-0", chunks)

    def bus(*_args):
        raise AssertionError("the bus was searched for a chunk already refused")

    frame = kafka_frame(*[("s", c) for c in chunks], ("s", listed))
    (out,) = to_signals(iter([frame]), TOPICS, FactLimits(), bus)
    assert list(out["kind"]) == [REJECT, REJECT]
    assert ("chunk 2 of snapshot snap-0 was refused (its dead letter names offset 2)"
            in json.loads(out["body"][1])["reason"])


def test_a_manifest_missing_a_chunk_the_bus_has_not_either_is_a_dead_letter_saying_so():
    _, chunks, manifest = chunked()
    frame = kafka_frame(*[("s", c) for c in chunks[1:]], ("s", manifest))
    (out,) = to_signals(iter([frame]), TOPICS, FactLimits(), lambda *a: a[-1])
    assert list(out["kind"]) == [REJECT]
    assert "is incomplete: chunk 0 of" in json.loads(out["body"][0])["reason"]


def test_a_chunk_alone_says_nothing_and_a_bus_that_fails_costs_only_its_manifest():
    _, chunks, manifest = chunked()
    assert signals(("s", chunks[0])).empty

    def broken(*_args):
        raise RuntimeError("bus away")

    frame = kafka_frame(("s", manifest), ("s", SNAPSHOT_DOC))
    (out,) = to_signals(iter([frame]), TOPICS, FactLimits(), broken)
    assert list(out["kind"]) == [REJECT, SNAPSHOT]
    assert "could not be read: RuntimeError: bus away" in json.loads(out["body"][0])["reason"]


def test_an_assembled_snapshot_that_contradicts_itself_is_refused_at_its_manifest():
    from schemas import snapshot_chunks as chunking

    whole, _, _ = chunked()
    whole["partitions"][150]["replicas"][0]["broker"] = 99  # a broker chunk 0 does not list
    chunks, manifest = chunking.split(whole, "snap-x", 8 << 10)
    out = signals(*[("s", c) for c in chunks], ("s", manifest))
    assert list(out["kind"]) == [REJECT]
    letter = json.loads(out["body"][0])
    assert letter["source_offset"] == len(chunks)
    assert "partitions[150].replicas[0].broker" in letter["reason"]
