"""The whole-loop heal on Kafka 4.4, KRaft only (heal_matrix.py); then the failed dir is
replaced, and the loop cordons it (KIP-1066) until it is trusted again: the job proposes
`cordon_log_dir`, a person approves it through serve, DescribeLogDirs v5 shows the dir
cordoned, and once it has been online for the trust time the job lifts our cordon."""

from __future__ import annotations

from typing import Any

import pytest

from core.live import open_admin
from remediation.executor.cluster import KafkaCluster
from sandbox import cluster, loop
from sandbox.state import SandboxState
from tests.e2e.heal_matrix import api, finished, fix_awaiting, heal_under_traffic
from tests.e2e.loop_support import wait

pytestmark = pytest.mark.e2e


def cordoned(state: SandboxState, broker: int) -> set[str]:
    """The broker's dirs DescribeLogDirs v5 says are cordoned."""
    with open_admin(state.bootstrap_servers) as admin:
        return KafkaCluster(admin).cordoned_dirs(broker)


def of_type(the_loop: loop.Loop, kind: str) -> list[dict[str, Any]]:
    return [a for a in api(the_loop, "GET", "/actions")["actions"] if a["type"] == kind]


def cordoned_until_trusted(state: SandboxState):
    def after(the_loop: loop.Loop, broker: int, path: str) -> None:
        assert of_type(the_loop, "cordon_log_dir") == []  # a failed dir is not cordoned
        cluster.heal_disk(state.reload(), broker, path)  # a new disk; the broker restarts
        state.reload()
        cordon = wait(lambda: fix_awaiting(the_loop, "cordon_log_dir"),
                      "a cordon of the dir back from its failure", the_loop, timeout=120)
        plan = api(the_loop, "GET", f"/actions/{cordon['id']}")["record"]["plan"]
        assert (plan["broker"], plan["log_dir"]) == (broker, path), plan
        api(the_loop, "POST", f"/actions/{cordon['id']}/approve", {})
        # Seen cordoned by the test's own DescribeLogDirs (v5 IsCordoned), before the
        # trust time lets the job lift it.
        wait(lambda: path in cordoned(state, broker), "the dir cordoned", the_loop,
             timeout=60)
        done = wait(lambda: finished(the_loop, cordon["id"]), "the cordon done", the_loop)
        assert done["state"] == "succeeded", done
        lift = wait(lambda: next((finished(the_loop, a["id"]) for a in of_type(
            the_loop, "uncordon_log_dir")), None), "our cordon lifted", the_loop, timeout=120)
        assert lift["state"] == "succeeded", lift
        assert lift["record"]["plan"] == plan
        assert path not in cordoned(state, broker)
        assert len(of_type(the_loop, "cordon_log_dir")) == 1
    return after


def test_a_failed_disk_under_traffic_is_healed_on_4_4(kraft_sandbox, tmp_path_factory,
                                                       record_property) -> None:
    heal_under_traffic(kraft_sandbox, tmp_path_factory.mktemp("heal-4.4"), record_property,
                       after=cordoned_until_trusted(kraft_sandbox))
