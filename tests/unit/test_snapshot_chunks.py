"""Chunked snapshots (schemas/snapshot_chunks.py): a snapshot split and assembled again is
the same document; every chunk is within its limit; chunks and manifests are checked as
they arrive, and a snapshot missing a chunk is never assembled."""

from __future__ import annotations

import json

import msgspec
import pytest

from bench import synthetic
from schemas import registry, wire
from schemas import snapshot_chunks as chunking
from schemas.registry import RecordError
from schemas.snapshot import parse_snapshot


def doc(**kwargs: int) -> dict:
    return synthetic.generate(**{"brokers": 30, "partitions": 3000, **kwargs})


@pytest.mark.parametrize("target", [8 << 10, 64 << 10, 1 << 20, 64 << 20])
def test_a_split_snapshot_assembles_to_the_same_document(target):
    whole = doc(consumer_groups=40)
    chunks, manifest = chunking.split(whole, "s1", target)
    for chunk in chunks:
        assert chunking.kind_of(chunk) == chunking.CHUNK
        chunking.check_chunk(chunk)
    assert chunking.kind_of(manifest) == chunking.MANIFEST
    parsed = chunking.check_manifest(manifest)
    assert [ref.sha256 for ref in parsed.chunks] == [chunking.digest(c) for c in chunks]
    assembled = chunking.assemble(parsed, {chunking.digest(c): c for c in chunks})
    assert msgspec.json.decode(assembled) == msgspec.json.decode(msgspec.json.encode(whole))
    assert parse_snapshot(assembled) == parse_snapshot(msgspec.json.encode(whole))
    if target == 64 << 20:
        assert len(chunks) == 1


def test_chunks_stay_within_the_target_and_the_brokers_come_first():
    whole = doc(brokers=60, partitions=20_000)
    target = 128 << 10
    chunks, _ = chunking.split(whole, "s1", target)
    assert len(chunks) > 10
    assert max(len(c) for c in chunks) <= target
    first = json.loads(chunks[0])
    assert len(first["brokers"]) == 60
    assert [json.loads(c)["seq"] for c in chunks] == list(range(len(chunks)))
    assert all("brokers" not in json.loads(c) for c in chunks[1:])


def test_one_item_bigger_than_the_target_is_a_chunk_of_its_own():
    whole = doc(brokers=2, partitions=40, dirs_per_broker=1, consumer_groups=0)
    whole["partitions"][4]["topic"] = "t" * 5000
    chunks, _ = chunking.split(whole, "s1", 1000)
    sizes = sorted(len(c) for c in chunks)
    assert sizes[-1] > 5000 and sizes[-2] <= 1000
    assert sum('"' + "t" * 5000 + '"' in c.decode() for c in chunks) == 1


def test_a_split_over_the_chunk_limit_is_refused_with_what_to_do():
    whole = doc(brokers=3, partitions=2)
    whole["partitions"][0]["topic"] = "t" * (wire.limit(chunking.CHUNK) + 10)
    with pytest.raises(chunking.ChunkError, match="over the .*-byte chunk limit"):
        chunking.split(whole, "s1", 1 << 20)


def test_a_missing_chunk_is_named_and_nothing_is_assembled():
    chunks, manifest = chunking.split(doc(), "s1", 16 << 10)
    parsed = chunking.check_manifest(manifest)
    found = {chunking.digest(c): c for c in chunks}
    del found[chunking.digest(chunks[2])]
    assert chunking.missing(parsed, found) == [2]
    with pytest.raises(chunking.ChunkError, match=r"is incomplete: chunk 2 of \d+ not found"):
        chunking.assemble(parsed, found)


def test_a_chunk_of_another_snapshot_with_a_forged_digest_list_is_refused():
    chunks, manifest = chunking.split(doc(), "s1", 16 << 10)
    other, _ = chunking.split(doc(seed=5), "s2", 16 << 10)
    forged = json.loads(manifest)
    forged["chunks"][1] = {"sha256": chunking.digest(other[1]), "bytes": len(other[1])}
    parsed = chunking.check_manifest(json.dumps(forged).encode())
    found = {chunking.digest(c): c for c in chunks + other}
    with pytest.raises(chunking.ChunkError, match="says it is chunk 1 of snapshot s2"):
        chunking.assemble(parsed, found)


@pytest.mark.parametrize("value, where", [
    (None, "$: no value"),
    (b"\xff\xfe", "$: not UTF-8"),
    (b'{"seq": ' + b"[" * 60_000, "$: nested deeper than 32 levels"),
    (b'{"version": 1, "cluster_id": "c", "taken_at": "2026-11-22T00:00:00Z", '
     b'"snapshot_id": "s", "seq": 0, "partitions": [{"topic": "t", "partition": 0, '
     b'"leader": "x", "isr": [], "replicas": []}]}', "partitions[0].leader: Expected `int`"),
    (b'{"version": 1, "cluster_id": "c", "taken_at": "yesterday", "snapshot_id": "s", '
     b'"seq": 0}', "taken_at: 'yesterday' is not an RFC 3339"),
    (b'{"version": 1, "cluster_id": "c", "taken_at": "2026-11-22T00:00:00Z", '
     b'"snapshot_id": "s", "seq": -1}', "seq: Expected `int` >= 0"),
    (b'{"version": 1, "cluster_id": "c", "taken_at": "2026-11-22T00:00:00Z", '
     b'"snapshot_id": "s", "seq": 0, "extra": 1}', "unknown field `extra`"),
    (b"x" * (9 << 20), "over the 8388608-byte limit"),
])
def test_a_bad_chunk_is_refused_with_its_reason(value, where):
    with pytest.raises(RecordError) as caught:
        chunking.check_chunk(value)
    assert where in str(caught.value)
    assert caught.value.schema == chunking.CHUNK


@pytest.mark.parametrize("change, where", [
    ({"chunks": []}, "chunks: lists no chunk"),
    ({"chunks": [{"sha256": "ABC", "bytes": 10}]}, "chunks[0].sha256: not a lowercase hex"),
    ({"chunks": [{"sha256": "a" * 64, "bytes": 9 << 20}]}, "chunks[0].bytes: 9437184 is not"),
    ({"chunks": [{"sha256": "a" * 64, "bytes": 5 << 20}] * 300}, "more than 1073741824"),
    ({"taken_at": "now"}, "taken_at: 'now' is not an RFC 3339"),
    ({"cluster_id": 5}, "cluster_id: Expected `str`"),
])
def test_a_bad_manifest_is_refused_with_its_reason(change, where):
    _, manifest = chunking.split(doc(brokers=3, partitions=5), "s1")
    with pytest.raises(RecordError, match=None) as caught:
        chunking.check_manifest(json.dumps({**json.loads(manifest), **change}).encode())
    assert where in str(caught.value)


def test_the_typed_records_follow_their_schema_files():
    for name, struct in ((chunking.CHUNK, chunking._ChunkDoc),
                         (chunking.MANIFEST, chunking.Manifest)):
        schema = registry.schema(name)
        fields = msgspec.structs.fields(struct)
        assert [f.name for f in fields] == list(schema["properties"]), name
        assert {f.name for f in fields if f.required} == set(schema["required"]), name


def test_a_whole_snapshot_and_poison_are_not_taken_for_chunks():
    assert chunking.kind_of(msgspec.json.encode(doc(brokers=3, partitions=5))) == \
        chunking.SNAPSHOT
    for poison in (None, b"", b"\xff", b"[1]", b'"seq"', b"{" * 1000):
        assert chunking.kind_of(poison) == chunking.SNAPSHOT
