"""selfheal_disk_rebalance (hourly): even out the log dirs of each broker (KIP-113).

snapshot (live cluster) -> plan (`core.plan.plan_disks`, at most `max_bytes_per_run`)
-> submit (a signed `move_replica_dirs` action to `selfheal serve`, pool
`kafka_reassignment`) -> wait (reschedule-mode sensor on the action's state; an action
waiting for approval shows its link in the log) -> report (bytes moved, partitions, skew
per broker before and after). serve throttles the moves and re-checks the skew first: if
no broker is skewed any more the action is superseded and the run says "nothing to do".
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import PokeReturnValue, dag, task
from selfheal_dag_support import defaults as d


@dag(
    dag_id="selfheal_disk_rebalance",
    schedule="@hourly",
    start_date=d.START,
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=4),
    default_args=d.default_args(),
    params={
        "threshold": d.threshold(1.10, "a dir above threshold x its broker's mean usage "
                                       "ratio is skewed (serve checks [detect] "
                                       "disk_skew_threshold too)"),
        "max_bytes_per_run": d.max_bytes(10 * 1024**3),
        "dry_run": d.dry_run(),
    },
    tags=d.TAGS,
    doc_md=__doc__,
)
def selfheal_disk_rebalance() -> None:
    from selfheal_dag_support import steps

    @task(outlets=[d.SNAPSHOT])
    def snapshot() -> dict:
        return steps.snapshot("before", d.SNAPSHOT)

    @task(outlets=[d.DISK_PLAN])
    def plan(snap: dict, **context) -> dict:
        return steps.plan_disks(snap, context["params"], d.DISK_PLAN)

    @task(pool=d.POOL)
    def submit(planned: dict, **context) -> dict:
        return steps.submit(planned, context["params"])

    @task.sensor(**d.sensor(timedelta(hours=3)))
    def wait(submitted: dict) -> PokeReturnValue:
        done, outcome = steps.poke(submitted)
        return PokeReturnValue(is_done=done, xcom_value=outcome)

    @task
    def report(planned: dict, outcome: dict) -> dict:
        return steps.report_disks(planned, outcome)

    planned = plan(snapshot())
    report(planned, wait(submit(planned)))


selfheal_disk_rebalance()
