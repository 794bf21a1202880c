"""A rolling upgrade of the sandbox to another Kafka line, as an operator does one: each
server stopped cleanly, restarted on the new line's jars, and the next one only once the
cluster has every replica back in sync.

The metadata version is left where it was (no `kafka-features upgrade`): until an
operator finalises it the cluster can still be rolled back, and the brokers of both lines
keep talking the same metadata.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from sandbox import cluster, jvm, processes, versions
from sandbox.jvm import SandboxError
from sandbox.startup import wait_port
from sandbox.state import SandboxState, ServerState

Progress = Callable[[str], None]


def under_replicated(state: SandboxState) -> list[str]:
    """Partitions whose ISR is short of their replicas, by the cluster's metadata."""
    from sandbox.status import kafka_admin

    with kafka_admin(state) as admin:
        topics = admin.describe_topics()
    return [f"{t['name']}-{p['partition_index']}" for t in topics for p in t["partitions"]
            if len(p["isr_nodes"]) < len(p["replica_nodes"])]


def _wait_in_sync(state: SandboxState, timeout: float, progress: Progress) -> None:
    deadline = time.monotonic() + timeout
    while short := under_replicated(state):
        if time.monotonic() > deadline:
            raise SandboxError(f"{len(short)} partitions still under-replicated after "
                               f"{timeout:.0f} s (e.g. {', '.join(short[:5])}); the upgrade "
                               "stops here so no second server goes down with them")
        time.sleep(0.5)
    progress("every replica in sync")


def _restart_on(state: SandboxState, server: ServerState, line: versions.KafkaLine,
                timeout: float, progress: Progress) -> None:
    conf_dir = Path(server.config).parent
    line.write_log_config(conf_dir, conf_dir / "server.log")
    if not processes.stop(server.pid, server.marker, timeout=60):
        raise SandboxError(f"{server.role} {server.node_id} was not running")
    server.pid = None
    server.kafka = line.line
    state.save()
    jvm.start(state, server)
    progress(f"{server.role} {server.node_id} restarted on Kafka {line.version} "
             f"(pid {server.pid})")
    if server.role == "broker":
        cluster.wait_ready(state, [server.node_id], timeout=timeout, progress=progress)
    else:
        wait_port(server, timeout)


def rolling_upgrade(state: SandboxState, to: str, timeout: float = 180.0,
                    progress: Progress = cluster._quiet) -> None:
    """Move every server to Kafka line ``to``, one at a time: the controller first, then
    each broker, waiting for the ISRs to fill before the next."""
    line = versions.line(to)
    if state.mode not in line.modes:
        raise SandboxError(f"this sandbox runs in {state.mode} mode, which Kafka {to} does "
                           f"not have; a ZooKeeper cluster must migrate to KRaft first")
    for server in state.servers():
        if not processes.is_running(server.pid, server.marker):
            raise SandboxError(f"{server.role} {server.node_id} is not running: start it "
                               "before a rolling upgrade")
    for server in state.servers():
        if state.kafka_of(server) == line.line:
            continue
        _restart_on(state, server, line, timeout, progress)
        _wait_in_sync(state, timeout, progress)
    state.kafka = line.line
    for server in state.servers():
        server.kafka = None
    state.save()
    progress(f"every server runs Kafka {line.version}; the metadata version is still "
             f"release {state.release}'s")
