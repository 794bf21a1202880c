"""Watch ZooKeeper's /brokers/ids for brokers joining and leaving.

Each live broker holds an ephemeral znode ``/brokers/ids/<id>``. Comparing only the
child names would miss a broker that restarted between two looks (a lost connection, a
slow callback): it left and came back under the same name. The znode's creation zxid
(``czxid``) differs after a restart, so the watcher keeps ``{id: czxid}`` and reports a
leave and a join for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streams.collect.events import Change, registration_changes
from streams.collect.zk_watch import OnError, RelistingWatcher

BROKERS_PATH = "/brokers/ids"


class BrokerRegistrationWatcher(RelistingWatcher):
    """Calls ``on_change`` with each `Change` (broker_registered / broker_deregistered)."""

    def __init__(self, zk: Any, on_change: Callable[[Change], None],
                 path: str = BROKERS_PATH, on_error: OnError | None = None) -> None:
        super().__init__(zk, path, on_error)
        self._emit = on_change
        self._known: dict[int, int] = {}

    def registered(self) -> dict[int, int]:
        """The brokers as of the last look: ``{id: czxid}``."""
        with self._lock:
            return dict(self._known)

    def _relist(self, initial: bool) -> None:
        children = self._zk.get_children(self._path, watch=self._on_watch)
        current: dict[int, int] = {}
        for name in children:
            if not name.isdigit():
                continue  # not a broker registration; nothing Kafka writes
            stat = self._zk.exists(f"{self._path}/{name}")
            if stat is not None:  # None: it left between the listing and now
                current[int(name)] = stat.czxid
        changes = [] if initial else registration_changes(self._known, current)
        self._known = current
        for change in changes:
            self._emit(change)
