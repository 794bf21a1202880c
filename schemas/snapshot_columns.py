"""The snapshot read by the compiled core straight from the JSON's bytes into columns.

For the planners that read columns (`selfheal plan offline|disks|leaders`): no
`Partition` is made at load; one is made from the columns when asked for
(`PartitionColumns[i]`), so a plan makes only those it names, and the model's passes
over every replica run over the columns in the core. The core reads the `partitions`
array itself and hands the rest of the document back as a small JSON object, which
msgspec's typed decoder checks as it checks a whole snapshot; the cross-references are
then checked over the columns.

Yes or no only, as the msgspec path: the core takes only the plain form collectors
write (no escapes in strings, integers under 19 digits, no floats, no key twice) and
refuses anything else with None; the loader then takes the msgspec path and, on a
refusal there, the checking walker, which names what is wrong. So a bad document gets
the same message on every path.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import msgspec

from schemas import native
from schemas.snapshot_decode import DECODER, dirs_by_broker, groups_hold, snapshot_of
from schemas.snapshot_types import NO_LEADER, Partition, Replica, Snapshot


class PartitionColumns(Sequence[Partition]):
    """The partitions as the core holds them; `Partition` records made on demand, once
    each (a planner asks for the same partition again when it writes the plan out);
    iterating makes all of them once."""

    __slots__ = ("columns", "_all", "_made")

    def __init__(self, columns: Any) -> None:
        self.columns = columns
        self._all: tuple[Partition, ...] | None = None
        self._made: dict[int, Partition] = {}

    def __len__(self) -> int:
        return len(self.columns)

    @overload
    def __getitem__(self, index: int) -> Partition: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Partition, ...]: ...

    def __getitem__(self, index: int | slice) -> Partition | tuple[Partition, ...]:
        if isinstance(index, slice):
            return tuple(self[k] for k in range(*index.indices(len(self))))
        found = self._made.get(index)  # a planner asks again when it writes the plan out
        if found is not None:
            return found
        if self._all is not None:
            return self._all[index]
        n = len(self)
        k = index + n if index < 0 else index
        if not 0 <= k < n:
            raise IndexError("partition index out of range")
        made = self._made[index] = self.columns.record(k, Partition, Replica)
        return made

    def __iter__(self) -> Iterator[Partition]:
        if self._all is None:
            record, made = self.columns.record, self._made
            self._all = tuple(
                made.get(k) or record(k, Partition, Replica) for k in range(len(self))
            )
            made.clear()
        return iter(self._all)

    def row(self, index: int) -> tuple[str, int, int, tuple[int, ...]]:
        """(topic, partition, leader, replica brokers) of one partition, no record made."""
        found: tuple[str, int, int, tuple[int, ...]] = self.columns.row(index)
        return found


def read_columns(data: bytes) -> Snapshot | None:
    """The snapshot with its partitions as columns, or None: no core, or a document
    the core or the checks do not take as it stands (the other paths then decide)."""
    read = native.function("read_columns")
    if read is None:
        return None
    found = read(data)
    if found is None:
        return None
    header, columns = found
    try:
        doc = DECODER.decode(header)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    dirs = dirs_by_broker(doc.brokers)
    if dirs is None or not groups_hold(doc.consumer_groups):
        return None
    try:
        holds = columns.references_hold(
            [(b, list(paths)) for b, paths in dirs.items()], NO_LEADER
        )
    except OverflowError:  # a broker id past 64 bits: the reference handles any int
        return None
    return snapshot_of(doc, PartitionColumns(columns)) if holds else None
