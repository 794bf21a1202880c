"""The real Airflow (scheduler, DAG processor, API server: `selfheal airflow up`) runs
selfheal_disk_rebalance, triggered through its REST API, to success on the sandbox; a run
triggered while it is active waits its turn (max_active_runs 1)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from core.plan.disks import broker_usage, is_skewed
from sandbox import airflow
from sandbox.fill import fill_disk
from sandbox.state import SandboxState
from sandbox.traffic import delete_topic
from tests.integration.serve_harness import bench

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

DAG = "selfheal_disk_rebalance"
THRESHOLD = 1.10
DIR_THROTTLE = 4 * 1024 * 1024


def _trigger(flow: airflow.Airflow, token: str, conf: dict[str, Any]) -> str:
    run = flow.api("POST", f"/dags/{DAG}/dagRuns", {"logical_date": None, "conf": conf}, token)
    return str(run["dag_run_id"])


def test_airflow_runs_the_disk_rebalance_to_success_one_run_at_a_time(
        rack_sandbox: SandboxState, tmp_path: Path) -> None:
    state = rack_sandbox
    broker = 0
    policy = ('[actions]\nmove_replica_dirs = "auto"\n[limits]\n'
              f"intra_broker_throttle_bytes_per_s = {DIR_THROTTLE}\n")
    topic = fill_disk(state, broker, "0", 24 * 1024 * 1024, partitions=6)
    flow: airflow.Airflow | None = None
    (tmp_path / "bench").mkdir()
    try:
        with bench(state, tmp_path / "bench", policy) as b:
            serve = b.serve()
            assert is_skewed(broker_usage(b.model(), broker), THRESHOLD)
            host, _, port = serve.url.removeprefix("http://").rpartition(":")
            conn = {"conn_type": "http", "host": host, "port": int(port), "password": b.token}
            env = {k: v for k, v in b.env.items() if k.startswith("SELFHEAL_")}
            env["AIRFLOW_CONN_SELFHEAL_SERVE"] = json.dumps(conn)

            flow = airflow.up(tmp_path / "work", env,
                              progress=lambda m: print(f"[airflow] {m}", file=sys.stderr))
            rss = flow.rss_bytes()
            print(f"[figures] airflow ready in {flow.started_in_s} s, "
                  f"{rss / 2**20:.0f} MiB resident", file=sys.stderr)
            token = flow.token()
            flow.api("PATCH", f"/dags/{DAG}", {"is_paused": False}, token)
            first = _trigger(flow, token, {"threshold": THRESHOLD})
            second = _trigger(flow, token, {"threshold": THRESHOLD})

            began = time.monotonic()
            seen: list[tuple[str, str]] = []
            overlap = False
            deadline = began + 420
            while time.monotonic() < deadline:
                states = {r: flow.api("GET", f"/dags/{DAG}/dagRuns/{r}", token=token)["state"]
                          for r in (first, second)}
                seen.append((states[first], states[second]))
                overlap |= states[first] == "running" and states[second] == "running"
                if all(s in ("success", "failed") for s in states.values()):
                    break
                time.sleep(1)
            took = time.monotonic() - began
            print(f"[figures] two triggered runs of {DAG} done in {took:.0f} s "
                  f"(peak {max(rss, flow.rss_bytes()) / 2**20:.0f} MiB)", file=sys.stderr)
            assert seen[-1] == ("success", "success"), seen[-10:]
            assert not overlap, "the second run ran while the first was active"
            assert ("running", "queued") in seen, seen[:20]

            def report(run_id: str) -> dict[str, Any]:
                entry = flow.api("GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/report/"
                                 "xcomEntries/return_value?deserialize=true", token=token)
                value = entry["value"]
                return value if isinstance(value, dict) else json.loads(value)

            done = report(first)
            assert done["outcome"] == "succeeded", done
            assert done["bytes_moved"] > 0 and done["skew_after"][str(broker)] <= THRESHOLD
            assert report(second)["outcome"] == "nothing to do"
            assert serve.action(done["action_id"])["state"] == "succeeded"
            assert not is_skewed(broker_usage(b.model(), broker), THRESHOLD)
    finally:
        if flow is not None:
            airflow.stop(flow)
            assert not any(flow.running().values())
            assert not [p for pid in flow.pids.values() for p in airflow._session_members(pid)
                        if airflow.is_ours(p, flow.home)]
        delete_topic(state, topic)
