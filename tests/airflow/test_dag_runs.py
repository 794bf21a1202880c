"""Each DAG run with `dag.test()` against the real sandbox and a real `selfheal serve`
(the bench harness: its own topics, store, token and policy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.plan.disks import broker_usage, is_skewed
from sandbox.fill import fill_disk
from sandbox.processes import free_port
from sandbox.state import SandboxState
from sandbox.traffic import delete_topic
from tests.airflow.conftest import run_dag
from tests.integration.serve_harness import bench, placed_topic, wait_until

pytestmark = pytest.mark.integration

DIR_THROTTLE = 2 * 1024 * 1024  # bytes/s: the ~16 MiB that move take several seconds
THRESHOLD = 1.10


def test_disk_rebalance_evens_out_a_filled_dir_under_the_throttle(
        rack_sandbox: SandboxState, airflow_env: dict[str, str], tmp_path: Path) -> None:
    state = rack_sandbox
    broker = 1
    policy = ('[actions]\nmove_replica_dirs = "auto"\n[limits]\n'
              f"intra_broker_throttle_bytes_per_s = {DIR_THROTTLE}\n")
    topic = fill_disk(state, broker, "0", 24 * 1024 * 1024, partitions=6)
    try:
        with bench(state, tmp_path, policy) as b:
            serve = b.serve()
            assert is_skewed(broker_usage(b.model(), broker), THRESHOLD)

            run = run_dag("selfheal_disk_rebalance", b, airflow_env, serve.url,
                          conf={"threshold": THRESHOLD})

            assert run.state == "success", run.output[-4000:]
            summary = run.summary
            assert summary["outcome"] == "succeeded", summary
            assert summary["bytes_moved"] > 0 and summary["partitions"] > 0
            assert summary["skew_before"][str(broker)] > THRESHOLD
            assert summary["skew_after"][str(broker)] <= THRESHOLD
            audit = "\n".join(summary["audit"])
            assert "throttle set" in audit and str(DIR_THROTTLE) in audit, audit
            assert "throttle removed" in audit, audit
            assert not is_skewed(broker_usage(b.model(), broker), THRESHOLD)
            # what serve ran is what the DAG submitted, and it says so in the task log
            shown = serve.action(summary["action_id"])
            assert shown["state"] == "succeeded" and shown["type"] == "move_replica_dirs"
            assert shown["record"]["trigger"]["kind"] == "schedule"
            assert f"submitted move_replica_dirs {summary['action_id'][:12]}" in run.output
            assert "run summary:" in run.output
    finally:
        delete_topic(state, topic)


def leader_spread(model) -> tuple[int, float]:
    """(max - min leaders over alive brokers, max - min leaders per broker over racks)."""
    from collections import Counter

    per_broker = Counter({b: 0 for b in model.alive})
    for p in model.partitions:
        if p.leader in model.alive:
            per_broker[p.leader] += 1
    racks: dict[str, list[int]] = {}
    for b, n in per_broker.items():
        racks.setdefault(model.rack_of[b], []).append(n)
    density = [sum(v) / len(v) for v in racks.values()]
    return (max(per_broker.values()) - min(per_broker.values()),
            max(density) - min(density))


def test_leader_rebalance_ends_with_leaders_even_by_broker_and_rack(
        rack_sandbox: SandboxState, airflow_env: dict[str, str], tmp_path: Path) -> None:
    state = rack_sandbox
    # broker 0 (rack1) leads every partition of this topic: uneven by broker and by rack
    topic = placed_topic(state, "airflow-leaders",
                         {p: [0, 1 + p % 2, 2 - p % 2] for p in range(8)})
    try:
        with bench(state, tmp_path, '[actions]\nrebalance_leaders = "auto"\n') as b:
            serve = b.serve()
            brokers_before, _ = leader_spread(b.model())
            assert brokers_before > 1

            run = run_dag("selfheal_leader_rebalance", b, airflow_env, serve.url)

            assert run.state == "success", run.output[-4000:]
            summary = run.summary
            assert summary["outcome"] == "succeeded", summary
            assert summary["partitions"] > 0 and summary["bytes_moved"] == 0
            before, after = summary["leaders_before"], summary["leaders_after"]
            assert before["broker_spread"] > 1 and after["broker_spread"] <= 1, summary
            assert set(after["per_rack"]) == {"rack1", "rack2"}
            brokers, racks = wait_until(lambda: (s := leader_spread(b.model()))[0] <= 1 and s,
                                        "leaders even by broker", 30)
            assert brokers <= 1 and racks <= 1, (brokers, racks)
    finally:
        delete_topic(state, topic)


def test_a_plan_serve_finds_stale_ends_the_run_as_nothing_to_do(
        rack_sandbox: SandboxState, airflow_env: dict[str, str], tmp_path: Path) -> None:
    state = rack_sandbox
    topic = fill_disk(state, 2, "0", 8 * 1024 * 1024, partitions=4)
    try:
        # serve calls a broker skewed only above 50x its mean: the DAG's 1.10 plan is stale
        with bench(state, tmp_path, '[actions]\nmove_replica_dirs = "auto"\n',
                   {"SELFHEAL_DETECT_DISK_SKEW_THRESHOLD": "50"}) as b:
            serve = b.serve()
            run = run_dag("selfheal_disk_rebalance", b, airflow_env, serve.url,
                          conf={"threshold": THRESHOLD})
            assert run.state == "success", run.output[-4000:]
            summary = run.summary
            assert summary["outcome"] == "nothing to do", summary
            assert summary["why"].startswith("serve superseded the action"), summary
            assert summary["bytes_moved"] == 0 and summary["partitions"] == 0
            assert serve.action(summary["action_id"])["state"] == "superseded"
            assert is_skewed(broker_usage(b.model(), 2), THRESHOLD)  # nothing moved
    finally:
        delete_topic(state, topic)


def test_with_serve_down_the_submit_retries_then_fails_saying_what_to_do(
        rack_sandbox: SandboxState, airflow_env: dict[str, str], tmp_path: Path) -> None:
    state = rack_sandbox
    topic = fill_disk(state, 2, "1", 8 * 1024 * 1024, partitions=4)
    try:
        with bench(state, tmp_path) as b:  # no serve started: nobody listens there
            nobody = f"http://127.0.0.1:{free_port()}"
            run = run_dag("selfheal_disk_rebalance", b, airflow_env, nobody,
                          conf={"threshold": THRESHOLD})
    finally:
        delete_topic(state, topic)
    assert run.state == "failed"
    assert run.task_state("plan") == "success"
    assert run.task_state("submit") == "failed"
    assert run.tasks["submit"]["try_number"] == 4  # the first try and 3 retries
    assert run.task_state("report") == "upstream_failed"
    assert run.output.count(f"selfheal serve at {nobody} is not reachable") >= 4
    assert "Start it (`selfheal serve`" in run.output
    assert "connection selfheal_serve" in run.output
