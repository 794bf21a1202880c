"""Small, real action records for the executor and service tests.

Each record's action id is the hash of its content, as the executor demands. `seed`
tells apart records that would otherwise carry the same plan: any seed but the default
names the plan's topic after it.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from schemas.actions import action_id as content_id

DEFAULT_SEED = "a"


def action_id(seed: str) -> str:
    """A well-formed id that belongs to no record (for link tests)."""
    return hashlib.sha256(seed.encode()).hexdigest()


def with_id(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its action id recomputed from its cluster, type and plan."""
    record["action_id"] = content_id(record["cluster_id"], record["type"], record["plan"])
    return record


def fix_offline(seed: str = DEFAULT_SEED, broker: int = 3, log_dir: str = "/data/d2",
                topic: str | None = None, partitions: int = 1, bytes_: int = 1_000_000,
                **over: Any) -> dict[str, Any]:
    if topic is None:
        topic = "orders" if seed == DEFAULT_SEED else f"orders-{seed}"
    record: dict[str, Any] = {
        "version": 1,
        "cluster_id": "c1",
        "action_id": "",
        "type": "fix_offline_replicas",
        "created_at": "2026-11-22T03:00:00Z",
        "event_time": "2026-11-22T02:59:58Z",
        "reason": f"log dir {log_dir} on broker {broker} is offline",
        "trigger": {"kind": "logdir_event", "broker": broker, "log_dir": log_dir},
        "plan": {
            "version": 1,
            "partitions": [
                {"topic": topic, "partition": p, "replicas": [1, 2, 4],
                 "log_dirs": ["any", "any", "/data/d1"]}
                for p in range(partitions)
            ],
        },
        "summary": {"partitions": partitions, "bytes": bytes_, "brokers": [1, 2, 4]},
    }
    record.update(over)
    return with_id(record) if "action_id" not in over else record


def of_type(type_: str, seed: str = "t", **over: Any) -> dict[str, Any]:
    record = fix_offline(seed, type=type_)
    if type_ == "move_replica_dirs":
        record["plan"] = {"version": 1, "partitions": [
            {"topic": "orders", "partition": 0, "replicas": [1, 2, 3],
             "log_dirs": ["/data/d2", "any", "any"]}]}
        record["summary"] = {"partitions": 1, "bytes": 5_000, "brokers": [1]}
    elif type_ == "rebalance_leaders":
        record["plan"] = {
            "reassignment": {"version": 1, "partitions": [
                {"topic": "orders", "partition": 0, "replicas": [2, 1, 3]}]},
            "election": {"partitions": [{"topic": "orders", "partition": 0}]},
        }
        record["summary"] = {"partitions": 1, "bytes": 0, "brokers": [1, 2]}
    elif type_ == "assign_consumers":
        record["plan"] = {"group": "g1", "assignment": {}, "cross_rack": 0}
        record["summary"] = {"partitions": 0, "bytes": 0, "brokers": []}
    elif type_ == "page_operator":
        record["plan"] = {"message": "replace the disk at /data/d2 on broker 3",
                          "brokers": [3], "log_dirs": ["/data/d2"]}
        record["summary"] = {"partitions": 0, "bytes": 0, "brokers": [3]}
    record.update(over)
    return copy.deepcopy(with_id(record) if "action_id" not in over else record)
