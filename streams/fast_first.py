"""A micro-batch in two parts: a failure's own evidence first, the full snapshots after.

A batch that brings a fleet's full snapshot (27 MB in chunks) spends seconds assembling
and decoding it; a failure's event or delta in the same batch would wait for that before
its fix is planned and sent. The sink (streams/sink.py) therefore runs such a batch in
two parts through the detector, delivering the first part's actions before it decodes the
second: ``first`` holds every record of the other topics and, on each partition of the
snapshot topic, the deltas before its first other record; ``rest`` holds that record and
everything after it on its partition.

Why this decides as the detector would: the cut is one Spark itself could have made
between two batches. The sources of the other topics are cut independently of the
snapshot topic's, and on the snapshot topic every record of ``first`` precedes every
record of ``rest``, so a delta is never moved ahead of a snapshot it follows (the
stale-delta rule, a delta at or before the latest full snapshot, still sees the same
order). Both parts run at the batch's watermark and the state is committed once, after
both: a batch that fails in its second part runs again whole, and its first part plans
the same action ids, which the batch's ledger (streams/replay.py) does not send twice.

A batch is also collected in pieces (streams.query.pieces: the small topics' rows, then
the metrics'), so that a failure's first part is delivered before the metrics' Kafka
ranges are read at all. Every record of a topic is in one piece, so each piece is again a
cut Spark could have made (its sources cut apart from the others'); the snapshot topic's
rest waits for the last piece, and the state is still committed once, after all of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from schemas import snapshot_chunks as chunking


def split(rows: Sequence[Any], snapshot_topic: str) -> tuple[list[Any], list[Any]]:
    """(first, rest) of a batch's Kafka rows (``topic``, ``partition``, ``offset``,
    ``value``); ``rest`` is empty when the snapshot topic brought nothing but deltas."""
    cut: dict[int, int] = {}  # snapshot-topic partition -> offset of its first non-delta
    for row in rows:
        if row.topic != snapshot_topic:
            continue
        if row.offset < cut.get(row.partition, row.offset + 1) and (
                chunking.kind_of(row.value) != chunking.DELTA):
            cut[row.partition] = row.offset
    if not cut:
        return list(rows), []
    first: list[Any] = []
    rest: list[Any] = []
    for row in rows:
        later = row.topic == snapshot_topic and row.offset >= cut.get(row.partition,
                                                                       row.offset + 1)
        (rest if later else first).append(row)
    return first, rest


def parts(pieces: Iterable[list[Any]], snapshot_topic: str) -> Iterator[list[Any]]:
    """The parts of a batch to run through the detector, in order, from its collected
    ``pieces`` (each holding every record of its topics; the next is collected only once
    the part before it has run): each piece's first part, then the snapshot topic's rest.
    No part is empty; an empty batch has none."""
    held: list[Any] = []
    for rows in pieces:
        first, rest = split([*held, *rows] if held else rows, snapshot_topic)
        held = rest
        if first:
            yield first
    if held:
        yield held
