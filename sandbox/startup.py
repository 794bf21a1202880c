"""Watching a sandbox server start: alive, listening, and when it dies, why, in one line.

A server that exits during start-up leaves the reason in its logs among hundreds of
lines; `selfheal sandbox up` prints the tail of those logs as progress and ends with one
line naming the cause (a port another process took, memory, disk space, or the first
error the server logged), never with a Kafka log line.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from sandbox import processes
from sandbox.jvm import SandboxError
from sandbox.ports import PortClash, port_clash, read_logs
from sandbox.state import ServerState


class StartupFailed(SandboxError):
    """A server died or never served; ``cause`` is one line, ``details`` its logs' tail."""

    def __init__(self, cause: str, details: str = "") -> None:
        super().__init__(cause + (f"\n{details}" if details else ""))
        self.cause = cause
        self.details = details


def log_files(server: ServerState) -> list[str]:
    return [server.log_file, str(Path(server.config).parent / "server.log")]


def log_tail(server: ServerState, lines: int = 15) -> str:
    chunks = []
    for name in log_files(server):
        try:
            text = Path(name).read_text(errors="replace").splitlines()[-lines:]
        except FileNotFoundError:
            continue
        chunks.append(f"--- {name}\n" + "\n".join(text))
    return "\n".join(chunks)


_KNOWN = (
    (re.compile(r"OutOfMemoryError"), "it ran out of heap (raise SELFHEAL_BROKER_HEAP, "
     "SELFHEAL_ZOOKEEPER_HEAP or SELFHEAL_CONTROLLER_HEAP)"),
    (re.compile(r"Cannot allocate memory|insufficient memory"),
     "the machine has too little free memory for its heap"),
    (re.compile(r"No space left on device"), "the disk under the work dir is full"),
    (re.compile(r"InconsistentClusterIdException"),
     "its log dirs belong to another cluster (start from an empty --work-dir)"),
    (re.compile(r"UnsupportedClassVersionError"), "the JDK is too old (Kafka needs 17+)"),
)
_ERROR_LINE = re.compile(r"\b(ERROR|FATAL)\b|Exception|Error:")
_LOG_PREFIX = re.compile(r"^\[[^\]]*\]\s*|^\S+ \S+ ")


def cause_of_death(server: ServerState) -> str:
    """Why ``server`` exited, in a few words (the logs' first error when nothing known)."""
    texts = read_logs(log_files(server))
    clash = port_clash(texts, [server.port, server.exporter_port])
    if clash:
        return clash
    for pattern, meaning in _KNOWN:
        if any(pattern.search(t) for t in texts):
            return meaning
    for text in texts:
        for line in text.splitlines():
            if _ERROR_LINE.search(line):
                return "its log says: " + _LOG_PREFIX.sub("", line.strip())[:200]
    return "its logs name no error"


def check_alive(server: ServerState) -> None:
    """Raise PortClash (retry with new ports) or StartupFailed when ``server`` is gone."""
    if processes.is_running(server.pid, server.marker):
        return
    who = f"{server.role} {server.node_id} (pid {server.pid})"
    clash = port_clash(read_logs(log_files(server)), [server.port, server.exporter_port])
    if clash:
        raise PortClash(f"{who} exited: {clash}")
    raise StartupFailed(f"{who} exited during start-up: {cause_of_death(server)}",
                        log_tail(server))


def wait_port(server: ServerState, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    # its own listener, not just an open port: another process may hold the port while
    # the server fails to bind it (then check_alive raises PortClash once it exits)
    while not (processes.port_open(server.port) and processes.listening(server.pid, server.port)):
        check_alive(server)
        if time.monotonic() > deadline:
            raise StartupFailed(f"{server.role} did not open port {server.port} in "
                                f"{timeout:.0f} s", log_tail(server))
        time.sleep(0.2)
