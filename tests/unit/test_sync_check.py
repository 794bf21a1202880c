"""The chaos suite's in-sync check and what it says when the wait for it fails
(tests/chaos/sync_check.py), on a described cluster and broker logs made up here."""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

from tests.chaos import sync_check


def described(*partitions: tuple[str, int, int, list[int], list[int]]) -> list[dict]:
    topics: dict[str, list[dict]] = {}
    for name, index, leader, replicas, isr in partitions:
        topics.setdefault(name, []).append({"partition_index": index, "leader_id": leader,
                                            "replica_nodes": replicas, "isr_nodes": isr})
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


def cluster(monkeypatch, tmp_path, topics: list[dict], logs: dict[int, str]):
    @contextmanager
    def admin(_state):
        yield SimpleNamespace(describe_topics=lambda: topics)

    monkeypatch.setattr(sync_check, "kafka_admin", admin)
    brokers = []
    for node, text in logs.items():
        folder = tmp_path / f"broker-{node}"
        folder.mkdir()
        (folder / "server.log").write_text(text)
        brokers.append(SimpleNamespace(node_id=node, config=str(folder / "broker.properties")))
    return SimpleNamespace(brokers=brokers)


def test_only_the_loops_topics_and_the_test_topic_count(monkeypatch, tmp_path):
    state = cluster(monkeypatch, tmp_path, described(
        ("loop.actions", 0, 1, [0, 1, 2], [0, 1, 2]),
        ("chaos-t", 0, 0, [0, 1], [0, 1]),
        ("someone-elses", 0, -1, [0, 1], [0])), {})
    assert sync_check.in_sync(state, "loop.", "chaos-t")
    state = cluster(monkeypatch, tmp_path / "b", described(
        ("loop.actions", 2, 1, [0, 1, 2], [1, 2]),
        ("chaos-t", 3, -1, [0, 1], [0, 1])), {})
    assert sync_check.out_of_sync(state, "loop.", "chaos-t") == [
        "loop.actions-2: leader 1, replicas [0, 1, 2], isr [1, 2]",
        "chaos-t-3: leader -1, replicas [0, 1], isr [0, 1]"]


def test_a_failed_wait_names_the_partitions_and_quotes_what_the_brokers_said(
        monkeypatch, tmp_path):
    log = ("[2026-12-07 04:00:00,000] INFO [Partition t-0 broker=0] ISR updated to 0,1 "
           "(kafka.cluster.Partition)\n"
           "[2026-12-07 04:00:01,000] WARN Broker had a stale broker epoch (12), retrying. "
           "(kafka.server.DefaultAlterPartitionManager)\n"
           "[2026-12-07 04:00:02,000] INFO [Partition loop.actions-2 broker=0] Failed to "
           "alter partition to PendingExpandIsr since the controller rejected the request "
           "with INELIGIBLE_REPLICA. Partition state has been reset to the latest committed "
           "state. AlterPartition ... (kafka.cluster.Partition)\n")
    state = cluster(monkeypatch, tmp_path, described(
        ("loop.actions", 2, 0, [0, 1, 2], [0, 2])), {0: log, 1: ""})
    said = sync_check.why_not_in_sync(state, "loop.", "chaos-t")
    assert "--- out of sync (1):\nloop.actions-2: leader 0, replicas [0, 1, 2], isr [0, 2]" \
        in said
    assert "stale broker epoch" in said and "INELIGIBLE_REPLICA" in said
    assert "ISR updated to 0,1" not in said  # an ordinary INFO line stays out
    assert "--- broker 1, its last warnings and ISR news" in said and "(none)" in said
