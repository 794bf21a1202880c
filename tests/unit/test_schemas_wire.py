"""The one bounded decoder: every poison a topic or an HTTP body can carry is a
RecordError with a reason, never another exception."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas import wire
from schemas.records import RAW_LIMIT, DeadLetter, LogDirEvent
from schemas.registry import RecordError

EVENT = (b'{"version":1,"cluster_id":"c","event_time":"2026-01-02T03:04:05.000Z",'
         b'"source":"zookeeper","kind":"log_dir_failure","broker":1}')

POISON = {
    "tombstone": (None, "no value (a tombstone)"),
    "deeply nested": (b"[" * 30_000 + b"]" * 30_000, "nested deeper than 32 levels"),
    "nested past the bound": (b"[" * 40 + b"]" * 40, "nested deeper than 32 levels"),
    "deep object": (b'{"a":' * 40 + b"1" + b"}" * 40, "nested deeper than 32 levels"),
    "invalid UTF-8": (b'{"raw": "\xff"}', "not UTF-8 text"),
    "not JSON": (b"\x00garbage", "not JSON"),
    "truncated": (b'{"version":', "not JSON"),
    "5 MB string": (b'"' + b"x" * 5_000_000 + b'"', "over the 65536-byte limit"),
    "an array": (b"[1, 2]", "expected a JSON object, got an array"),
    "a string": (b'"hello"', "expected a JSON object, got a string"),
    "wrong types": (EVENT.replace(b'"broker":1', b'"broker":"one"'), "broker"),
}


@pytest.mark.parametrize("name", sorted(POISON))
def test_every_poison_is_a_record_error_with_its_reason(name):
    raw, reason = POISON[name]
    with pytest.raises(RecordError) as caught:
        wire.record("logdir-event", raw)
    assert reason in str(caught.value)


def test_a_good_record_passes_and_is_the_decoded_object():
    assert wire.record("logdir-event", EVENT)["broker"] == 1
    assert LogDirEvent.from_json(EVENT).broker == 1


def test_a_tombstone_through_the_typed_record_is_a_record_error_not_a_type_error():
    with pytest.raises(RecordError, match="tombstone"):
        LogDirEvent.from_json(None)


def test_the_size_limit_is_checked_per_record_type():
    big = b'{"x":"' + b"y" * (2 << 20) + b'"}'
    with pytest.raises(RecordError, match="over the 65536-byte limit"):
        wire.decode("broker-metric", big)
    assert wire.decode("action", big) == {"x": "y" * (2 << 20)}


def test_depth_counts_levels_without_recursion():
    assert wire.depth(1) == 0
    assert wire.depth([]) == 1
    assert wire.depth({"a": [{"b": []}]}) == 4
    assert wire.depth([[[[]]]], stop=2) == 3  # stops looking past the bound


@given(st.binary(max_size=300))
def test_no_bytes_at_all_raise_anything_but_a_record_error(raw):
    try:
        wire.record("logdir-event", raw)
    except RecordError:
        pass


@given(st.recursive(st.none() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                    max_leaves=40))
def test_any_json_value_is_accepted_or_refused_with_a_record_error(value):
    import json

    try:
        wire.record("action", json.dumps(value))
    except RecordError:
        pass


def test_a_dead_letter_of_a_huge_value_keeps_the_head_and_says_where_the_rest_is():
    letter = DeadLetter.reject(b"x" * (RAW_LIMIT + 10), "too big", "selfheal.actions", 2, 7,
                               event_time="2026-01-02T03:04:05.000Z")
    assert len(letter.raw) == RAW_LIMIT
    assert letter.reason.endswith(f"the first {RAW_LIMIT} of {RAW_LIMIT + 10} bytes, the "
                                  "whole record is at selfheal.actions[2]@7")
    assert DeadLetter.reject(None, "tombstone", "t", event_time=letter.event_time).raw == ""


@pytest.mark.parametrize("raw,broker", [
    (b'{"version":1,"broker":3,"event":1}', 3),
    (None, None), (b"", None), (b"\xff", None), (b"[" * 50_000, None),
    (b'{"broker":"x"}', None), (b"[1]", None),
])
def test_a_zookeeper_notification_reads_its_broker_or_none_whatever_the_bytes(raw, broker):
    from streams.collect.logdir_watch import parse_notification_data

    assert parse_notification_data(raw) == broker
