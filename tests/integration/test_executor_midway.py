"""A move's target that dies mid-way, on the real sandbox: a throttled disk move whose
target dir fails ends `failed` naming the dir, never `succeeded`, and the replicas it was
moving stay online in the dir they started in."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from core.plan import plan_disks
from sandbox import cluster, traffic
from sandbox.fill import fill_disk
from sandbox.state import SandboxState
from sandbox.traffic import delete_topic
from tests.integration.serve_harness import audit_text, bench
from tests.integration.test_executor_moves import dir_throttles
from tests.integration.test_executor_revert import POLICY, where
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def test_a_disk_move_whose_target_dir_fails_ends_failed_and_its_replicas_stay_online(
        sandbox: SandboxState, tmp_path: Path, record_property) -> None:
    state, broker = sandbox, 1
    topic = fill_disk(state, broker, "0", 16 * 1024 * 1024, partitions=4)
    target = state.broker(broker).log_dirs[1]
    failed_at = None
    try:
        before, _ = where(state, topic, broker)
        with bench(state, tmp_path, POLICY) as b:
            serve = b.serve()
            plan = plan_disks(b.model())
            mine = [m for m in plan.moves if m.broker == broker and m.topic == topic]
            assert mine and {m.target for m in mine} == {target}, plan.moves
            partitions = [{"topic": m.topic, "partition": m.partition, "replicas": [broker],
                           "log_dirs": [m.target]} for m in mine]
            aid = b.propose(b.action("move_replica_dirs", {"version": 1, "partitions":
                                     partitions}, f"broker {broker} is skewed",
                                     bytes_moved=sum(m.size_bytes for m in mine)))
            serve.wait_state(aid, {"executing"})
            wait_until(lambda: where(state, topic, broker)[1], "a log-dir move in flight", 30,
                       explain=lambda: audit_text(serve.action(aid)))

            cluster.fail_disk(state, broker, target)
            failed_at = time.monotonic()
            done = serve.wait_state(aid, {"failed"}, timeout=90)
            ended_after = time.monotonic() - failed_at
            print(f"\n[midway] target dir failed -> action failed: {ended_after:.1f} s")
            record_property("figures", {"what": "target died", "dir_fail_to_end_s":
                                        ended_after})

            # Two honest ends, by when the executor next acts: its per-tick check sees the
            # dir gone, or a move it submits next into that dir is refused by Kafka
            # (KafkaStorageError once the broker has marked the dir offline; UnknownError
            # while the dir is failing under the call: both seen in full runs). Never a
            # success.
            died = done["error"].startswith(f"a target died mid-way: log dir {target} on "
                                            f"broker {broker}")
            refused = (done["error"].startswith("Kafka refused the move")
                       and ("KafkaStorageError" in done["error"]
                            or "UnknownError" in done["error"]))
            assert died or refused, audit_text(done)
            assert not died or "replica moves into it lost" in done["error"]
            assert not any(a["to"] in ("verifying", "succeeded") for a in done["audit"])
            assert dir_throttles(state) == {}
            # The replicas it was moving never left their dir, and serve every read.
            after, moving = where(state, topic, broker)
            assert not moving and after == before
            assert all(not p["offline_replicas"] and p["leader_id"] == broker
                       for p in traffic.partitions(state, topic))
    finally:
        if cluster.disk_failed(target):
            cluster.heal_disk(state.reload(), broker, target)
        delete_topic(state, topic)
