"""Reverting on the real sandbox: an operator's cancel, and the execution timeout, stop the
moves in flight, put the throttle back, and leave the replicas where they were."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.plan import plan_disks
from sandbox.fill import fill_disk
from sandbox.state import SandboxState
from sandbox.status import kafka_admin, placement
from sandbox.traffic import delete_topic
from tests.integration.serve_harness import Bench, audit_text, bench
from tests.integration.test_executor_moves import dir_throttles
from tests.polling import wait_until

pytestmark = pytest.mark.integration

CRAWL = 256 * 1024  # bytes/s: the moves take a minute, long enough to stop them
POLICY = f'[actions]\nmove_replica_dirs = "auto"\n[limits]\n' \
         f"intra_broker_throttle_bytes_per_s = {CRAWL}\n"


def where(state: SandboxState, topic: str, broker: int) -> tuple[dict[int, str], set[int]]:
    """Each partition's dir on `broker`, and the partitions with a move in flight there."""
    with kafka_admin(state) as admin:
        reply = admin.describe_log_dirs(topic_partitions=[topic], brokers=[broker])[0]
    dirs = {p: path for path, parts in placement(reply, topic).items() for p in parts}
    moving = {p["partition_index"] for d in reply["log_dirs"] for t in d["topics"]
              if t["name"] == topic for p in t["partitions"] if p["is_future_key"]}
    return dirs, moving


def start_slow_moves(state: SandboxState, b: Bench, broker: int, topic: str) -> tuple[str, Any]:
    serve = b.serve()
    plan = plan_disks(b.model())
    assert any(m.broker == broker and m.topic == topic for m in plan.moves)
    aid = b.propose(b.action("move_replica_dirs", plan, "even out the disks",
                             bytes_moved=sum(m.size_bytes for m in plan.moves)))
    serve.wait_state(aid, {"executing"})
    try:
        wait_until(lambda: where(state, topic, broker)[1], "a log-dir move in flight", 30)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{audit_text(serve.action(aid))}") from None
    return aid, serve


def test_cancel_stops_the_moves_in_flight_and_restores_the_throttle(
        sandbox: SandboxState, tmp_path: Path) -> None:
    state, broker = sandbox, 2
    topic = fill_disk(state, broker, "1", 16 * 1024 * 1024, partitions=4)
    try:
        before, _ = where(state, topic, broker)
        with bench(state, tmp_path, POLICY) as b:
            aid, serve = start_slow_moves(state, b, broker, topic)
            assert dir_throttles(state).get(broker) == str(CRAWL)
            status, body = serve.api("POST", f"/actions/{aid}/cancel",
                                     {"actor": "bob", "reason": "not now"})
            assert status == 200 and body["cancel_request"]["actor"] == "bob", body
            done = serve.wait_state(aid, {"cancelled"}, timeout=60)
            last = done["audit"][-1]
            assert last["actor"] == "bob" and "log dir moves stopped" in last["reason"]
            assert dir_throttles(state) == {}
            after, moving = wait_until(lambda: (w := where(state, topic, broker)) and not w[1]
                                       and w, "no move left in flight", 30)
            assert after == before  # every replica still in the dir it started in
    finally:
        delete_topic(state, topic)


def test_moves_not_done_by_the_timeout_are_reverted_and_fail(sandbox: SandboxState,
                                                             tmp_path: Path) -> None:
    state, broker = sandbox, 0
    topic = fill_disk(state, broker, "1", 16 * 1024 * 1024, partitions=4)
    try:
        before, _ = where(state, topic, broker)
        with bench(state, tmp_path, POLICY,
                   {"SELFHEAL_SERVE_EXECUTION_TIMEOUT_SECONDS": "4"}) as b:
            aid, serve = start_slow_moves(state, b, broker, topic)
            done = serve.wait_state(aid, {"failed"}, timeout=60)
            assert "execution timeout 4 s" in done["error"]
            assert "log dir moves stopped" in done["error"]
            assert dir_throttles(state) == {}
            after, _ = wait_until(lambda: (w := where(state, topic, broker)) and not w[1]
                                  and w, "no move left in flight", 30)
            assert after == before
    finally:
        delete_topic(state, topic)
