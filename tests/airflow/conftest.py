"""Fixtures of the Airflow tests: a sandbox with fewer racks than brokers, an Airflow
metadata database, and `dag.test()` run in a subprocess against a real serve.

The sandbox here has 3 brokers over 2 racks (brokers 0 and 2 share rack1), so a
partition can violate KIP-36 rack diversity and leaders can be uneven by rack while even
by broker. It comes up for the first test that uses it and goes down by PID after
the last (tests/conftest.py).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sandbox.airflow import DAGS_FOLDER, environment, prepare
from tests.integration.serve_harness import Bench

REPO = Path(__file__).resolve().parents[2]
RESULT = "@@RESULT@@"


@pytest.fixture(scope="session")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An AIRFLOW_HOME with a migrated SQLite database and the kafka_reassignment pool;
    the environment that points Airflow at it and at airflow/dags."""
    home = tmp_path_factory.mktemp("airflow-home")
    env = environment(home, 0, secrets.token_hex(32))
    prepare(home, env)
    return {k: v for k, v in env.items() if k.startswith("AIRFLOW") or k == "AIRFLOW_HOME"} | {
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "SELFHEAL_AIRFLOW_DATA_DIR": str(home / "selfheal-runs")}


@dataclass
class DagResult:
    state: str
    tasks: dict[str, dict[str, Any]]
    xcom: dict[str, Any]
    output: str
    seconds: float

    def task_state(self, task_id: str) -> str:
        return self.tasks[task_id]["state"]

    @property
    def summary(self) -> dict[str, Any]:
        return self.xcom.get("report.return_value") or self.xcom.get("report.summary") or {}


def run_dag(dag_id: str, bench: Bench, airflow_env: dict[str, str], serve_url: str | None,
            conf: dict[str, Any] | None = None, timeout: float = 540,
            **opts: Any) -> DagResult:
    """`dag.test()` of ``dag_id`` in a subprocess with the bench's selfheal environment
    (its topic prefix, token, the sandbox) and the connection to its serve."""
    env = {**bench.env, **airflow_env, "PYTHONPATH": str(REPO)}
    if serve_url is not None:
        host, _, port = serve_url.removeprefix("http://").rpartition(":")
        env["AIRFLOW_CONN_SELFHEAL_SERVE"] = json.dumps(
            {"conn_type": "http", "host": host, "port": int(port), "password": bench.token})
    args = json.dumps({"conf": conf or {}, "retry_delay": 1, "poke_interval": 1, **opts})
    log = bench.work / f"dag-test-{dag_id}.log"  # a test may watch it while the run goes
    with open(log, "w") as out:
        done = subprocess.run([sys.executable, "-m", "tests.airflow.dag_runner", dag_id, args],
                              cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)
    output = log.read_text()
    lines = [x for x in output.splitlines() if x.startswith(RESULT)]
    assert done.returncode == 0 and lines, f"dag.test of {dag_id} broke:\n{output[-6000:]}"
    doc = json.loads(lines[-1].removeprefix(RESULT))
    print(f"[figures] dag.test {dag_id}: {doc['state']} in {doc['seconds']} s", file=sys.stderr)
    return DagResult(doc["state"], doc["tasks"], doc["xcom"], output, doc["seconds"])

