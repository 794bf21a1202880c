"""An operator at work beside kafka-selfheal: the real `kafka-reassign-partitions` and
`kafka-configs` tools from the broker's own jars (their main classes per Kafka line:
sandbox/versions.py), and the throttle configs they set by hand."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from sandbox import jvm, versions
from sandbox.state import SandboxState
from sandbox.status import kafka_admin


def reassign_tool(state: SandboxState, work: Path, name: str,
                  targets: dict[tuple[str, int], list[int]], *args: str) -> str:
    """Run kafka-reassign-partitions with a plan file of `targets` (written to
    work/<name>.json); its stdout. Fails the test with the tool's stderr if it fails."""
    plan = work / f"{name}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(targets.items())]}))
    return _tool(state, versions.line(state.kafka).reassign_tool,
                 "--reassignment-json-file", str(plan), *args)


def default_rates(state: SandboxState, *args: str) -> str:
    """kafka-configs on the cluster-wide broker default (`--entity-default`), as an
    operator sets one: `--alter --add-config k=v`, `--delete-config k`, `--describe`."""
    return _tool(state, versions.line(state.kafka).configs_tool,
                 "--entity-type", "brokers", "--entity-default", *args)


def _tool(state: SandboxState, main: str, *args: str) -> str:
    """One of Kafka's command-line tools from the broker's own jars; its stdout. Fails the
    test with the tool's stderr if it fails."""
    line = versions.line(state.kafka)
    cmd = [*jvm.tool_cmd(line, "256m", main), "--bootstrap-server", state.bootstrap_servers,
           *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{' '.join(args)}: {done.stdout}\n{done.stderr}"
    return done.stdout


def set_configs(state: SandboxState, kind: str, name: str,
                values: dict[str, str | None]) -> None:
    """Incremental alter, as `kafka-configs --alter --add-config/--delete-config` does."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

    kinds = {"broker": ConfigResourceType.BROKER, "topic": ConfigResourceType.TOPIC}
    ops = {k: (AlterConfigOp.DELETE, None) if v is None else (AlterConfigOp.SET, v)
           for k, v in values.items()}
    with kafka_admin(state) as admin:
        reply = admin.alter_configs([ConfigResource(kinds[kind], name, ops)],
                                    raise_on_unknown=False, incremental=True)
    assert all(r == "OK" for by_name in reply.values() for r in by_name.values()), reply


def in_flight(state: SandboxState) -> dict[tuple[str, int], list[int]]:
    """Each reassignment in flight and the replica list it ends at."""
    with kafka_admin(state) as admin:
        found = admin.list_partition_reassignments()
    return {(tp.topic, tp.partition): [b for b in r["replicas"]
                                       if b not in r["removing_replicas"]]
            for tp, r in found.items()}
