"""core.live without a cluster: reducing a DescribeLogDirs reply, and where a
replica that no online dir lists is said to be."""

from __future__ import annotations

from core.live import KAFKA_STORAGE_ERROR, PlacementMemory, _replica, broker_dirs


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
