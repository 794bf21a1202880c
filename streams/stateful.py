"""The job's stateful step: the detector, one cluster at a time, on the driver.

`step_cluster` takes one cluster's signal rows of a micro-batch and that cluster's
`ClusterState` (JSON, kept between batches by streams/batch_state.py), steps the pure
`streams.detect.Detector` and returns decisions, notes and the snapshot to keep; dead
letters (key "") pass straight through, so the batch sink sees everything in one list.
Late records are never dropped here (the detector orders evidence by event time
itself); the event-time watermark expires failure signals that no dir explains.
"""

from __future__ import annotations

import dataclasses
import json
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

# kind values of the outcomes
DECISION = "decision"  # body: Decision JSON
NOTE = "note"  # body: text for the operator
DEAD_LETTER = "dead_letter"  # body: DeadLetter JSON
KEEP = "keep"  # body: the SnapshotRef JSON of the cluster's newer full snapshot


def event_ms(value: Any) -> int:
    """A signal row's event time in epoch ms: as collected (ms already), or a timestamp."""
    if type(value) is int:
        return value
    import pandas as pd

    return int(pd.Timestamp(value).value // 1_000_000)  # ns -> ms


def signal_of(row: Any) -> Signal:
    """One signal row (streams.signals) as the detector's type."""
    import pandas as pd

    ms = event_ms(row.event_ts)
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


Outcome = tuple[str, str, str]  # (cluster id, "" for none; kind; body)


def step_cluster(settings: DetectSettings, cluster: str, rows: list[Any], state: str | None,
                 watermark_ms: int) -> tuple[list[Outcome], str | None]:
    """One cluster's signal rows of a micro-batch through the detector, from its state
    before the batch (`ClusterState` JSON, None: none yet): the outcomes and the state
    after it. Dead letters (key "") pass straight through. Pure: the same rows and
    state give the same outcomes, so a batch run again decides again the same."""
    out: list[Outcome] = [(cluster, DEAD_LETTER, r.body) for r in rows
                          if r.kind == REJECT]
    signals = [signal_of(r) for r in rows if r.kind != REJECT]
    if not (cluster and signals):
        return out, state
    current = ClusterState.from_json(state) if state is not None else ClusterState()
    before = current.snapshot
    decisions, notes = Detector(settings).step(cluster, current, signals, watermark_ms)
    if current.snapshot is not None and current.snapshot != before:
        # the driver reads it ahead, for the next failure's plan (streams/keeper.py)
        out.append((cluster, KEEP, json.dumps(dataclasses.asdict(current.snapshot))))
    out += [(cluster, DECISION, d.to_json()) for d in decisions]
    out += [(cluster, DEAD_LETTER, dead_letter(n)) if n.letter is not None
            else (cluster, NOTE, n.text) for n in notes]
    return out, current.to_json()
