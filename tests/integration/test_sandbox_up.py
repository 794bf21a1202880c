"""`sandbox up` in a folder of its own: it comes up, survives a port taken from under it,
and a failed start ends with one line naming the cause."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

from sandbox import cluster, ports
from sandbox.state import load
from tests.conftest import SELFHEAL

pytestmark = pytest.mark.integration


def test_a_sandbox_in_a_temp_dir_comes_up_and_goes_down_by_pid(tmp_path: Path) -> None:
    lines: list[str] = []
    state = cluster.up(tmp_path / "sb", brokers=2, log_dirs=1, racks=0,
                       progress=lines.append)
    try:
        assert cluster.live_broker_ids(state) == {0, 1}
        used = [p for s in state.servers() for p in (s.port, s.exporter_port) if p]
        assert len(set(used)) == len(used)
    finally:
        cluster.down(state.reload())
    assert not (tmp_path / "sb").exists()
    print("\n".join(lines))


class _StolenPortBook(ports.PortBook):
    """Another process takes the first broker's port in the moment between its release
    and the broker's start (ZooKeeper, released first, has no exporter port)."""

    thief: socket.socket | None = None

    def release(self, wanted: Iterable[int | None]) -> None:
        wanted = list(wanted)
        super().release(wanted)
        if _StolenPortBook.thief is None and None not in wanted:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", wanted[0]))
            sock.listen()
            _StolenPortBook.thief = sock


def test_a_port_taken_before_its_broker_binds_it_is_retried_with_new_ports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "PortBook", _StolenPortBook)
    lines: list[str] = []
    try:
        state = cluster.up(tmp_path / "sb", brokers=1, log_dirs=1, racks=0,
                           progress=lines.append)
    finally:
        stolen = _StolenPortBook.thief
        _StolenPortBook.thief = None
    try:
        assert stolen is not None
        taken = stolen.getsockname()[1]
        retried = [line for line in lines if "retrying with new ports" in line]
        assert retried, "\n".join(lines)
        assert f"port {taken} was already in use" in retried[0]
        assert state.brokers[0].port != taken
        assert cluster.live_broker_ids(state) == {0}
    finally:
        stolen.close()
        cluster.down(state.reload())
    print("\n".join(lines))


def test_a_failed_up_ends_with_one_line_naming_the_cause(tmp_path: Path) -> None:
    work = tmp_path / "sb"
    env = {**os.environ, "SELFHEAL_BROKER_HEAP": "12m"}  # too small for a Kafka broker
    result = subprocess.run(
        [*SELFHEAL, "sandbox", "--work-dir", str(work), "up", "--brokers", "1",
         "--log-dirs", "1", "--racks", "0"],
        capture_output=True, text=True, env=env, timeout=300, cwd=Path(__file__).parents[2])
    try:
        assert result.returncode == 1, result.stderr
        last = result.stderr.strip().splitlines()[-1]
        print(last)
        assert last.startswith("selfheal sandbox: broker 0 (pid "), result.stderr
        assert "exited during start-up: it ran out of heap (raise SELFHEAL_BROKER_HEAP" \
            in last, result.stderr
    finally:
        # `up` stopped what it started; whatever the state file still lists is checked.
        if (work / "sandbox.json").exists():
            state = load(work)
            cluster.down(state)
            assert not any(s.pid for s in state.servers())
