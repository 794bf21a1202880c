"""What the sandbox looks like right now: processes, racks, ports, log dirs, controller."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from core.live import KAFKA_STORAGE_ERROR, open_admin
from sandbox import processes, prometheus
from sandbox.cluster import client_config, disk_failed
from sandbox.state import SandboxState

__all__ = ["KAFKA_STORAGE_ERROR", "kafka_admin", "placement", "status", "render"]


@contextlib.contextmanager
def kafka_admin(state: SandboxState) -> Iterator[Any]:
    """A kafka-python admin client (it has the log-dir calls), closed on exit."""
    from sandbox.secure import kafka_security

    with open_admin(state.bootstrap_servers, client_id="selfheal-sandbox",
                    security=kafka_security(state.security)) as admin:
        yield admin


def placement(reply: dict[str, Any], topic: str) -> dict[str, dict[int, int]]:
    """One broker's DescribeLogDirs reply as ``{log_dir: {partition: size_bytes}}`` for
    ``topic``'s current replicas (a move's future replica is left out)."""
    return {
        d["log_dir"]: {
            p["partition_index"]: p["partition_size"]
            for t in d["topics"] if t["name"] == topic
            for p in t["partitions"] if not p["is_future_key"]
        }
        for d in reply["log_dirs"]
    }


def log_dir_errors(state: SandboxState, broker_ids: list[int]) -> dict[int, dict[str, int]]:
    """DescribeLogDirs per broker: ``{broker: {path: error_code}}``; unreachable brokers absent."""
    result: dict[int, dict[str, int]] = {}
    try:
        with kafka_admin(state) as admin:
            for broker_id in broker_ids:
                try:
                    reply = admin.describe_log_dirs(brokers=[broker_id])[0]
                except Exception:
                    continue
                result[broker_id] = {d["log_dir"]: d["error_code"] for d in reply["log_dirs"]}
    except Exception:
        pass
    return result


def controller_id(state: SandboxState) -> int | None:
    """The active controller: ZooKeeper's /controller, or the KRaft quorum's controller."""
    if state.mode == "kraft":
        return state.controller.node_id if state.controller else None
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client_config(state))  # must outlive the future
    try:
        cluster = admin.describe_cluster(request_timeout=5).result()
    except Exception:
        return None
    return cluster.controller.id if cluster.controller else None


def status(state: SandboxState) -> dict[str, Any]:
    """The sandbox's state as plain data (what `selfheal sandbox status --json` prints)."""
    running = {s.node_id: processes.is_running(s.pid, s.marker) for s in state.brokers}
    errors = log_dir_errors(state, [b for b, up in running.items() if up])
    brokers = []
    for b in state.brokers:
        dirs = []
        for path in b.log_dirs:
            if b.node_id in errors and path in errors[b.node_id]:
                online: bool | None = errors[b.node_id][path] == 0
            else:
                online = None  # broker down or unreachable: unknown
            dirs.append({"path": path, "online": online, "fault_injected": disk_failed(path)})
        brokers.append({
            "id": b.node_id,
            "rack": b.rack,
            "running": running[b.node_id],
            "pid": b.pid,
            "port": b.port,
            "exporter_url": b.exporter_url,
            "rss_bytes": processes.rss_bytes(b.pid) if running[b.node_id] and b.pid else 0,
            "log_dirs": dirs,
        })
    head = state.zookeeper or state.controller
    prom = prometheus.find(state.work_dir)
    return {
        "mode": state.mode,
        "cluster_id": state.cluster_id,
        "work_dir": state.work_dir,
        "state_file": str(state.path),
        "bootstrap_servers": state.bootstrap_servers,
        "zookeeper_connect": state.zookeeper_connect,
        "controller": controller_id(state),
        "exporter_urls": [b.exporter_url for b in state.brokers]
        + ([state.controller.exporter_url] if state.controller else []),
        "quorum": None if head is None else {
            "role": head.role, "node_id": head.node_id, "port": head.port, "pid": head.pid,
            "running": processes.is_running(head.pid, head.marker),
        },
        "brokers": brokers,
        "prometheus_url": prom.url if prom is not None else None,
    }


def render(info: dict[str, Any]) -> str:
    """`status` for people."""
    lines = [
        f"sandbox ({info['mode']} mode)  cluster {info['cluster_id']}",
        f"  bootstrap   {info['bootstrap_servers']}",
    ]
    if info["zookeeper_connect"]:
        lines.append(f"  zookeeper   {info['zookeeper_connect']}")
    q = info["quorum"]
    if q:
        lines.append(f"  quorum      {q['role']} pid {q['pid']} "
                     f"{'running' if q['running'] else 'DOWN'}")
    lines.append(f"  controller  {info['controller'] if info['controller'] is not None else '?'}")
    lines.append(f"  state file  {info['state_file']}")
    if info.get("prometheus_url"):
        lines.append(f"  prometheus  {info['prometheus_url']}")
    lines.append("")
    lines.append(f"  {'broker':<7}{'rack':<8}{'port':<7}{'state':<9}{'exporter':<38}log dirs")
    for b in info["brokers"]:
        state = "running" if b["running"] else "DOWN"
        dirs = []
        for d in b["log_dirs"]:
            mark = {True: "online", False: "OFFLINE", None: "?"}[d["online"]]
            if d["fault_injected"]:
                mark += " (failed by sandbox)"
            dirs.append(f"{d['path']} {mark}")
        lines.append(
            f"  {b['id']:<7}{b['rack'] or '-':<8}{b['port']:<7}{state:<9}"
            f"{b['exporter_url'] or '-':<38}{dirs[0] if dirs else ''}"
        )
        for extra in dirs[1:]:
            lines.append(" " * 69 + extra)
    return "\n".join(lines)
