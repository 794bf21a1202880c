"""The typed decoder (schemas/snapshot_decode.py) against the checking walker: JSON text
read by `parse_snapshot` gives the very records, or the very error, that
`snapshot_from_dict` gives for the same document."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.snapshot import SnapshotError, parse_snapshot, snapshot_from_dict
from schemas.snapshot_decode import decode_snapshot
from tests.unit.test_plan_snapshot import ALL_PATHS, EXAMPLE, SAMPLES, json_values, mutate

# EXAMPLE with every replica's log_dir written, as the collectors write them: the decoder
# reads it (EXAMPLE itself leaves one out, which sends it to the walker).
READABLE = copy.deepcopy(EXAMPLE)
READABLE["partitions"][1]["replicas"][0]["log_dir"] = None


def mutate_readable(path: str, value: Any = None, delete: bool = False) -> dict[str, Any]:
    """A copy of READABLE with the field at `path` replaced or deleted."""
    doc = copy.deepcopy(READABLE)
    parts = [
        int(k) if k.isdigit() else k for k in path.replace("]", "").replace("[", ".").split(".")
    ]
    node: Any = doc
    for key in parts[:-1]:
        node = node[key]
    if delete:
        del node[parts[-1]]
    else:
        node[parts[-1]] = value
    return doc


def outcome(read: Any, arg: Any) -> Any:
    try:
        return read(arg)
    except SnapshotError as exc:
        return (exc.path, exc.problem, exc.kind)


def same_as_the_walker(doc: Any) -> None:
    text = json.dumps(doc)
    expected = outcome(snapshot_from_dict, doc)
    assert outcome(parse_snapshot, text) == expected
    assert outcome(parse_snapshot, text.encode()) == expected
    fast = decode_snapshot(text)
    if fast is not None:  # the decoder accepts only what the walker accepts, as it reads it
        assert fast == expected


def with_partitions(*partitions: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(EXAMPLE)
    doc["brokers"][1]["log_dirs"].append({"path": "/data/d2", "online": True})
    doc["partitions"] = list(partitions)
    return doc


def part(topic: str, number: int, *replicas: tuple[int, str | None]) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": number,
        "leader": replicas[0][0],
        "isr": [b for b, _ in replicas],
        "replicas": [{"broker": b, "log_dir": d, "size_bytes": 1} for b, d in replicas],
    }


def test_a_valid_snapshot_is_read_by_the_decoder_into_the_same_records():
    fast = decode_snapshot(json.dumps(READABLE))
    assert fast is not None
    assert fast == snapshot_from_dict(READABLE)
    assert fast.partitions[0].replicas[2].log_dir is None


def test_what_the_decoder_is_stricter_about_still_loads_through_the_walker():
    # No log_dir on a replica, 1234.0 as an integer: both valid under the schema.
    assert decode_snapshot(json.dumps(EXAMPLE)) is None
    assert parse_snapshot(json.dumps(EXAMPLE)) == snapshot_from_dict(EXAMPLE)
    doc = mutate("partitions[0].replicas[0].size_bytes", 1234.0)
    assert parse_snapshot(json.dumps(doc)).partitions[0].replicas[0].size_bytes == 1234


@pytest.mark.parametrize(
    ("doc", "path", "words"),
    [
        # broker 0 has /data/d1 only; broker 1 has /data/d1 and /data/d2
        (with_partitions(part("t", 0, (1, "/data/d2"), (0, "/data/d2"))),
         "partitions[0].replicas[1].log_dir", "/data/d2 is not a log dir of broker 0"),
        (with_partitions(part("t", 0, (1, "/data/d1")), part("u", 0, (1, "/data/d1")),
                         part("t", 0, (0, "/data/d1"))),
         "partitions[2].partition", "t-0 appears twice (also partitions[0])"),
        (with_partitions(part("t", 0, (1, "/data/d1")), part("t", 0, (0, "/data/d1"))),
         "partitions[1].partition", "t-0 appears twice (also partitions[0])"),
        (with_partitions(part("t", 0, (1, "/data/d9"))),
         "partitions[0].replicas[0].log_dir", "/data/d9 is not a log dir of broker 1"),
        (with_partitions(part("t", 0, (1, None), (1, "/data/d1"))),
         "partitions[0].replicas[1].broker", "broker 1 holds two replicas of t-0"),
    ],
)  # fmt: skip
def test_references_the_decoder_refuses_are_named_by_the_walker(doc, path, words):
    assert decode_snapshot(json.dumps(doc)) is None
    with pytest.raises(SnapshotError) as caught:
        parse_snapshot(json.dumps(doc))
    assert caught.value.path == path
    assert words in str(caught.value)
    assert caught.value.kind == "consistency"
    same_as_the_walker(doc)


def test_a_topic_listed_in_two_runs_is_fine_when_its_partitions_differ():
    doc = with_partitions(
        part("t", 0, (1, "/data/d2")), part("u", 0, (1, "/data/d1")), part("t", 1, (0, None))
    )
    fast = decode_snapshot(json.dumps(doc))
    assert fast is not None and [p.name for p in fast.partitions] == ["t-0", "u-0", "t-1"]


@pytest.mark.parametrize("doc", SAMPLES)
def test_the_decoder_and_the_walker_agree_on_the_samples(doc):
    same_as_the_walker(doc)


READABLE_PATHS = sorted(set(ALL_PATHS) | {"partitions[1].replicas[0].log_dir"})


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(READABLE_PATHS), value=json_values, delete=st.booleans())
def test_the_decoder_and_the_walker_agree_on_random_mutations(path, value, delete):
    same_as_the_walker(mutate_readable(path, value, delete=delete))


@settings(max_examples=300, deadline=None)
@given(path=st.sampled_from(READABLE_PATHS), value=st.integers(-2, 9))
def test_the_decoder_and_the_walker_agree_on_plausible_numbers(path, value):
    same_as_the_walker(mutate_readable(path, value))


def test_mutations_of_the_readable_example_reach_the_decoder():
    # Guards the property tests above: they must exercise the decoder's own checks.
    assert decode_snapshot(json.dumps(mutate_readable("partitions[0].leader", 1))) is not None
    assert decode_snapshot(json.dumps(mutate_readable("partitions[0].leader", 5))) is None


def test_invalid_utf8_is_a_snapshot_error_not_a_codec_trace():
    raw = json.dumps(EXAMPLE).encode().replace(b'"version"', b'"\xff\xfe"', 1)
    assert decode_snapshot(raw) is None  # the walker says what is wrong
    with pytest.raises(SnapshotError, match="not UTF-8 text"):
        parse_snapshot(raw)


def test_a_cordoned_dir_reads_the_same_through_both_decoders_and_absent_is_false() -> None:
    text = json.dumps(READABLE)
    fast, walked = parse_snapshot(text), snapshot_from_dict(json.loads(text))
    cordoned = {(b.id, d.path): d.cordoned for b in walked.brokers for d in b.log_dirs}
    assert cordoned == {(0, "/data/d1"): False, (1, "/data/d1"): True, (2, "/data/d1"): False}
    assert fast.brokers == walked.brokers
