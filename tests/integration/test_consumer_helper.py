"""Issue 14's first acceptance line on the real sandbox: three consumers in three racks run
`RackAwareConsumer` on a topic of RF 2 whose leaders lean to rack1; a KIP-881 target
planned from the live snapshot goes through `serve` (a signed `assign_consumers`, policy
auto) to the consumer-assignments topic; the members switch to it under traffic, then a
member leaves and the other two fall back to the group's own assignment. Locality before
and after, and every message of an idempotent acks=all producer read exactly once.
"""

from __future__ import annotations

import logging
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from core import bus
from core.groups import read_groups
from core.live import open_admin
from core.locality import local_racks, strategy_for
from core.model import ClusterModel
from core.plan.consumers import plan_consumers
from remediation.consumers import RackAwareConsumer
from sandbox.state import SandboxState
from schemas.snapshot import snapshot_from_dict
from tests.integration.serve_harness import bench, placed_topic
from tests.polling import wait_until

# RF 2; broker 0 (rack1) leads four of the six partitions, brokers 1 and 2 one each. With
# the members in rack order, librdkafka's roundrobin gives rack1 {0, 3}, rack2 {1, 4} and
# rack3 {2, 5}: none led from the member's rack. Member ids sort by client.id, so the
# group's roundrobin and the planner see the members in that order on every run.
PLACEMENT = {0: [1, 2], 1: [0, 1], 2: [0, 1], 3: [2, 0], 4: [0, 1], 5: [0, 2]}
RACKS = ("rack1", "rack2", "rack3")
TP = tuple[str, int]


class Member:
    """One process-like member: a `RackAwareConsumer` polled on its own thread."""

    def __init__(self, state: SandboxState, group: str, topic: str, rack: str, rank: int,
                 targets_topic: str, seen: list[tuple[str, bytes]],
                 lock: threading.Lock) -> None:
        self.rack = rack
        self.consumer = RackAwareConsumer(
            {"bootstrap.servers": state.bootstrap_servers, "group.id": group,
             "client.id": f"m{rank}-{rack}", "client.rack": rack,
             "auto.offset.reset": "earliest",
             # librdkafka's roundrobin is not rack-aware: the group's own assignment is
             # the one a KIP-881 target improves on
             "partition.assignment.strategy": "roundrobin", "session.timeout.ms": 10000},
            [topic], targets_topic=targets_topic, cluster_id=state.cluster_id)
        self.read = 0
        self._seen, self._lock = seen, lock
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"member-{rack}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stopping.is_set():
                msg = self.consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    with self._lock:
                        self._seen.append((self.rack, msg.value()))
                    self.read += 1
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), f"member {self.rack} did not close"


class Traffic:
    """An idempotent acks=all producer writing numbered values round the partitions."""

    def __init__(self, state: SandboxState, topic: str, partitions: int) -> None:
        from confluent_kafka import Producer

        self.acked: list[bytes] = []
        self.failed: list[str] = []
        self._producer = Producer({"bootstrap.servers": state.bootstrap_servers,
                                   "enable.idempotence": True, "acks": "all",
                                   "linger.ms": 5})
        self._topic, self._partitions = topic, partitions
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="traffic", daemon=True)
        self.thread.start()

    def _delivered(self, err, msg) -> None:  # noqa: ANN001 (librdkafka's callback)
        if err is None:
            self.acked.append(msg.value())
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        n = 0
        while not self.stopping.wait(0.01):
            self._producer.produce(self._topic, str(n).encode(), partition=n % self._partitions,
                                   on_delivery=self._delivered)
            self._producer.poll(0)
            n += 1
        assert self._producer.flush(60) == 0

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(90)


def share(model: ClusterModel, racks: dict[str, str],
          reading: dict[str, Iterable[TP]]) -> tuple[float, dict[str, str]]:
    """Share of the read partitions each member reads from its own rack (the product's
    `local_racks`: the leader's rack here, the sandbox runs no follower fetching)."""
    index = model.partition_index()
    local = total = 0
    per: dict[str, str] = {}
    for member, tps in reading.items():
        mine = [racks[member] in local_racks(model, model.partitions[index[tp]]) for tp in tps]
        local, total = local + sum(mine), total + len(mine)
        per[racks[member]] = f"{sum(mine)}/{len(mine)}"
    return (local / total if total else 0.0), per


def fell_back(members: list[Member], everything: set[TP]) -> bool:
    """The members read every partition, by the group's own assignment; else an error
    saying what each member does (wait_until shows the last one)."""
    read = sorted(tp for m in members for tp in m.consumer.reading)
    if read == sorted(everything) and all(not m.consumer.view.applies for m in members):
        return True
    raise AssertionError("; ".join(
        f"{m.rack}: reads {sorted(p for _, p in m.consumer.reading)}, owns "
        f"{sorted(p for _, p in m.consumer.owned)}, {m.consumer.view.why}"
        for m in members))


def cross_rack(model: ClusterModel, racks: dict[str, str],
               reading: dict[str, Iterable[TP]]) -> int:
    """Partitions read by a member with no replica in its rack (what KIP-881 minimises)."""
    index = model.partition_index()
    return sum(1 for member, tps in reading.items() for tp in tps
               if racks[member] not in {model.rack_of.get(r.broker) for r in
                                        model.partitions[index[tp]].replicas})


def test_three_racks_switch_to_the_published_target_and_back_reading_every_message_once(
        sandbox: SandboxState, tmp_path: Path) -> None:
    logging.getLogger("selfheal.consumers").setLevel(logging.INFO)  # shown on failure
    state = sandbox
    topic = placed_topic(state, "kip881", PLACEMENT)
    everything = {(topic, p) for p in PLACEMENT}
    group = f"kip881-{uuid.uuid4().hex[:6]}"
    seen: list[tuple[str, bytes]] = []
    lock = threading.Lock()
    with bench(state, tmp_path) as b:
        bus.ensure_topics(b.config)
        serve = b.serve()
        members = [Member(state, group, topic, rack, rank,
                          b.config.topic("consumer-assignments"), seen, lock)
                   for rank, rack in enumerate(RACKS)]
        traffic = Traffic(state, topic, len(PLACEMENT))
        try:
            wait_until(lambda: sorted(tp for m in members for tp in m.consumer.reading)
                       == sorted(everything) and all(m.read for m in members),
                       "the group reading every partition, each member something", 120)

            # the live snapshot with the group as the collector reads it
            doc = b.snapshot()
            with open_admin(state.bootstrap_servers) as admin:
                doc["consumer_groups"] = read_groups(admin, [group])
            model = ClusterModel(snapshot_from_dict(doc))
            (found,) = model.snapshot.consumer_groups
            racks = {m.member_id: m.rack for m in found.members}
            assert sorted(racks) == sorted(m.consumer.member_id for m in members)
            assert sorted(r for r in racks.values() if r) == list(RACKS), \
                "client.rack not decoded from the members' subscriptions"
            by_id = {m.consumer.member_id: m for m in members}
            now = {i: m.consumer.reading for i, m in by_id.items()}
            before, before_per = share(model, racks, now)
            cross_before = cross_rack(model, racks, now)

            plan = plan_consumers(model, group, strategy_for(found))
            planned, planned_per = share(model, racks, {
                i: [(tp.topic, tp.partition) for tp in tps]
                for i, tps in plan.assignment.items()})
            aid = b.propose(b.action("assign_consumers", plan.to_json(),
                                     "test: apply the group's KIP-881 target"))
            serve.wait_state(aid, {"succeeded"}, timeout=120)

            target = {i: {(tp.topic, tp.partition) for tp in tps}
                      for i, tps in plan.assignment.items()}
            wait_until(lambda: all(m.consumer.reading == target[i] for i, m in by_id.items()),
                       "every member reading its partitions of the target", 120)
            now = {i: m.consumer.reading for i, m in by_id.items()}
            after, after_per = share(model, racks, now)
            cross_after = cross_rack(model, racks, now)
            switched = sum(m.consumer.switches for m in members)
            read_at_switch = len(seen)

            # a member leaves: the target no longer fits, the others fall back
            leaving = members.pop()
            leaving.stop()
            wait_until(lambda: fell_back(members, everything),
                       "the two left reading every partition by the group's assignment", 120)
            why_fallback = members[0].consumer.view.why
        finally:
            traffic.stop()
            try:
                wait_until(lambda: {v for _, v in seen} >= set(traffic.acked),
                           "every acknowledged message read", 120)
            except AssertionError:
                pass  # the counts below say what is missing
            finally:
                for m in members:
                    m.stop()

    assert traffic.failed == []
    produced = Counter(traffic.acked)
    consumed = Counter(value for _, value in seen)
    twice = sorted((int(v) for v, n in consumed.items() if n > 1))
    lost = sorted(int(v) for v in produced if v not in consumed)
    print(f"[figures] KIP-881 helper, 3 members in 3 racks, RF 2, 4 of 6 leaders on rack1: "
          f"locality (leader's rack) before {before:.2f} {before_per}, plan "
          f"({strategy_for(found)}, cross-rack {plan.cross_rack}) {planned:.2f} {planned_per}, "
          f"after {after:.2f} {after_per}; {switched} switch(es); messages produced "
          f"{len(produced)}, consumed {len(seen)} ({read_at_switch} before a member left), "
          f"read twice {len(twice)}, lost {len(lost)}; partitions read with no replica in "
          f"the member's rack before {cross_before}, after {cross_after}; fallback: "
          f"{why_fallback}", file=sys.stderr)
    assert after >= planned
    assert cross_after == plan.cross_rack
    assert twice == [] and lost == []
    assert sum(consumed.values()) == sum(produced.values())
