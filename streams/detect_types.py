"""What the detector reads, writes and keeps (streams/detect.py is the state machine).

Its inputs are signals (a failed or online dir, a departed broker, a snapshot's facts),
its outputs decisions (what to propose) and notes, its memory one `ClusterState` per
cluster; each of these crosses Spark's state store or an output row as JSON, so each
type here says how it is written and read back.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.config import DetectConfig

Ms = int

# Trigger kinds, as in action.schema.json's trigger.kind.
LOGDIR_EVENT = "logdir_event"
METRIC = "metric"
SNAPSHOT = "snapshot"
BROKER_LEFT = "broker_left"

FIX_OFFLINE = "fix_offline_replicas"
MOVE_DIRS = "move_replica_dirs"
REBALANCE_LEADERS = "rebalance_leaders"
PAGE = "page_operator"
DEAD_BROKER = "dead_broker"  # a decision: re-replicate everything a departed broker held
ASSIGN_CONSUMERS = "assign_consumers"
CORDON_DIR = "cordon_log_dir"
UNCORDON_DIR = "uncordon_log_dir"


@dataclass(frozen=True, slots=True)
class DetectSettings:
    """The `[detect]` knobs the state machine needs, in milliseconds."""

    skew_window_ms: Ms = 300_000
    leader_window_ms: Ms = 600_000
    signal_window_ms: Ms = 120_000
    fresh_snapshot_wait_ms: Ms = 15_000
    broker_return_grace_ms: Ms = 60_000
    broker_death_grace_ms: Ms = 60_000
    consumer_locality_margin: float = 0.10
    consumer_locality_window_ms: Ms = 300_000
    # A dir that failed and came back stays cordoned until online this long.
    returned_trust_ms: Ms = 900_000
    # An uncordon proposed and not done (rejected, expired, failed) is proposed again
    # after this, doubling each time, up to the max.
    uncordon_retry_ms: Ms = 600_000
    uncordon_retry_max_ms: Ms = 14_400_000

    def uncordon_wait(self, tries: int) -> Ms:
        """How long after the ``tries``-th uncordon proposal the next may come."""
        return min(self.uncordon_retry_ms << min(tries - 1, 20), self.uncordon_retry_max_ms)

    @classmethod
    def from_config(cls, detect: DetectConfig) -> DetectSettings:
        return cls(
            skew_window_ms=round(detect.skew_window_seconds * 1000),
            leader_window_ms=round(detect.leader_window_seconds * 1000),
            signal_window_ms=round(detect.signal_window_seconds * 1000),
            fresh_snapshot_wait_ms=round(detect.fresh_snapshot_wait_seconds * 1000),
            broker_return_grace_ms=round(detect.broker_return_grace_seconds * 1000),
            broker_death_grace_ms=round(detect.broker_death_grace_seconds * 1000),
            consumer_locality_margin=detect.consumer_locality_margin,
            consumer_locality_window_ms=round(detect.consumer_locality_window_seconds * 1000),
            returned_trust_ms=round(detect.returned_trust_seconds * 1000),
        )


# --- what the detector reads ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SnapshotRef:
    """Where a snapshot record sits on the bus, and when it was taken."""

    topic: str
    partition: int
    offset: int
    taken_at: Ms


@dataclass(frozen=True, slots=True)
class GroupFacts:
    """One consumer group's locality (streams/facts.py, core/locality.py).

    ``ratio``/``planned``: the share read on the members' own racks now and under its
    KIP-881 plan (None when nothing is assigned or no plan could be made);
    ``membership``: a digest of its member ids (a new membership is a new question);
    ``no_rack``: (member id, client id) of members without client.rack; ``racks``: the
    cluster's racks; ``diagnosis``: why it reads across racks, for the operator;
    ``broker_assigned``: a KIP-848 group (nothing outside it steers its assignment);
    ``racks_known``: False when its members' racks could not be read.
    """

    ratio: float | None
    planned: float | None
    strategy: str
    stable: bool
    membership: str
    no_rack: tuple[tuple[str, str], ...] = ()
    racks: tuple[str, ...] = ()
    diagnosis: str = ""
    broker_assigned: bool = False
    racks_known: bool = True

    def to_doc(self) -> dict[str, object]:
        return {"ratio": self.ratio, "planned": self.planned, "strategy": self.strategy,
                "stable": self.stable, "membership": self.membership,
                "no_rack": [list(m) for m in self.no_rack], "racks": list(self.racks),
                "diagnosis": self.diagnosis, "broker_assigned": self.broker_assigned,
                "racks_known": self.racks_known}

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> GroupFacts:
        return cls(doc["ratio"], doc["planned"], doc["strategy"], doc["stable"],
                   doc["membership"], tuple((m, c) for m, c in doc["no_rack"]),
                   tuple(doc["racks"]), doc["diagnosis"], doc.get("broker_assigned", False),
                   doc.get("racks_known", True))


@dataclass(frozen=True, slots=True)
class SnapshotFacts:
    """What detection needs from one snapshot (streams/facts.py computes it).

    ``dirs``: broker -> {dir path: online}; ``alive``: broker -> alive; ``skewed``:
    broker -> fullest dir over its broker's mean, only brokers past the skew limits;
    ``leaders``: why leadership is unbalanced, or None when it is not; ``over``: broker ->
    its dirs past the skew threshold, whatever the bytes (a cordon is lifted only once
    below it); ``cordoned``: broker -> its cordoned dirs; ``metadata_level``: the
    metadata.version feature level (None: unknown).
    """

    dirs: dict[int, dict[str, bool]]
    alive: dict[int, bool]
    skewed: dict[int, float] = field(default_factory=dict)
    leaders: str | None = None
    groups: dict[str, GroupFacts] = field(default_factory=dict)
    over: dict[int, list[str]] = field(default_factory=dict)
    cordoned: dict[int, list[str]] = field(default_factory=dict)
    metadata_level: int | None = None

    def to_json(self) -> str:
        return json.dumps({
            "over": {str(b): d for b, d in self.over.items()},
            "cordoned": {str(b): d for b, d in self.cordoned.items()},
            "metadata_level": self.metadata_level,
            "dirs": {str(b): d for b, d in self.dirs.items()},
            "alive": {str(b): a for b, a in self.alive.items()},
            "skewed": {str(b): r for b, r in self.skewed.items()},
            "leaders": self.leaders,
            "groups": {g: f.to_doc() for g, f in self.groups.items()},
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> SnapshotFacts:
        doc = json.loads(text)
        return cls(
            dirs={int(b): d for b, d in doc["dirs"].items()},
            alive={int(b): a for b, a in doc["alive"].items()},
            skewed={int(b): r for b, r in doc["skewed"].items()},
            leaders=doc["leaders"],
            groups={g: GroupFacts.from_doc(f) for g, f in doc.get("groups", {}).items()},
            over={int(b): d for b, d in doc.get("over", {}).items()},
            cordoned={int(b): d for b, d in doc.get("cordoned", {}).items()},
            metadata_level=doc.get("metadata_level"),
        )


@dataclass(frozen=True, slots=True)
class Failure:
    """A log dir failed. ``broker``/``log_dir`` None when the signal did not say."""

    time: Ms
    source: str  # LOGDIR_EVENT or METRIC
    broker: int | None = None
    log_dir: str | None = None


@dataclass(frozen=True, slots=True)
class DirOnline:
    """The per-dir gauge reads 0: the dir is online at ``time``."""

    time: Ms
    broker: int
    log_dir: str


@dataclass(frozen=True, slots=True)
class BrokerGone:
    """The broker left the cluster (its registration vanished)."""

    time: Ms
    broker: int


@dataclass(frozen=True, slots=True)
class BrokerBack:
    """The broker registered again (it runs and is part of the cluster)."""

    time: Ms
    broker: int


@dataclass(frozen=True, slots=True)
class SnapshotSeen:
    time: Ms  # taken_at
    ref: SnapshotRef
    facts: SnapshotFacts


@dataclass(frozen=True, slots=True)
class DeltaSeen:
    """A failure's delta (schemas/snapshot_delta.py): the brokers it names, each
    (alive, {dir: online}), at ``time`` (its taken_at); ``body`` is the record."""

    time: Ms
    ref: SnapshotRef
    brokers: dict[int, tuple[bool, dict[str, bool]]]
    body: str


Signal = Failure | DirOnline | BrokerGone | BrokerBack | SnapshotSeen | DeltaSeen

# Within one timestamp: failures first (they date episodes), snapshots last (they see
# everything the same instant reported), a delta after the snapshot it follows.
ORDER = {Failure: 0, DirOnline: 1, BrokerGone: 2, BrokerBack: 3, SnapshotSeen: 4,
         DeltaSeen: 5}


# --- what it writes ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decision:
    """Something to propose; streams/propose.py turns it into an action record.

    ``offline_dirs`` are every dir the detector holds offline in the cluster: the
    planner marks them offline in the snapshot, which may predate the failure. Likewise
    ``cordoned``: the dirs this detector cordoned or is cordoning (a snapshot taken
    before serve ran the cordon shows them open; Kafka refuses a replica into them).
    """

    type: str
    cluster_id: str
    event_time: Ms
    trigger_kind: str
    broker: int | None
    log_dir: str | None
    snapshot: SnapshotRef | None
    offline_dirs: tuple[tuple[int, str], ...] = ()
    reason: str = ""
    group: str | None = None  # the consumer group an assign_consumers decision is about
    # The failure's delta taken after ``snapshot``: planned from the snapshot + it.
    delta: SnapshotRef | None = None
    cordoned: tuple[tuple[int, str], ...] = ()

    def to_json(self) -> str:
        body = dataclasses.asdict(self)
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Decision:
        doc = json.loads(text)
        ref = doc["snapshot"]
        doc["snapshot"] = SnapshotRef(**ref) if ref is not None else None
        delta = doc.get("delta")
        doc["delta"] = SnapshotRef(**delta) if delta is not None else None
        doc["offline_dirs"] = tuple((int(b), d) for b, d in doc["offline_dirs"])
        doc["cordoned"] = tuple((int(b), d) for b, d in doc.get("cordoned", ()))
        return cls(**doc)


@dataclass(frozen=True, slots=True)
class Note:
    """Something the operator should read that is not an action (printed by the job)."""

    cluster_id: str
    time: Ms
    text: str
    # A record that goes to the dead-letter topic with ``text`` as its reason, instead of
    # being printed: where it sits, and its value.
    letter: tuple[SnapshotRef, str] | None = None


# --- state ---------------------------------------------------------------------------


@dataclass(slots=True)
class Episode:
    """One offline spell of one (broker, dir)."""

    broker: int
    log_dir: str
    since: Ms  # the earliest signal that matched
    trigger: str  # the kind of that signal
    evidence: Ms  # the newest evidence that it is offline
    proposed: bool = False


@dataclass(slots=True)
class Pending:
    """A failure signal that named no dir yet."""

    time: Ms
    source: str
    broker: int | None


@dataclass(slots=True)
class Spell:
    """A condition that must last a window before it is acted on (skew, leaders)."""

    since: Ms
    proposed: bool = False


@dataclass(slots=True)
class GroupSpell:
    """A consumer group below its plan (or with members lacking client.rack), for one
    membership: proposed once per membership and spell."""

    since: Ms
    membership: str
    proposed: bool = False
    paged: list[str] = field(default_factory=list)  # member ids already paged


@dataclass(slots=True)
class ClusterState:
    snapshot: SnapshotRef | None = None
    # broker -> [alive, number of log dirs], from the latest snapshot.
    brokers: dict[int, tuple[bool, int]] = field(default_factory=dict)
    episodes: dict[tuple[int, str], Episode] = field(default_factory=dict)
    pending: list[Pending] = field(default_factory=list)
    skew: dict[int, Spell] = field(default_factory=dict)
    leaders: Spell | None = None
    paged: dict[int, Ms] = field(default_factory=dict)
    # broker -> when it was first seen gone with a failure open: paged after the grace
    # unless it comes back (an operator restarting it after replacing the disk).
    departed: dict[int, Ms] = field(default_factory=dict)
    # broker -> when it was first seen gone with no failure open: its replicas are
    # re-replicated after the grace; and the brokers whose death has been proposed (the
    # same death is healed once; back and gone again is a new one).
    dead: dict[int, Ms] = field(default_factory=dict)
    healed: dict[int, Ms] = field(default_factory=dict)
    # broker -> when it last registered: a departure dated before that is over already
    # (its record came late, or the bus lost what came between).
    back: dict[int, Ms] = field(default_factory=dict)
    # group -> its locality spell; group -> its members-without-client.rack spell
    consumers: dict[str, GroupSpell] = field(default_factory=dict)
    rackless: dict[str, GroupSpell] = field(default_factory=dict)
    newest: Ms = 0  # newest event time seen: the clock when there is no watermark
    # `newest` when the snapshot source last moved on (a newer snapshot arrived): a
    # source that keeps moving is behind, not stalled, and is waited for.
    snapshot_moved: Ms = 0
    # The newest failure delta taken after `snapshot` (the next snapshot supersedes it).
    delta: SnapshotRef | None = None
    # (broker, dir) -> when it came back online after failing (streams/detect_cordons.py);
    # the cordons this detector proposed -> whether their lifting is proposed; whether
    # the cluster was told it is too old to cordon.
    returned: dict[tuple[int, str], Ms] = field(default_factory=dict)
    cordons: dict[tuple[int, str], bool] = field(default_factory=dict)
    # our cordon -> when its uncordon was last proposed and how many times
    lifts: dict[tuple[int, str], tuple[Ms, int]] = field(default_factory=dict)
    cordon_note: bool = False

    def to_json(self) -> str:
        return json.dumps({
            "returned": [[b, d, t] for (b, d), t in self.returned.items()],
            "cordons": [[b, d, lifted] for (b, d), lifted in self.cordons.items()],
            "lifts": [[b, d, t, n] for (b, d), (t, n) in self.lifts.items()],
            "cordon_note": self.cordon_note,
            "snapshot": dataclasses.asdict(self.snapshot) if self.snapshot else None,
            "delta": dataclasses.asdict(self.delta) if self.delta else None,
            "brokers": {str(b): list(v) for b, v in self.brokers.items()},
            "episodes": [dataclasses.asdict(e) for e in self.episodes.values()],
            "pending": [dataclasses.asdict(p) for p in self.pending],
            "skew": {str(b): dataclasses.asdict(s) for b, s in self.skew.items()},
            "leaders": dataclasses.asdict(self.leaders) if self.leaders else None,
            "paged": {str(b): t for b, t in self.paged.items()},
            "departed": {str(b): t for b, t in self.departed.items()},
            "dead": {str(b): t for b, t in self.dead.items()},
            "healed": {str(b): t for b, t in self.healed.items()},
            "back": {str(b): t for b, t in self.back.items()},
            "consumers": {g: dataclasses.asdict(s) for g, s in self.consumers.items()},
            "rackless": {g: dataclasses.asdict(s) for g, s in self.rackless.items()},
            "newest": self.newest,
            "snapshot_moved": self.snapshot_moved,
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ClusterState:
        doc = json.loads(text)
        episodes = [Episode(**e) for e in doc["episodes"]]
        return cls(
            snapshot=SnapshotRef(**doc["snapshot"]) if doc["snapshot"] else None,
            brokers={int(b): (bool(v[0]), int(v[1])) for b, v in doc["brokers"].items()},
            episodes={(e.broker, e.log_dir): e for e in episodes},
            pending=[Pending(**p) for p in doc["pending"]],
            skew={int(b): Spell(**s) for b, s in doc["skew"].items()},
            leaders=Spell(**doc["leaders"]) if doc["leaders"] else None,
            paged={int(b): t for b, t in doc["paged"].items()},
            departed={int(b): t for b, t in doc.get("departed", {}).items()},
            dead={int(b): t for b, t in doc.get("dead", {}).items()},
            healed={int(b): t for b, t in doc.get("healed", {}).items()},
            back={int(b): t for b, t in doc.get("back", {}).items()},
            consumers={g: GroupSpell(**s) for g, s in doc.get("consumers", {}).items()},
            rackless={g: GroupSpell(**s) for g, s in doc.get("rackless", {}).items()},
            newest=doc["newest"],
            snapshot_moved=doc.get("snapshot_moved", 0),
            delta=SnapshotRef(**doc["delta"]) if doc.get("delta") else None,
            returned={(int(b), d): t for b, d, t in doc.get("returned", [])},
            cordons={(int(b), d): bool(x) for b, d, x in doc.get("cordons", [])},
            lifts={(int(b), d): (t, n) for b, d, t, n in doc.get("lifts", [])},
            cordon_note=doc.get("cordon_note", False),
        )
