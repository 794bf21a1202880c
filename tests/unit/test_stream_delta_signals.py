"""A failure's delta through the job's steps: on the snapshot topic it becomes a delta
signal (a bad one a dead letter), and the stateful step plans the fix from it at once or
dead-letters it with the reason."""

from __future__ import annotations

import json
from typing import Any

from schemas.registry import validate
from schemas.snapshot_delta import make_delta
from streams.detect_types import FIX_OFFLINE, Decision
from streams.signals import DELTA, REJECT
from streams.stateful import DEAD_LETTER, DECISION
from tests.unit.test_stream_signals import Batches, signals
from tests.unit.test_stream_validate import EVENT
from tests.unit.test_stream_validate import SNAPSHOT as BASE

FAILED = {**BASE, "taken_at": "2026-11-22T03:51:00Z",
          "brokers": [{"id": 0, "rack": "r1", "alive": True,
                       "log_dirs": [{"path": "/d1", "online": False},
                                    {"path": "/d2", "online": True}]}]}
# the ZooKeeper notification of that failure, between the snapshot and the delta
NOTIFIED = {**EVENT, "event_time": "2026-11-22T03:50:59Z"}


def delta(doc: dict[str, Any] = FAILED, brokers: tuple[int, ...] = (0,)) -> bytes:
    return json.dumps(make_delta(doc, brokers, BASE["taken_at"], "log_dir_failure")).encode()


def test_a_delta_is_a_signal_with_its_coordinates_and_its_record():
    (row,) = signals(("s", delta())).itertuples()
    assert (row.kind, row.key, row.offset) == (DELTA, "c1", 0)
    assert json.loads(row.body)["brokers"][0]["id"] == 0


def test_a_bad_delta_is_a_dead_letter_saying_why():
    bad = json.loads(delta())
    bad["brokers"] = []
    (row,) = signals(("s", json.dumps(bad).encode())).itertuples()
    letter = json.loads(row.body)
    assert row.kind == REJECT and "1 to 64" in letter["reason"]
    validate("dead-letter", letter)


def decisions(out: Any) -> list[Decision]:
    return [Decision.from_json(b) for k, b in zip(out["kind"], out["body"], strict=True)
            if k == DECISION]


def test_the_fix_is_planned_at_the_delta_from_the_snapshot_before_it(tmp_path):
    step = Batches(tmp_path)
    step(signals(("s", BASE)))
    out = step(signals(("e", NOTIFIED), ("s", delta())))
    fix = next(d for d in decisions(out) if d.type == FIX_OFFLINE)
    assert (fix.broker, fix.log_dir) == (0, "/d1")
    assert fix.snapshot.offset == 0 and fix.delta is not None  # the base, and the delta


def test_a_delta_naming_a_broker_the_snapshot_lacks_is_a_dead_letter(tmp_path):
    step = Batches(tmp_path)
    step(signals(("s", BASE)))
    stranger = {**FAILED, "brokers": [{**FAILED["brokers"][0], "id": 9}],
                "partitions": [{**BASE["partitions"][0], "leader": 9, "isr": [9],
                                "replicas": [{"broker": 9, "log_dir": "/d1", "size_bytes": 5}]}]}
    out = step(signals(("s", delta(stranger, (9,)))))
    (body,) = [b for k, b in zip(out["kind"], out["body"], strict=True) if k == DEAD_LETTER]
    letter = json.loads(body)
    validate("dead-letter", letter)
    assert "broker(s) 9" in letter["reason"] and letter["cluster_id"] == "c1"
    assert decisions(out) == []
