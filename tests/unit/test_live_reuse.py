"""A snapshot an event triggers describes the brokers the event names and re-uses the
others' last DescribeLogDirs answer only while it is young and still lists every replica
the metadata places on them; the collector gathers the named brokers per burst."""

from __future__ import annotations

import threading

import pytest

from core.live import PlacementMemory, read_snapshot
from streams.collect.coalesce import Coalescer
from streams.collect.events import ClusterView


class Admin:
    """Three brokers, one dir each; ``placed`` is topic -> partition -> replica brokers."""

    def __init__(self, placed: dict[str, dict[int, list[int]]]) -> None:
        self.placed = placed
        self.asked: list[int] = []
        self.lock = threading.Lock()
        self.sizes = 100

    def describe_cluster(self) -> dict:
        return {"cluster_id": "c", "brokers": [{"broker_id": b, "rack": f"r{b}"}
                                               for b in (0, 1, 2)]}

    def describe_topics(self) -> list[dict]:
        return [{"name": t, "error_code": 0, "partitions": [
            {"partition_index": p, "leader_id": r[0], "isr_nodes": r, "replica_nodes": r}
            for p, r in parts.items()]} for t, parts in self.placed.items()]

    def describe_log_dirs(self, brokers: list[int]) -> list[dict]:
        (b,) = brokers
        with self.lock:
            self.asked.append(b)
        topics = [{"name": t, "partitions": [
            {"partition_index": p, "partition_size": self.sizes, "is_future_key": False}
            for p, r in parts.items() if b in r]} for t, parts in self.placed.items()]
        return [{"log_dirs": [{"log_dir": f"/d{b}", "error_code": 0, "total_bytes": 1000,
                               "usable_bytes": 500, "topics": topics}]}]


def sizes(doc: dict, broker: int) -> set[int]:
    return {r["size_bytes"] for p in doc["partitions"] for r in p["replicas"]
            if r["broker"] == broker}


@pytest.fixture
def admin() -> Admin:
    return Admin({"t": {0: [0, 1], 1: [1, 2], 2: [2, 0]}})


def test_only_the_named_broker_is_described_the_others_re_used(admin):
    memory = PlacementMemory()
    read_snapshot(admin, "c", memory)
    assert sorted(admin.asked) == [0, 1, 2] and memory.last_described == 3
    admin.asked.clear()
    admin.sizes = 200  # grown since: only the described broker shows it
    doc = read_snapshot(admin, "c", memory, only={1}, max_age=60)
    assert admin.asked == [1] and memory.last_described == 1
    assert sizes(doc, 1) == {200} and sizes(doc, 0) == sizes(doc, 2) == {100}
    assert all(r["log_dir"] == f"/d{r['broker']}" for p in doc["partitions"]
               for r in p["replicas"])


def test_a_broker_given_a_replica_since_its_answer_is_described_again(admin):
    memory = PlacementMemory()
    read_snapshot(admin, "c", memory)
    admin.asked.clear()
    admin.placed["new"] = {0: [0, 1]}  # created since: broker 0's answer lacks it
    doc = read_snapshot(admin, "c", memory, only={2}, max_age=60)
    assert sorted(admin.asked) == [0, 1, 2]
    new = next(p for p in doc["partitions"] if p["topic"] == "new")
    assert [r["log_dir"] for r in new["replicas"]] == ["/d0", "/d1"]


def test_an_answer_older_than_the_bound_is_not_re_used(admin):
    memory = PlacementMemory()
    read_snapshot(admin, "c", memory)
    admin.asked.clear()
    read_snapshot(admin, "c", memory, only={1}, max_age=0.0)
    assert sorted(admin.asked) == [0, 1, 2]


def test_a_dir_change_a_probe_saw_drops_the_kept_answer(admin):
    memory = PlacementMemory()
    read_snapshot(admin, "c", memory)
    memory.forget_if_changed(0, [])  # same as kept: kept
    memory.forget_if_changed(2, ["/d2"])  # the probe sees /d2 offline now
    admin.asked.clear()
    read_snapshot(admin, "c", memory, only={1}, max_age=60)
    assert sorted(admin.asked) == [1, 2]


def test_without_names_every_broker_is_described(admin):
    memory = PlacementMemory()
    read_snapshot(admin, "c", memory)
    admin.asked.clear()
    read_snapshot(admin, "c", memory, max_age=60)
    assert sorted(admin.asked) == [0, 1, 2]


def test_a_burst_gathers_the_brokers_it_names_and_one_unnamed_trigger_means_all():
    c = Coalescer(0.2)
    c.note(1.0, "failure on 1", brokers=[1])
    c.note(1.1, "failure on 3", brokers=[3])
    assert c.about() == {1, 3}
    c.take()
    assert c.about() == set()
    c.note(2.0, "failure on 1", brokers=[1])
    c.note(2.1, "the probe saw a change")
    assert c.about() is None
    c.take()
    c.note(3.0, "failure on 2", brokers=[2])
    assert c.about() == {2}


def test_a_look_says_which_brokers_changed():
    before = ClusterView(frozenset({0, 1, 2}), frozenset({(1, "/a")}))
    after = ClusterView(frozenset({0, 1, 3}), frozenset({(0, "/b"), (1, "/a")}))
    assert before.differs(after) == {0, 2, 3}
    assert before.differs(before) == set()
