"""A re-replication whose target broker is SIGKILLed mid-copy, on a real Kafka 4.4 cluster
of 4 brokers over 2 racks (the issue's layout: with 3 brokers over 3 racks no live broker
is left to take the copy once its target dies).

The fix of a failed dir copies a partition onto broker T at a crawl; T is killed. The
action ends `failed` naming T with its reassignment cancelled, and its partitions are
planned again at once. The new plan then has two brokers failing at once (the failed dir,
the dead T): the default circuit breaker (max_failed_brokers = 1) holds it for a person,
with that reason, which is what kept such a re-plan from healing by itself. Approved, it
heals the partitions on live brokers, nothing acknowledged lost.

On the same cluster: a copy whose only source is killed stalls (its target alive), is
said stalled in the audit and on the dashboard's panel as the real Prometheus answers it,
and moves again when the source returns; a target killed and started again at once does
no harm, and the audit says what happened.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.plan import plan_offline
from dashboards import remediation
from remediation.executor.throttle import FOLLOWER_RATE, LEADER_RATE
from sandbox import cluster, prometheus, traffic
from sandbox.state import SandboxState
from sandbox.status import kafka_admin
from schemas.records import Trigger
from tests.dashboards.queries import concrete
from tests.integration.serve_harness import (
    Bench,
    ServeProcess,
    audit_text,
    bench,
    placed_topic,
)
from tests.integration.test_serve_failover import in_flight
from tests.integration.test_serve_offline_fix import prefill, throttles_set
from tests.polling import wait_until

pytestmark = pytest.mark.integration

CRAWL = 100 * 1024  # bytes/s, the throttle: a 3 MiB copy takes half a minute
POLICY = f"""
[actions]
fix_offline_replicas = "auto"
[limits]
inter_broker_throttle_bytes_per_s = {CRAWL}
"""


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxState]:
    state = cluster.up(tmp_path_factory.mktemp("sandbox-wide"), brokers=4, racks=2,
                       kafka="4.4", mode="kraft",
                       progress=lambda m: print(f"[sandbox] {m}", file=sys.stderr))
    try:
        yield state
    finally:
        cluster.down(state.reload())


def put_back_rates(state: SandboxState) -> None:
    """The cleanup of a test whose broker stays down to the end (the executor puts the
    rate back only once a broker is up): the throttle rate it kept is removed."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

    ops = {k: (AlterConfigOp.DELETE, None) for k in (LEADER_RATE, FOLLOWER_RATE)}
    with kafka_admin(state) as admin:
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(s.node_id), ops)
                             for s in state.brokers], raise_on_unknown=False,
                            incremental=True)


class Copy:
    """A failed dir's fix copying `topic`'s partitions off `victim` onto `target` at a
    crawl, under traffic; `other` holds their only online replica."""

    def __init__(self, state: SandboxState, b: Bench, serve: ServeProcess) -> None:
        rack = {s.node_id: s.rack for s in state.brokers}
        self.victim = victim = 0
        self.other = other = next(b_ for b_ in sorted(rack) if rack[b_] != rack[victim])
        self.topic = topic = placed_topic(state, "midway",
                                          {0: [other, victim], 1: [other, victim]})
        prefill(state, topic, 2, 3 * 1024 * 1024)
        self.failed = failed = traffic.log_dir_of(state, topic, 0, victim)
        self.on_failed = sorted(p for p in (0, 1)
                                if traffic.log_dir_of(state, topic, p, victim) == failed)
        self.producer = traffic.BackgroundProducer(state, topic, rate_per_s=50)
        self.consumer = traffic.BackgroundConsumer(state, topic)
        self.consumer.start()
        self.producer.start()
        cluster.fail_disk(state, victim, failed)
        traffic.produce(state, topic, 20)  # a write makes the follower notice at once

        def planned():
            plan = plan_offline(b.model())
            mine = [t for t in plan.reassignment.partitions if t.topic == topic]
            return mine if sorted(t.partition for t in mine) == self.on_failed else None

        self.mine = mine = wait_until(planned, f"the failed dir {failed} in a live snapshot", 60)
        self.aid = aid = b.propose(b.action(
            "fix_offline_replicas", {"version": 1, "partitions": [t.to_json() for t in mine]},
            f"log dir {failed} on broker {victim} failed", bytes_moved=len(mine) * 3 * 2**20,
            trigger=Trigger("logdir_event", victim, failed)))
        serve.wait_state(aid, {"executing"})
        wait_until(lambda: set(self.on_failed) <= in_flight(state, topic),
                   "the copies in flight", 60, explain=lambda: audit_text(serve.action(aid)))
        (self.target,) = {b_ for t in mine for b_ in t.replicas if b_ not in (victim, other)}

    def healed(self, state: SandboxState, replicas: dict[int, list[int]]) -> None:
        for p in traffic.partitions_settled(
                state, self.topic, lambda p: p["partition_index"] not in self.on_failed
                or (not p["offline_replicas"]
                    and set(p["replica_nodes"]) == set(replicas[p["partition_index"]])
                    and sorted(p["isr_nodes"]) == sorted(p["replica_nodes"]))):
            if p["partition_index"] in self.on_failed:
                assert not p["offline_replicas"], p
                assert set(p["replica_nodes"]) == set(replicas[p["partition_index"]]), p
                assert sorted(p["isr_nodes"]) == sorted(p["replica_nodes"]), p
        time.sleep(2)
        assert traffic.delivery_problems(self.producer, self.consumer) == []

    def close(self, state: SandboxState, killed: list[int]) -> None:
        self.producer.stop()
        self.consumer.stop()
        for broker in killed:
            cluster.start_broker(state.reload(), broker)
        put_back_rates(state)
        if cluster.disk_failed(self.failed):
            cluster.heal_disk(state.reload(), self.victim, self.failed)
        traffic.delete_topic(state, self.topic)


def test_a_copy_whose_target_broker_is_killed_ends_at_once_and_is_healed_elsewhere(
        wide: SandboxState, tmp_path: Path, record_property) -> None:
    state, killed = wide, []
    with bench(state, tmp_path, POLICY) as b:
        serve = b.serve()
        copy = Copy(state, b, serve)
        try:
            aid, target, topic = copy.aid, copy.target, copy.topic
            cluster.kill_broker(state, target)
            killed.append(target)
            died_at = time.monotonic()
            done = serve.wait_state(aid, {"failed"}, timeout=120)
            ended_after = time.monotonic() - died_at
            assert done["error"].startswith(f"a target died mid-way: broker {target}, which "
                                            "the plan adds replicas of"), audit_text(done)
            assert f"{len(copy.on_failed)} reassignments onto it cancelled" in done["error"]
            assert "still short of a copy" in done["error"]  # back on the failed dir's copy
            assert done["journal"]["target_died"]["targets"][0]["broker"] == target
            assert any(a["reason"].startswith("broker down, its throttle left as set")
                       for a in done["audit"]), audit_text(done)
            assert not in_flight(state, topic)

            # Planned again at once, linked both ways; held by the breaker for a person.
            again = wait_until(lambda: serve.action(aid)["journal"].get("replanned"),
                               "the partitions planned again", 60,
                               explain=lambda: audit_text(serve.action(aid)))
            new = serve.wait_state(again, {"awaiting_approval"})
            assert aid[:12] in new["record"]["reason"]
            assert "circuit breaker: 2 brokers failing at once" in audit_text(new)
            assert any(f"planned again at once as action {again[:12]}" in a["reason"]
                       for a in serve.action(aid)["audit"])
            replanned = {p["partition"]: p["replicas"]
                         for p in new["record"]["plan"]["partitions"] if p["topic"] == topic}
            assert sorted(replanned) == copy.on_failed
            assert all(target not in r and copy.victim not in r for r in replanned.values())

            status, body = serve.api("POST", f"/actions/{again}/approve", {"actor": "alice"})
            assert status == 200 and body["state"] == "approved", body
            healed = serve.wait_state(again, {"succeeded"}, timeout=300)
            healed_after = time.monotonic() - died_at
            print(f"\n[midway] target broker SIGKILLed -> action failed {ended_after:.1f} s, "
                  f"-> partitions healed {healed_after:.1f} s (approval included)")
            record_property("figures", {"what": "target broker died",
                                        "death_to_end_s": ended_after,
                                        "death_to_healed_s": healed_after})
            assert healed["audit"][-1]["to"] == "succeeded"
            copy.healed(state, replanned)
            # the dead broker takes no config: its rate stays until it is back (audited)
            assert throttles_set(state, topic, down=[target]) == {}
        finally:
            copy.close(state, killed)


def test_a_copy_whose_source_dies_is_said_stalled_and_moves_again_when_it_returns(
        wide: SandboxState, tmp_path: Path) -> None:
    state, killed = wide, []
    with bench(state, tmp_path, POLICY, {"SELFHEAL_SERVE_STALL_SECONDS": "10"}) as b:
        serve = b.serve()
        copy = Copy(state, b, serve)
        prom = prometheus.start(state, targets={"serve": serve.url.removeprefix("http://")})
        try:
            # The only online replica dies: no leader, nothing to copy from; the target
            # lives, so the action is not ended: it is stalled.
            cluster.kill_broker(state, copy.other)
            killed.append(copy.other)
            wait_until(lambda: serve.action(copy.aid)["journal"].get("stalled"),
                       "the action said stalled", 120,
                       explain=lambda: audit_text(serve.action(copy.aid)))
            shown = serve.action(copy.aid)
            assert shown["state"] == "executing"
            assert [a["reason"] for a in shown["audit"]
                    if a["reason"].startswith("stalled: no bytes moved for ")], \
                audit_text(shown)
            (panel,) = [p for p in remediation.panels() if p.title.startswith("Stalled")]
            expr = f"({concrete(panel.queries[0].expr, state.cluster_id)}) > 0"
            assert wait_until(lambda: prom.query(expr), f"the stalled panel: {expr}", 60)

            cluster.start_broker(state.reload(), copy.other)
            killed.remove(copy.other)
            done = serve.wait_state(copy.aid, {"succeeded"}, timeout=300)
            assert any(a["reason"].startswith("moving again") for a in done["audit"]), \
                audit_text(done)
            assert wait_until(lambda: prom.query(expr.replace(" > 0", " == 0")),
                              "the stalled panel back at 0", 60)
            copy.healed(state, {t.partition: list(t.replicas) for t in copy.mine})
        finally:
            prom.stop()
            copy.close(state, killed)


def test_a_target_that_dies_and_returns_at_once_does_no_harm_and_is_told(
        wide: SandboxState, tmp_path: Path) -> None:
    state, killed = wide, []
    # no breaker in the way: this case is about the return, not two failures at once
    with bench(state, tmp_path, POLICY + "[breaker]\nmax_failed_brokers = 2\n") as b:
        serve = b.serve()
        copy = Copy(state, b, serve)
        try:
            cluster.kill_broker(state, copy.target)
            cluster.start_broker(state.reload(), copy.target)
            first = serve.wait_state(copy.aid, {"succeeded", "failed"}, timeout=300)
            if first["state"] == "succeeded":
                # Gone too briefly to be fenced: the reads waited for it, the copy went on,
                # and the audit says so.
                final, replicas = first, {t.partition: list(t.replicas) for t in copy.mine}
                told = audit_text(first)
                assert f"target broker {copy.target} stopped answering" in told, told
                assert f"target broker {copy.target} answers again" in told, told
            else:
                # It did: ended naming the broker, planned again at once, healed by that.
                assert first["error"].startswith(f"a target died mid-way: broker "
                                                 f"{copy.target}"), audit_text(first)
                again = wait_until(lambda: serve.action(copy.aid)["journal"].get("replanned"),
                                   "the partitions planned again", 60)
                final = serve.wait_state(again, {"succeeded", "awaiting_approval"},
                                         timeout=300)
                if final["state"] == "awaiting_approval":
                    # Back before the re-plan: the same plan, so the same action re-opened;
                    # its last attempt failed, so the policy has a person look first, and
                    # the page says why.
                    assert again == copy.aid, audit_text(final)
                    assert "the last attempt failed (a target died mid-way: broker " \
                        f"{copy.target}" in audit_text(final), audit_text(final)
                    status, body = serve.api("POST", f"/actions/{again}/approve",
                                             {"actor": "alice"})
                    assert status == 200 and body["state"] == "approved", body
                    final = serve.wait_state(again, {"succeeded"}, timeout=300)
                replicas = {p["partition"]: p["replicas"]
                            for p in final["record"]["plan"]["partitions"]}
                # the rate on the broker that was down stays for the operator, and is named
                assert "broker down, its throttle left as set" in audit_text(first)
            print(f"\n[midway] a target back at once: {first['state']}; "
                  + audit_text(first).replace("\n", " |"))
            assert final["state"] == "succeeded"
            copy.healed(state, replicas)
            # and the rate left on it while it was down is put back now that it is up
            wait_until(lambda: throttles_set(state, copy.topic) == {},
                       "the throttle left on the returned broker put back", 60)
            if first["state"] == "failed":
                assert f"broker:{copy.target} back: the throttle left on it put back" in \
                    audit_text(serve.action(copy.aid)), audit_text(serve.action(copy.aid))
        finally:
            copy.close(state, killed)
