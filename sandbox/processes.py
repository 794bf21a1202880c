"""Start and stop the sandbox's server processes, by PID, never by name.

The processes outlive the `selfheal sandbox up` command that starts them, so they are not
our children to wait on: liveness is read from /proc, and a PID is trusted only while its
command line still carries the marker we started it with (PIDs get reused).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

_GIVEN: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the kernel picks it), never one this
    process was handed before: the kernel may give a closed port straight back, and two
    servers would then be told the same one. (`sandbox.ports.PortBook` also holds them.)"""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port
    raise OSError(f"no new free port on {host} after 100 tries")


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def listening(pid: int | None, port: int) -> bool:
    """Whether process ``pid`` itself listens on TCP ``port`` (Linux /proc): an open port
    may belong to another process that took it first, while ``pid`` fails to bind."""
    if pid is None:
        return False
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                sockets.add(f"socket:[{fields[9]}]")
    if not sockets:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in sockets:
                return True
        except OSError:
            continue
    return False


def spawn(cmd: list[str], log_file: Path, cwd: Path,
          env: Mapping[str, str] | None = None) -> int:
    """Start ``cmd`` detached in its own session, output to ``log_file``; return its PID.
    ``env``: its environment (default: ours)."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return proc.pid


def is_running(pid: int | None, marker: str) -> bool:
    """True while ``pid`` is alive (not a zombie) and its command line contains ``marker``."""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    if state == "Z":
        _reap(pid)
        return False
    # The kernel shows an empty command line while a process is between fork and exec
    # (and the java launcher may exec itself again): alive, not yet identifiable.
    return not cmdline.strip() or marker in cmdline


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop(pid: int | None, marker: str, timeout: float = 30.0, sig: int = signal.SIGTERM) -> bool:
    """Signal ``pid`` (SIGTERM first, SIGKILL after ``timeout`` s); True if it was running."""
    if not send(pid, marker, sig):
        return False
    wait_gone(pid, marker, timeout)
    return True


def send(pid: int | None, marker: str, sig: int) -> bool:
    """Signal ``pid`` if it is still the process named by ``marker``; True if it was."""
    if not is_running(pid, marker):
        return False
    assert pid is not None
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
    return True


def wait_gone(pid: int | None, marker: str, timeout: float = 30.0) -> None:
    """Wait up to ``timeout`` s for a signalled ``pid`` to exit, then SIGKILL it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_running(pid, marker):
            return
        time.sleep(0.1)
    assert pid is not None
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while is_running(pid, marker) and time.monotonic() < deadline:
        time.sleep(0.1)


def rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` in bytes (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except FileNotFoundError:
        pass
    return 0


def children_by_parent() -> dict[int, list[int]]:
    """Each process's children now, from the parent links in /proc/*/stat."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        parent = int(text.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(stat.parent.name))
    return children
