"""A rolling upgrade from Kafka 3.9 (KRaft) to 4.4 while the whole loop runs: the
controller and every broker restarted in turn on the new jars. Nothing acknowledged is
lost, the loop keeps running through the mixed-version cluster, and it proposes nothing
that the restarts alone explain: a broker restarting is not a dead broker, and its dirs
are not failed disks. Half-way, the collector and `selfheal doctor` say in one line
which calls the brokers of the two versions disagree on, and on which brokers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from core.live import open_admin
from sandbox import cluster, loop, traffic, upgrade
from sandbox.state import SandboxState
from selfheal.doctor_checks import WARN, broker_versions
from tests.e2e.heal_matrix import api
from tests.e2e.loop_support import drop_topics, wait, wait_for_batches

pytestmark = pytest.mark.e2e

# What a restart must never bring: a fix for a "dead" broker or a "failed" dir, or a page.
FALSE_ALARMS = ("fix_offline_replicas", "page_operator")
MIXED = "brokers run different Kafka versions"


def said(the_loop: loop.Loop, text: str) -> list[str]:
    """The snapshot collector's log lines that contain ``text``."""
    return [line for line in the_loop.pieces["collect-snapshots"].log_tail(10_000).splitlines()
            if text in line]


def check_mixed(state: SandboxState, the_loop: loop.Loop, new: int) -> None:
    """Broker ``new`` alone runs 4.4: the collector's log and the doctor name the call only
    it answers (DescribeLogDirs v5, which 3.9 lacks) and the brokers without it."""
    old = ", ".join(str(b.node_id) for b in state.brokers if b.node_id != new)
    expected = f"DescribeLogDirs v5 (log-dir cordons) not on brokers {old}, only on broker {new}"
    line = wait(lambda: said(the_loop, MIXED), "the collector names the mixed versions",
                the_loop, timeout=60)
    assert len(line) == 1 and expected in line[0], line
    with open_admin(state.bootstrap_servers) as admin:
        check = broker_versions(admin, sorted(b.node_id for b in state.brokers))
    assert check.status == WARN and expected in check.detail, check


@pytest.fixture(scope="module")
def on_3_9(tmp_path_factory) -> Iterator[SandboxState]:
    state = cluster.up(tmp_path_factory.mktemp("upgrade"), kafka="3.9", mode="kraft")
    try:
        yield state
    finally:
        cluster.down(state.reload())


def test_a_rolling_upgrade_to_4_4_under_the_loop_loses_nothing_and_alarms_nobody(
        on_3_9, tmp_path_factory, record_property) -> None:
    state = on_3_9
    topic = f"upgrade-{uuid.uuid4().hex[:6]}"
    traffic.create_topic(state, topic, partitions=6, replication_factor=2)
    the_loop = loop.start(
        state, tmp_path_factory.mktemp("upgrade-loop"), names=loop.pieces_for(state),
        overrides={"bus": {"topic_prefix": f"upg{uuid.uuid4().hex[:6]}."},
                   "detect": {"leader_window_seconds": 86400.0,
                              "disk_skew_min_bytes": 1 << 40}})
    consumer = traffic.BackgroundConsumer(state, topic)
    producer = traffic.BackgroundProducer(state, topic, rate_per_s=50)
    try:
        wait_for_batches(the_loop, 0)
        wait(lambda: api(the_loop, "GET", "/actions") is not None, "serve API", the_loop)
        consumer.start()
        producer.start()
        wait(lambda: len(producer.acked) > 50, "traffic flowing", the_loop, timeout=60)
        steps: list[str] = []

        def step(line: str) -> None:
            steps.append(line)
            if line.startswith("broker ") and "restarted on Kafka 4.4.0" in line and len(
                    [s for s in steps if s.startswith("broker ") and "restarted" in s]) == 1:
                check_mixed(state, the_loop, int(line.split()[1]))

        upgrade.rolling_upgrade(state, "4.4", progress=step)
        assert state.reload().kafka == "4.4"
        assert [s for s in steps if "restarted on Kafka 4.4.0" in s] == [
            f"{s.role} {s.node_id} restarted on Kafka 4.4.0 (pid {s.pid})"
            for s in state.servers()]
        the_loop.check_alive()  # no piece stopped on the mixed-version cluster
        # The job keeps reading the cluster after the last restart: more batches come.
        seen = wait_for_batches(the_loop, 0)
        wait_for_batches(the_loop, seen + 3)
        wait(lambda: said(the_loop, "every broker answers the same calls again"),
             "the collector says the versions agree again", the_loop, timeout=60)
        # said once per change (each broker's restart changes who lacks what), not per
        # snapshot
        lines = [line.split(" ", 1)[1] for line in said(the_loop, MIXED)]
        assert all(a != b for a, b in zip(lines, lines[1:], strict=False)), lines
        alarms = [a for a in api(the_loop, "GET", "/actions")["actions"]
                  if a["type"] in FALSE_ALARMS]
        assert alarms == [], alarms
        assert len(producer.acked) > 100
        producer.stop()
        wait(lambda: not traffic.delivery_problems(producer, consumer), "every message read",
             the_loop, timeout=60)
        record_property("figures", {"what": "rolling upgrade 3.9->4.4",
                                    "acked": len(producer.acked)})
    finally:
        producer.stop()
        consumer.stop()
        the_loop.stop_all()
        drop_topics(state, the_loop.topic(""))
