"""core.zk_session: what kazoo logs for one client, and its connection thread's death of a
refused login, become one flag and no traceback (the refusal itself, on a real ZooKeeper
with SASL: tests/e2e/test_secured_heal_zk.py)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from kazoo.exceptions import SessionClosedRequireSaslError

from core.security import ZooKeeperSecurity
from core.zk_session import login_refused, zk_client


@pytest.fixture
def sasl(tmp_path: Path) -> ZooKeeperSecurity:
    path = tmp_path / "zk.password"
    path.write_text("pw\n")
    path.chmod(0o600)
    return ZooKeeperSecurity(sasl_mechanism="DIGEST-MD5", username="selfheal",
                             password_file=path)


def _refusal(client) -> None:
    """What kazoo's connection loop logs when ZooKeeper refuses the login."""
    try:
        raise SessionClosedRequireSaslError()
    except SessionClosedRequireSaslError:
        client.logger.exception("Unhandled exception in connection loop")


def test_a_refused_login_is_noted_and_not_logged(sasl, caplog) -> None:
    client = zk_client("127.0.0.1:1", sasl)
    try:
        with caplog.at_level(logging.DEBUG, logger="kazoo"):
            assert not login_refused(client)
            client.logger.warning("Connection dropped: %s", "socket closed")
            _refusal(client)
        assert login_refused(client)
        # the refusal is said by start() in one line; what else kazoo says goes on as before
        assert [r.getMessage() for r in caplog.records] == ["Connection dropped: socket closed"]
    finally:
        client.close()


def test_without_a_login_nothing_is_taken_for_a_refusal(caplog) -> None:
    client = zk_client("127.0.0.1:1")
    try:
        with caplog.at_level(logging.DEBUG, logger="kazoo"):
            _refusal(client)
        assert not login_refused(client)
        assert [r.getMessage() for r in caplog.records] == [
            "Unhandled exception in connection loop"]
    finally:
        client.close()


def _die_in_thread(name: str, exc: BaseException) -> None:
    def target() -> None:
        raise exc

    thread = threading.Thread(target=target, name=name)
    thread.start()
    thread.join()


def test_only_the_connection_threads_death_of_a_refused_login_goes_unprinted(
        sasl, monkeypatch) -> None:
    printed: list[str] = []  # what the hook before ours (Python's prints) is handed
    monkeypatch.setattr(threading, "excepthook",
                        lambda args: printed.append(f"{args.thread.name}: {args.exc_value!r}"))
    zk_client("127.0.0.1:1", sasl).close()  # puts its hook in front
    _die_in_thread("Thread-7 (zk_loop)", SessionClosedRequireSaslError())
    _die_in_thread("Thread-8 (zk_loop)", RuntimeError("a bug"))
    _die_in_thread("Thread-9 (mine)", SessionClosedRequireSaslError())
    assert printed == ["Thread-8 (zk_loop): RuntimeError('a bug')",
                       "Thread-9 (mine): SessionClosedRequireSaslError()"]
