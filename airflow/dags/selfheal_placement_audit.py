"""selfheal_placement_audit (daily): what is wrong with replica placement, and the fix
software may make.

snapshot -> audit (KIP-36 rack diversity: partitions spanning fewer racks than
min(RF, racks); replicas on dead brokers or offline dirs; partitions with fewer replicas
than their topic's intent) -> plan the fix for offline replicas (`core.plan.plan_offline`,
rack-aware) -> submit (a signed `fix_offline_replicas`, pool `kafka_reassignment`; serve's
policy asks for approval by default, and the run shows the link) -> wait -> report.
Rack-diversity violations and RF below intent are reported for an operator.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param, PokeReturnValue, dag, task
from selfheal_dag_support import defaults as d


@dag(
    dag_id="selfheal_placement_audit",
    schedule="@daily",
    start_date=d.START,
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=8),
    default_args=d.default_args(),
    params={
        "threshold": d.threshold(1.0, "fraction of racks a partition must span, of "
                                      "min(RF, racks); 1.0 is KIP-36's full diversity"),
        "min_replication_factor": Param(1, type="integer", minimum=1,
                                        description="intended RF of every topic at least"),
        "max_bytes_per_run": d.max_bytes(50 * 1024**3),
        "dry_run": d.dry_run(),
    },
    tags=d.TAGS,
    doc_md=__doc__,
)
def selfheal_placement_audit() -> None:
    from selfheal_dag_support import audit_steps, steps

    @task(outlets=[d.SNAPSHOT])
    def snapshot() -> dict:
        return steps.snapshot("before", d.SNAPSHOT)

    @task(outlets=[d.PLACEMENT_REPORT])
    def audit(snap: dict, **context) -> dict:
        return audit_steps.audit_placement(snap, context["params"], d.PLACEMENT_REPORT)

    @task(outlets=[d.OFFLINE_PLAN])
    def plan(snap: dict, **context) -> dict:
        return audit_steps.plan_offline_fix(snap, context["params"], d.OFFLINE_PLAN)

    @task(pool=d.POOL)
    def submit(planned: dict, **context) -> dict:
        return steps.submit(planned, context["params"])

    @task.sensor(**d.sensor(timedelta(hours=6)))
    def wait(submitted: dict) -> PokeReturnValue:
        done, outcome = steps.poke(submitted)
        return PokeReturnValue(is_done=done, xcom_value=outcome)

    @task
    def report(audited: dict, planned: dict, outcome: dict) -> dict:
        return audit_steps.report_audit(audited, planned, outcome)

    snap = snapshot()
    planned = plan(snap)
    report(audit(snap), planned, wait(submit(planned)))


selfheal_placement_audit()
