"""selfheal_leader_rebalance (hourly): even out partition leaders by broker and by rack.

snapshot -> plan (`core.plan.plan_leaders`: replica-list reorders, then a preferred
election; no data moves) -> submit (a signed `rebalance_leaders` action, pool
`kafka_reassignment`) -> wait (reschedule-mode sensor) -> report (leaders per broker and
per rack before and after). serve runs the plan only if its elections still even out
leaders cluster-wide; otherwise it is superseded and the run says "nothing to do".
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param, PokeReturnValue, dag, task
from selfheal_dag_support import defaults as d


@dag(
    dag_id="selfheal_leader_rebalance",
    schedule="@hourly",
    start_date=d.START,
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=3),
    default_args=d.default_args(),
    params={
        "threshold": d.threshold(1.10, "act when the busiest broker leads more than "
                                       "threshold x the mean, or brokers or racks differ "
                                       "by more than one leader per broker"),
        "max_partitions_per_run": Param(1000, type="integer", minimum=0,
                                        description="most leader changes per run (0: no "
                                                    "cap); leaders move no bytes"),
        "dry_run": d.dry_run(),
    },
    tags=d.TAGS,
    doc_md=__doc__,
)
def selfheal_leader_rebalance() -> None:
    from selfheal_dag_support import steps

    @task(outlets=[d.SNAPSHOT])
    def snapshot() -> dict:
        return steps.snapshot("before", d.SNAPSHOT)

    @task(outlets=[d.LEADER_PLAN])
    def plan(snap: dict, **context) -> dict:
        return steps.plan_leaders(snap, context["params"], d.LEADER_PLAN)

    @task(pool=d.POOL)
    def submit(planned: dict, **context) -> dict:
        return steps.submit(planned, context["params"])

    @task.sensor(**d.sensor(timedelta(hours=2)))
    def wait(submitted: dict) -> PokeReturnValue:
        done, outcome = steps.poke(submitted)
        return PokeReturnValue(is_done=done, xcom_value=outcome)

    @task
    def report(planned: dict, outcome: dict) -> dict:
        return steps.report_leaders(planned, outcome)

    planned = plan(snapshot())
    report(planned, wait(submit(planned)))


selfheal_leader_rebalance()
