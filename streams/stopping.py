"""When the job stops its query: at the end of a batch body, never inside one.

Stopping a query cancels its running Spark jobs and interrupts its thread. A batch body
(the foreachBatch function, which runs the whole batch inside `frame.collect()`) that is
cancelled fails with a long Py4J error, and Spark's matching of that text overflowed the
JVM stack (a StackOverflowError trace on every such stop). Waiting for the trigger to be
idle did not help: batches that outlast the trigger run back to back. Stopping the query
the moment a body returns still raced the next body on a loaded machine.

So the stop is issued from the end of a body: while the query thread waits for the body
to return, no new batch can start; another thread calls `query.stop()` (which first marks
the query terminated), and the body returns once the query is no longer active. Spark
then commits the batch just processed, or, interrupted, leaves it for the checkpoint to
run again; either way the stop is Spark's ordinary one. When no body runs, the next one
(data comes every few seconds) does the same; if none starts within ``idle_wait``, the
topics are idle and the caller stops the query itself. A body that starts after that
claim does no work and fails with a short message, so its batch runs again on restart.
"""

from __future__ import annotations

import threading
import time
from typing import Any

IDLE_WAIT_SECONDS = 3.0  # for a body to start when none runs (the trigger is 1 s)
STOP_TIMEOUT_SECONDS = 60.0


class StopDeferred(RuntimeError):
    """The job is stopping: this batch was not processed and runs again on restart."""


class StopGate:
    """Shared by the batch body (`enter`/`leave`) and the thread that stops (`stop`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = False
        self.wanted = threading.Event()  # set once `stop` was called
        self._stopper: str | None = None  # "body" or "caller", once one has claimed it
        self.stopped = threading.Event()
        self.query: Any = None  # the query, set by the job once it runs

    def enter(self) -> None:
        """A body starts; raises StopDeferred once the caller has claimed the stop."""
        with self._lock:
            if self._stopper == "caller":
                raise StopDeferred("the job is stopping; this batch runs again on restart")
            self._running = True

    def leave(self) -> None:
        """A body ends (whether it succeeded or not); if a stop is wanted and nobody
        claimed it, stop the query from here."""
        with self._lock:
            self._running = False
            mine = self.wanted.is_set() and self._stopper is None
            if mine:
                self._stopper = "body"
        if mine:
            self._stop_from_body()

    def _stop_from_body(self) -> None:
        query = self.query

        def stop() -> None:
            try:
                query.stop()
            finally:
                self.stopped.set()

        threading.Thread(target=stop, name="selfheal-stop-query", daemon=True).start()
        # Return once the query is marked stopped, so that it starts no other batch.
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while time.monotonic() < deadline and not self.stopped.is_set():
            try:
                if not query.isActive:
                    return
            except Exception:  # the driver is going away: nothing more to wait for
                return
            time.sleep(0.02)

    def stop(self, query: Any, idle_wait: float = IDLE_WAIT_SECONDS,
             timeout: float = STOP_TIMEOUT_SECONDS) -> str:
        """Stop ``query`` at the end of a body, or now if no body comes within
        ``idle_wait``; returns who stopped it ("body" or "caller")."""
        self.query = query
        with self._lock:
            self.wanted.set()
        deadline = time.monotonic() + idle_wait
        while time.monotonic() < deadline:
            if self.stopped.wait(0.05):
                return "body"
            with self._lock:
                if self._running or self._stopper is not None:
                    break  # a body runs: it stops the query when it ends
        with self._lock:
            mine = not self._running and self._stopper is None
            if mine:
                self._stopper = "caller"
        if mine:
            query.stop()
            self.stopped.set()
            return "caller"
        if not self.stopped.wait(timeout):
            query.stop()  # a body that never ends: interrupt it after all
        return "body"
