"""Which log dirs to cordon and which of our cordons to lift (KIP-1066, Kafka 4.3+).

A cordoned dir keeps its replicas and serves them, but the broker creates no new replica
there (new partitions and replicas arriving by reassignment alike) and refuses disk moves
into it. Two kinds of dir are cordoned while the moves that fix them run:

- a dir past the disk-skew limit (above `threshold` x its broker's mean ratio, the rule
  `core.plan.disks` evens out), so the planner's moves out of it are not refilled;
- a dir that failed and came back online (`returned`), so it is not refilled while its
  health is still in doubt.

A cordon is lifted only when the product made it (`ours`), the dir is online, no longer
among `returned`, and within the skew limit again. An operator's cordons are never
touched, and a broker's last uncordoned online dir is never cordoned: with every dir
cordoned the controller places nothing on the broker at all.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from core.model import ClusterModel
from core.plan.disks import DEFAULT_THRESHOLD, broker_usage, mean_ratio, over_limit

DirKey = tuple[int, str]

# metadata.version 4.3-IV0 (MetadataVersion.IBP_4_3_IV0's feature level): the first that
# honours cordoned.log.dirs; before it a dynamic set is refused.
CORDON_METADATA_LEVEL = 30


@dataclass(frozen=True, slots=True)
class DirCordon:
    """One dir to cordon or to lift our cordon from, and why (human text)."""

    broker: int
    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class CordonPlan:
    cordon: tuple[DirCordon, ...] = ()
    uncordon: tuple[DirCordon, ...] = ()
    # One line when the cluster cannot cordon (nothing is proposed then); None otherwise.
    unsupported: str | None = None


def unsupported(metadata_level: int | None) -> str | None:
    """Why this cluster cannot cordon a dir, in one line; None when it can."""
    if metadata_level is None:
        return ("log-dir cordoning needs KRaft with metadata.version 4.3-IV0 or later; "
                "this cluster reports no metadata.version (ZooKeeper mode), so no dir is "
                "cordoned")
    if metadata_level < CORDON_METADATA_LEVEL:
        return (f"log-dir cordoning needs metadata.version 4.3-IV0 (level "
                f"{CORDON_METADATA_LEVEL}) or later; this cluster is at level "
                f"{metadata_level}, so no dir is cordoned (finalise a newer metadata.version "
                "with kafka-features.sh to use it)")
    return None


def plan_cordons(model: ClusterModel, threshold: float = DEFAULT_THRESHOLD, *,
                 ours: Collection[DirKey] = (), returned: Collection[DirKey] = (),
                 metadata_level: int | None = CORDON_METADATA_LEVEL) -> CordonPlan:
    """The cordons to add and the cordons of ours to lift, from one snapshot."""
    why_not = unsupported(metadata_level)
    if why_not is not None:
        return CordonPlan(unsupported=why_not)
    ours_set, returned_set = set(ours), set(returned)
    cordon: list[DirCordon] = []
    uncordon: list[DirCordon] = []
    for broker in sorted(model.brokers):
        if broker not in model.alive:
            continue  # a dynamic config cannot reach a broker that is down
        dirs = model.dirs[broker]
        over = over_limit_dirs(model, broker, threshold)
        free = [p for p, d in dirs.items() if d.online and not d.cordoned]
        # A dir back from its failure first: it is empty, so its sibling reads past the
        # skew limit; of the two only one may be cordoned, and it is the returned one.
        for path, d in sorted(dirs.items(), key=lambda kv: ((broker, kv[0]) not in
                                                            returned_set, kv[0])):
            key = (broker, path)
            if not d.online:
                continue  # nothing is placed on a failed dir anyway
            if d.cordoned:
                if key in ours_set and key not in returned_set and path not in over:
                    uncordon.append(DirCordon(broker, path, (
                        f"log dir {path} on broker {broker} is online and within "
                        f"{threshold:.2f}x its broker's mean again: lifting our cordon")))
                continue
            if key in returned_set:
                why = (f"log dir {path} on broker {broker} failed and is back online: "
                       "cordoned so no new replica lands there until it is trusted again")
            elif path in over:
                why = (f"log dir {path} on broker {broker} is at {over[path]:.2f}x its "
                       f"broker's mean (limit {threshold:.2f}x): cordoned so no new replica "
                       "lands there while the moves out of it run")
            else:
                continue
            if free == [path]:
                continue  # the broker's last open dir: cordoning it would close the broker
            free.remove(path)
            cordon.append(DirCordon(broker, path, why))
    return CordonPlan(tuple(cordon), tuple(uncordon))


def over_limit_dirs(model: ClusterModel, broker: int, threshold: float) -> dict[str, float]:
    """The broker's online dirs above the skew limit, with their ratio to the mean."""
    dirs = broker_usage(model, broker)
    if len(dirs) < 2 or not any(d.used for d in dirs):
        return {}
    mean = mean_ratio(dirs)
    return {d.path: d.ratio / mean for d in dirs
            if over_limit(d.used, threshold * mean * d.capacity)}
