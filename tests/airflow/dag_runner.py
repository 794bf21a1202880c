"""Run one DAG with `dag.test()` in this process and print what happened as JSON.

Started by the tests as a subprocess, so Airflow's configuration (AIRFLOW_HOME and
friends, from the environment) never leaks into the pytest process:

    python -m tests.airflow.dag_runner DAG_ID '{"conf": {...}, "retry_delay": 1,
                                               "poke_interval": 1}'

The last line of stdout is ``@@RESULT@@`` and a JSON object: the run's state, each task's
state and try number, and the XComs of the run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta


def main() -> int:
    from airflow.dag_processing.dagbag import BundleDagBag
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    dag_id, raw = sys.argv[1], sys.argv[2]
    opts = json.loads(raw)
    folder = os.environ["AIRFLOW__CORE__DAGS_FOLDER"]
    bag = BundleDagBag(dag_folder=folder, bundle_path=folder)
    if bag.import_errors:
        raise SystemExit(f"import errors: {bag.import_errors}")
    dag = bag.get_dag(dag_id)
    for task in dag.tasks:
        if "retry_delay" in opts:
            task.retry_delay = timedelta(seconds=opts["retry_delay"])
            task.max_retry_delay = timedelta(seconds=opts["retry_delay"] * 4)
        if "poke_interval" in opts and hasattr(task, "poke_interval"):
            task.poke_interval = opts["poke_interval"]
    began = time.monotonic()
    run = dag.test(run_conf=opts.get("conf") or {})
    seconds = round(time.monotonic() - began, 1)
    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=dag_id, run_id=run.run_id).all()
        xcoms = session.query(XComModel).filter_by(dag_id=dag_id, run_id=run.run_id).all()
        result = {
            "run_id": run.run_id,
            "state": str(run.state),
            "seconds": seconds,
            "tasks": {ti.task_id: {"state": str(ti.state), "try_number": ti.try_number}
                      for ti in tis},
            "xcom": {f"{x.task_id}.{x.key}": XComModel.deserialize_value(x) for x in xcoms},
        }
    print("@@RESULT@@" + json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
