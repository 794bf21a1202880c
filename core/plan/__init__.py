"""The planners: a cluster model in, a plan out, in the formats Kafka's tools read.

Pure functions, no I/O; `selfheal plan ...` (remediation/plan/cli.py) is a thin shell
over them:

    model = ClusterModel.load("snapshot.json")
    plan_offline(model).to_json()          # kafka-reassign-partitions.sh JSON
    plan_disks(model, threshold=1.10)      # intra-broker log-dir moves
    plan_leaders(model).election_json()    # kafka-leader-election.sh JSON
    plan_consumers(model, "group", "range")
    assign_replicas({0: "r1", 1: "r2"}, partitions=6, replication_factor=2, start_index=0)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.model import ClusterModel
    from core.plan.consumers import plan_consumers
    from core.plan.disks import plan_disks
    from core.plan.errors import PlanError
    from core.plan.leaders import plan_leaders
    from core.plan.offline import plan_offline
    from core.plan.replicas import assign_replicas

# Name -> module. Imported on first use, so `selfheal` loads only the planner it runs.
_EXPORTS = {
    "ClusterModel": "core.model",
    "PlanError": "core.plan.errors",
    "assign_replicas": "core.plan.replicas",
    "plan_consumers": "core.plan.consumers",
    "plan_disks": "core.plan.disks",
    "plan_leaders": "core.plan.leaders",
    "plan_offline": "core.plan.offline",
}
__all__ = [
    "ClusterModel",
    "PlanError",
    "assign_replicas",
    "plan_consumers",
    "plan_disks",
    "plan_leaders",
    "plan_offline",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
