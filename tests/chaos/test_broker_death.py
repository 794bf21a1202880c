"""A broker that dies (SIGKILL, under traffic) on a 4-broker, 2-rack sandbox: after the
grace its replicas are re-replicated on the others, once; one back within the grace gets
nothing; two dead at once (more than the breaker's one) are paged, not moved."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from sandbox import cluster, traffic
from sandbox.state import SandboxState
from tests.chaos.chaos_support import scenario, shared_loop

pytestmark = pytest.mark.chaos

GRACE_S = 20.0
# Snapshots every 5 s, not the loop's 15: the checks after a death wait on later snapshots
# (still gone, or back) and see two or more in 10 s.
DETECT = {"detect": {"broker_death_grace_seconds": GRACE_S},
          "collect": {"snapshot_interval_seconds": 5.0}}


@pytest.fixture(scope="module")
def four(tmp_path_factory) -> Iterator[SandboxState]:
    # the default Kafka line, KRaft: a dead broker is fenced by the controller
    state = cluster.up(tmp_path_factory.mktemp("four-brokers"), brokers=4, racks=2)
    try:
        yield state
    finally:
        cluster.down(state.reload())


@pytest.fixture(scope="module")
def shared(four, tmp_path_factory):
    """One loop through the module's deaths (a short grace), as in production."""
    with shared_loop(four, tmp_path_factory.mktemp("dead-loop"), overrides=DETECT) as running:
        yield running


def fixes_for_broker(s, broker: int) -> list[dict]:
    from tests.e2e.loop_support import parsed

    return [a for a in parsed(s.readers["actions"].messages)
            if a.get("type") == "fix_offline_replicas"
            and a["trigger"].get("kind") == "broker_left" and a["trigger"].get("broker") == broker]


def test_a_dead_broker_is_re_replicated_after_the_grace_once(four, shared, tmp_path):
    with scenario(four, tmp_path, "dead", partitions=8, shared=shared) as s:
        held = {p["partition_index"] for p in traffic.partitions(four, s.topic)
                if 3 in p["replica_nodes"]}
        assert held, "broker 3 holds replicas of the test topic"
        start = time.monotonic()
        cluster.kill_broker(four, 3)  # SIGKILL: a crash
        try:
            fix = s.wait(lambda: fixes_for_broker(s, 3)[:1], "the dead broker's fix",
                         GRACE_S + 120)[0]
            s.timings["death -> fix proposed s"] = time.monotonic() - start
            named = {p["partition"] for p in fix["plan"]["partitions"] if p["topic"] == s.topic}
            assert named == held
            s.wait_done(fix["action_id"])
            s.timings["death -> healed s"] = time.monotonic() - start
            s.timings["grace s"] = GRACE_S
            for p in traffic.partitions(four, s.topic):
                assert 3 not in p["replica_nodes"] and len(p["replica_nodes"]) == 2, p
                assert sorted(p["isr_nodes"]) == sorted(p["replica_nodes"]), p
            # later snapshots, read by the job, still show it gone: healed once
            s.wait_read_snapshots_since(time.time(), count=2)
            assert len(fixes_for_broker(s, 3)) == 1
            s.assert_proposed_once()
            s.assert_no_throttle_left()
            s.assert_history()
        finally:
            cluster.start_broker(four, 3)
            four.reload()


def test_a_broker_back_within_the_grace_gets_no_fix(four, shared, tmp_path):
    with scenario(four, tmp_path, "back", partitions=8, shared=shared) as s:
        died = time.time()
        cluster.kill_broker(four, 2)
        time.sleep(3)
        cluster.start_broker(four, 2)
        four.reload()
        # past the grace, with snapshots showing it back, read by the job
        s.wait_read_snapshots_since(died + GRACE_S + 10, count=2, timeout=GRACE_S + 120)
        assert fixes_for_broker(s, 2) == []
        s.assert_healthy()
        s.assert_history()


def victims(partitions: list[dict]) -> tuple[int, int]:
    """Two brokers to kill at once, each holding a partition whose other copy survives them,
    so there is a fix for the breaker to stop. Kafka's placer pairs two racks' brokers in
    lockstep: a topic may pair the same two brokers in every partition, and killing those
    two leaves nothing to move, only pages (a run of this test once did)."""
    holders = [set(p["replica_nodes"]) for p in partitions]
    for pair in itertools.combinations(sorted(set().union(*holders)), 2):
        if all(any(b in h and len(h & set(pair)) == 1 for h in holders) for b in pair):
            return pair
    raise AssertionError(f"no two brokers of {holders} leave a partition a copy to move")


def test_two_dead_brokers_at_once_trip_the_breaker_and_page(four, shared, tmp_path):
    with scenario(four, tmp_path, "two-dead", partitions=8, shared=shared) as s:
        dead = victims(traffic.partitions(four, s.topic))
        try:
            cluster.kill_brokers(four, list(dead))
            fix = s.wait(lambda: [f for b in dead for f in fixes_for_broker(s, b)][:1],
                         "a dead broker's fix", GRACE_S + 120)[0]
            shown = s.wait(lambda: (a := s.api("GET", f"/actions/{fix['action_id']}"))
                           ["state"] != "proposed" and a, "the policy's ruling")
            assert shown["state"] == "awaiting_approval", shown["state"]
            assert shown["journal"]["decision"]["page"] is True
            assert any("breaker" in r for r in shown["journal"]["decision"]["reasons"])
            assert s.executions(fix["action_id"]) == 0
        finally:
            for broker in dead:
                cluster.start_broker(four, broker)
            four.reload()
            cluster.wait_ready(four, timeout=180)
        s.assert_history()
