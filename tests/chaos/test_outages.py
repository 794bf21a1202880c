"""ZooKeeper sessions expiring, ZooKeeper away for longer than a session, and the bus
unreachable for a minute: the loop rides each out, then heals the next fault once."""

from __future__ import annotations

import os
import signal
import time

import pytest

from sandbox import cluster
from tests.chaos.chaos_support import scenario, some_dir
from tests.chaos.sync_check import in_sync, why_not_in_sync

pytestmark = pytest.mark.chaos

SESSION_S = 10.0  # the collectors', serve's lock's and the brokers' ZooKeeper session


def heal_next_fault(s, broker: int, what: str) -> None:
    """Once every replica is in sync again, fail a dir of ``broker``: one fix, run once,
    the topic whole again. Not sooner: a full run once failed the dir holding a
    partition's only in-sync copy while the broker healed before (an empty disk,
    restarted) was still catching up across a ZooKeeper outage; no software can repair
    that partition (two overlapping faults), and the planner now says so."""
    prefix = s.loop.config["bus"]["topic_prefix"]
    s.wait(lambda: in_sync(s.state, prefix, s.topic), "the bus and the topic in sync", 180,
           detail=lambda: why_not_in_sync(s.state, prefix, s.topic))
    path = some_dir(s.state, broker, s.topic)
    try:
        s.healed_once(broker, path, s.fail(broker, path), f"{what}: fault")
    finally:
        s.heal(broker, path)


def test_expired_zookeeper_sessions_and_a_zookeeper_outage_are_ridden_out(sandbox, tmp_path):
    with scenario(sandbox, tmp_path / "loop", "zk") as s:
        # Session expiry on demand: the ZooKeeper collector and serve (it holds the executor
        # lock in ZooKeeper) are paused past their session timeout while ZooKeeper runs, so
        # ZooKeeper expires their sessions; then they go on.
        paused = [s.loop.pieces[name].pid for name in ("collect-zk", "serve")]
        for pid in paused:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(SESSION_S * 1.6)
        for pid in paused:
            os.kill(pid, signal.SIGCONT)
        s.wait(lambda: s.api("GET", "/actions") is not None, "serve answering", 60)
        heal_next_fault(s, 1, "after session expiry")

        # ZooKeeper itself away for longer than a session.
        cluster.stop_zookeeper(sandbox)
        time.sleep(SESSION_S * 2)
        cluster.start_zookeeper(sandbox)
        sandbox.reload()
        cluster.wait_ready(sandbox, timeout=120)
        heal_next_fault(s, 2, "after a ZooKeeper outage")

        s.assert_kept()


def test_the_bus_unreachable_for_a_minute_loses_nothing_and_proposes_nothing_twice(
        chaos_sandbox, tmp_path):
    with scenario(chaos_sandbox, tmp_path / "loop", "bus") as s:
        start = time.monotonic()
        ids = [b.node_id for b in chaos_sandbox.brokers]
        cluster.kill_brokers(chaos_sandbox, ids, graceful=True)  # the bus is this cluster
        time.sleep(60)
        cluster.start_brokers(chaos_sandbox, ids, timeout=180)
        chaos_sandbox.reload()
        # Back means whole again: every replica in sync. A dir failed while the restarted
        # brokers were still catching up once left the bus partitions it held led from
        # the failed dir until that broker restarted, and the job's offset fetches
        # waited on them (a different, overlapping fault).
        prefix = s.loop.config["bus"]["topic_prefix"]
        s.wait(lambda: in_sync(chaos_sandbox, prefix, s.topic), "the bus and the topic in sync",
               120, detail=lambda: why_not_in_sync(chaos_sandbox, prefix, s.topic))
        s.timings["bus away s"] = time.monotonic() - start
        s.loop.check_alive()  # every piece rode it out
        heal_next_fault(s, 0, "after the bus came back")
        s.assert_kept()
