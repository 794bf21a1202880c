"""The detector's state between micro-batches, kept by the driver in the query's checkpoint.

One small JSON file per batch, ``<checkpoint>/detector/<batch id>.json``: every cluster's
`ClusterState` and the event-time watermark the next batch runs at. A batch starts from
the newest file below its own id, so a batch that Spark runs again (its sink failed, or
the job stopped before Spark committed it) starts from the same state and decides the
same, as it did on Spark's state store. The file is written once the batch's records
are delivered, before Spark writes the batch's commit: offsets and state stay together.

Why not Spark's state store: an idle batch paid a shuffle, a second stage, a second
Python task and the store's load and commit for one small JSON per cluster
(docs/streaming.md has the figures).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streams.detect_types import DetectSettings
from streams.stateful import Outcome, event_ms, step_cluster

STATE_DIR = "detector"


@dataclass(frozen=True)
class Saved:
    """The state after one batch: every cluster's `ClusterState` JSON, and the
    watermark (epoch ms) the next batch runs at, as Spark's would: the latest event time
    seen so far less the delay, never moving back."""

    watermark_ms: int = 0
    clusters: dict[str, str] = field(default_factory=dict)


class BatchState:
    """Steps the detector per batch from the state the batch before it left."""

    def __init__(self, checkpoint: Path, settings: DetectSettings,
                 watermark_delay_ms: int) -> None:
        self.root = Path(checkpoint) / STATE_DIR
        self.settings = settings
        self.delay_ms = watermark_delay_ms
        self._last: tuple[int, Saved] | None = None  # (batch id, its state)

    def step(self, batch_id: int, rows: Iterable[Any], part: Saved | None = None
             ) -> tuple[list[Outcome], Saved]:
        """The batch's signal rows (``SIGNAL_DDL``) through the detector, cluster by
        cluster: the outcomes, and the state to `commit` once they are delivered.
        ``part``: what the batch's first part left (streams/fast_first.py); this part
        goes on from its clusters, at the batch's watermark, as if the two were one."""
        before = self._before(batch_id)
        start = before if part is None else part
        by_cluster: dict[str, list[Any]] = {}
        newest = None
        for row in rows:
            by_cluster.setdefault(row.key or "", []).append(row)
            ms = event_ms(row.event_ts)
            newest = ms if newest is None or ms > newest else newest
        clusters = dict(start.clusters)
        outcomes: list[Outcome] = []
        for cluster, group in by_cluster.items():
            out, state = step_cluster(self.settings, cluster, group, clusters.get(cluster),
                                      before.watermark_ms)
            outcomes += out
            if state is not None and cluster:
                clusters[cluster] = state
        watermark = start.watermark_ms
        if newest is not None:
            watermark = max(watermark, newest - self.delay_ms)
        return outcomes, Saved(watermark, clusters)

    def commit(self, batch_id: int, after: Saved) -> None:
        """Keep ``after`` as the state batch ``batch_id`` left (atomically); drop what no
        batch can start from any more (Spark runs again at most the batch it did not
        commit)."""
        write_durably(self.root / f"{batch_id}.json",
                      {"watermark_ms": after.watermark_ms, "clusters": after.clusters})
        self._last = (batch_id, after)
        for old in self._ids():
            if old < batch_id - 1:
                (self.root / f"{old}.json").unlink(missing_ok=True)

    def _before(self, batch_id: int) -> Saved:
        if self._last is not None and self._last[0] == batch_id - 1:
            return self._last[1]
        earlier = [i for i in self._ids() if i < batch_id]
        if not earlier:
            return Saved()
        doc = json.loads((self.root / f"{max(earlier)}.json").read_text(encoding="utf-8"))
        return Saved(int(doc["watermark_ms"]), dict(doc["clusters"]))

    def _ids(self) -> list[int]:
        if not self.root.is_dir():
            return []
        return [int(p.stem) for p in self.root.glob("*.json") if p.stem.isdigit()]


def write_durably(path: Path, doc: Any) -> None:
    """``doc`` as JSON at ``path``, whole or not at all, on the disk before this returns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + ".tmp")
    with open(temp, "w", encoding="utf-8") as out:
        json.dump(doc, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temp, path)
