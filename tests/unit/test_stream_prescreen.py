"""The fast path (streams/prescreen.py) drops only records the schema accepts, and takes
the collectors' own partition-size samples; the gauges that skip the suite are valid."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.records import BrokerMetric
from schemas.registry import dumps, is_rfc3339, is_valid
from streams.collect.exporter import wire_dict
from streams.prescreen import is_certain_gauge, is_fast
from streams.signals import COUNT_GAUGE
from streams.validate import OFFLINE_GAUGE
from tests.unit.test_stream_validate import METRIC, mutations

SIZE = {**METRIC, "metric": "kafka_log_size", "labels": {"topic": "orders", "partition": "3"},
        "value": 1048576.0}


def sound(raw: bytes) -> None:
    """If the fast path takes it, it is a valid partition-size sample."""
    if is_fast(raw):
        doc = json.loads(raw)
        assert is_valid("broker-metric", doc) and doc["metric"] == "kafka_log_size", raw


def test_the_collectors_size_samples_take_the_fast_path():
    for rack in (None, "r1"):
        for value in (0.0, 1.0, 123456789.0, 0.5):
            record = BrokerMetric(cluster_id="prod-1", event_time="2026-11-22T03:50:54.123Z",
                                  broker=7, metric="kafka_log_size", value=value, rack=rack,
                                  labels={"topic": "orders.é", "partition": "12"})
            assert is_fast(dumps(wire_dict(record))), record


def test_every_mutation_of_a_size_sample_is_either_valid_or_slow():
    for _, doc in mutations(SIZE):
        for raw in (dumps(doc), json.dumps(doc).encode(), json.dumps(doc, indent=1).encode()):
            sound(raw)
    assert not is_fast(dumps({**SIZE, "event_time": "2026-02-30T00:00:00Z"}))
    assert not is_fast(dumps({**SIZE, "value": -1}))


def test_the_pattern_knows_the_calendar():
    for year in (1900, 1999, 2000, 2023, 2024, 2100, 2400, 9999):
        for month in range(0, 14):
            for day in range(0, 33):
                when = f"{year}-{month:02}-{day:02}T23:59:59.5Z"
                raw = dumps({**SIZE, "event_time": when})
                assert is_fast(raw) == is_rfc3339(when), when


def test_other_metrics_bad_bytes_and_tombstones_are_slow():
    assert not is_fast(dumps({**SIZE, "metric": "kafka_log_log_directory_offline"}))
    assert not is_fast(dumps(SIZE).replace(b'"c1"', b'"\xffc1"'))
    assert not is_fast(dumps(SIZE).replace(b"c1", b"c\x01"))
    assert not is_fast(None)
    for tail in (b"\n", b"\r", "\u2028".encode()):
        assert not is_fast(dumps(SIZE) + tail)


# Field values near every edge the pattern draws: types, escapes, numbers, times.
TEXT = st.text(alphabet=st.sampled_from('a"\\\x00\x1fé0-:. '), max_size=4)
ANY = st.one_of(st.none(), st.booleans(), st.integers(-3, 3),
                st.floats(allow_nan=True, allow_infinity=True), TEXT,
                st.sampled_from(["2026-11-22T03:50:54.123Z", "2026-02-29T00:00:00Z",
                                 "2024-02-29T23:59:59.999999Z", "2026-11-22T03:50:54.1234567Z",
                                 "2026-11-22T24:00:00Z", "0000-01-01T00:00:00Z"]),
                st.dictionaries(TEXT, st.one_of(TEXT, st.integers()), max_size=2))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(SIZE)), ANY, max_size=3), st.booleans())
def test_random_changes_never_make_an_invalid_record_fast(changes: dict[str, Any],
                                                          compact: bool):
    doc = {**SIZE, **changes}
    try:
        raw = dumps(doc) if compact else json.dumps(doc).encode()
    except ValueError:  # NaN has no JSON
        return
    sound(raw)


# The gauges detection reads skip the Great Expectations suite when certainly valid.
COUNT = {**METRIC, "metric": "kafka_log_offline_log_directory_count", "labels": {}, "value": 0}


def certainly_valid(raw: bytes) -> None:
    """If it skips the suite, the suite would pass it: valid, and a per-dir gauge names
    its dir."""
    if is_certain_gauge(raw):
        doc = json.loads(raw)
        assert is_valid("broker-metric", doc), raw
        assert doc["metric"] in (OFFLINE_GAUGE, COUNT_GAUGE), raw
        if doc["metric"] == OFFLINE_GAUGE:
            assert doc["labels"].get("log_dir"), raw


def test_the_collectors_gauges_skip_the_suite():
    for rack in (None, "r1"):
        for metric, labels in ((OFFLINE_GAUGE, {"log_dir": "/data/b1/d2"}),
                               (COUNT_GAUGE, {})):
            for value in (0.0, 1.0, 2.0):
                record = BrokerMetric(cluster_id="prod-1", broker=7, metric=metric,
                                      event_time="2026-11-22T03:50:54.123Z", value=value,
                                      rack=rack, labels=labels)
                raw = dumps(wire_dict(record))
                assert is_certain_gauge(raw) and not is_fast(raw), record


def test_every_mutation_of_a_gauge_is_either_valid_or_checked():
    for base in (METRIC, COUNT):
        for _, doc in mutations(base):
            for raw in (dumps(doc), json.dumps(doc).encode(), json.dumps(doc, indent=1).encode()):
                certainly_valid(raw)
    assert not is_certain_gauge(dumps({**METRIC, "labels": {"log_dir": ""}}))
    assert not is_certain_gauge(dumps({**METRIC, "labels": {}}))
    assert not is_certain_gauge(dumps({**METRIC, "labels": {"log_dir": "/d", "x": "y"}}))
    assert not is_certain_gauge(dumps({**COUNT, "labels": {"log_dir": "/d"}}))
    assert not is_certain_gauge(dumps(SIZE))
    assert not is_certain_gauge(None)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(METRIC)), ANY, max_size=3), st.booleans(),
       st.booleans())
def test_random_changes_never_let_an_invalid_gauge_skip_the_suite(
        changes: dict[str, Any], compact: bool, count: bool):
    doc = {**(COUNT if count else METRIC), **changes}
    try:
        raw = dumps(doc) if compact else json.dumps(doc).encode()
    except ValueError:  # NaN has no JSON
        return
    certainly_valid(raw)
