"""The cluster model: one snapshot plus the indexes every planner asks for.

What sits on each log dir comes from the checking loader, which notes it while
validating, or after the typed decoder from one pass on first use. The sums planners
need (bytes per dir, replicas and bytes per broker, partitions with an offline replica)
come from it when it is there; without it, the per-broker sums and the partitions with
an offline replica take a lighter pass of their own (the offline planner needs nothing
else, and the per-dir index costs twice that pass at 2.8M replicas). The racks of each
consumed topic's replicas are also made on first use (the consumer planners ask for
them once per group). Loaded with `columns=True` (the planners' CLI), the partitions
may be the compiled reader's columns (schemas/snapshot_columns.py): those two passes
then run over the columns in the core, and a record is made only where one is asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from itertools import groupby
from operator import attrgetter, lt
from pathlib import Path
from types import ModuleType
from typing import IO

from schemas import native
from schemas.snapshot import (
    Broker,
    DirReplicas,
    LogDir,
    Partition,
    Replica,
    Snapshot,
    load_snapshot,
)
from schemas.snapshot_columns import PartitionColumns

DirKey = tuple[int, str]  # (broker id, log dir path)

_TOPIC = attrgetter("topic")
_DENSE_IDS = 1 << 16  # broker ids under this index lists rather than dicts


@dataclass(frozen=True, slots=True)
class BrokerTotals:
    """One pass over every replica, without the per-dir index."""

    counts: dict[int, int]  # replicas per broker, offline ones included
    sizes: dict[int, int]  # bytes of replicas per broker
    offline: tuple[int, ...]  # indexes into `partitions` of those with an offline replica


class ClusterModel:
    """Read-only indexes over a snapshot. Planners never mutate it."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.partitions: Sequence[Partition] = snapshot.partitions
        self.brokers: dict[int, Broker] = {b.id: b for b in snapshot.brokers}
        self.rack_of: dict[int, str | None] = {b.id: b.rack for b in snapshot.brokers}
        self.alive: frozenset[int] = frozenset(b.id for b in snapshot.brokers if b.alive)
        self.dirs: dict[int, dict[str, LogDir]] = {
            b.id: {d.path: d for d in b.log_dirs} for b in snapshot.brokers
        }
        self.offline_dirs: frozenset[DirKey] = frozenset(
            (b.id, d.path) for b in snapshot.brokers for d in b.log_dirs if not d.online
        )
        self.brokers_with_offline_dir: frozenset[int] = frozenset(b for b, _ in self.offline_dirs)
        self._racks_of: dict[tuple[int, ...], frozenset[str]] = {}  # by replica brokers
        self._replica_racks: dict[str, dict[int, frozenset[str]]] = {}  # by topic

    @classmethod
    def load(cls, source: str | Path | IO[str] | IO[bytes], columns: bool = False) -> ClusterModel:
        """Read, validate and index a snapshot file (`columns`: the partitions may come
        as schemas/snapshot_columns.py's, for a planner that reads them so)."""
        return cls(load_snapshot(source, columns))

    # --- replica state ---------------------------------------------------------------

    def is_offline(self, replica: Replica) -> bool:
        """Offline: its broker is down, its dir is offline, or its dir is unknown on a
        broker that has an offline dir (DescribeLogDirs cannot list a failed dir)."""
        broker = replica.broker
        if broker not in self.alive:
            return True
        if replica.log_dir is None:
            return broker in self.brokers_with_offline_dir
        return (broker, replica.log_dir) in self.offline_dirs

    @cached_property
    def replicas_by_dir(self) -> dict[tuple[int, str | None], DirReplicas]:
        """What sits on each (broker, dir); dir None: replicas whose dir is unknown."""
        if self.snapshot.replicas_by_dir:
            return self.snapshot.replicas_by_dir  # the loader's, found while validating
        # One pass over every replica: broker first, then dir, so no key tuple is built
        # or hashed per replica (a second or so at 2.8M replicas).
        by_broker: dict[int, dict[str | None, DirReplicas]] = {
            b: {path: DirReplicas(b, path) for path in (*dirs, None)}
            for b, dirs in self.dirs.items()
        }
        fast = native.core()
        if fast is None or not self._dir_index_native(fast, by_broker):
            for i, p in enumerate(self.partitions):
                for r in p.replicas:
                    bucket = by_broker[r.broker][r.log_dir]
                    bucket.sizes.append(r.size_bytes)
                    bucket.partitions.append(i)
        return {(b, path): d for b, dirs in by_broker.items() for path, d in dirs.items()}

    def _dir_index_native(
        self, fast: ModuleType, by_broker: dict[int, dict[str | None, DirReplicas]]
    ) -> bool:
        """The same pass compiled; False (nothing filled) when it cannot take the input."""
        buckets = [d for dirs in by_broker.values() for d in dirs.values()]
        slots = [(d.broker, d.path) for d in buckets]
        parts = self.partitions
        try:
            found = (parts.columns.dir_index_of(slots) if isinstance(parts, PartitionColumns)
                     else fast.dir_index(parts, slots))
        except OverflowError:  # a broker id over 64 bits: the reference handles any int
            return False
        if found is None:
            return False
        for d, (sizes, partitions) in zip(buckets, found, strict=True):
            d.sizes, d.partitions = sizes, partitions
        return True

    def _has_dir_index(self) -> bool:
        return bool(self.snapshot.replicas_by_dir) or "replicas_by_dir" in self.__dict__

    @cached_property
    def broker_totals(self) -> BrokerTotals:
        """Replicas and bytes per broker and the partitions with an offline replica."""
        ids = self.brokers
        # Only a broker that is down or has an offline dir can hold an offline replica:
        # the full test runs for their replicas alone.
        suspect = self.brokers_with_offline_dir | (ids.keys() - self.alive)
        # Tables indexed by broker id: lists when the ids are small (the usual case; a
        # third faster than dicts at 2.8M replicas), dicts otherwise. The loop is the same.
        counts: list[int] | dict[int, int]
        sizes: list[int] | dict[int, int]
        flagged: list[bool] | dict[int, bool]
        top = max(ids, default=0)
        if top < _DENSE_IDS:
            counts, sizes = [0] * (top + 1), [0] * (top + 1)
            flagged = [b in suspect for b in range(top + 1)]
        else:
            counts, sizes = dict.fromkeys(ids, 0), dict.fromkeys(ids, 0)
            flagged = {b: b in suspect for b in ids}
        fast = native.core()
        if fast is not None:
            done = self._broker_totals_native(fast)
            if done is not None:
                return done
        is_offline = self.is_offline
        found: list[int] = []
        for i, p in enumerate(self.partitions):
            for r in p.replicas:
                b = r.broker
                counts[b] += 1
                sizes[b] += r.size_bytes
                if flagged[b] and is_offline(r):
                    found.append(i)
        return BrokerTotals(
            {b: counts[b] for b in ids}, {b: sizes[b] for b in ids}, tuple(dict.fromkeys(found))
        )

    def _broker_totals_native(self, fast: ModuleType) -> BrokerTotals | None:
        """The same pass compiled; None when it cannot take the input."""
        ids = list(self.brokers)
        parts = self.partitions
        count = parts.columns.broker_totals if isinstance(parts, PartitionColumns) else partial(
            fast.broker_totals, parts)
        try:
            found = count(
                ids, list(self.alive), list(self.brokers_with_offline_dir),
                list(self.offline_dirs),
            )
        except OverflowError:  # a figure over 64 bits: the reference handles any int
            return None
        if found is None:
            return None
        counts, sizes, offline = found
        return BrokerTotals(dict(zip(ids, counts, strict=True)),
                            dict(zip(ids, sizes, strict=True)), tuple(offline))

    @cached_property
    def partitions_with_offline_replicas(self) -> tuple[int, ...]:
        """Indexes into `partitions` of every partition with an offline replica."""
        if not self._has_dir_index():
            return self.broker_totals.offline
        found: set[int] = set()
        for (b, path), bucket in self.replicas_by_dir.items():
            if (
                b not in self.alive
                or (path is None and b in self.brokers_with_offline_dir)
                or (b, path) in self.offline_dirs
            ):
                found.update(bucket.partitions)
        return tuple(sorted(found))

    def can_host(self, broker: int) -> bool:
        """Alive with at least one online log dir."""
        return broker in self.alive and any(d.online for d in self.dirs[broker].values())

    # --- load ------------------------------------------------------------------------

    def replicas_on_dir(self, broker: int, path: str) -> list[tuple[int, int]]:
        """(size, partition index) of the replicas on one dir; a new list each call."""
        bucket = self.replicas_by_dir[(broker, path)]
        return list(zip(bucket.sizes, bucket.partitions, strict=True))

    @cached_property
    def dir_bytes(self) -> dict[DirKey, int]:
        """Bytes of known replicas on each log dir."""
        if not self._has_dir_index():  # over columns, the core sums without the index
            found = self._dir_sums_native()
            if found is not None:
                return found
        return {
            (b, path): sum(bucket.sizes)
            for (b, path), bucket in self.replicas_by_dir.items()
            if path is not None
        }

    def _dir_sums_native(self) -> dict[DirKey, int] | None:
        parts, sums = self.partitions, native.function("dir_sums")
        if sums is None or not isinstance(parts, PartitionColumns):
            return None
        slots = [(b, path) for b, dirs in self.dirs.items() for path in dirs]
        try:
            found = sums(parts.columns, slots)
        except OverflowError:  # a broker id over 64 bits: the reference handles any int
            return None
        return None if found is None else dict(zip(slots, found, strict=True))

    @cached_property
    def replica_counts(self) -> dict[int, int]:
        """Replicas per broker (offline ones included)."""
        if not self._has_dir_index():
            return self.broker_totals.counts
        counts = dict.fromkeys(self.brokers, 0)
        for (b, _), bucket in self.replicas_by_dir.items():
            counts[b] += len(bucket.sizes)
        return counts

    @cached_property
    def broker_bytes(self) -> dict[int, int]:
        """Bytes of replicas per broker."""
        if not self._has_dir_index():
            return self.broker_totals.sizes
        total = dict.fromkeys(self.brokers, 0)
        for (b, _), bucket in self.replicas_by_dir.items():
            total[b] += sum(bucket.sizes)
        return total

    def free_bytes(self, broker: int, path: str) -> int | None:
        """Free space on a dir: `usable_bytes`, else capacity minus known replicas."""
        d = self.dirs[broker][path]
        if d.usable_bytes is not None:
            return d.usable_bytes
        if d.total_bytes is not None:
            return max(0, d.total_bytes - self.dir_bytes[(broker, path)])
        return None

    # --- racks ------------------------------------------------------------------------

    @cached_property
    def _partitions_by_topic(self) -> dict[str, list[Partition]]:
        """Each topic's partitions as the snapshot lists them, topics in the order they
        first appear."""
        found: dict[str, list[Partition]] = {}
        for topic, run in groupby(self.partitions, _TOPIC):
            found.setdefault(topic, []).extend(run)
        return found

    @cached_property
    def _topic_rank(self) -> dict[str, int]:
        return {t: k for k, t in enumerate(self._partitions_by_topic)}

    def replica_racks(self, topics: Iterable[str]) -> dict[str, dict[int, frozenset[str]]]:
        """For each of `topics` in the snapshot (in the snapshot's order): partition number
        -> the racks of its replicas on alive brokers, by partition number. Made on first
        ask and kept (the consumer planners ask again per group); each call gets copies."""
        index = self._partitions_by_topic
        present = [t for t in set(topics) if t in index]
        if len(present) > 1:
            present.sort(key=self._topic_rank.__getitem__)
        return {t: dict(self._racks_of_topic(t)) for t in present}

    def _racks_of_topic(self, topic: str) -> dict[int, frozenset[str]]:
        found = self._replica_racks.get(topic)
        if found is not None:
            return found
        found = {}
        # A cluster has few distinct replica lists: one set of racks each, shared. The
        # unpacking and the try are the quick paths of 3.11's interpreter (a map over
        # the replicas, or a dict subclass, took twice as long at 10,000 partitions).
        seen, alive, rack_of = self._racks_of, self.alive, self.rack_of
        for p in self._partitions_by_topic[topic]:
            replicas = p.replicas
            n = len(replicas)
            if n == 3:
                a, b, c = replicas
                brokers: tuple[int, ...] = (a.broker, b.broker, c.broker)
            elif n == 2:
                a, b = replicas
                brokers = (a.broker, b.broker)
            elif n == 1:
                brokers = (replicas[0].broker,)
            else:
                brokers = tuple([r.broker for r in replicas])
            try:
                found[p.partition] = seen[brokers]
            except KeyError:
                found[p.partition] = seen[brokers] = frozenset(
                    rack for x in brokers if x in alive and (rack := rack_of[x]) is not None
                )
        numbers = list(found)
        if not all(map(lt, numbers, numbers[1:])):
            found = dict(sorted(found.items()))
        self._replica_racks[topic] = found
        return found

    def partition_index(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> index into `partitions`: built once per model (the job's
        facts asked for it six times a snapshot, 0.1 s each at 100,000 partitions) and
        shared, so callers only read it."""
        return self._partition_index

    @cached_property
    def _partition_index(self) -> dict[tuple[str, int], int]:
        return {(p.topic, p.partition): i for i, p in enumerate(self.partitions)}
