"""Same-broker recovery on JBOD: what an operator does when no other broker may take a
replica lost with a failed dir (the replication factor equals the brokers that could hold
it), so re-replication cannot help.

Two ways, both on the broker itself (facts from Kafka's source, 3.7+ and 4.x):
- replace the disk and mount it at the same path, then restart the broker. In KRaft a
  broker refuses a log dir without `meta.properties`, so the new disk is formatted first
  (`kafka-storage.sh format --ignore-formatted` formats only the dirs that are not).
- remove the dir from `log.dirs` and restart the broker. Its replicas that were there
  are created again in one of its remaining dirs (the log manager picks a dir when the
  one assigned is not among its own) and copied from their leaders; the broker then
  reports the new dir to the controller. Not possible for the dir that holds the
  cluster metadata (`metadata.log.dir`, by default the first of `log.dirs`).
"""

from __future__ import annotations

from core.model import ClusterModel
from core.plan.formats import human_bytes

# The part of the offline planner's reason that says no other broker may take the replica.
NO_OTHER_BROKER = "too few alive brokers with an online dir outside the partition"


def same_broker_steps(model: ClusterModel, broker: int, failed: list[str],
                      need_bytes: int) -> str:
    """The operator's steps on `broker` for the replicas lost with its `failed` dirs
    (`need_bytes`: what they held), with the free space of each of its healthy dirs."""
    where = ", ".join(failed) or "the failed dir"
    healthy = sorted(p for p, d in model.dirs.get(broker, {}).items()
                     if d.online and p not in failed)
    free = {p: model.free_bytes(broker, p) for p in healthy}
    shown = ", ".join(f"{p} {human_bytes(v)} free" if v is not None else f"{p} free space "
                      "unknown" for p, v in free.items()) or "none"
    known = [v for v in free.values() if v is not None]
    room = ("" if not known or len(known) < len(free) or max(known) >= need_bytes else
            " (no healthy dir has room for all of it: replace the disk instead, or free "
            "space first)")
    return (f"No other broker may take these replicas, so re-replication cannot help: "
            f"recover them on broker {broker} itself. Either (1) replace the failed disk, "
            f"mount it at {where} again, format it if the cluster runs KRaft "
            f"(kafka-storage.sh format --ignore-formatted --cluster-id <the cluster's id> "
            f"--config <broker {broker}'s server.properties>) and restart broker {broker}; or "
            f"(2) remove {where} from log.dirs in broker {broker}'s server.properties and "
            f"restart it: its replicas from there are created again on its healthy dirs and "
            f"copied from their leaders ({human_bytes(need_bytes)} to copy; healthy dirs: "
            f"{shown}){room}. (2) is not possible for the dir that holds the cluster "
            f"metadata (metadata.log.dir). Then kafka-topics.sh --describe "
            f"--under-replicated-partitions shows them until they are back in sync")
