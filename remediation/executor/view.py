"""The cluster as the executor just read it, and what every check reads off it.

`LiveView` holds a live snapshot's model (only the action's topics, when it is big), the
reassignments in flight, the replicas being moved between dirs, and the whole-cluster
tallies an action's premise needs. The checks (`checks.py`) and the progress and
verification (`progress.py`) are pure functions over it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from core.model import ClusterModel
from schemas.records import Action
from schemas.snapshot import Partition

TP = tuple[str, int]
MAX_REASONS = 5  # a verdict names this many partitions, then "and N more"


@dataclass(frozen=True, slots=True)
class Reassigning:
    """One partition reassignment in flight (ListPartitionReassignments)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True)
class LiveView:
    """The cluster as the executor just read it."""

    model: ClusterModel
    reassigning: Mapping[TP, Reassigning] = field(default_factory=dict)
    # (topic, partition, broker) -> the dir a replica is being moved to (a future replica)
    future: Mapping[tuple[str, int, int], str] = field(default_factory=dict)
    # Whole-cluster figures when `model` holds only some topics (KafkaCluster.read):
    # bytes per (broker, dir) and partitions led per broker; None: from `model`.
    all_dir_bytes: Mapping[tuple[int, str], int] | None = None
    all_leaders: Mapping[int, int] | None = None
    # Brokers whose DescribeLogDirs answered in this read; None: every alive one (a view
    # built by hand). Another broker's dirs and replicas are only the last known ones.
    answered: frozenset[int] | None = None

    @property
    def dir_bytes(self) -> Mapping[tuple[int, str], int]:
        return self.model.dir_bytes if self.all_dir_bytes is None else self.all_dir_bytes

    @cached_property
    def leaders(self) -> Mapping[int, int]:
        if self.all_leaders is not None:
            return self.all_leaders
        return leader_counts(p.leader for p in self.model.partitions)

    @property
    def cluster_id(self) -> str:
        return self.model.snapshot.cluster_id

    @cached_property
    def _index(self) -> dict[TP, int]:
        return self.model.partition_index()

    def partition(self, topic: str, number: int) -> Partition | None:
        i = self._index.get((topic, number))
        return None if i is None else self.model.partitions[i]

    def reassignments_per_broker(self) -> dict[int, int]:
        """Reassignments in flight that touch each broker (the policy's concurrency limit)."""
        out: dict[int, int] = {}
        for r in self.reassigning.values():
            for b in set(r.replicas) | set(r.adding) | set(r.removing):
                out[b] = out.get(b, 0) + 1
        return out

    def heard(self, broker: int) -> bool:
        """The broker is alive and answered DescribeLogDirs in this read."""
        return broker in self.model.alive and (self.answered is None
                                               or broker in self.answered)

    def online_dir(self, broker: int, path: str) -> bool:
        d = self.model.dirs.get(broker, {}).get(path)
        return d is not None and d.online


def summarise(items: Iterable[str], limit: int = MAX_REASONS) -> str:
    """'a; b; c' cut to `limit` items, saying how many more there are."""
    items = list(items)
    shown = "; ".join(items[:limit])
    return shown + (f"; and {len(items) - limit} more" if len(items) > limit else "")


def leader_counts(leaders: Iterable[int]) -> dict[int, int]:
    """Partitions led per broker (-1, no leader, is not counted)."""
    out: dict[int, int] = {}
    for b in leaders:
        if b >= 0:
            out[b] = out.get(b, 0) + 1
    return out


def replicas_of(p: Partition) -> tuple[int, ...]:
    return tuple(r.broker for r in p.replicas)


def dir_moves(action: Action, view: LiveView) -> dict[tuple[str, int, int], str]:
    """Replicas not yet in the dir the plan names: (topic, partition, broker) -> dir.

    For a fix, only replicas that exist already and whose broker takes intra-broker
    moves (none of its dirs offline); the others are placed by the reassignment itself.
    """
    model = view.model
    out: dict[tuple[str, int, int], str] = {}
    for t in action.targets():
        p = view.partition(t.topic, t.partition)
        if p is None:
            continue
        dirs = {r.broker: r.log_dir for r in p.replicas}
        for b in t.replicas:
            path = t.dir_of(b)
            if (path is None or b not in dirs or dirs[b] == path
                    or b in model.brokers_with_offline_dir or b not in model.alive):
                continue
            if view.future.get((t.topic, t.partition, b)) == path:
                continue  # already on its way
            out[(t.topic, t.partition, b)] = path
    return out
