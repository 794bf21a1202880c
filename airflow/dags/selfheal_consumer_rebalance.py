"""selfheal_consumer_rebalance (every 15 min): KIP-881 rack-aware consumer assignments.

For the groups that opt in (the run's `groups` param, else the Airflow variable
`selfheal_consumer_groups`, comma-separated): snapshot with the groups' members (their
client.rack and topics, read with DescribeGroups) -> plan (`core.plan.plan_consumers`;
cross-rack partitions and locality now against planned) -> submit (one signed
`assign_consumers` per group that reads across racks by more than the threshold, to
`selfheal serve`, pool `kafka_reassignment`; serve's policy and limits decide as for the
other DAGs) -> wait (reschedule-mode sensor) -> report. serve publishes each target to
the consumer-assignments topic; the group's members apply it through the client-side
helper (`RackAwareConsumer`, docs/consumer-groups.md). A KIP-848 group is reported with
what an operator can set and never submitted. `dry_run` is on by default: a run plans and
reports until an operator turns it off for the groups that run the helper.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param, PokeReturnValue, dag, task
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
        "strategy": Param("auto", enum=["auto", "range", "cooperative-sticky"],
                          description="the KIP-881 assignor to plan with; auto: the group's "
                                      "own when it is one of them, else cooperative-sticky"),
        "threshold": d.threshold(1.10, "a group is re-assigned when more than "
                                       "(threshold - 1) of its partitions are consumed "
                                       "cross-rack and the plan has fewer"),
        "dry_run": d.dry_run(True),
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

    @task(pool=d.POOL)
    def submit(planned: dict, **context) -> list:
        return group_steps.submit_groups(planned, context["params"])

    @task.sensor(**d.sensor(timedelta(minutes=12)))
    def wait(submitted: list) -> PokeReturnValue:
        done, outcomes = group_steps.poke_groups(submitted)
        return PokeReturnValue(is_done=done, xcom_value=outcomes)

    @task
    def report(planned: dict, outcomes: list) -> dict:
        return group_steps.report_consumers(planned, outcomes)

    planned = plan(snapshot())
    report(planned, wait(submit(planned)))


selfheal_consumer_rebalance()
