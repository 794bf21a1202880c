"""KRaft storage for the sandbox: `kafka-storage format` of each node before it starts."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sandbox import jvm, secure, versions
from sandbox.jvm import SandboxError
from sandbox.state import SandboxState, ServerState


def format_all(state: SandboxState, progress: Callable[[str], None]) -> None:
    """`kafka-storage format` for every KRaft node, in parallel (one JVM each)."""
    progress(f"formatting KRaft storage (cluster id {state.cluster_id}, "
             f"release {state.release}, "
             f"{state.quorum} quorum)")
    nodes = [s for s in state.servers() if s.role in ("controller", "broker")]

    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        list(pool.map(lambda node: format_node(state, node), nodes))


def format_node(state: SandboxState, node: ServerState) -> None:
    """`kafka-storage format` for one KRaft node, with the node's own Kafka line; dirs
    already formatted are kept. Every log dir gets a meta.properties with its own
    directory id (KIP-858)."""
    line = versions.line(state.kafka_of(node))
    cmd = [
        *jvm.tool_cmd(line, "128m", "kafka.tools.StorageTool",
                      line.log_flag(Path(node.config).parent)), "format",
        "-t", state.cluster_id, "-c", node.config,
        # the cluster's metadata version, not the node's: an upgraded broker re-formatting
        # a replaced disk joins the cluster it is in
        "--release-version", state.release,
        "--ignore-formatted",
    ]
    if state.quorum == "dynamic":
        # KIP-853: the one controller bootstraps the quorum as its only voter; the
        # brokers learn the voters from it
        cmd.append("--standalone" if node.role == "controller" else "--no-initial-controllers")
    if state.security is not None:
        cmd += secure.format_args(state.security)
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        said = f"{result.stdout}{result.stderr}"
        if state.security is not None and state.security.mode == "sasl_ssl":  # no password
            for user in secure.SUPER_USERS:
                said = said.replace(state.security.password(user), "[hidden]")
        raise SandboxError(f"formatting storage for {node.role} {node.node_id} failed:\n"
                           f"{said}")
