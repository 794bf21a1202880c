"""Each DAG run with `dag.test()` against the real sandbox and a real `selfheal serve`
(the bench harness: its own topics, store, token and policy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.plan import plan_disks
from core.plan.disks import broker_usage, is_skewed
from sandbox.fill import fill_disk
from sandbox.processes import free_port
from sandbox.state import SandboxState
from sandbox.traffic import delete_topic
from tests.airflow.conftest import DagResult, run_dag
from tests.conftest import prove
from tests.integration.serve_harness import bench, placed_topic
from tests.polling import wait_until

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
            # The filled broker needs moves. Others may too: the bus topics' own few KiB
            # land unevenly on two dirs (and the DAG, like serve, evens every broker out);
            # what this test asserts is the filled broker's.
            planned = {m.broker for m in plan_disks(b.model(), THRESHOLD).moves}
            assert broker in planned, planned

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


def test_a_dry_run_plans_and_reports_but_submits_nothing(
        rack_sandbox: SandboxState, airflow_env: dict[str, str], tmp_path: Path) -> None:
    state = rack_sandbox
    topic = placed_topic(state, "airflow-dry-run",
                         {p: [0, 1 + p % 2, 2 - p % 2] for p in range(8)})
    try:
        with bench(state, tmp_path, '[actions]\nrebalance_leaders = "auto"\n') as b:
            serve = b.serve()
            before = {(p.topic, p.partition): p.leader for p in b.model().partitions}
            run = run_dag("selfheal_leader_rebalance", b, airflow_env, serve.url,
                          conf={"dry_run": True})
            assert run.state == "success", run.output[-4000:]
            assert run.summary["outcome"] == "dry run", run.summary
            assert "dry run: would submit rebalance_leaders" in run.output
            assert serve.api("GET", "/actions")[1]["actions"] == []  # nothing reached serve
            after = {(p.topic, p.partition): p.leader for p in b.model().partitions}
            assert {tp: after.get(tp) for tp in before} == before  # nothing moved
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


def shrink_by_hand(state: SandboxState, topic: str, partition: int, replicas: list[int]) -> None:
    """What an operator's reassignment does: the partition keeps only ``replicas``."""
    from kafka import TopicPartition

    from core.live import open_admin
    from sandbox import traffic

    with open_admin(state.bootstrap_servers) as admin:
        admin.alter_partition_reassignments({TopicPartition(topic, partition): replicas})
    wait_until(lambda: traffic.partitions(state, topic)[partition]["replica_nodes"] == replicas,
               f"{topic}-{partition} on {replicas}")


def test_the_audit_finds_a_rack_diversity_violation_planted_by_hand(
        rack_sandbox: SandboxState, airflow_env: dict[str, str], tmp_path: Path) -> None:
    import json

    state = rack_sandbox
    # brokers 0 and 2 share rack1: partition 0 spans one rack where two are possible;
    # partition 2 has one replica where its topic intends two
    topic = placed_topic(state, "airflow-audit", {0: [0, 2], 1: [1, 0], 2: [2, 1]})
    try:
        shrink_by_hand(state, topic, 2, [2])
        with bench(state, tmp_path) as b:
            serve = b.serve()
            run = run_dag("selfheal_placement_audit", b, airflow_env, serve.url)
    finally:
        delete_topic(state, topic)
    assert run.state == "success", run.output[-4000:]
    summary = run.summary
    assert summary["outcome"] == "nothing to do", summary  # nothing software may move
    report = json.loads(Path(summary["report"]).read_text())
    violations = [(v["topic"], v["partition"], v["racks"])
                  for v in report["rack_diversity_violations"]]
    assert (topic, 0, ["rack1"]) in violations
    assert not [v for v in violations if v[0] == topic and v[1] != 0]
    assert [(v["partition"], v["intent"]) for v in report["below_replication_intent"]
            if v["topic"] == topic] == [(2, 2)]
    assert report["offline_replicas"] == []
    assert summary["found"]["rack_diversity_violations"] >= 1
    assert f"{topic}-0: replicas [0, 2] on racks ['rack1'] (want 2)" in run.output


def test_an_action_awaiting_approval_shows_its_link_and_a_rejection_ends_the_run_clearly(
        rack_sandbox: SandboxState, airflow_env: dict[str, str], tmp_path: Path) -> None:
    import threading

    state = rack_sandbox
    topic = placed_topic(state, "airflow-approve",
                         {p: [0, 1 + p % 2, 2 - p % 2] for p in range(8)})
    try:
        with bench(state, tmp_path, '[actions]\nrebalance_leaders = "approve"\n') as b:
            serve = b.serve()
            got: dict[str, DagResult] = {}
            runner = threading.Thread(target=lambda: got.update(run=run_dag(
                "selfheal_leader_rebalance", b, airflow_env, serve.url)), daemon=True)
            runner.start()
            waiting = wait_until(lambda: serve.api("GET", "/actions?state=awaiting_approval")[1]
                                 ["actions"], "the DAG's action waiting for approval", 180)
            action_id = waiting[0]["id"]
            link = serve.action(action_id)["approval_url"]
            log = tmp_path / "dag-test-selfheal_leader_rebalance.log"
            # the run sits on its sensor, showing the link, while nobody decides
            wait_until(lambda: "AWAITS APPROVAL" in log.read_text(), "the link in the log", 60)
            status, _ = serve.api("POST", f"/actions/{action_id}/reject",
                                  {"actor": "alice", "reason": "not during the sale"})
            assert status == 200
            runner.join(300)
            assert not runner.is_alive()
            run = got["run"]
            assert serve.action(action_id)["state"] == "cancelled"
    finally:
        delete_topic(state, topic)
    assert run.state == "failed"
    assert run.task_state("wait") == "success" and run.task_state("report") == "failed"
    assert f"AWAITS APPROVAL: {link.split('/approve/')[0]}/approve/" in run.output
    assert f"action {action_id[:12]} ended cancelled: it was rejected or cancelled" in \
        run.output
    assert "not during the sale" in run.output
    assert run.xcom["report.summary"]["outcome"] == "cancelled"


def stable_group(state: SandboxState, group: str, members: int) -> None:
    """Wait until DescribeGroups shows ``group`` Stable with every member assigned (a
    group between generations is not judged: the DAG skips it)."""
    from core.groups import read_groups
    from core.live import open_admin

    def stable() -> bool:
        with open_admin(state.bootstrap_servers) as admin:
            (found,) = read_groups(admin, [group])
        return (found["state"] == "Stable" and len(found["members"]) == members
                and all(m["assignment"] for m in found["members"]))

    wait_until(stable, f"group {group} stable with {members} members assigned", 60)


class Member:
    """One real consumer of a group, with client.rack set, polling on a thread."""

    def __init__(self, state: SandboxState, group: str, topic: str, rack: str) -> None:
        import threading

        from confluent_kafka import Consumer

        self.rack = rack
        self.errors: list[str] = []
        self.consumer = Consumer({"bootstrap.servers": state.bootstrap_servers,
                                  "group.id": group, "client.rack": rack,
                                  # librdkafka's range is rack-aware (KIP-881)
                                  # when the metadata has the racks; roundrobin never
                                  "partition.assignment.strategy": "roundrobin",
                                  "session.timeout.ms": 10000,
                                  # The topic is seconds old: a broker that did not list it
                                  # yet left the subscription without it until librdkafka's
                                  # next metadata refresh, 5 minutes by default.
                                  "topic.metadata.refresh.interval.ms": 2000,
                                  "error_cb": lambda err: self.errors.append(str(err))})
        self.consumer.subscribe([topic])
        self.assigned: list[int] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error() is not None:
                self.errors.append(str(msg.error()))
            self.assigned = sorted(tp.partition for tp in self.consumer.assignment())
        self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)


def test_consumer_rebalance_plans_rack_aware_targets_and_by_default_submits_none(
        rack_sandbox: SandboxState, airflow_env: dict[str, str], tmp_path: Path,
        record_property) -> None:
    import json
    import uuid

    state = rack_sandbox
    # every partition has a replica on rack1 (brokers 0, 2); only 0, 1 and 4 on rack2 (1)
    placement = {0: [0, 1], 1: [1, 2], 2: [2, 0], 3: [0, 2], 4: [1, 0], 5: [2, 0]}
    topic = placed_topic(state, "airflow-consumers", placement)
    group = f"airflow-group-{uuid.uuid4().hex[:6]}"
    members = [Member(state, group, topic, rack) for rack in ("rack1", "rack2")]
    try:
        try:
            wait_until(lambda: sorted(p for m in members for p in m.assigned)
                       == list(range(6)), "the group consuming every partition", 60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; by member: " + "; ".join(
                f"{m.rack} {m.assigned} errors {m.errors[-3:]}" for m in members)) from None
        stable_group(state, group, 2)
        with bench(state, tmp_path) as b:
            run = run_dag("selfheal_consumer_rebalance", b, airflow_env, None,
                          conf={"groups": [group, "nobody-home"],
                                "strategy": "cooperative-sticky"})
    finally:
        for m in members:
            m.stop()
        delete_topic(state, topic)
    assert run.state == "success", run.output[-4000:]
    summary = run.summary
    # dry_run is this DAG's default: the action is signed and kept, never submitted
    assert summary["outcome"] == "dry run", summary
    assert "dry run: would submit assign_consumers" in run.output
    found = summary["groups"][group]
    assert found["members"] == 2 and found["racks"] == ["rack1", "rack2"]
    assert found["partitions"] == 6
    # roundrobin gives the rack2 member {0, 2, 4} or {1, 3, 5}: at least one partition
    # with no replica on rack2; the plan is the fewest cross-rack there can be
    assert found["cross_rack_planned"] == 0 < found["cross_rack_now"]
    assert found["would_apply"] is True
    assert "skipped" in summary["groups"]["nobody-home"]
    plans = json.loads(Path(summary["plans"]).read_text())
    by_member = plans[group]["assignment"]
    assert sorted(len(tps) for tps in by_member.values()) == [3, 3]
    rack2 = [tps for tps in by_member.values()
             if all(placement[tp["partition"]].count(1) for tp in tps)]
    assert rack2, by_member  # the rack2 member only gets partitions with a replica there
    prove(record_property, state, "consumer locality")
