"""A core install (`pip install .`, no extras) runs the collectors and `serve` for real:
with Spark, Great Expectations, pandas, pyarrow, Airflow and grafanalib unimportable,
a snapshot collector publishes a snapshot and `serve` leads and executes a signed action."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.state import SandboxState
from tests.integration.serve_harness import bench, leader_tilted_topic, reorder_plan

pytestmark = pytest.mark.integration

NO_EXTRAS = Path(__file__).resolve().parents[1] / "unit" / "without_extras"


def core_env(env: dict[str, str]) -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    return {**env, "PYTHONPATH": f"{NO_EXTRAS}{os.pathsep}{root}"}


def test_the_snapshot_collector_runs_without_extras(sandbox: SandboxState, tmp_path) -> None:
    env = core_env({**os.environ, "SELFHEAL_SANDBOX_DIR": sandbox.work_dir,
                    "SELFHEAL_CONFIG": "", "SELFHEAL_BUS_TOPIC_PREFIX": "coreinstall."})
    done = subprocess.run([sys.executable, "-m", "selfheal.cli", "collect", "snapshots",
                           "--once", "--metrics-port", "0"],
                          capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "snapshot" in done.stderr and "Traceback" not in done.stderr


def test_serve_leads_and_executes_without_extras(sandbox: SandboxState, tmp_path) -> None:
    blocked = core_env({})["PYTHONPATH"]
    with bench(sandbox, tmp_path, '[actions]\nrebalance_leaders = "auto"\n',
               extra_env={"PYTHONPATH": blocked}) as b:
        serve = b.serve()  # would die at once if it needed an extra
        topic = leader_tilted_topic(sandbox, "core-install", [0, 1, 2], new_leader=1)
        aid = b.propose(b.action("rebalance_leaders", reorder_plan(topic, [1, 0, 2]),
                                 "broker 1 should lead"))
        serve.wait_state(aid, {"succeeded"}, timeout=120)
        assert serve.alive() and not any("Traceback" in line for line in serve.lines)
