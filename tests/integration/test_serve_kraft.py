"""`selfheal serve` on a KRaft cluster: no ZooKeeper, so the executor lock is a lease through
a consumer group on the bus; a standby takes over, and the executor works the same."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from sandbox import traffic
from sandbox.state import SandboxState
from tests.integration.serve_harness import bench, leader_tilted_topic, reorder_plan

pytestmark = pytest.mark.integration


def test_the_group_lease_fails_over_and_the_new_leader_executes(kraft_sandbox: SandboxState,
                                                               tmp_path: Path) -> None:
    state = kraft_sandbox
    with bench(state, tmp_path, '[actions]\nrebalance_leaders = "auto"\n') as b:
        assert b.config.cluster.zookeeper_connect is None
        first = b.serve()
        second = b.serve(leader=False)
        second.wait_line(rf"standby: waiting for the executor lock \(held by .*pid {first.pid}")
        second.wait_role("standby", timeout=1)

        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
        second.wait_role("leader", timeout=90)  # after the group's session timeout
        # Now that the serves' topics and groups exist, with leaders of their own:
        topic = leader_tilted_topic(state, "kraft-leaders", [0, 1, 2], new_leader=1)

        aid = b.propose(b.action("rebalance_leaders", reorder_plan(topic, [1, 2, 0]),
                                 "broker 1 should lead"))
        second.wait_state(aid, {"succeeded"}, timeout=120)
        (p, *_) = traffic.partitions_settled(
            state, topic, lambda p: p["partition_index"] != 0
            or (p["leader_id"], p["replica_nodes"]) == (1, [1, 2, 0]))
        assert (p["leader_id"], p["replica_nodes"]) == (1, [1, 2, 0]), p
