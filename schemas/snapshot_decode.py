"""The snapshot's fast path: msgspec decodes the JSON straight into the typed records.

msgspec checks the structure while it decodes (types, minimums, empty strings, unknown
fields: the schema's rules are in the records' annotations), so what is left in Python
is the cross-references the schema cannot express, checked over whole columns where
that can be done in C. This path only says yes or no: on any refusal
(`msgspec.DecodeError`, or a reference that does not hold) the loader runs the checking
walker of schemas/snapshot.py over the same text, which names the first bad field in
document order, and accepts what the fast path is stricter about than the schema (3.0
as an integer, a replica without `log_dir`).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, groupby
from operator import attrgetter
from typing import Annotated, Literal

import msgspec

from schemas import native
from schemas.snapshot_types import (
    NO_LEADER,
    Assigned,
    Broker,
    ConsumerGroup,
    Member,
    Name,
    NonNegative,
    Partition,
    Snapshot,
)


class _LogDirDoc(msgspec.Struct, forbid_unknown_fields=True):
    path: Name
    online: bool
    total_bytes: NonNegative | None = None
    usable_bytes: NonNegative | None = None
    cordoned: bool = False


class _BrokerDoc(msgspec.Struct, forbid_unknown_fields=True):
    id: NonNegative
    alive: bool
    log_dirs: tuple[_LogDirDoc, ...]
    rack: Name | None = None
    replica_selector: Name | None = None


class _AssignedDoc(msgspec.Struct, forbid_unknown_fields=True):
    topic: Name
    partitions: tuple[NonNegative, ...]


class _MemberDoc(msgspec.Struct, forbid_unknown_fields=True):
    member_id: Name
    client_id: str
    topics: tuple[Name, ...]
    rack: Name | None = None
    group_instance_id: Name | None = None
    assignment: tuple[_AssignedDoc, ...] = ()


class _GroupDoc(msgspec.Struct, forbid_unknown_fields=True):
    group: Name
    members: tuple[_MemberDoc, ...]
    protocol_type: str | None = None
    protocol: str | None = None
    state: str | None = None
    group_protocol: Name | None = None
    racks_known: bool = True


class _SnapshotDoc(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    version: Literal[1]
    cluster_id: Name
    taken_at: str
    brokers: tuple[_BrokerDoc, ...]
    partitions: tuple[Partition, ...]
    consumer_groups: tuple[_GroupDoc, ...] = ()
    metadata_level: Annotated[int, msgspec.Meta(ge=0)] | None = None


DECODER = msgspec.json.Decoder(_SnapshotDoc)
_REPLICAS = attrgetter("replicas")
_BROKER = attrgetter("broker")
_LOG_DIR = attrgetter("log_dir")
_TOPIC = attrgetter("topic")
_NUMBER = attrgetter("partition")


def decode_snapshot(text: str | bytes) -> Snapshot | None:
    """The snapshot, or None when the text is not one this path accepts as it stands
    (the checking walker then decides, and names what is wrong)."""
    try:
        doc = DECODER.decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError):  # ValidationError included; msgspec
        return None  # says invalid UTF-8 with the codec's own error
    dirs = dirs_by_broker(doc.brokers)
    if dirs is None or not groups_hold(doc.consumer_groups):
        return None
    if not _references_hold(doc.partitions, dirs):
        return None
    return snapshot_of(doc, doc.partitions)


def snapshot_of(doc: _SnapshotDoc, partitions: Sequence[Partition]) -> Snapshot:
    """The records of a decoded document, with `partitions` as given."""
    return Snapshot(
        cluster_id=doc.cluster_id,
        taken_at=doc.taken_at,
        metadata_level=doc.metadata_level,
        # The records from the decoded ones by msgspec, in C: 2-5x building each frozen
        # dataclass in Python (12,000 log dirs at 300k replicas: ~5-10 ms saved).
        brokers=msgspec.convert(doc.brokers, tuple[Broker, ...], from_attributes=True),
        partitions=partitions,
        consumer_groups=tuple(
            ConsumerGroup(
                g.group,
                tuple(
                    Member(m.member_id, m.client_id, m.rack, m.topics, m.group_instance_id,
                           tuple(Assigned(a.topic, a.partitions) for a in m.assignment))
                    for m in g.members
                ),
                g.protocol_type,
                g.protocol,
                g.state,
                g.group_protocol,
                g.racks_known,
            )
            for g in doc.consumer_groups
        ),
    )


def dirs_by_broker(brokers: Sequence[_BrokerDoc | Broker]) -> dict[int, frozenset[str]] | None:
    """Broker id -> its dir paths; None when an id or a broker's path repeats."""
    out: dict[int, frozenset[str]] = {}
    for b in brokers:
        paths = frozenset(d.path for d in b.log_dirs)
        if b.id in out or len(paths) != len(b.log_dirs):
            return None
        out[b.id] = paths
    return out


def groups_hold(groups: tuple[_GroupDoc, ...]) -> bool:
    return all(len({m.member_id for m in g.members}) == len(g.members) for g in groups)


def _references_hold(partitions: tuple[Partition, ...], dirs: dict[int, frozenset[str]]) -> bool:
    """The replicas' and partitions' cross-references, compiled where the core is built."""
    fast = native.core()
    if fast is not None:
        try:
            return bool(fast.references_hold(
                partitions, {b: list(paths) for b, paths in dirs.items()}, NO_LEADER
            ))
        except OverflowError:  # an id over 64 bits: the reference handles any int
            pass
    return _replicas_hold(partitions, dirs) and _partitions_unique(partitions)


def _replicas_hold(partitions: tuple[Partition, ...], dirs: dict[int, frozenset[str]]) -> bool:
    """Every replica on a known broker and one of its dirs, no broker twice in a
    partition, leader and ISR among the replicas."""
    replicas = list(chain.from_iterable(map(_REPLICAS, partitions)))
    if not dirs.keys() >= set(map(_BROKER, replicas)):
        return False
    every_path = frozenset().union(*dirs.values())
    named = set(map(_LOG_DIR, replicas))
    named.discard(None)
    if not every_path >= named:
        return False
    # A path some broker lacks: the replicas on those brokers are checked one by one.
    partial = {b for b, paths in dirs.items() if paths != every_path}
    if partial:
        for r in replicas:
            if r.broker in partial and r.log_dir is not None and r.log_dir not in dirs[r.broker]:
                return False
    for p in partitions:
        replicas_of = p.replicas
        brokers = {r.broker for r in replicas_of}
        if (
            len(brokers) != len(replicas_of)
            or (p.leader not in brokers and p.leader != NO_LEADER)
            or not brokers.issuperset(p.isr)
        ):
            return False
    return True


def _partitions_unique(partitions: tuple[Partition, ...]) -> bool:
    """No (topic, partition) twice. Snapshots list a topic's partitions together, so
    the check runs per run of one topic; a topic met in two runs takes the full check."""
    numbers = list(map(_NUMBER, partitions))
    seen: set[str] = set()
    start = 0
    for topic, run in groupby(map(_TOPIC, partitions)):
        end = start + len(list(run))
        if topic in seen:
            return len(set(zip(map(_TOPIC, partitions), numbers, strict=True))) == len(numbers)
        seen.add(topic)
        if len(set(numbers[start:end])) != end - start:
            return False
        start = end
    return True
