"""selfheal_consumer_rebalance (every 15 min): KIP-881 rack-aware consumer assignments.

For the groups that opt in (the run's `groups` param, else the Airflow variable
`selfheal_consumer_groups`, comma-separated): snapshot with the groups' members (their
client.rack and topics, read with DescribeGroups) -> plan (`core.plan.plan_consumers`)
-> report (cross-rack partitions now against planned). It plans and reports only: the
apply path (`assign_consumers` through serve) comes with the consumer-groups issue, so
no task submits and none needs the `kafka_reassignment` pool.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param, dag, task
from selfheal_dag_support import defaults as d


@dag(
    dag_id="selfheal_consumer_rebalance",
    schedule="*/15 * * * *",
    start_date=d.START,
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(minutes=14),
    default_args=d.default_args(),
    params={
        "groups": Param([], type="array", description="groups to plan (empty: the variable "
                                                      "selfheal_consumer_groups)"),
        "strategy": Param("range", enum=["range", "cooperative-sticky"],
                          description="the groups' partition.assignment.strategy"),
        "threshold": d.threshold(1.10, "a group would be re-assigned when more than "
                                       "(threshold - 1) of its partitions are consumed "
                                       "cross-rack and the plan has fewer"),
        "max_bytes_per_run": d.max_bytes(0),
        "dry_run": Param(True, type="boolean", description="always a dry run until the "
                                                           "apply path exists"),
    },
    tags=d.TAGS,
    doc_md=__doc__,
)
def selfheal_consumer_rebalance() -> None:
    from selfheal_dag_support import group_steps, steps

    @task(outlets=[d.SNAPSHOT])
    def snapshot(**context) -> dict:
        return steps.snapshot("before", d.SNAPSHOT,
                              groups=group_steps.opted_in_groups(context["params"]))

    @task(outlets=[d.CONSUMER_PLAN])
    def plan(snap: dict, **context) -> dict:
        return group_steps.plan_consumer_groups(snap, context["params"], d.CONSUMER_PLAN)

    @task
    def report(planned: dict) -> dict:
        return group_steps.report_consumers(planned)

    report(plan(snapshot()))


selfheal_consumer_rebalance()
