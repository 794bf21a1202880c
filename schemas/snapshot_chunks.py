"""Snapshots too big for one record: chunks, a manifest, and the whole document again.

At Cruise Control's worst case (2.8M replicas) a snapshot is ~240 MB of JSON, past the
bus's 64 MiB message limit. The collector splits it (`split`): chunk 0 carries the
brokers, then partitions and consumer groups follow in document order, each chunk at
most `target` bytes; every chunk is keyed ``<cluster>/chunk/<seq>`` (so compaction keeps
the newest of each position), and a small manifest keyed ``<cluster>`` goes last, listing
each chunk's SHA-256. The manifest is the completeness marker: written only after every
chunk was sent, so a collector that dies half-way leaves chunks no manifest names, and
readers never see a half snapshot.

Readers check each chunk as it arrives (`check_chunk`: the same typed records as a whole
snapshot), find the manifest's chunks by digest, and `assemble` them into the one
whole-snapshot document every planner and the detector already read; its references
(a replica's broker and dir) are checked there, across chunks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import msgspec

from schemas import wire
from schemas.registry import RecordError, is_rfc3339
from schemas.snapshot_decode import _BrokerDoc, _GroupDoc
from schemas.snapshot_types import MAX_SNAPSHOT_BYTES, Name, NonNegative, Partition

CHUNK = "cluster-snapshot-chunk"
MANIFEST = "cluster-snapshot-manifest"
SNAPSHOT = "cluster-snapshot"
DELTA = "cluster-snapshot-delta"  # schemas/snapshot_delta.py

DEFAULT_CHUNK_BYTES = 4 << 20
MAX_CHUNKS = 4096  # the manifest schema's maxItems
# An assembled snapshot may be far larger than one record; this bounds what one manifest
# can make a reader hold: what a snapshot file may be.
MAX_ASSEMBLED_BYTES = MAX_SNAPSHOT_BYTES


class ChunkError(ValueError):
    """A chunk or manifest that cannot be used; the message says which and why."""


class _ChunkDoc(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    version: Literal[1]
    cluster_id: Name
    taken_at: str
    snapshot_id: Name
    seq: NonNegative
    brokers: tuple[_BrokerDoc, ...] = ()
    partitions: tuple[Partition, ...] = ()
    consumer_groups: tuple[_GroupDoc, ...] = ()
    metadata_level: NonNegative | None = None  # with the brokers, in chunk 0


class _ChunkRaw(msgspec.Struct):
    """A chunk with its arrays left as JSON text, for assembly (already checked)."""

    cluster_id: str
    taken_at: str
    snapshot_id: str
    seq: int
    brokers: msgspec.Raw = msgspec.Raw()  # empty: the chunk has none
    partitions: msgspec.Raw = msgspec.Raw()
    consumer_groups: msgspec.Raw = msgspec.Raw()
    metadata_level: int | None = None


class ChunkRef(msgspec.Struct, forbid_unknown_fields=True):
    sha256: str
    bytes: int


class Manifest(msgspec.Struct, forbid_unknown_fields=True):
    version: Literal[1]
    cluster_id: Name
    taken_at: str
    snapshot_id: Name
    chunks: tuple[ChunkRef, ...]


class _Kind(msgspec.Struct):
    seq: msgspec.Raw = msgspec.Raw()  # empty: absent
    chunks: msgspec.Raw = msgspec.Raw()
    base_taken_at: msgspec.Raw = msgspec.Raw()


_CHUNK = msgspec.json.Decoder(_ChunkDoc)
_CHUNK_RAW = msgspec.json.Decoder(_ChunkRaw)
_MANIFEST = msgspec.json.Decoder(Manifest)
_KIND = msgspec.json.Decoder(_Kind)


def chunk_key(cluster_id: str, seq: int) -> bytes:
    """A chunk's record key: compaction keeps the newest chunk of each position, and the
    cluster's own key (the manifest's) stays the newest complete snapshot."""
    return f"{cluster_id}/chunk/{seq}".encode()


def kind_of(value: bytes | None) -> str:
    """Which record of the snapshot topic ``value`` is meant to be: `CHUNK` (it has a
    ``seq``), `MANIFEST` (it lists ``chunks``), `DELTA` (it names its ``base_taken_at``)
    or `SNAPSHOT` (anything else, a whole document or something that is none of these,
    which the snapshot's checks refuse)."""
    if value is None:
        return SNAPSHOT
    try:
        fields = _KIND.decode(value)
    except Exception:  # noqa: BLE001 - not an object, not JSON, not UTF-8: a bad snapshot
        return SNAPSHOT
    if len(fields.seq):
        return CHUNK
    if len(fields.chunks):
        return MANIFEST
    if len(fields.base_taken_at):
        return DELTA
    return SNAPSHOT


def digest(value: bytes) -> str:
    return hashlib.sha256(value).hexdigest()


def check_chunk(value: bytes | None) -> None:
    """Check one chunk record as it arrives: size, JSON, and every item's shape (the
    typed records of a whole snapshot); `RecordError` says what is wrong."""
    if value is None or len(value) > wire.limit(CHUNK):
        wire.decode(CHUNK, value)  # raises: a tombstone, or over the chunk limit
        raise AssertionError("wire.decode accepted a tombstone or an oversized chunk")
    try:
        doc = _CHUNK.decode(value)
    except msgspec.ValidationError as exc:
        wire.decode(CHUNK, value)  # not JSON, not UTF-8, too deep: the boundary's words
        raise _record_error(CHUNK, exc) from None
    except (msgspec.DecodeError, UnicodeDecodeError):
        wire.decode(CHUNK, value)
        raise RecordError(CHUNK, "$", "not a chunk") from None
    if not is_rfc3339(doc.taken_at):
        raise RecordError(CHUNK, "taken_at", f"{doc.taken_at!r} is not an RFC 3339 date-time")


def check_manifest(value: bytes | None) -> Manifest:
    """Check one manifest record; `RecordError` says what is wrong."""
    doc = wire.decode(MANIFEST, value)  # size, JSON, depth: refused with the reason
    try:
        manifest = msgspec.convert(doc, Manifest)
    except msgspec.ValidationError as exc:
        raise _record_error(MANIFEST, exc) from None
    if not is_rfc3339(manifest.taken_at):
        raise RecordError(MANIFEST, "taken_at",
                          f"{manifest.taken_at!r} is not an RFC 3339 date-time")
    if not manifest.chunks:
        raise RecordError(MANIFEST, "chunks", "lists no chunk")
    if len(manifest.chunks) > MAX_CHUNKS:
        raise RecordError(MANIFEST, "chunks", f"{len(manifest.chunks)} chunks, over the "
                                              f"{MAX_CHUNKS} a snapshot may have")
    for i, ref in enumerate(manifest.chunks):
        if len(ref.sha256) != 64 or ref.sha256.strip("0123456789abcdef"):
            raise RecordError(MANIFEST, f"chunks[{i}].sha256", "not a lowercase hex SHA-256")
        if ref.bytes < 1 or ref.bytes > wire.limit(CHUNK):
            raise RecordError(MANIFEST, f"chunks[{i}].bytes",
                              f"{ref.bytes} is not a chunk's size (1 to {wire.limit(CHUNK)})")
    if sum(ref.bytes for ref in manifest.chunks) > MAX_ASSEMBLED_BYTES:
        raise RecordError(MANIFEST, "chunks", "the chunks add up to more than "
                                              f"{MAX_ASSEMBLED_BYTES} bytes")
    return manifest


def _record_error(schema: str, exc: msgspec.ValidationError) -> RecordError:
    """msgspec's "Expected `int`, got `str` - at `$.partitions[0].leader`" as a path and
    a problem."""
    text = str(exc)
    problem, _, where = text.rpartition(" - at `")
    if not problem:
        return RecordError(schema, "$", text)
    path = where.rstrip("`").removeprefix("$.").removeprefix("$") or "$"
    return RecordError(schema, path, problem)


def split(doc: Mapping[str, Any], snapshot_id: str, target: int = DEFAULT_CHUNK_BYTES
          ) -> tuple[list[bytes], bytes]:
    """A whole snapshot document as (chunks, manifest), each chunk at most ``target``
    bytes unless one item alone (or the brokers, which stay together in chunk 0) is
    bigger; over `wire.limit(CHUNK)` the split is refused: `ChunkError` says why."""
    head = {"version": 1, "cluster_id": doc["cluster_id"], "taken_at": doc["taken_at"],
            "snapshot_id": snapshot_id}
    encode = msgspec.json.encode
    # What a chunk costs besides its items: the head, the seq, one array's name.
    overhead = len(encode({**head, "seq": MAX_CHUNKS, "consumer_groups": []}))
    first: dict[str, Any] = {"brokers": list(doc["brokers"])}
    if doc.get("metadata_level") is not None:
        first["metadata_level"] = doc["metadata_level"]
    pieces: list[dict[str, Any]] = [first]
    for field in ("partitions", "consumer_groups"):
        items = list(doc.get(field) or ())
        if items:
            pieces.extend({field: part} for part in _parts(items, target - overhead, encode))
    chunks: list[bytes] = []
    last: dict[str, Any] = {}
    for piece in pieces:
        # Neighbours of different arrays share a chunk while it fits: the brokers rarely
        # fill one of their own.
        if chunks and not (piece.keys() & last.keys()):
            both = encode({**head, "seq": len(chunks) - 1, **last, **piece})
            if len(both) <= target:
                chunks[-1], last = both, {**last, **piece}
                continue
        last = piece
        chunks.append(encode({**head, "seq": len(chunks), **piece}))
    if len(chunks) > MAX_CHUNKS:
        raise ChunkError(f"the snapshot needs {len(chunks)} chunks of {target} bytes, over "
                         f"the {MAX_CHUNKS} a manifest may list: raise "
                         "[collect] snapshot_chunk_bytes")
    for seq, chunk in enumerate(chunks):
        if len(chunk) > wire.limit(CHUNK):
            raise ChunkError(f"chunk {seq} is {len(chunk)} bytes, over the "
                             f"{wire.limit(CHUNK)}-byte chunk limit (one item that big?)")
    return chunks, manifest_of(doc["cluster_id"], doc["taken_at"], snapshot_id, chunks)


def manifest_of(cluster_id: str, taken_at: str, snapshot_id: str, chunks: Sequence[bytes]
                ) -> bytes:
    """The manifest record that makes ``chunks`` (in seq order) one snapshot."""
    return msgspec.json.encode({
        "version": 1, "cluster_id": cluster_id, "taken_at": taken_at,
        "snapshot_id": snapshot_id,
        "chunks": [{"sha256": digest(c), "bytes": len(c)} for c in chunks]})


def _parts(items: list[Any], budget: int, encode: Any) -> Iterable[list[Any]]:
    """``items`` in runs whose JSON array is at most ``budget`` bytes (a run of one item
    may be more). One encode of the whole array sizes the runs; a run that comes out too
    big is halved."""
    per_item = max(1, len(encode(items)) // len(items))
    # 90% of the budget: runs of the average size would be over it half the time, and
    # each such run is halved (chunks of two thirds of the target on average).
    step = max(1, budget * 9 // 10 // per_item)
    todo = [items[i:i + step] for i in range(0, len(items), step)]
    todo.reverse()  # popped from the end: in document order
    while todo:
        run = todo.pop()
        if len(run) > 1 and len(encode(run)) > budget:
            half = len(run) // 2
            todo.extend((run[half:], run[:half]))
            continue
        yield run


def missing(manifest: Manifest, found: Mapping[str, bytes]) -> list[int]:
    """The seqs of the manifest's chunks not in ``found`` (values by digest)."""
    return [seq for seq, ref in enumerate(manifest.chunks) if ref.sha256 not in found]


def assemble(manifest: Manifest, found: Mapping[str, bytes]) -> bytes:
    """The whole snapshot document of ``manifest`` from its chunks (values by digest,
    each already checked with `check_chunk`); `ChunkError` when one is missing or does
    not belong to this snapshot."""
    gone = missing(manifest, found)
    if gone:
        raise ChunkError(_missing_text(manifest, gone))
    arrays: dict[str, list[bytes]] = {"brokers": [], "partitions": [], "consumer_groups": []}
    level = None
    for seq, ref in enumerate(manifest.chunks):
        value = found[ref.sha256]
        try:
            chunk = _CHUNK_RAW.decode(value)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise ChunkError(f"chunk {seq} of snapshot {manifest.snapshot_id} is not a "
                             f"chunk: {exc}") from None
        if (chunk.cluster_id, chunk.snapshot_id, chunk.seq, chunk.taken_at) != (
                manifest.cluster_id, manifest.snapshot_id, seq, manifest.taken_at):
            raise ChunkError(
                f"chunk {seq} of snapshot {manifest.snapshot_id} says it is chunk "
                f"{chunk.seq} of snapshot {chunk.snapshot_id} of cluster {chunk.cluster_id} "
                f"taken at {chunk.taken_at}; the manifest says cluster "
                f"{manifest.cluster_id}, taken at {manifest.taken_at}")
        level = chunk.metadata_level if chunk.metadata_level is not None else level
        for name in arrays:
            inner = bytes(getattr(chunk, name)).strip()[1:-1].strip()
            if inner:
                arrays[name].append(inner)
    head = msgspec.json.encode({"version": 1, "cluster_id": manifest.cluster_id,
                                "taken_at": manifest.taken_at,
                                **({} if level is None else {"metadata_level": level})})
    body = b",".join(b'"%s":[%s]' % (name.encode(), b",".join(parts))
                     for name, parts in arrays.items())
    return head[:-1] + b"," + body + b"}"


def _missing_text(manifest: Manifest, gone: Sequence[int]) -> str:
    shown = ", ".join(str(s) for s in gone[:5]) + (" ..." if len(gone) > 5 else "")
    return (f"snapshot {manifest.snapshot_id} of cluster {manifest.cluster_id} (taken at "
            f"{manifest.taken_at}) is incomplete: chunk {shown} of {len(manifest.chunks)} "
            "not found before its manifest with the digest it lists (refused, compacted "
            "away, or never written); the next complete snapshot serves instead")
