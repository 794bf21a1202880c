"""What changed between two looks at a cluster, as `LogDirEvent` records (pure: no I/O).

The ZooKeeper collector compares broker registrations (id -> the znode's creation zxid,
so a restart between two looks still shows as leave + join); the snapshot collector
compares `ClusterView`s built from DescribeLogDirs and Metadata (KRaft has no ZooKeeper
to tell it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from core import clock
from schemas.records import LogDirEvent
from streams.collect.logdir_watch import NOTIFICATION_PATH, LogDirNotification

REGISTERED = "broker_registered"
DEREGISTERED = "broker_deregistered"
DIR_FAILURE = "log_dir_failure"
STORAGE_ERROR = "KAFKA_STORAGE_ERROR"


@dataclass(frozen=True)
class Change:
    """One event-worthy difference: a kind, the broker, the dir for a dir failure."""

    kind: str
    broker: int
    log_dir: str | None = None


def registration_changes(before: Mapping[int, int], after: Mapping[int, int]) -> list[Change]:
    """Broker joins and leaves between two ``{broker: czxid}`` listings of /brokers/ids.

    A broker whose znode was re-created (another czxid) restarted between the looks: it
    left and joined, and both are reported, in that order.
    """
    changes = []
    for broker in sorted(set(before) | set(after)):
        old, new = before.get(broker), after.get(broker)
        if old == new:
            continue
        if old is not None:
            changes.append(Change(DEREGISTERED, broker))
        if new is not None:
            changes.append(Change(REGISTERED, broker))
    return changes


@dataclass(frozen=True)
class ClusterView:
    """Which brokers are registered and which of their dirs are offline, at one look."""

    alive: frozenset[int]
    offline: frozenset[tuple[int, str]]  # (broker, dir)

    @staticmethod
    def observe(previous: ClusterView | None, alive: Iterable[int],
                answered: Mapping[int, Iterable[str]]) -> ClusterView:
        """The view after a look: ``answered`` maps each broker whose DescribeLogDirs
        answered to its offline dirs. A broker that did not answer keeps what the previous
        view said about its dirs: silence is not recovery."""
        offline = {(b, d) for b, dirs in answered.items() for d in dirs}
        if previous is not None:
            offline |= {(b, d) for b, d in previous.offline if b not in answered}
        return ClusterView(frozenset(alive), frozenset(offline))

    def differs(self, other: ClusterView) -> set[int]:
        """The brokers whose membership or offline dirs differ between the two looks."""
        return ({b for b, _ in self.offline ^ other.offline}
                | set(self.alive ^ other.alive))


def view_changes(before: ClusterView | None, after: ClusterView) -> list[Change]:
    """Dirs that went offline and brokers that joined or left since ``before``.

    On the first look (``before`` None) every offline dir is reported, since a failure
    that predates the collector still needs healing; membership is only a baseline then.
    A dir that comes back (a replaced disk) is no event: the next snapshot shows it.
    """
    changes = []
    if before is not None:
        for broker in sorted(before.alive - after.alive):
            changes.append(Change(DEREGISTERED, broker))
        for broker in sorted(after.alive - before.alive):
            changes.append(Change(REGISTERED, broker))
    seen = before.offline if before is not None else frozenset()
    for broker, path in sorted(after.offline - seen):
        changes.append(Change(DIR_FAILURE, broker, path))
    return changes


def change_event(cluster_id: str, change: Change, source: str,
                 event_time: str | None = None) -> LogDirEvent:
    """The record for one change seen by ``source`` ("zookeeper", "describe_log_dirs",
    "metadata")."""
    details = STORAGE_ERROR if source == "describe_log_dirs" else None
    znode = f"/brokers/ids/{change.broker}" if source == "zookeeper" else None
    return LogDirEvent(
        cluster_id=cluster_id, event_time=event_time or clock.text(), source=source,
        kind=change.kind, broker=change.broker, log_dir=change.log_dir, znode=znode,
        details=details,
    )


def notification_event(cluster_id: str, notification: LogDirNotification,
                       path: str = NOTIFICATION_PATH,
                       event_time: str | None = None) -> LogDirEvent:
    """The record for one /log_dir_event_notification child (or an unseen one)."""
    znode: str | None
    details: str | None
    if notification.name is None:
        znode = None
        details = ("a notification was created and deleted while the watcher was away "
                   f"(an unexplained cversion advance of {path}); reconcile with "
                   "DescribeLogDirs")
    else:
        znode = f"{path}/{notification.name}"
        details = (None if notification.broker is not None else
                   "no broker id: the controller deleted the znode before it could be read")
    return LogDirEvent(
        cluster_id=cluster_id, event_time=event_time or clock.text(), source="zookeeper",
        kind=DIR_FAILURE, broker=notification.broker, znode=znode, details=details,
    )
