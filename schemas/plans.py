"""The partition target every plan is made of, from the planner to the Admin call.

A planner builds `PartitionAssignment`s (core/plan), an action carries them in the
reassignment JSON `kafka-reassign-partitions.sh` reads, and the executor checks and
submits the same objects, read once from the record (`reassignment_targets`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ANY_DIR = "any"  # KIP-113: the broker picks the dir


@dataclass(frozen=True, slots=True)
class PartitionAssignment:
    """The target replica list of one partition; `log_dirs` None leaves dirs unsaid."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def dir_of(self, broker: int) -> str | None:
        """The dir this target names for `broker`'s replica; None for "any" or unsaid."""
        if self.log_dirs is None or broker not in self.replicas:
            return None
        path = self.log_dirs[self.replicas.index(broker)]
        return None if path == ANY_DIR else path

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "topic": self.topic,
            "partition": self.partition,
            "replicas": list(self.replicas),
        }
        if self.log_dirs is not None:
            out["log_dirs"] = list(self.log_dirs)
        return out


def reassignment_targets(reassignment: Mapping[str, Any]) -> tuple[PartitionAssignment, ...]:
    """The targets of a schema-valid reassignment JSON, typed."""
    out = []
    for p in reassignment["partitions"]:
        dirs = p.get("log_dirs")
        out.append(PartitionAssignment(p["topic"], p["partition"], tuple(p["replicas"]),
                                       None if dirs is None else tuple(dirs)))
    return tuple(out)


REASSIGNMENT_TYPES = frozenset({"fix_offline_replicas", "move_replica_dirs"})


def action_targets(type_: str, plan: Mapping[str, Any]) -> tuple[PartitionAssignment, ...]:
    """The partition targets of a schema-valid plan of action type `type_`; none for
    pages and consumer assignments."""
    if type_ in REASSIGNMENT_TYPES:
        return reassignment_targets(plan)
    if type_ == "rebalance_leaders":
        return reassignment_targets(plan["reassignment"])
    return ()


def action_elections(type_: str, plan: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """(topic, partition) of the preferred elections a leader plan asks for."""
    if type_ != "rebalance_leaders":
        return ()
    return tuple((p["topic"], p["partition"]) for p in plan["election"]["partitions"])
