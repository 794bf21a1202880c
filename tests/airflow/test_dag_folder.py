"""The DAG folder as Airflow's own DagBag loads it (no cluster needed)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.airflow.conftest import REPO

DAGS = {"selfheal_disk_rebalance", "selfheal_leader_rebalance",
        "selfheal_consumer_rebalance", "selfheal_placement_audit"}

PROBE = """
import json
from airflow.dag_processing.dagbag import BundleDagBag
from sandbox.airflow import DAGS_FOLDER
bag = BundleDagBag(dag_folder=str(DAGS_FOLDER), bundle_path=DAGS_FOLDER)
print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": {
    d.dag_id: {"schedule": str(d.schedule), "max_active_runs": d.max_active_runs,
               "catchup": d.catchup, "dagrun_timeout": str(d.dagrun_timeout),
               "params": sorted(d.params), "dry_run": d.params["dry_run"],
               "tasks": {t.task_id: {"pool": t.pool, "retries": t.retries,
                                     "backoff": t.retry_exponential_backoff,
                                     "mode": getattr(t, "mode", None),
                                     "outlets": [a.name for a in t.outlets]}
                         for t in d.tasks}}
    for d in bag.dags.values()}}))
"""


def _bag(env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_dag_folder_loads_without_import_errors_and_every_dag_is_safe_to_schedule(
        airflow_env: dict[str, str]) -> None:
    found = _bag({**airflow_env, "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert found["errors"] == {}
    assert set(found["dags"]) == DAGS
    for dag_id, dag in found["dags"].items():
        assert dag["schedule"] not in ("None", ""), dag_id
        assert dag["max_active_runs"] == 1, dag_id
        assert dag["catchup"] is False, dag_id
        assert dag["dagrun_timeout"] != "None", dag_id
        assert {"threshold", "dry_run"} <= set(dag["params"]), dag_id
        # a consumer group's assignment changes only once an operator turns dry_run off
        assert dag["dry_run"] is (dag_id == "selfheal_consumer_rebalance"), dag_id
        for task_id, task in dag["tasks"].items():
            if task_id == "submit":  # the one task that hands moves to serve
                assert task["pool"] == "kafka_reassignment", dag_id
            else:
                assert task["pool"] != "kafka_reassignment", (dag_id, task_id)
            if task_id == "wait":
                assert task["mode"] == "reschedule", dag_id
            else:
                assert task["retries"] >= 2 and task["backoff"], (dag_id, task_id)
        assert "selfheal_cluster_snapshot" in dag["tasks"]["snapshot"]["outlets"], dag_id
        assert dag["tasks"]["plan"]["outlets"], dag_id
    schedules = {d: found["dags"][d]["schedule"] for d in DAGS}
    assert schedules == {"selfheal_disk_rebalance": "@hourly",
                         "selfheal_leader_rebalance": "@hourly",
                         "selfheal_consumer_rebalance": "*/15 * * * *",
                         "selfheal_placement_audit": "@daily"}


def test_no_airflow_init_shadows_the_airflow_package() -> None:
    assert not (REPO / "airflow" / "__init__.py").exists()
    assert not (REPO / "airflow" / "dags" / "__init__.py").exists()
