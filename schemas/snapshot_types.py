"""The cluster snapshot's typed records (schemas/snapshot.py reads and checks them).

`Partition` and `Replica`, a million of each at Cruise Control's worst case, are msgspec
Structs the loader decodes the JSON straight into; their annotations carry the schema's
constraints. The others are few and stay dataclasses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import FrozenInstanceError, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec

SCHEMA_PATH = Path(__file__).with_name("cluster-snapshot.schema.json")
SNAPSHOT_VERSION = 1
NO_LEADER = -1
# The most JSON a snapshot may be, read from a file or assembled from chunks: Cruise
# Control's largest published cluster (2.8M replicas) is ~240 MB; past this a reader
# would hold several GiB before it could say anything.
MAX_SNAPSHOT_BYTES = 1 << 30


class SnapshotError(ValueError):
    """A snapshot that is not valid JSON, breaks the schema, or contradicts itself.

    `path` names the first bad field (``partitions[3].replicas[1].broker``); `kind` is
    "io" (unreadable), "json" (not JSON), "schema" (breaks cluster-snapshot.schema.json)
    or "consistency" (valid structure, but a reference or a duplicate the schema cannot
    see).
    """

    def __init__(self, path: str, problem: str, kind: str = "schema") -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
        self.kind = kind


@dataclass(frozen=True, slots=True)
class LogDir:
    path: str
    online: bool
    total_bytes: int | None = None
    usable_bytes: int | None = None
    # Cordoned (KIP-1066, DescribeLogDirs v5): no new replica is placed on it. Always
    # False before Kafka 4.3's metadata version; the document leaves it out then.
    cordoned: bool = False


RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True, slots=True)
class Broker:
    id: int
    rack: str | None
    alive: bool
    log_dirs: tuple[LogDir, ...]
    # The broker's `replica.selector.class` (KIP-392); None when it is not set (consumers
    # then read from leaders only) or was not read.
    replica_selector: str | None = None

    @property
    def follower_fetching(self) -> bool:
        """Consumers with client.rack may read from a replica on their rack (KIP-392)."""
        return self.replica_selector is not None and self.replica_selector.rsplit(
            ".", 1)[-1] == RACK_AWARE_SELECTOR.rsplit(".", 1)[-1]


NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Name = Annotated[str, msgspec.Meta(min_length=1)]


class _Record(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """Frozen and hashable as the dataclass records are. msgspec's own `frozen=True`
    would raise a bare AttributeError where callers expect FrozenInstanceError. gc=False:
    records never form cycles, and a million tracked objects slow every collection."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __hash__(self) -> int:
        return hash(msgspec.structs.astuple(self))


class Replica(_Record):
    """One replica. `log_dir` must be present in the JSON for the fast decoder (null when
    unknown, as the collectors write it); a replica that leaves it out is read by the
    checking walker instead."""

    broker: NonNegative
    log_dir: Name | None
    size_bytes: NonNegative


class Partition(_Record):
    topic: Name
    partition: NonNegative
    leader: Annotated[int, msgspec.Meta(ge=NO_LEADER)]
    isr: tuple[NonNegative, ...]
    replicas: Annotated[tuple[Replica, ...], msgspec.Meta(min_length=1)]

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class Assigned:
    """The partitions of one topic a member consumes (its group's last assignment)."""

    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    client_id: str
    rack: str | None  # client.rack, from the subscription metadata (v3, KIP-881)
    topics: tuple[str, ...]
    group_instance_id: str | None = None
    assignment: tuple[Assigned, ...] = ()

    def assigned(self) -> list[tuple[str, int]]:
        """(topic, partition) of everything the member consumes."""
        return [(a.topic, p) for a in self.assignment for p in a.partitions]


@dataclass(frozen=True, slots=True)
class ConsumerGroup:
    group: str
    members: tuple[Member, ...]
    # "consumer" for a consumer group (DescribeGroups' protocol type); the assignor in
    # use: the clients' ("range", "cooperative-sticky", ...) in a classic group, the
    # broker's ("uniform", "range") in a KIP-848 one; the group state ("Stable", ...).
    # None when the snapshot was written without them.
    protocol_type: str | None = None
    protocol: str | None = None
    state: str | None = None
    # The group's rebalance protocol, as its consumers' `group.protocol` names it:
    # "classic" (None: a snapshot written before the field) or "consumer" (KIP-848).
    group_protocol: str | None = None
    # False when the reader could not see the members' client.rack (KIP-848 groups read
    # through librdkafka, whose ConsumerGroupDescribe answer drops RackId): a member's
    # rack None then means unknown, not unset.
    racks_known: bool = True

    @property
    def broker_assigned(self) -> bool:
        """The broker makes the assignment (KIP-848): no client-side assignor, and so
        no assignment from outside the group, applies to it (KAFKA-18327)."""
        return self.group_protocol not in (None, "classic")


@dataclass(slots=True)
class DirReplicas:
    """The replicas on one log dir of one broker (`path` None: those whose dir is
    unknown), as the loader met them while checking that the dir exists."""

    broker: int
    path: str | None
    sizes: list[int] = field(default_factory=list)
    partitions: list[int] = field(default_factory=list)  # indexes into Snapshot.partitions


@dataclass(frozen=True, slots=True)
class Snapshot:
    cluster_id: str
    taken_at: str
    brokers: tuple[Broker, ...]
    # A tuple, or schemas/snapshot_columns.PartitionColumns where the loader was asked
    # for columns (`plan leaders`): records made on demand from the compiled core's.
    partitions: Sequence[Partition]
    consumer_groups: tuple[ConsumerGroup, ...] = ()
    version: int = SNAPSHOT_VERSION
    # The finalized metadata.version feature level (KRaft); None: ZooKeeper or not read.
    metadata_level: int | None = None
    # Derived, not part of the document: every (broker, dir) of the brokers, empty ones
    # too, with what the loader found there. Empty when the snapshot was built by hand.
    replicas_by_dir: dict[tuple[int, str | None], DirReplicas] = field(
        default_factory=dict, compare=False, repr=False
    )
