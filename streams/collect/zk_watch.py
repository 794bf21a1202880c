"""The shape both ZooKeeper watchers share: re-list a path on every callback.

A ZooKeeper watch fires once and says only that something changed, so each callback
re-reads the whole path (setting the next watch) and diffs against what was known. The
re-read holds a lock: kazoo's callback thread and the collector's own resync after a
reconnect may re-read at the same time, and an older listing applied after a newer one
would report changes twice.

On a lost connection kazoo drops its watches and calls each callback with an event of
type NONE; those are ignored here, because the collector calls `resync()` once the
connection is back, and that re-reads and re-arms everything.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

OnError = Callable[[Exception], None]


def _ignore(_exc: Exception) -> None:
    pass


class RelistingWatcher:
    """Subclasses implement ``_relist(initial)``, which reads the path with
    ``watch=self._on_watch`` and reports what changed."""

    def __init__(self, zk: Any, path: str, on_error: OnError | None = None) -> None:
        self._zk = zk
        self._path = path
        self._on_error = on_error or _ignore
        self._lock = threading.RLock()
        self._stopped = False

    def start(self) -> None:
        """Take what is there now as known (reported by nobody), then watch."""
        self._zk.ensure_path(self._path)
        with self._lock:
            self._relist(initial=True)

    def stop(self) -> None:
        """Ignore watch callbacks until `resync()`."""
        self._stopped = True

    def resync(self) -> None:
        """Re-read after a reconnect: whatever changed while away is reported."""
        self._stopped = False
        with self._lock:
            self._relist(initial=False)

    def _on_watch(self, event: Any) -> None:
        if self._stopped or getattr(event, "type", None) == "NONE":
            return
        try:
            with self._lock:
                self._relist(initial=False)
        except Exception as exc:  # kazoo would only log it; the collector resyncs
            self._on_error(exc)

    def _relist(self, initial: bool) -> None:
        raise NotImplementedError
