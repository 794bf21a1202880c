"""The executor lock in ZooKeeper survives its session expiring: the holder steps down,
then takes the lock again with a new session (it used to wait for ever, believing the dead
session's lock was still its own)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from remediation.executor.lock import ZkLeadership
from sandbox.state import SandboxState
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def expire(leadership: ZkLeadership, hosts: str) -> None:
    """Expire the holder's session on demand, as ZooKeeper does to a silent client: a
    second client joins the same session and closes it."""
    from kazoo.client import KazooClient

    session_id, password = leadership.client.client_id
    twin = KazooClient(hosts=hosts, client_id=(session_id, password))
    twin.start(timeout=15)
    twin.stop()
    twin.close()


@contextmanager
def leading(sandbox: SandboxState, session_timeout: float
            ) -> Iterator[tuple[ZkLeadership, list[str]]]:
    """A lock holder that leads, with what it says; closed after."""
    said: list[str] = []
    holder = ZkLeadership(sandbox.zookeeper_connect, f"lock-test-{time.time_ns()}",
                          "test holder", said.append, session_timeout=session_timeout)
    try:
        assert holder.wait(threading.Event(), timeout=30)
        assert holder.is_leader()
        yield holder, said
    finally:
        holder.close()


def test_a_holder_whose_session_expired_steps_down_and_takes_the_lock_again(
        sandbox: SandboxState) -> None:
    with leading(sandbox, session_timeout=6.0) as (holder, said):
        expire(holder, sandbox.zookeeper_connect)
        lost = "ZooKeeper session lost: no longer the active executor"
        # kazoo says SUSPENDED, then LOST, on its own thread
        wait_until(lambda: lost in said, f"{lost!r} said", 30, every=0.1,
                   explain=lambda: f"said: {said}")
        assert not holder.is_leader()
        assert holder.wait(threading.Event(), timeout=60), said
        assert holder.is_leader()
        assert holder.holder() == "test holder"


def test_a_holder_whose_connection_came_back_within_its_session_still_leads(
        sandbox: SandboxState) -> None:
    from sandbox import cluster

    try:
        with leading(sandbox, session_timeout=30.0) as (holder, said):
            cluster.stop_zookeeper(sandbox)  # away for less than the session
            # not while it cannot tell
            wait_until(lambda: not holder.is_leader(), "the holder stepping down", 30,
                       every=0.1)
            cluster.start_zookeeper(sandbox)
            sandbox.reload()
            assert holder.wait(threading.Event(), timeout=60), said
            assert holder.is_leader() and holder.holder() == "test holder"
            assert said == []  # the session lived on: nothing was lost
    finally:
        cluster.wait_ready(sandbox, timeout=120)
