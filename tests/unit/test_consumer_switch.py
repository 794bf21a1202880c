"""`RackAwareConsumer`'s switches on an in-memory group: the order of its Kafka calls
(stop reading before the token names the next reader), the offsets it starts from, and
every message delivered once across a lend and a give-back. The real-Kafka version of
this is tests/integration/test_consumer_helper.py."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest
from confluent_kafka import TopicPartition

from remediation.consumers import consumer as helper
from remediation.consumers.handoff import parse_token
from schemas.records import ConsumerAssignment

T = "orders"
GEN = 4


class Group:
    """One topic's messages, the group's committed offsets, and every call in order."""

    def __init__(self, partitions: int, messages: int) -> None:
        self.log: list[tuple[str, str, Any]] = []
        self.committed: dict[tuple[str, int], tuple[int, str | None]] = {}
        self.data = {p: [f"{p}:{i}".encode() for i in range(messages)]
                     for p in range(partitions)}
        self.members: dict[str, str] = {}  # member id -> client id
        self.target: ConsumerAssignment | None = None
        self.version = 0


class FakeConsumer:
    def __init__(self, group: Group, name: str, settings: dict[str, Any]) -> None:
        self.group, self.name = group, name
        group.members[name] = settings["client.id"]
        self.assigned: dict[tuple[str, int], int] = {}

    def subscribe(self, topics: list[str], **callbacks: Any) -> None:
        self.callbacks = callbacks

    def memberid(self) -> str:
        return self.name

    def consumer_group_metadata(self) -> bytes:
        return b"CGMDv2:" + GEN.to_bytes(4, sys.byteorder) + b"g\x00" + \
            self.name.encode() + b"\x00\x00"

    def assign(self, tps: list[TopicPartition]) -> None:
        self.assigned = {(tp.topic, tp.partition): tp.offset for tp in tps}
        self.group.log.append(("assign", self.name, dict(self.assigned)))

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> list[Any]:
        assert asynchronous is False
        for tp in offsets:
            self.group.committed[(tp.topic, tp.partition)] = (tp.offset, tp.metadata)
        self.group.log.append(("commit", self.name, {(tp.topic, tp.partition):
                                                     (tp.offset, tp.metadata)
                                                     for tp in offsets}))
        return [SimpleNamespace(topic=tp.topic, partition=tp.partition, error=None)
                for tp in offsets]

    def committed(self, tps: list[TopicPartition], timeout: float) -> list[Any]:
        return [SimpleNamespace(topic=tp.topic, partition=tp.partition, error=None,
                                offset=self.group.committed.get((tp.topic, tp.partition),
                                                                (-1001, None))[0],
                                metadata=self.group.committed.get((tp.topic, tp.partition),
                                                                  (-1001, None))[1])
                for tp in tps]

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        return 0, len(self.group.data[tp.partition])

    def list_topics(self, timeout: float) -> Any:
        return SimpleNamespace(topics={T: SimpleNamespace(
            partitions={p: None for p in self.group.data})})

    def poll(self, timeout: float) -> Any:
        for (topic, p), at in sorted(self.assigned.items()):
            if at < len(self.group.data[p]):
                self.assigned[(topic, p)] = at + 1
                return SimpleNamespace(topic=lambda t=topic: t, partition=lambda p=p: p,
                                       offset=lambda at=at: at, error=lambda: None,
                                       value=lambda p=p, at=at: self.group.data[p][at])
        return None

    def close(self) -> None:
        pass


class FakeAdmin:
    def __init__(self, group: Group) -> None:
        self.group = group

    def describe_consumer_groups(self, ids: list[str], request_timeout: float) -> Any:
        found = SimpleNamespace(
            state=confluent_kafka.ConsumerGroupState.STABLE,
            members=[SimpleNamespace(member_id=m, client_id=c)
                     for m, c in self.group.members.items()])
        return {ids[0]: SimpleNamespace(result=lambda timeout: found)}


class FakeTargets:
    def __init__(self, group: Group) -> None:
        self.group = group

    @property
    def version(self) -> int:
        return self.group.version

    def catch_up(self, timeout: float) -> None:
        pass

    def poll(self) -> ConsumerAssignment | None:
        return self.group.target

    def close(self) -> None:
        pass


@pytest.fixture
def group(monkeypatch: pytest.MonkeyPatch) -> Group:
    shared = Group(partitions=3, messages=5)
    names = iter(["a", "b"])
    monkeypatch.setattr(confluent_kafka, "Consumer",
                        lambda settings: FakeConsumer(shared, next(names), settings))
    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", lambda s: FakeAdmin(shared))
    monkeypatch.setattr(helper, "TargetReader", lambda *a, **k: FakeTargets(shared))
    return shared


def member(owned: list[int]) -> helper.RackAwareConsumer:
    c = helper.RackAwareConsumer({"group.id": "g", "client.rack": "r",
                                  "auto.offset.reset": "earliest"}, [T], check_seconds=0,
                                 commit_seconds=3600, hold_back_seconds=0)
    c._on_assign(c._consumer, [TopicPartition(T, p) for p in owned])
    return c


def drain(c: helper.RackAwareConsumer, n: int) -> list[bytes]:
    out = []
    for _ in range(n):
        msg = c.poll(0)
        if msg is not None:
            out.append(msg.value())
    return out


def publish(group: Group, assignment: dict[str, list[int]]) -> None:
    group.target = ConsumerAssignment.from_dict({
        "version": 1, "cluster_id": "c", "event_time": "2026-11-25T10:00:00Z",
        "group": "g", "strategy": "range", "cross_rack": 0,
        "assignment": {m: [{"topic": T, "partition": p} for p in ps]
                       for m, ps in assignment.items()}})
    group.version += 1


def test_a_lend_stops_the_owner_before_the_token_and_the_borrower_reads_on_from_it(group):
    a, b = member([0, 1]), member([2])
    got = drain(a, 4) + drain(b, 2)  # a: 0:0..0:3 (partition 0 first); b: 2:0, 2:1
    publish(group, {"a": [0], "b": [1, 2]})
    got += drain(a, 1)  # the check lends partition 1, then a reads 0:4
    assign_at = next(i for i, e in enumerate(group.log) if e[:2] == ("assign", "a")
                     and (T, 1) not in e[2])
    token_at = next(i for i, e in enumerate(group.log) if e[:2] == ("commit", "a")
                    and parse_token(e[2].get((T, 1), (0, None))[1]) is not None)
    assert assign_at < token_at  # stopped reading before anyone could start
    offset, meta = group.committed[(T, 1)]
    assert (offset, parse_token(meta).holder) == (0, "b")  # a never read partition 1
    got += drain(b, 20)
    assert a.reading == {(T, 0)} and b.reading == {(T, 1), (T, 2)}
    # the target goes: b gives partition 1 back at its position, a reads on from there
    group.target, group.version = None, group.version + 1
    b.poll(0)
    offset, meta = group.committed[(T, 1)]
    assert offset == 5 and parse_token(meta).holder == "a"
    got += drain(a, 20)
    assert a.reading == {(T, 0), (T, 1)} and b.reading == {(T, 2)}
    assert sorted(got) == sorted(v for vs in group.data.values() for v in vs)


def test_every_switch_commits_what_was_delivered_before_it(group):
    a, _ = member([0, 1]), member([2])
    drain(a, 3)  # 0:0, 0:1, 0:2
    publish(group, {"a": [0], "b": [1, 2]})
    a.poll(0)
    assert group.committed[(T, 0)][0] == 3


def test_a_new_generation_describes_the_group_again(group):
    a, _ = member([0, 1]), member([2])
    publish(group, {"a": [0, 1], "b": [2]})
    a.poll(0)
    assert a._members[2] == {"a", "b"}
    a._on_revoke(a._consumer, [])
    a._on_assign(a._consumer, [TopicPartition(T, p) for p in (0, 1, 2)])
    assert a._members == helper._UNKNOWN  # never a description from before the rebalance
