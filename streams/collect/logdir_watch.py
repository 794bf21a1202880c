"""Watch ZooKeeper's /log_dir_event_notification without missing a notification.

A broker whose log dir fails creates a persistent sequential child there; the active
controller reads and deletes it within moments. A watcher that re-lists children after
the watch fires can therefore find the child already gone. Two facts close that gap:

* the sequential suffix of a child is the parent's ``cversion`` when it was created, and
* every child creation and deletion bumps the parent's ``cversion`` by one.

So each callback re-lists the children *with the parent's stat*: names not seen before are
reported with their data (or ``None`` if already deleted), and any advance of ``cversion``
that the seen creations and deletions do not explain is reported as notifications whose
names we never saw (a create+delete pair we slept through). The name alone is the signal;
which broker it was is resolved from the data when there was time to read it, else from
the next DescribeLogDirs snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from schemas import wire
from schemas.registry import RecordError
from streams.collect.zk_watch import OnError, RelistingWatcher

NOTIFICATION_PATH = "/log_dir_event_notification"
CHILD_PREFIX = "log_dir_event_"


@dataclass(frozen=True)
class LogDirNotification:
    """One log-dir failure notification a broker wrote to ZooKeeper."""

    name: str | None  # the znode name, None when it came and went unseen
    sequence: int | None
    broker: int | None  # from the znode's data, when it could still be read
    seen_by_name: bool

    @staticmethod
    def sequence_of(name: str) -> int | None:
        suffix = name.removeprefix(CHILD_PREFIX)
        return int(suffix) if suffix.isdigit() else None


# A notification's data is a few dozen bytes; ZooKeeper's own limit is 1 MB.
ZNODE_LIMIT = 64 << 10


def parse_notification_data(raw: bytes | None) -> int | None:
    """The broker id in ``{"version":1,"broker":<id>,"event":1}``; None if unreadable."""
    if not raw:
        return None
    try:
        data = wire.decode("zookeeper-notification", raw, ZNODE_LIMIT)
        return int(data["broker"])
    except (RecordError, ValueError, KeyError, TypeError):
        return None


class LogDirNotificationWatcher(RelistingWatcher):
    """Calls ``on_notification`` once per notification (from kazoo's callback thread, or
    the thread that calls `resync`)."""

    def __init__(self, zk: Any, on_notification: Callable[[LogDirNotification], None],
                 path: str = NOTIFICATION_PATH, on_error: OnError | None = None) -> None:
        super().__init__(zk, path, on_error)
        self._emit = on_notification
        self._known: set[str] = set()
        self._cversion: int | None = None

    def pending(self) -> list[LogDirNotification]:
        """The children there now, with their data: what a one-shot look reports."""
        children = self._zk.get_children(self._path)
        return [self._read(name) for name in sorted(children)]

    def _read(self, name: str) -> LogDirNotification:
        try:
            raw, _ = self._zk.get(f"{self._path}/{name}")
        except Exception:  # deleted between list and read: the name still counts
            raw = None
        return LogDirNotification(
            name, LogDirNotification.sequence_of(name), parse_notification_data(raw),
            seen_by_name=True,
        )

    def _relist(self, initial: bool) -> None:
        children, stat = self._zk.get_children(
            self._path, watch=self._on_watch, include_data=True
        )
        current = set(children)
        if initial:
            self._known, self._cversion = current, stat.cversion
            return
        new = sorted(current - self._known)
        gone = self._known - current
        found = [self._read(name) for name in new]
        previous = self._cversion if self._cversion is not None else stat.cversion
        unexplained = (stat.cversion - previous) - len(new) - len(gone)
        self._known, self._cversion = current, stat.cversion
        # each unseen notification cost one creation and one deletion
        for _ in range(max(0, unexplained) // 2):
            self._emit(LogDirNotification(None, None, None, seen_by_name=False))
        for notification in found:
            self._emit(notification)
