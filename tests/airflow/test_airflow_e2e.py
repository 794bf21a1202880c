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
from sandbox import airflow, processes
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
                  f"{rss / 2**20:.0f} MiB RSS, {flow.pss_bytes() / 2**20:.0f} MiB PSS",
                  file=sys.stderr)
            token = flow.token()
            # Unpausing also starts a run for the latest hourly tick: three runs in all.
            flow.api("PATCH", f"/dags/{DAG}", {"is_paused": False}, token)
            mine = [_trigger(flow, token, {"threshold": THRESHOLD}) for _ in range(2)]

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

            def report(run_id: str) -> dict[str, Any]:
                entry = flow.api("GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/report/"
                                 "xcomEntries/return_value?deserialize=true", token=token)
                value = entry["value"]
                return value if isinstance(value, dict) else json.loads(value)

            reports = [report(r["dag_run_id"]) for r in runs]
            done = reports[0]  # the first run evens broker 0 out ...
            assert done["outcome"] == "succeeded", reports
            assert done["bytes_moved"] > 0 and done["skew_after"][str(broker)] <= THRESHOLD
            # ... and the later ones, planned after it, leave broker 0 alone (they may
            # even out what the bus topics' own writes skewed meanwhile)
            assert {r["outcome"] for r in reports[1:]} <= {"nothing to do", "succeeded"}
            assert not [m for r in reports[1:] for m in r["moves"] if m["broker"] == broker]
            assert serve.action(done["action_id"])["state"] == "succeeded"
            assert not is_skewed(broker_usage(b.model(), broker), THRESHOLD)
    finally:
        if flow is not None:
            airflow.stop(flow)
            # every process it started is gone, whatever its title says
            assert not [pid for pid in flow.pids.values() if processes.is_running(pid, "")]
        delete_topic(state, topic)
