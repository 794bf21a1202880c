"""The compiled reader (native/src/scan.rs, schemas/snapshot_columns.py): a snapshot's
bytes straight into columns. Whatever it takes must be exactly what the msgspec decoder
and the reference take, field for field; whatever it does not take exactly it refuses
(None), and the loader then gives what the other paths give, error or snapshot."""

from __future__ import annotations

import json
import random
import shutil
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.model import ClusterModel
from core.plan import offline
from schemas import native
from schemas.snapshot import Snapshot, parse_snapshot
from schemas.snapshot_columns import PartitionColumns, read_columns
from schemas.snapshot_decode import decode_snapshot
from tests.unit.plan_snapshots import broker, clusters, doc, model, partition, random_cluster

BUILT = shutil.which("cargo") is not None


def fields(s: Snapshot) -> tuple[Any, ...]:
    """Everything a snapshot holds, its partitions as records."""
    return (s.cluster_id, s.taken_at, s.metadata_level, s.brokers, tuple(s.partitions),
            s.consumer_groups)


def reference(text: bytes, monkeypatch: pytest.MonkeyPatch) -> Snapshot | None:
    monkeypatch.setenv("SELFHEAL_NATIVE", "0")
    try:
        return decode_snapshot(text)
    finally:
        monkeypatch.setenv("SELFHEAL_NATIVE", "1")


def compact(document: dict[str, Any]) -> bytes:
    """As collectors write a snapshot: the form the reader reads in one pass."""
    return json.dumps(document, separators=(",", ":")).encode()


def columns_model(document: dict[str, Any], taken: bool = True) -> ClusterModel:
    """Through the compiled reader, as `plan leaders` reads (the tests' loader); `taken`:
    the reader takes this document where the core is on."""
    snapshot = parse_snapshot(compact(document), columns=True)
    if taken and native.core() is not None:
        assert isinstance(snapshot.partitions, PartitionColumns)
    return ClusterModel(snapshot)


def small() -> dict[str, Any]:
    return doc(
        [broker(0, "a", ["/d1", "/d2"]), broker(1, "b"), broker(2, None, ["/d1"], alive=False)],
        [partition("t", 0, [(0, "/d2", 5), (1, None, 0)]), partition("t", 1, [2, 0], leader=-1),
         partition("u", 0, [1], isr=[])],
        [{"group": "g", "members": [{"member_id": "m", "client_id": "c", "topics": ["t"]}]}],
    )  # fmt: skip


# Bytes a mutation puts in: JSON's own, and the edges of what the reader takes.
PIECES = ['"', "\\", ",", ":", "[", "]", "{", "}", "-", "0", "1", "9", ".", "e", " ", "\n",
          "null", "true", "-1", "-0", "1e3", "NaN", "\u00e9", "\\u0074", "99999999999999999999",
          '"x"', '""', "\x01"]  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_no_byte_edit_makes_the_reader_take_what_the_decoder_does_not(seed):
    rng = random.Random(seed)
    text = rng.choice([json.dumps(small(), indent=1), compact(small()).decode()])
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(text) + 1)
        cut = rng.choice([0, 0, 1, 2])
        text = text[:at] + rng.choice(PIECES) + text[at + cut:]
    data = text.encode("utf-8", "surrogatepass")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SELFHEAL_NATIVE", "1")
        fast, slow = read_columns(data), reference(data, mp)
    if fast is not None:
        assert slow is not None and fields(fast) == fields(slow)


VALUES = [0, 1, -1, -2, 2**63 - 1, 2**63, 2**64, 10**18, 1.5, 3.0, "x", "", None, True, [],
          {}, [0], [{}], {"broker": 0}]  # fmt: skip


def places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON document."""
    found = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            found += places(v, (*path, k))
    elif isinstance(value, list):
        for k, v in enumerate(value):
            found += places(v, (*path, k))
    return found


@settings(max_examples=600, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_no_value_put_anywhere_makes_the_reader_take_what_the_decoder_does_not(seed):
    rng = random.Random(seed)
    document = small()
    for _ in range(rng.randint(1, 2)):
        *parent, key = rng.choice(places(document)[1:])
        holder = document
        for k in parent:
            holder = holder[k]
        if rng.random() < 0.2 and isinstance(holder, dict):
            del holder[key]
        else:
            holder[key] = rng.choice(VALUES)
    data = compact(document) if seed % 2 else json.dumps(document).encode()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SELFHEAL_NATIVE", "1")
        fast, slow = read_columns(data), reference(data, mp)
    if fast is not None:
        assert slow is not None and fields(fast) == fields(slow)
    elif slow is not None:  # refused only where the reader is stricter: 19 digits or more
        assert any(type(v) is int and v >= 10**18 for v in map(partial(get, document),
                                                              places(document)))


def get(document: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        document = document[k]
    return document


@pytest.mark.parametrize("edit", [
    lambda d: d["partitions"][0]["replicas"][0].update(size_bytes=2**70),  # past 64 bits
    lambda d: d["partitions"][0]["replicas"][0].update(size_bytes=3.0),  # the walker's int
    lambda d: d["partitions"][0]["replicas"][1].pop("log_dir"),  # the walker's default
    lambda d: d["partitions"][0].update(topic="t\u00e9"),  # an escape in the JSON
    lambda d: d["partitions"][0].update(partition=10**18),  # 19 digits
    lambda d: d["brokers"].append(broker(2**64, None, [])),  # checked after the header
])  # fmt: skip
def test_what_the_reader_does_not_take_loads_as_the_other_paths_load_it(edit, monkeypatch):
    document = small()
    edit(document)
    text = json.dumps(document).encode()
    monkeypatch.setenv("SELFHEAL_NATIVE", "1")
    assert read_columns(text) is None
    found = parse_snapshot(text, columns=True)
    assert isinstance(found.partitions, tuple)
    monkeypatch.setenv("SELFHEAL_NATIVE", "0")
    assert fields(found) == fields(parse_snapshot(text))


def test_any_layout_and_key_order_reads_the_same(monkeypatch):
    document = small()
    shuffled = {k: document[k] for k in reversed(list(document))}
    shuffled["partitions"] = [{k: p[k] for k in reversed(list(p))} for p in document["partitions"]]
    text = json.dumps(shuffled, indent="\t\r\n ", separators=(" ,", " : ")).encode()
    monkeypatch.setenv("SELFHEAL_NATIVE", "1")
    found = read_columns(text)
    assert (found is not None) == BUILT
    if found is not None:
        assert fields(found) == fields(parse_snapshot(json.dumps(document)))


@pytest.mark.parametrize("text", [
    '{"version": 1, "partitions": [], "partitions": []}',  # a key twice
    '{"partitions": [{"topic": "t", "topic": "t"}]}',
    '{"partitions": []} x',  # something after the document
    '{"partitions": [' + "[" * 600 + "]" * 600 + "]}",
    '{"brokers": ' + "[" * 600 + "]" * 600 + ', "partitions": []}',
    '{"brokers": [}, "partitions": []}',
    "\ufeff{}",
])  # fmt: skip
def test_the_reader_refuses_what_is_not_plain(text):
    assert read_columns(text.encode()) is None


def test_records_are_made_on_demand_and_equal_the_decoders(monkeypatch):
    document = random_cluster(random.Random(3), brokers=5, racks=2, partitions=40, max_rf=3)
    text = json.dumps(document).encode()
    monkeypatch.setenv("SELFHEAL_NATIVE", "1")
    found = read_columns(text)
    if not BUILT:
        assert found is None
        return
    assert found is not None
    expected = reference(text, monkeypatch)
    assert expected is not None
    parts, want = found.partitions, expected.partitions
    assert isinstance(parts, PartitionColumns) and len(parts) == len(want) == 40
    assert parts[-1] == want[-1] and parts[3] == want[3] and parts[5:9] == want[5:9]
    with pytest.raises(IndexError):
        parts[40]
    assert parts.row(7) == (want[7].topic, want[7].partition, want[7].leader,
                            tuple(r.broker for r in want[7].replicas))
    assert tuple(parts) == want and list(parts) == list(want)


@settings(max_examples=150, deadline=None)
@given(document=clusters(max_brokers=12, max_partitions=80, p_dead=0.2, p_dir_offline=0.15,
                         p_no_total=0.3))
def test_offline_plans_and_the_model_indexes_are_the_same_through_columns(document):
    # `plan offline` reads columns too: its broker sums, the per-dir index (dirs without
    # a known capacity ask for it) and the records of the partitions it repairs.
    def run(load: Any) -> tuple[Any, ...]:
        m = load(document)
        plan = offline.plan_offline(m)
        text = json.dumps(plan.to_json()) + offline.explain(m, plan)
        again = load(document)
        by_dir = {k: (d.sizes, d.partitions) for k, d in again.replicas_by_dir.items()}
        return text, by_dir, again.broker_totals, again.dir_bytes, load(document).broker_bytes

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SELFHEAL_NATIVE", "1")
        fast = run(columns_model)
        mp.setenv("SELFHEAL_NATIVE", "0")
        reference = run(model)
    assert fast == reference
