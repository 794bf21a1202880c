"""Is every replica in sync, and if not, which and why: the precondition of a fault in
the chaos scenarios (one fault at a time), with what the brokers said when it is not met."""

from __future__ import annotations

from collections import deque
from pathlib import Path

from sandbox.state import SandboxState
from sandbox.status import kafka_admin

# What tells why a replica stays out of the ISR after ZooKeeper or a broker went away: a
# warning or error, or the INFO lines of a session expiring, a broker re-registering, a
# controller elected, an ISR change sent or refused, a fetcher giving a partition up.
_INFO_CLUES = ("Session expired", "Registered broker", "elected as the controller",
               "AlterPartition", "ineligible", "marked as failed", "Shrinking ISR",
               "Expanding ISR", "older epoch", "Ignoring LeaderAndIsr", "broker epoch")


def _telling(line: str) -> bool:
    return ("] WARN " in line or "] ERROR " in line
            or ("] INFO " in line and any(clue in line for clue in _INFO_CLUES)))


def out_of_sync(state: SandboxState, prefix: str, topic: str) -> list[str]:
    """The partitions of the loop's bus topics and of ``topic`` that are leaderless or
    have a replica out of the ISR, one line each."""
    with kafka_admin(state) as admin:
        found = admin.describe_topics()
    return [f"{t['name']}-{p['partition_index']}: leader {p['leader_id']}, replicas "
            f"{sorted(p['replica_nodes'])}, isr {sorted(p['isr_nodes'])}"
            for t in found if t["name"].startswith(prefix) or t["name"] == topic
            for p in t["partitions"]
            if p["leader_id"] < 0 or set(p["isr_nodes"]) != set(p["replica_nodes"])]


def in_sync(state: SandboxState, prefix: str, topic: str) -> bool:
    """Every partition of the loop's bus topics and of ``topic`` led, all replicas in sync."""
    return not out_of_sync(state, prefix, topic)


def why_not_in_sync(state: SandboxState, prefix: str, topic: str, lines: int = 20) -> str:
    """For a failed wait: the partitions still out of sync and each broker's last telling
    lines (a stuck ISR change, a fetcher's errors, a controller that did not answer)."""
    try:
        bad = out_of_sync(state, prefix, topic)
    except Exception as exc:  # the cluster may be what is wrong
        bad = [f"(describing the topics failed: {exc!r})"]
    shown = "\n".join(bad[:20]) + (f"\n... and {len(bad) - 20} more" if len(bad) > 20 else "")
    parts = [f"--- out of sync ({len(bad)}):\n{shown}"]
    for broker in state.brokers:
        warned: deque[str] = deque(maxlen=lines)
        path = Path(broker.config).parent / "server.log"  # log4j's, beside its config
        if path.exists():
            with path.open(errors="replace") as log:
                warned.extend(line.rstrip()[:400] for line in log if _telling(line))
        parts.append(f"--- broker {broker.node_id}, its last warnings and ISR news "
                     f"({path}):\n"
                     + ("\n".join(warned) or "(none)"))
    return "\n".join(parts)
