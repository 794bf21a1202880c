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

CORDON_VISIBLE_SECONDS = 15.0


def cordon(cluster: KafkaCluster, broker: int, path: str) -> dict[str, Any]:
    """Cordon `path` on `broker`; returns the journal entry for `uncordon`. A dir that is
    cordoned already is left as it is (`added` False: the cordon is not ours)."""
    _check_supported(cluster)
    found = cluster.cordon_config(broker)
    change = with_dir(found, path)
    entry = {"broker": broker, "path": path, "added": bool(change),
             "dynamic_before": found.dynamic}
    if change:
        cluster.alter_configs({f"broker:{broker}": change})
        _await(cluster, broker, path, cordoned=True)
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


def _check_supported(cluster: KafkaCluster) -> None:
    why_not = unsupported(cluster.metadata_level())
    if why_not is not None:
        raise ClusterError(why_not)


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
