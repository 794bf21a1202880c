"""core.live without a cluster: reducing a DescribeLogDirs reply, and where a
replica that no online dir lists is said to be."""

from __future__ import annotations

import threading

from core.live import KAFKA_STORAGE_ERROR, PlacementMemory, _replica, broker_dirs, per_broker


def reply(*dirs: tuple[str, int, list[tuple[str, int, int, bool]]]) -> dict:
    return {"log_dirs": [
        {"log_dir": path, "error_code": error, "total_bytes": 100 if not error else -1,
         "usable_bytes": 60 if not error else -1,
         "topics": [{"name": t, "partitions": [
             {"partition_index": p, "partition_size": size, "is_future_key": future}]}
             for t, p, size, future in parts]}
        for path, error, parts in dirs]}


def test_a_reply_keeps_current_replicas_and_moves_in_flight_apart():
    dirs = broker_dirs(reply(("/d1", 0, [("t", 0, 10, False), ("t", 1, 5, True)]),
                             ("/d2", KAFKA_STORAGE_ERROR, [])))
    assert dirs.dirs == {"/d1": {"online": True, "total_bytes": 100, "usable_bytes": 60},
                         "/d2": {"online": False, "total_bytes": None, "usable_bytes": None}}
    assert dirs.replicas == {("t", 0): ("/d1", 10)}
    assert dirs.future == {("t", 1): "/d1"}


def test_an_unlisted_replica_is_placed_by_memory_or_on_the_one_failed_dir():
    one_failed = broker_dirs(reply(("/d1", 0, []), ("/d2", KAFKA_STORAGE_ERROR, [])))
    memory = PlacementMemory()
    # never seen, one dir offline: it was there
    assert _replica(("t", 0), 1, one_failed, memory)["log_dir"] == "/d2"
    # seen on the online dir before: it is being re-created, not on a failed dir
    memory.replica_dirs[("t", 1, 1)] = "/d1"
    assert _replica(("t", 1), 1, one_failed, memory)["log_dir"] is None
    # two dirs offline and never seen: unknown
    two_failed = broker_dirs(reply(("/d1", KAFKA_STORAGE_ERROR, []),
                                   ("/d2", KAFKA_STORAGE_ERROR, []), ("/d3", 0, [])))
    assert _replica(("t", 2), 1, two_failed, memory)["log_dir"] is None
    # the broker did not answer: its last known dir
    assert _replica(("t", 1), 1, None, memory)["log_dir"] == "/d1"


def test_brokers_are_asked_several_at_once_never_more_than_the_bound():
    bound = 4
    together = threading.Barrier(bound, timeout=30)  # broken unless 4 calls overlap
    lock, in_flight, peak = threading.Lock(), [0], [0]

    def ask(broker: int) -> str:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        try:
            if broker < bound:
                together.wait()
            return f"dirs of {broker}"
        finally:
            with lock:
                in_flight[0] -= 1

    answers = per_broker(ask, [9, 3, 0, 7, 1, 2, 8, 5, 6, 4], concurrency=bound)
    assert list(answers) == list(range(10))
    assert answers == {b: f"dirs of {b}" for b in range(10)}
    assert peak[0] == bound


def test_one_broker_or_a_bound_of_one_asks_in_this_thread():
    caller = threading.get_ident()
    seen: list[int] = []

    def ask(broker: int) -> int:
        seen.append(threading.get_ident())
        return broker * 10

    assert per_broker(ask, [2], concurrency=8) == {2: 20}
    assert per_broker(ask, [3, 1], concurrency=1) == {1: 10, 3: 30}
    assert seen == [caller] * 3


def test_a_cordoned_dir_is_recorded_and_an_uncordoned_one_leaves_the_field_out():
    answer = reply(("/d1", 0, []), ("/d2", 0, []))
    answer["log_dirs"][0]["is_cordoned"] = True  # DescribeLogDirs v5 (Kafka 4.3+)
    answer["log_dirs"][1]["is_cordoned"] = False
    dirs = broker_dirs(answer).dirs
    assert dirs["/d1"]["cordoned"] is True
    assert "cordoned" not in dirs["/d2"]  # a 3.9 snapshot reads the same as before


def test_no_dirs_at_all_is_a_denial_never_an_empty_broker():
    """Kafka answers DescribeLogDirs without Describe on Cluster with no dirs and only a
    top-level error code (kafka-python drops it): that must stop the read, naming the ACL,
    not make a snapshot that says nothing is wrong. (The real denial needs an authorizer:
    the secured sandbox; here the reply it gives.)"""
    import pytest

    from core.live import LogDirsDenied, describe_dirs

    class Denied:
        def describe_log_dirs(self, brokers):
            return [{"broker": brokers[0], "log_dirs": []}]

    with pytest.raises(LogDirsDenied, match="broker 3 .* Describe on Cluster") as err:
        describe_dirs(Denied(), 3)
    assert "--operation Describe --cluster" in str(err.value)
    assert "\n" not in str(err.value)
