"""A batch that runs again after its actions reached the bus sends none of them twice
(streams/replay.py), on the real bus: the job's sink is made twice on one checkpoint, as a
job killed between the bus's acknowledgement and the batch's commit is started again."""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest

from core.bus import ensure_topics
from core.config import load
from streams.batch_state import Saved
from streams.detect_types import PAGE, Decision
from streams.metrics import BatchOutput, StreamMetrics
from streams.sink import BatchSink
from streams.stateful import DECISION
from tests.integration.collect_support import TopicReader
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def _page(broker: int) -> tuple[str, str, str]:
    decision = Decision(PAGE, "replay-c1", 1_764_000_000_000, "broker_left", broker, None,
                        None, reason=f"broker {broker} stopped")
    return ("replay-c1", DECISION, decision.to_json())


def _run(sink: BatchSink, batch_id: int, outcomes: list) -> dict[str, int]:
    """One run of a batch's delivery, as `BatchSink.__call__` makes it: the actions it
    produced (and the bus acknowledged), by type."""
    sink._begin(batch_id)
    output = BatchOutput(phases={"plan": 0.0, "send": 0.0})
    sink._deliver(batch_id, outcomes, output, {})
    return dict(output.actions)


def test_a_batch_run_again_after_a_kill_sends_each_action_once(sandbox, tmp_path):
    prefix = f"rpl{uuid.uuid4().hex[:6]}."
    config = load(path=None, env={
        "SELFHEAL_SANDBOX_DIR": sandbox.work_dir, "SELFHEAL_BUS_TOPIC_PREFIX": prefix,
        "SELFHEAL_CLUSTER_ACTION_SIGNING_KEY": uuid.uuid4().hex * 2})
    ensure_topics(config)
    reader = TopicReader(sandbox, config.topic("actions"))
    reader.start()
    said: list[str] = []
    sinks = []

    def sink() -> BatchSink:
        sinks.append(BatchSink(config, StreamMetrics(), said.append, tmp_path / "cp"))
        return sinks[-1]

    def on_bus() -> Counter:  # by id: a run again re-signs, with its own created_at
        return Counter(json.loads(m.value)["action_id"] for m in reader.messages)

    try:
        first = sink()
        assert _run(first, 5, [_page(1)]) == {"page_operator": 1}
        # the job then recorded broker 2's page and died before producing it
        page2 = first.proposer.actions(Decision.from_json(_page(2)[2]))
        first.sent.unsent(5, page2)
        # started again: batch 5 runs again, planning the same two pages and a third
        again = sink()
        assert _run(again, 5, [_page(1), _page(2), _page(3)]) == {"page_operator": 2}
        assert any("batch 5 runs again: 1 action(s)" in line for line in said), said
        wait_until(lambda: len(reader.messages) >= 3, "three pages on the bus", 30)
        assert sorted(on_bus().values()) == [1, 1, 1], on_bus()
        # the state committed, then Spark's own commit lost: the batch once more, and
        # the ledger alone says all of it went (no bus to ask)
        again.state.commit(5, Saved())
        last = sink()
        assert _run(last, 5, [_page(1), _page(2), _page(3)]) == {}
        last.state.commit(5, Saved())
        assert _run(last, 6, [_page(4)]) == {"page_operator": 1}
        last.state.commit(6, Saved())
        last.sent.forget_before(6)
        assert sorted(p.name for p in (tmp_path / "cp" / "detector").iterdir()) == [
            "5.json", "6.json", "6.sent"]
        wait_until(lambda: len(reader.messages) >= 4, "the next batch page", 30)
        assert sorted(on_bus().values()) == [1, 1, 1, 1], on_bus()
    finally:
        reader.stop()
        for made in sinks:
            made.close()
