"""What every selfheal DAG shares: the pool, retries, the Assets, the params, the sensor."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Asset, Param

# One slot: at most one task at a time submits moves to the cluster, across every DAG.
# `selfheal airflow up` creates it; elsewhere: airflow pools set kafka_reassignment 1 "..."
POOL = "kafka_reassignment"
START = datetime(2026, 1, 1, tzinfo=UTC)
TAGS = ["selfheal", "kafka"]

# Downstream DAGs can follow these (schedule=[SNAPSHOT]); each event's extra names the
# file (path), the cluster and, for plans, the action id.
SNAPSHOT = Asset(name="selfheal_cluster_snapshot", uri="selfheal://cluster/snapshot")
DISK_PLAN = Asset(name="selfheal_plan_disks", uri="selfheal://plans/move_replica_dirs")
LEADER_PLAN = Asset(name="selfheal_plan_leaders", uri="selfheal://plans/rebalance_leaders")
CONSUMER_PLAN = Asset(name="selfheal_plan_consumers", uri="selfheal://plans/assign_consumers")
OFFLINE_PLAN = Asset(name="selfheal_plan_offline", uri="selfheal://plans/fix_offline_replicas")
PLACEMENT_REPORT = Asset(name="selfheal_placement_report", uri="selfheal://reports/placement")


def default_args() -> dict[str, Any]:
    """Retries with exponential backoff: 30 s, 60 s, 120 s (Kafka or serve briefly away)."""
    return {
        "owner": "selfheal",
        "retries": 3,
        "retry_delay": timedelta(seconds=30),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=10),
    }


def sensor(timeout: timedelta) -> dict[str, Any]:
    """A reschedule-mode sensor: no worker slot is held while serve works or a human
    decides; `timeout` covers the approval TTL (1 h by default) plus the move itself."""
    return {"mode": "reschedule", "poke_interval": 15, "timeout": timeout.total_seconds(),
            "retries": 0}


def dry_run(default: bool = False) -> Param:
    return Param(default, type="boolean",
                 description="plan and report only; submit nothing to serve")


def threshold(default: float, what: str) -> Param:
    return Param(default, type="number", minimum=1.0, description=what)


def max_bytes(default: int) -> Param:
    return Param(default, type="integer", minimum=0,
                 description="most bytes one run may move (0: no cap); the rest waits for "
                             "the next run")
