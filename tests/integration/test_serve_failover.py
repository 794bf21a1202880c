"""`selfheal serve` dies: mid-execution it resumes without a second reassignment, and a
standby waiting on the executor lock takes over."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from core.live import open_admin
from core.plan import plan_offline
from sandbox import cluster, traffic
from sandbox.state import SandboxState
from schemas.records import Trigger
from tests.integration.serve_harness import bench
from tests.integration.test_serve_offline_fix import prefill, throttles_set
from tests.polling import wait_until

pytestmark = pytest.mark.integration

SLOW = 128 * 1024  # bytes/s: a 3 MiB copy takes ~25 s, long enough to kill serve in it
POLICY = f"""
[actions]
fix_offline_replicas = "auto"
[limits]
inter_broker_throttle_bytes_per_s = {SLOW}
"""


def in_flight(state: SandboxState, topic: str) -> set[int]:
    with open_admin(state.bootstrap_servers) as admin:
        return {tp.partition for tp in admin.list_partition_reassignments()
                if tp.topic == topic}


def test_a_killed_serve_resumes_the_reassignment_in_flight(sandbox: SandboxState,
                                                           tmp_path: Path) -> None:
    state = sandbox
    topic = f"serve-resume-{int(time.time())}"
    traffic.create_topic(state, topic, partitions=1, replication_factor=2)
    prefill(state, topic, 1, 3 * 1024 * 1024)
    victim = next(b for b in traffic.partitions(state, topic)[0]["replica_nodes"]
                  if b != traffic.leader_of(state, topic, 0))  # a follower: no leader move
    failed = traffic.log_dir_of(state, topic, 0, victim)
    with bench(state, tmp_path, POLICY) as b:
        try:
            first = b.serve()
            cluster.fail_disk(state, victim, failed)
            traffic.produce(state, topic, 50)  # a write makes the follower notice at once

            def planned():
                plan = plan_offline(b.model())
                return plan if any(t.topic == topic for t in plan.reassignment.partitions) \
                    else None

            plan = wait_until(planned, "the failed dir in a live snapshot", 60)
            aid = b.propose(b.action("fix_offline_replicas", plan, "resume test",
                                     trigger=Trigger("logdir_event", victim, failed)))
            first.wait_state(aid, {"executing"})
            wait_until(lambda: 0 in in_flight(state, topic), "the reassignment in flight", 30)
            before = first.action(aid)["journal"]
            assert first.stop(signal.SIGKILL) == -signal.SIGKILL

            # Kafka goes on copying; a new serve picks the action up where it was.
            assert 0 in in_flight(state, topic)
            second = b.serve()
            done = second.wait_state(aid, {"succeeded"}, timeout=300)
            notes = [a["reason"] for a in done["audit"]]
            assert sum(n.startswith("reassignment submitted") for n in notes) == 1, notes
            assert any(n.startswith("picked up executing after a restart") for n in notes)
            assert done["journal"]["submitted_at"] == before["submitted_at"]
            assert done["attempts"] == 1
            assert sum(n.startswith("throttle set") for n in notes) == 1
            assert any(n.startswith("throttle removed") for n in notes)
            assert throttles_set(state, topic) == {}
            (p,) = traffic.partitions(state, topic)
            assert victim not in p["replica_nodes"] and not p["offline_replicas"]
            assert sorted(p["isr_nodes"]) == sorted(p["replica_nodes"])
        finally:
            if cluster.disk_failed(failed):
                cluster.heal_disk(state.reload(), victim, failed)


def test_a_standby_takes_over_when_the_active_serve_is_killed(sandbox: SandboxState,
                                                             tmp_path: Path) -> None:
    with bench(sandbox, tmp_path) as b:
        first = b.serve()
        second = b.serve(leader=False)
        second.wait_line(rf"standby: waiting for the executor lock \(held by .*pid "
                         rf"{first.pid} {first.url}\)")
        status, text, _ = second.http("GET", "/healthz")
        assert status == 200 and '"role": "standby"' in text
        time.sleep(2)
        second.wait_role("standby", timeout=1)  # still waiting while the first lives

        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
        second.wait_role("leader", timeout=90)  # after the ZooKeeper session expires

        # The new leader takes in actions: a page waits for an operator, with its link.
        # (A page naming no dir: serve resolves one about a dir the live cluster shows
        # online within a pass, which is right, and would race this check.)
        page = b.action("page_operator", {"message": "no plan could be made",
                                          "brokers": [0], "log_dirs": []},
                        "failover test")
        aid = b.propose(page)
        second.wait_state(aid, {"awaiting_approval"})
        second.wait_line(rf"PAGE: action {aid[:12]} \(page_operator\) awaits approval")
