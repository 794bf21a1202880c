"""The real Airflow (scheduler, DAG processor, API server: `selfheal airflow up`), started
once for this module beside one real serve, runs the DAGs triggered through its REST API
on the sandbox (Kafka 4.4):

- selfheal_disk_rebalance to success; a run triggered while it is active waits its turn
  (max_active_runs 1);
- selfheal_consumer_rebalance with dry_run off: a classic group whose members run the
  client-side helper gets its KIP-881 target through serve and reads from its own racks
  after; the KIP-848 group opted in beside it is never submitted.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from core import bus
from core.groups import read_groups
from core.live import open_admin
from core.locality import locality
from core.model import ClusterModel
from core.plan.disks import broker_usage, is_skewed
from core.plan.formats import TopicPartition
from sandbox import airflow, processes
from sandbox.fill import fill_disk
from sandbox.state import SandboxState
from sandbox.traffic import delete_topic
from schemas.snapshot import snapshot_from_dict
from tests.airflow.test_dag_runs import stable_group
from tests.conftest import ON_DEMAND
from tests.integration.serve_harness import Bench, ServeProcess, bench, placed_topic
from tests.integration.test_consumer_groups_snapshot import Consumer
from tests.integration.test_consumer_helper import Member
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

DAG = "selfheal_disk_rebalance"
CONSUMER_DAG = "selfheal_consumer_rebalance"
THRESHOLD = 1.10
DIR_THROTTLE = 4 * 1024 * 1024


@dataclass
class Running:
    state: SandboxState
    bench: Bench
    serve: ServeProcess
    flow: airflow.Airflow
    token: str


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """One serve (dir moves auto, under a throttle; assign_consumers auto, serve's default)
    and one Airflow whose workers reach it, for every test of the module. Each test asks
    for `rack_sandbox` too, which keeps the on-demand sandbox up between them."""
    rack_sandbox = ON_DEMAND["rack_sandbox"].get(tmp_path_factory)
    work = tmp_path_factory.mktemp("airflow-e2e")
    (work / "bench").mkdir()
    policy = ('[actions]\nmove_replica_dirs = "auto"\n[limits]\n'
              f"intra_broker_throttle_bytes_per_s = {DIR_THROTTLE}\n")
    flow: airflow.Airflow | None = None
    with bench(rack_sandbox, work / "bench", policy) as b:
        try:
            bus.ensure_topics(b.config)
            serve = b.serve()
            host, _, port = serve.url.removeprefix("http://").rpartition(":")
            conn = {"conn_type": "http", "host": host, "port": int(port), "password": b.token}
            env = {k: v for k, v in b.env.items() if k.startswith("SELFHEAL_")}
            env["AIRFLOW_CONN_SELFHEAL_SERVE"] = json.dumps(conn)
            flow = airflow.up(work / "work", env,
                              progress=lambda m: print(f"[airflow] {m}", file=sys.stderr))
            print(f"[figures] airflow ready in {flow.started_in_s} s, "
                  f"{flow.rss_bytes() / 2**20:.0f} MiB RSS, "
                  f"{flow.pss_bytes() / 2**20:.0f} MiB PSS", file=sys.stderr)
            yield Running(rack_sandbox, b, serve, flow, flow.token())
        finally:
            if flow is not None:
                airflow.stop(flow)
                # every process it started is gone, whatever its title says
                assert not [pid for pid in flow.pids.values()
                            if processes.is_running(pid, "")]


def _trigger(run: Running, dag: str, conf: dict[str, Any]) -> str:
    made = run.flow.api("POST", f"/dags/{dag}/dagRuns", {"logical_date": None, "conf": conf},
                        run.token)
    return str(made["dag_run_id"])


def _report(run: Running, dag: str, run_id: str) -> dict[str, Any]:
    entry = run.flow.api("GET", f"/dags/{dag}/dagRuns/{run_id}/taskInstances/report/"
                         "xcomEntries/return_value?deserialize=true", token=run.token)
    value = entry["value"]
    return value if isinstance(value, dict) else json.loads(value)


def test_airflow_runs_the_disk_rebalance_to_success_one_run_at_a_time(
        rack_sandbox: SandboxState, running: Running) -> None:
    state, b, serve, flow, token = (running.state, running.bench, running.serve,
                                    running.flow, running.token)
    broker = 0
    topic = fill_disk(state, broker, "0", 24 * 1024 * 1024, partitions=6)
    try:
        assert is_skewed(broker_usage(b.model(), broker), THRESHOLD)
        # Unpausing also starts a run for the latest hourly tick: three runs in all.
        flow.api("PATCH", f"/dags/{DAG}", {"is_paused": False}, token)
        mine = [_trigger(running, DAG, {"threshold": THRESHOLD}) for _ in range(2)]

        began = time.monotonic()
        seen: list[dict[str, str]] = []
        deadline = began + 480
        while time.monotonic() < deadline:
            runs = flow.api("GET", f"/dags/{DAG}/dagRuns", token=token)["dag_runs"]
            states = {r["dag_run_id"]: r["state"] for r in runs}
            seen.append(states)
            if all(states.get(r) in ("success", "failed") for r in mine) and not [
                    s for s in states.values() if s in ("running", "queued")]:
                break
            time.sleep(1)
        took = time.monotonic() - began
        print(f"[figures] {len(seen[-1])} runs of {DAG} done in {took:.0f} s "
              f"(then {flow.rss_bytes() / 2**20:.0f} MiB RSS, "
              f"{flow.pss_bytes() / 2**20:.0f} MiB PSS)", file=sys.stderr)
        assert set(seen[-1].values()) == {"success"}, seen[-1]
        assert max(list(s.values()).count("running") for s in seen) == 1, \
            "two runs of the DAG were active at once"
        assert any("running" in s.values() and "queued" in s.values() for s in seen)
        runs = sorted(flow.api("GET", f"/dags/{DAG}/dagRuns", token=token)["dag_runs"],
                      key=lambda r: r["start_date"])
        for earlier, later in zip(runs, runs[1:], strict=False):
            assert later["start_date"] >= earlier["end_date"], (earlier, later)

        reports = [_report(running, DAG, r["dag_run_id"]) for r in runs]
        done = reports[0]  # the first run evens broker 0 out ...
        assert done["outcome"] == "succeeded", reports
        assert done["bytes_moved"] > 0 and done["skew_after"][str(broker)] <= THRESHOLD
        # ... and the later ones, planned after it, leave broker 0 alone (they may even
        # out what the bus topics' own writes skewed meanwhile)
        assert {r["outcome"] for r in reports[1:]} <= {"nothing to do", "succeeded"}
        assert not [m for r in reports[1:] for m in r["moves"] if m["broker"] == broker]
        assert serve.action(done["action_id"])["state"] == "succeeded"
        assert not is_skewed(broker_usage(b.model(), broker), THRESHOLD)
    finally:
        delete_topic(state, topic)


# RF 2 over brokers 0, 2 (rack1) and 1 (rack2). librdkafka's roundrobin, members in
# client.id order, gives rack1 {0, 2, 4}, all led from rack2, and rack2 {1, 3, 5}, which
# have no replica on rack2 at all: every partition is read across racks.
PLACEMENT = {0: [1, 0], 1: [0, 2], 2: [1, 2], 3: [2, 0], 4: [1, 0], 5: [0, 2]}
RACKS = ("rack1", "rack2")


def _group_locality(run: Running, group: str, reading: dict[str, set[tuple[str, int]]]
                    ) -> tuple[float | None, ClusterModel]:
    """The product's locality (core.locality) of what the members read."""
    doc = run.bench.snapshot()
    with open_admin(run.state.bootstrap_servers) as admin:
        doc["consumer_groups"] = read_groups(admin, [group])
    model = ClusterModel(snapshot_from_dict(doc))
    (found,) = model.snapshot.consumer_groups
    tps = {m: [TopicPartition(t, p) for t, p in sorted(r)] for m, r in reading.items()}
    return locality(model, found, tps).ratio, model


def test_airflow_applies_a_classic_group_s_rack_aware_target_never_a_kip848_group_s(
        rack_sandbox: SandboxState, running: Running) -> None:
    state, b, serve = running.state, running.bench, running.serve
    topic = placed_topic(state, "airflow-apply", PLACEMENT)
    everything = {(topic, p) for p in PLACEMENT}
    classic = f"airflow-classic-{uuid.uuid4().hex[:6]}"
    kip848 = f"airflow-kip848-{uuid.uuid4().hex[:6]}"
    seen: list[tuple[str, bytes]] = []
    members = [Member(state, classic, topic, rack, rank, b.config.topic("consumer-assignments"),
                      seen, threading.Lock()) for rank, rack in enumerate(RACKS)]
    broker_assigned = [Consumer(state.bootstrap_servers, kip848, topic, f"n-{rack}", rack,
                                strategy=None) for rack in RACKS]
    try:
        wait_until(lambda: sorted(tp for m in members for tp in m.consumer.reading)
                   == sorted(everything)
                   and sorted(p for c in broker_assigned for p in c.assigned)
                   == sorted(PLACEMENT), "both groups reading every partition", 120)
        stable_group(state, classic, len(members))
        by_id = {m.consumer.member_id: m for m in members}
        before, _ = _group_locality(running, classic,
                                    {i: m.consumer.reading for i, m in by_id.items()})

        flow, token = running.flow, running.token
        flow.api("PATCH", f"/dags/{CONSUMER_DAG}", {"is_paused": False}, token)
        mine = _trigger(running, CONSUMER_DAG, {"groups": [classic, kip848],
                                                "dry_run": False})
        began = time.monotonic()
        wait_until(lambda: flow.api("GET", f"/dags/{CONSUMER_DAG}/dagRuns/{mine}",
                                    token=token)["state"] in ("success", "failed"),
                   f"the {CONSUMER_DAG} run done", 480, every=1)
        took = time.monotonic() - began
        state_of = flow.api("GET", f"/dags/{CONSUMER_DAG}/dagRuns/{mine}", token=token)["state"]
        report = _report(running, CONSUMER_DAG, mine)
        found = report["groups"][classic]
        action = found["action"]
        shown = serve.action(action["action_id"])
        target = {i: {(tp["topic"], tp["partition"]) for tp in tps}
                  for i, tps in shown["record"]["plan"]["assignment"].items()}
        wait_until(lambda: all(m.consumer.reading == target[i] for i, m in by_id.items()),
                   "every member reading its partitions of the target", 120)
        after, _ = _group_locality(running, classic,
                                   {i: m.consumer.reading for i, m in by_id.items()})
        applied = [serve.action(a["id"])["record"]["plan"]["group"]
                   for a in serve.api("GET", "/actions")[1]["actions"]
                   if a["type"] == "assign_consumers"]
    finally:
        for m in members:
            m.stop()
        for c in broker_assigned:
            c.stop()
        delete_topic(state, topic)

    print(f"[figures] {CONSUMER_DAG} with dry_run off: {state_of} in {took:.0f} s; group "
          f"{classic} (roundrobin, 2 members in 2 racks) locality (leader's rack, "
          f"core.locality) before {before}, reported now {found['locality_now']}, planned "
          f"{found['locality_planned']}, read after {after}; cross-rack partitions "
          f"{found['cross_rack_now']} -> {found['cross_rack_planned']}", file=sys.stderr)
    assert state_of == "success", report
    assert report["outcome"] == "succeeded", report
    assert action["state"] == "succeeded" and shown["type"] == "assign_consumers"
    assert shown["record"]["trigger"]["kind"] == "schedule"
    assert (found["cross_rack_now"], found["cross_rack_planned"]) == (3, 0)
    assert before == found["locality_now"] == 0.0
    assert after == found["locality_planned"] == 1.0
    # the KIP-848 group is reported with what an operator can set, and never submitted
    assert "group.consumer.assignors" in report["groups"][kip848]["skipped"]
    assert applied == [classic]
