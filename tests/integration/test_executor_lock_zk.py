"""The executor lock in ZooKeeper survives its session expiring: the holder steps down,
then takes the lock again with a new session (it used to wait for ever, believing the dead
session's lock was still its own)."""

from __future__ import annotations

import threading
import time

import pytest

from remediation.executor.lock import ZkLeadership
from sandbox.state import SandboxState

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


def test_a_holder_whose_session_expired_steps_down_and_takes_the_lock_again(
        sandbox: SandboxState) -> None:
    said: list[str] = []
    holder = ZkLeadership(sandbox.zookeeper_connect, f"lock-test-{time.time_ns()}",
                          "test holder", said.append, session_timeout=6.0)
    try:
        assert holder.wait(threading.Event(), timeout=30)
        assert holder.is_leader()
        expire(holder, sandbox.zookeeper_connect)
        lost = "ZooKeeper session lost: no longer the active executor"
        deadline = time.monotonic() + 30  # kazoo says SUSPENDED, then LOST, on its thread
        while lost not in said and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lost in said
        assert not holder.is_leader()
        assert holder.wait(threading.Event(), timeout=60), said
        assert holder.is_leader()
        assert holder.holder() == "test holder"
    finally:
        holder.close()


def test_a_holder_whose_connection_came_back_within_its_session_still_leads(
        sandbox: SandboxState) -> None:
    from sandbox import cluster

    said: list[str] = []
    holder = ZkLeadership(sandbox.zookeeper_connect, f"lock-test-{time.time_ns()}",
                          "test holder", said.append, session_timeout=30.0)
    try:
        assert holder.wait(threading.Event(), timeout=30)
        cluster.stop_zookeeper(sandbox)  # away for less than the session
        deadline = time.monotonic() + 30
        while holder.is_leader() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not holder.is_leader()  # not while it cannot tell
        cluster.start_zookeeper(sandbox)
        sandbox.reload()
        assert holder.wait(threading.Event(), timeout=60), said
        assert holder.is_leader() and holder.holder() == "test holder"
        assert said == []  # the session lived on: nothing was lost
    finally:
        holder.close()
        cluster.wait_ready(sandbox, timeout=120)
