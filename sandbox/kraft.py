"""KRaft storage for the sandbox: `kafka-storage format` of each node before it starts."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sandbox import jars, jvm
from sandbox.jvm import SandboxError
from sandbox.state import SandboxState, ServerState

# KIP-858: JBOD in KRaft needs metadata version 3.7-IV2 or later.
KRAFT_RELEASE_VERSION = "3.9"


def format_all(state: SandboxState, progress: Callable[[str], None]) -> None:
    """`kafka-storage format` for every KRaft node, in parallel (one JVM each)."""
    progress(f"formatting KRaft storage (cluster id {state.cluster_id}, "
             f"release {KRAFT_RELEASE_VERSION})")
    nodes = [s for s in state.servers() if s.role in ("controller", "broker")]

    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        list(pool.map(lambda node: format_node(state, node), nodes))


def format_node(state: SandboxState, node: ServerState) -> None:
    """`kafka-storage format` for one KRaft node; dirs already formatted are kept."""
    cmd = [
        jvm.java(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
        f"-Dlog4j.configuration=file:{Path(node.config).parent / 'log4j.properties'}",
        "-cp", jars.classpath("broker"), "kafka.tools.StorageTool", "format",
        "-t", state.cluster_id, "-c", node.config,
        "--release-version", KRAFT_RELEASE_VERSION, "--ignore-formatted",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise SandboxError(f"formatting storage for {node.role} {node.node_id} failed:\n"
                           f"{result.stdout}{result.stderr}")
