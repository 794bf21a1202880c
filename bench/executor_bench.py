"""The executor's own overhead per action, without Kafka's data movement.

One `fix_offline_replicas` action (1, 10 and 100 partitions, planned on a synthetic
cluster) goes through the real `Executor`: intake (parse, schema, id check, refusal
checks, store, policy) and every execution step (re-read, staleness check, journal,
throttle bookkeeping, progress, verification) to `succeeded`. Kafka is replaced by a
stand-in that completes each move the moment it is asked and answers config calls from
memory, so what is timed is the executor's work; each re-read still builds the cluster
model from a full snapshot document, as the real one does after Kafka answers.

Figures: milliseconds per action, split into the re-reads (model building, which grows
with the cluster) and everything else (which grows with the plan); the store is a real
SQLite file. Repeated; best and median shown, as the machine is shared.
"""

from __future__ import annotations

import copy
import secrets
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import synthetic
from core import clock
from core.model import ClusterModel
from core.plan import plan_offline
from core.plan.formats import OfflinePlan, Reassignment
from core.signing import ActionSigner
from remediation.executor.policy import policy_from_mapping
from remediation.executor.runner import Executor
from remediation.executor.store import ActionStore
from remediation.executor.view import LiveView
from schemas.actions import build_action
from schemas.records import Trigger
from schemas.snapshot import snapshot_from_dict

CLUSTERS = (("small", {"brokers": 12, "partitions": 1_000}),
            ("1/10", synthetic.TENTH),
            ("full", synthetic.FULL))
PLAN_SIZES = (1, 10, 100)
# Runs by itself whatever the synthetic cluster's failures (one failed dir per 50 brokers).
POLICY = policy_from_mapping({"actions": {"fix_offline_replicas": "auto"},
                              "limits": {"max_partitions_per_action": 1000},
                              "breaker": {"max_failed_brokers": 1000,
                                          "max_failed_log_dir_percent": 100}})


class InstantCluster:
    """Kafka as the executor sees it, with every move done the moment it is asked."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.parts = {(p["topic"], p["partition"]): p for p in doc["partitions"]}
        self.settings: dict[str, dict[str, str | None]] = {}
        self.last_view: LiveView | None = None
        self.read_seconds = 0.0
        self.reads = 0

    def read(self, future_of: Any = (), topics: Any = None) -> LiveView:
        t = time.perf_counter()
        doc = self.doc
        if topics is not None:  # as KafkaCluster.read does
            wanted = set(topics)
            doc = {**doc, "partitions": [p for p in doc["partitions"] if p["topic"] in wanted]}
        self.last_view = LiveView(ClusterModel(snapshot_from_dict(doc)))
        self.read_seconds += time.perf_counter() - t
        self.reads += 1
        return self.last_view

    def configs(self, resources: Any, keys: Any) -> dict[str, dict[str, str | None]]:
        return {r: {k: self.settings.get(r, {}).get(k) for k in keys} for r in resources}

    def alter_configs(self, changes: dict[str, dict[str, str | None]]) -> None:
        for r, keys in changes.items():
            self.settings.setdefault(r, {}).update(keys)

    def reassign(self, targets: dict[tuple[str, int], list[int] | None]) -> dict[Any, str]:
        for tp, replicas in targets.items():
            if replicas is None:
                continue
            p = self.parts[tp]
            size = max(r["size_bytes"] for r in p["replicas"])
            dirs = {b["id"]: next(d["path"] for d in b["log_dirs"] if d["online"])
                    for b in self.doc["brokers"] if b["id"] in replicas}
            p["replicas"] = [{"broker": b, "log_dir": dirs[b], "size_bytes": size}
                             for b in replicas]
            p["isr"], p["leader"] = list(replicas), replicas[0]
        return {}

    def move_dirs(self, moves: Any) -> dict[Any, str]:
        for (topic, partition, broker), path in moves.items():
            for r in self.parts[(topic, partition)]["replicas"]:
                if r["broker"] == broker:
                    r["log_dir"] = path
        return {}

    def elect_preferred(self, partitions: Any) -> dict[Any, str]:
        return {}


def one_action(doc: dict[str, Any], plan: OfflinePlan, work: Path) -> tuple[float, float,
                                                                             int]:
    """(total s, of which re-reads s, reads) for one action from intake to succeeded."""
    cluster = InstantCluster(copy.deepcopy(doc))
    store = ActionStore(work / f"{time.perf_counter_ns()}.sqlite")
    try:
        signer = ActionSigner(secrets.token_hex(32))
        executor = Executor(store, cluster, POLICY, signer=signer,  # type: ignore[arg-type]
                            log=lambda m: None)
        action = build_action(doc["cluster_id"], "fix_offline_replicas", plan,
                              reason="bench", trigger=Trigger("snapshot"),
                              event_time=clock.text(), bytes_moved=1 << 30,
                              created_at=clock.text())
        raw = signer.sign_action(action).to_json()
        t = time.perf_counter()
        received = executor.receive(raw, "bench[0]@0")
        assert received.state is not None and received.state.value == "approved", received
        for _ in range(20):
            executor.tick()
            row = store.get(action.action_id)
            if row is not None and not row.open:
                break
        total = time.perf_counter() - t
        row = store.get(action.action_id)
        assert row is not None and row.state.value == "succeeded", (row, store.audit(row.id))
        return total, cluster.read_seconds, cluster.reads
    finally:
        store.close()


def main(repeats: int = 5) -> None:
    work = Path(tempfile.mkdtemp(prefix="selfheal-executor-bench-"))
    try:
        print(f"{'cluster':<8}{'partitions':>11}{'plan':>6}{'total ms':>10}{'median':>8}"
              f"{'re-reads':>10}{'reads':>7}{'rest ms':>9}  (best of {repeats}; median total)")
        for label, size in CLUSTERS:
            doc = synthetic.generate(**size)
            full = plan_offline(ClusterModel(snapshot_from_dict(doc)))
            for n in PLAN_SIZES:
                plan = OfflinePlan(Reassignment(full.reassignment.partitions[:n]))
                if len(plan.reassignment.partitions) < n:
                    continue
                runs = [one_action(doc, plan, work) for _ in range(repeats)]
                best = min(runs)
                median = statistics.median(r[0] for r in runs)
                print(f"{label:<8}{size['partitions']:>11}{n:>6}{best[0] * 1000:>10.1f}"
                      f"{median * 1000:>8.1f}{best[1] * 1000:>10.1f}{best[2]:>7}"
                      f"{(best[0] - best[1]) * 1000:>9.1f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
