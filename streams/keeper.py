"""The latest full snapshot of each cluster, decoded and kept on the driver.

Kept as `selfheal plan` reads it: the compiled core's columns
(schemas/snapshot_columns.py, ~20 bytes a replica; no record made until a plan names a
partition), or the records where the core is absent or turned off (`SELFHEAL_NATIVE=0`).

When a batch brings a cluster a newer full snapshot, the sink hands the keeper its value
(the batch had it: no second read from the bus) to decode on a thread of its own, off
the batches' path (without the value, the thread reads it back); a failure's fix is then
planned from that document in memory plus the failure's small delta
(streams/propose.py), without reading or decoding a whole cluster in the batch. A
document asked for before its read finished waits for it; one never kept (a restart, a
failed read) is read where it is asked for, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from schemas.snapshot import parse_snapshot
from schemas.snapshot_types import Snapshot
from streams.detect_types import SnapshotRef

# (where, cluster id) -> the record's value; LookupError when it cannot be read back.
ReadSnapshot = Callable[[SnapshotRef, str], bytes]

# Clusters whose snapshot is kept, the most recently used: a job reading a bus shared by
# many clusters must not hold them all (a fleet's, 300,000 replicas: ~136 MiB as dicts,
# ~10 MiB as columns); a cluster not kept is read in place, as before.
MAX_KEPT = 2


def decode(raw: bytes) -> Snapshot:
    """A snapshot record's value as the planners read it (SnapshotError if it is not one)."""
    return parse_snapshot(raw, columns=True)


class SnapshotKeeper:
    """``get(ref, cluster)``: the snapshot at ``ref``, decoded; ``keep`` reads one ahead."""

    def __init__(self, read: ReadSnapshot, background: ReadSnapshot | None = None,
                 most: int = MAX_KEPT, decoder: Callable[[bytes], Any] = decode) -> None:
        self.read = read
        self.decode = decoder
        self.most = most
        self.background = background
        self._docs: dict[str, tuple[SnapshotRef, Any]] = {}
        self._loading: dict[str, tuple[SnapshotRef, Future[Any]]] = {}
        self._lock = threading.Lock()
        self._pool = (ThreadPoolExecutor(1, thread_name_prefix="selfheal-snapshot-keeper")
                      if background is not None else None)

    def keep(self, ref: SnapshotRef, cluster_id: str, raw: bytes | None = None) -> None:
        """A newer full snapshot of ``cluster_id`` is at ``ref``: read it ahead, or
        decode ``raw``, its value, when the batch already had it (no second read of a
        fleet's 27 MB from the bus)."""
        if self._pool is None:
            return
        with self._lock:
            for held in (self._docs.get(cluster_id), self._loading.get(cluster_id)):
                if held is not None and held[0].taken_at >= ref.taken_at:
                    return  # this one, or a newer one, is kept or on its way
            self._loading[cluster_id] = (ref, self._pool.submit(self._load, ref, cluster_id,
                                                                raw))

    def _load(self, ref: SnapshotRef, cluster_id: str, raw: bytes | None = None) -> Any:
        assert self.background is not None
        doc = self.decode(raw if raw is not None else self.background(ref, cluster_id))
        with self._lock:
            held = self._docs.get(cluster_id)
            if held is None or held[0].taken_at <= ref.taken_at:
                self._hold(cluster_id, ref, doc)
            if self._loading.get(cluster_id, (None,))[0] == ref:
                del self._loading[cluster_id]  # kept now (or let go): not held twice
        return doc

    def _hold(self, cluster_id: str, ref: SnapshotRef, doc: Any) -> None:
        """Keep ``doc`` as the cluster's, the most recent; the least recent beyond
        `most` go (under the lock)."""
        self._docs.pop(cluster_id, None)
        self._docs[cluster_id] = (ref, doc)
        while len(self._docs) > self.most:
            del self._docs[next(iter(self._docs))]

    def get(self, ref: SnapshotRef, cluster_id: str) -> Any:
        with self._lock:
            held = self._docs.get(cluster_id)
            loading = self._loading.get(cluster_id)
            if held is not None and held[0] == ref:
                self._hold(cluster_id, ref, held[1])
                return held[1]
        if loading is not None and loading[0] == ref:
            try:
                return loading[1].result()
            except Exception:  # noqa: BLE001 - read here instead, which says what failed
                pass
        doc = self.decode(self.read(ref, cluster_id))
        with self._lock:
            self._hold(cluster_id, ref, doc)
        return doc

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
