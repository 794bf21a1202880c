"""The job's stateful step: one group per cluster, the detector's state in the state store.

`applyInPandasWithState` calls `detect_group` with one cluster's signals of a micro-batch
and that cluster's `ClusterState` (a JSON string in the state store). It steps the pure
`streams.detect.Detector` and emits decisions and notes; dead letters (key "") pass
straight through, so the batch sink sees everything in one frame. No timeout: late
records are never dropped by Spark here (the detector orders evidence by event time
itself); the event-time watermark expires failure signals that no dir explains.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import Any

from schemas.snapshot_delta import check_delta
from streams.detect import Detector
from streams.detect_types import (
    LOGDIR_EVENT,
    BrokerBack,
    BrokerGone,
    ClusterState,
    DeltaSeen,
    DetectSettings,
    DirOnline,
    Failure,
    Note,
    Signal,
    SnapshotFacts,
    SnapshotRef,
    SnapshotSeen,
)
from streams.signals import BACK, DELTA, FAILURE, GONE, ONLINE, REJECT, SNAPSHOT

OUTCOME_DDL = "cluster_id STRING, kind STRING, body STRING"
STATE_DDL = "state STRING"

# kind values of the outcome rows
DECISION = "decision"  # body: Decision JSON
NOTE = "note"  # body: text for the operator
DEAD_LETTER = "dead_letter"  # body: DeadLetter JSON
KEEP = "keep"  # body: the SnapshotRef JSON of the cluster's newer full snapshot


def signal_of(row: Any) -> Signal:
    """One signal row (streams.signals) as the detector's type."""
    import pandas as pd

    ms = int(pd.Timestamp(row.event_ts).value // 1_000_000)  # ns -> ms
    broker = None if pd.isna(row.broker) else int(row.broker)
    if row.kind == FAILURE:
        return Failure(ms, row.source or LOGDIR_EVENT, broker, row.log_dir or None)
    if row.kind == ONLINE:
        return DirOnline(ms, int(broker or 0), row.log_dir)
    if row.kind == GONE:
        return BrokerGone(ms, int(broker or 0))
    if row.kind == BACK:
        return BrokerBack(ms, int(broker or 0))
    if row.kind == SNAPSHOT:
        ref = SnapshotRef(row.topic, int(row.partition), int(row.offset), ms)
        return SnapshotSeen(ms, ref, SnapshotFacts.from_json(row.body))
    if row.kind == DELTA:
        ref = SnapshotRef(row.topic, int(row.partition), int(row.offset), ms)
        return DeltaSeen(ms, ref, check_delta(row.body.encode("utf-8")).dirs(), row.body)
    raise ValueError(f"unknown signal kind {row.kind!r}")


def dead_letter(note: Note) -> str:
    """The dead letter of a record the detector refused (a `Note` with its letter)."""
    from core import clock
    from schemas.records import DeadLetter

    assert note.letter is not None
    ref, body = note.letter
    letter = DeadLetter.reject(body.encode("utf-8"), note.text, ref.topic, ref.partition,
                               ref.offset, cluster_id=note.cluster_id, event_time=clock.text())
    return letter.to_json().decode("utf-8")


def detect_group(settings: DetectSettings) -> Callable[..., Iterator[Any]]:
    """The function `applyInPandasWithState` runs per (cluster key, micro-batch)."""

    def run(key: tuple[str], frames: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd

        cluster = key[0]
        rows = [r for frame in frames for r in frame.itertuples(index=False)]
        out: dict[str, list[str | None]] = {"cluster_id": [], "kind": [], "body": []}

        def emit(kind: str, body: str) -> None:
            out["cluster_id"].append(cluster or None)
            out["kind"].append(kind)
            out["body"].append(body)

        for r in rows:
            if r.kind == REJECT:
                emit(DEAD_LETTER, r.body)
        signals = [signal_of(r) for r in rows if r.kind != REJECT]
        if cluster and signals:
            current = ClusterState.from_json(state.get[0]) if state.exists else ClusterState()
            before = current.snapshot
            decisions, notes = Detector(settings).step(
                cluster, current, signals, state.getCurrentWatermarkMs())
            state.update((current.to_json(),))
            if current.snapshot is not None and current.snapshot != before:
                # the driver reads it ahead, for the next failure's plan (streams/keeper.py)
                emit(KEEP, json.dumps(dataclasses.asdict(current.snapshot)))
            for d in decisions:
                emit(DECISION, d.to_json())
            for n in notes:
                if n.letter is not None:
                    emit(DEAD_LETTER, dead_letter(n))
                else:
                    emit(NOTE, n.text)
        if out["kind"]:  # no empty frames through Arrow (see streams.signals.to_signals)
            yield pd.DataFrame(out, columns=["cluster_id", "kind", "body"])

    return run
