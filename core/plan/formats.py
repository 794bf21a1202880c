"""Plan records and their JSON, in the formats Kafka's own tools read.

`Reassignment.to_json()` is the file `kafka-reassign-partitions.sh --execute
--reassignment-json-file` takes (with `log_dirs`, KIP-113); `LeaderPlan.election_json()`
is the file `kafka-leader-election.sh --path-to-json-file` takes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The partition target is the wire's own type; planners may name it from here too.
from schemas.plans import ANY_DIR as ANY_DIR
from schemas.plans import PartitionAssignment as PartitionAssignment

EXPLAIN_LINES = 40  # item lines an --explain summary shows before "... and N more"


def first_lines(lines: list[str], limit: int = EXPLAIN_LINES) -> list[str]:
    """`lines` cut to `limit`, saying how many were left out."""
    if len(lines) <= limit:
        return lines
    return [*lines[:limit], f"  ... and {len(lines) - limit} more"]


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB', for the --explain summaries."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    k = 0
    while abs(n) >= 1024 and k < len(units) - 1:
        n /= 1024
        k += 1
    return f"{n:.0f} B" if k == 0 else f"{n:.1f} {units[k]}"


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition}

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class Reassignment:
    """A list of partition targets; empty means nothing to do."""

    partitions: tuple[PartitionAssignment, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"version": 1, "partitions": [p.to_json() for p in self.partitions]}

    def __bool__(self) -> bool:
        return bool(self.partitions)


@dataclass(frozen=True, slots=True)
class Unrecoverable:
    """A partition the offline planner leaves to the operator, and why."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "replicas": list(self.replicas),
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class OfflinePlan:
    reassignment: Reassignment
    unrecoverable: tuple[Unrecoverable, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = self.reassignment.to_json()
        out["unrecoverable"] = [u.to_json() for u in self.unrecoverable]
        return out


@dataclass(frozen=True, slots=True)
class SkippedBroker:
    broker: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"broker": self.broker, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class DirMove:
    """One intra-broker move, for the human summary."""

    topic: str
    partition: int
    broker: int
    source: str
    target: str
    size_bytes: int


@dataclass(frozen=True, slots=True)
class DiskPlan:
    reassignment: Reassignment
    skipped: tuple[SkippedBroker, ...] = ()
    moves: tuple[DirMove, ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, Any]:
        out = self.reassignment.to_json()
        out["skipped"] = [s.to_json() for s in self.skipped]
        return out


@dataclass(frozen=True, slots=True)
class LeaderPlan:
    reassignment: Reassignment
    election: tuple[TopicPartition, ...] = ()

    def election_json(self) -> dict[str, Any]:
        return {"partitions": [tp.to_json() for tp in self.election]}

    def to_json(self) -> dict[str, Any]:
        return {"reassignment": self.reassignment.to_json(), "election": self.election_json()}


@dataclass(frozen=True, slots=True)
class ConsumerPlan:
    group: str
    assignment: dict[str, tuple[TopicPartition, ...]]
    cross_rack: int

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "assignment": {
                member: [tp.to_json() for tp in tps] for member, tps in self.assignment.items()
            },
            "cross_rack": self.cross_rack,
        }
