"""Small, real action records for the executor and service tests."""

from __future__ import annotations

import copy
import hashlib
from typing import Any


def action_id(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()


def fix_offline(seed: str = "a", broker: int = 3, log_dir: str = "/data/d2",
                topic: str = "orders", partitions: int = 1, bytes_: int = 1_000_000,
                **over: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "version": 1,
        "cluster_id": "c1",
        "action_id": action_id(seed),
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
    return record


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
    return copy.deepcopy(record)
