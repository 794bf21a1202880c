"""The executor's cordon step: cordon one log dir, or lift a cordon it made, through
IncrementalAlterConfigs (`cordoned.log.dirs`, arithmetic in `cordon.py`), verified by
DescribeLogDirs v5's `IsCordoned` as the broker reports it.

`cordon` returns the journal entry the undo needs (what the broker's own dynamic value
was, and whether we added the dir at all); `uncordon` takes that entry and removes our
dir only. Both refuse, in one line, a cluster whose metadata version cannot cordon.
"""

from __future__ import annotations

import time
from typing import Any

from core.plan.cordon import unsupported
from remediation.executor.cluster import ClusterError, KafkaCluster
from remediation.executor.cordon import with_dir, without_dir
from remediation.executor.lifecycle import State
from remediation.executor.store import ActionStore

CORDON_VISIBLE_SECONDS = 15.0


def prepare(cluster: KafkaCluster, broker: int, path: str) -> dict[str, Any]:
    """The journal entry of a cordon, read before anything changes: whether the dir is
    ours to cordon (`added` False: cordoned already, the cordon is not ours) and the
    broker's own dynamic value the undo must give back."""
    _check_supported(cluster)
    found = cluster.cordon_config(broker)
    return {"broker": broker, "path": path, "added": not found.cordoned(path),
            "dynamic_before": found.dynamic}


def apply(cluster: KafkaCluster, entry: dict[str, Any]) -> None:
    """Cordon the entry's dir if it is ours to cordon; safe to run again after a crash
    (a dir listed already is not listed twice)."""
    if not entry.get("added"):
        return
    broker, path = int(entry["broker"]), str(entry["path"])
    change = with_dir(cluster.cordon_config(broker), path)
    if change:
        cluster.alter_configs({f"broker:{broker}": change})
    _await(cluster, broker, path, cordoned=True)


def cordon(cluster: KafkaCluster, broker: int, path: str) -> dict[str, Any]:
    """`prepare` then `apply`: cordon `path` on `broker`, returning the journal entry."""
    entry = prepare(cluster, broker, path)
    apply(cluster, entry)
    return entry


def uncordon(cluster: KafkaCluster, entry: dict[str, Any]) -> bool:
    """Lift the cordon `cordon` journalled, taking our dir only; False when there was
    nothing of ours to lift."""
    if not entry.get("added"):
        return False
    _check_supported(cluster)
    broker, path = int(entry["broker"]), str(entry["path"])
    change = without_dir(cluster.cordon_config(broker), path, entry.get("dynamic_before"))
    if not change:
        return False
    cluster.alter_configs({f"broker:{broker}": change})
    _await(cluster, broker, path, cordoned=False)
    return True


def ours(store: ActionStore, cluster_id: str, broker: int,
         path: str) -> tuple[str, dict[str, Any]] | None:
    """The newest finished cordon action of ours on (broker, path) not yet lifted: its id
    and journal entry; None when the dir holds no cordon we made."""
    for row in reversed(store.list(State.SUCCEEDED, cluster_id)):
        entry = row.journal.get("cordon")
        if (row.type == "cordon_log_dir" and entry and entry.get("added")
                and not entry.get("lifted") and entry["broker"] == broker
                and entry["path"] == path):
            return row.id, dict(entry)
    return None


def why_not(cluster: KafkaCluster) -> str | None:
    """One line saying why this cluster cannot cordon a dir; None when it can."""
    return unsupported(cluster.metadata_level())


def _check_supported(cluster: KafkaCluster) -> None:
    reason = why_not(cluster)
    if reason is not None:
        raise ClusterError(reason)


def _await(cluster: KafkaCluster, broker: int, path: str, cordoned: bool) -> None:
    """Wait until the broker itself reports the dir (un)cordoned: it applies a dynamic
    config moments after the alter returns, and a replica created in between could still
    land there."""
    deadline = time.monotonic() + CORDON_VISIBLE_SECONDS
    while (path in cluster.cordoned_dirs(broker)) != cordoned:
        if time.monotonic() > deadline:
            raise ClusterError(
                f"broker {broker} does not report log dir {path} "
                f"{'cordoned' if cordoned else 'uncordoned'} {CORDON_VISIBLE_SECONDS:.0f} s "
                "after the config change; check the broker's cordoned.log.dirs")
        time.sleep(0.2)
