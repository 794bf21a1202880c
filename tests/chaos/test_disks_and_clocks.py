"""Disk faults of other kinds, and clock trouble: a dir broken while its broker is down
is found and healed when the broker comes back; a full disk (a small tmpfs, ENOSPC under
traffic) goes offline and what it held is re-replicated; records dated far in the future or the
past neither move the detector's clock nor hide a real failure."""

from __future__ import annotations

import json
import time

import pytest

from sandbox import cluster, traffic
from sandbox.fill import fill_until_full
from schemas import wire
from tests.chaos.chaos_support import scenario, shared_loop, some_dir

pytestmark = pytest.mark.chaos


@pytest.fixture(scope="module")
def shared(chaos_sandbox, tmp_path_factory):
    """One loop through the module's faults, as in production (the clock's odd records
    go last: they are meant to be shrugged off, and are)."""
    with shared_loop(chaos_sandbox, tmp_path_factory.mktemp("disks-loop")) as running:
        yield running


def test_a_dir_broken_while_its_broker_is_stopped_is_healed_when_it_returns(
        chaos_sandbox, shared, tmp_path):
    with scenario(chaos_sandbox, tmp_path, "stopped-disk", shared=shared) as s:
        broker = 1
        path = some_dir(chaos_sandbox, broker, s.topic)
        try:
            start = time.monotonic()
            cluster.kill_broker(chaos_sandbox, broker, graceful=True)
            cluster.fail_disk(chaos_sandbox, broker, path)  # the disk dies while the broker is down
            cluster.start_broker(chaos_sandbox, broker)
            chaos_sandbox.reload()
            s.healed_once(broker, path, start, "broker stopped")
            s.assert_kept()
        finally:
            s.heal(broker, path)


def test_a_full_disk_under_traffic_goes_offline_and_what_it_held_is_re_replicated(
        chaos_sandbox, shared, tmp_path):
    with scenario(chaos_sandbox, tmp_path, "full-disk", shared=shared) as s:
        broker, partner = 2, 0
        path = some_dir(chaos_sandbox, broker, s.topic)
        full_topic = None
        try:
            # the dir becomes a tmpfs with 16 MiB free (its broker restarts meanwhile)
            cluster.small_disk(chaos_sandbox, broker, path, 16 * 2**20)
            chaos_sandbox.reload()
            start = time.monotonic()
            full_topic, acked = fill_until_full(chaos_sandbox, broker, path, partner, 256 * 2**20)
            s.timings["MiB acknowledged before ENOSPC"] = acked / 2**20
            fix = s.healed_once(broker, path, start, "disk full")
            moved = {(t["topic"], t["partition"]) for t in fix["plan"]["partitions"]}
            # the full disk's own writes and the traffic topic's replica both moved off it
            assert {(full_topic, 0), (full_topic, 1)} <= moved, sorted(moved)
            s.wait(lambda: all(not p["offline_replicas"] and broker not in p["replica_nodes"]
                               for p in traffic.partitions(chaos_sandbox, full_topic)),
                   f"{full_topic} re-replicated off broker {broker}", 120, alive=False)
            s.assert_kept()
        finally:
            s.heal(broker, path)
            if full_topic:
                traffic.delete_topic(chaos_sandbox, full_topic)


def test_records_from_the_far_future_or_past_hide_no_real_failure(chaos_sandbox, shared,
                                                                  tmp_path):
    from confluent_kafka import Producer

    with scenario(chaos_sandbox, tmp_path, "clock", shared=shared) as s:
        prefix = s.loop.config["bus"]["topic_prefix"]
        producer = Producer({"bootstrap.servers": chaos_sandbox.bootstrap_servers})
        odd = []
        for when in ("2100-01-01T00:00:00.000Z", "1970-01-02T00:00:00.000Z"):
            for b in chaos_sandbox.brokers:
                event = {"version": 1, "cluster_id": chaos_sandbox.cluster_id, "event_time": when,
                         "source": "zookeeper", "kind": "broker_registered",
                         "broker": b.node_id, "log_dir": None, "znode": None,
                         "details": "chaos: a clock far off"}
                metric = {"version": 1, "cluster_id": chaos_sandbox.cluster_id, "event_time": when,
                          "broker": b.node_id, "rack": b.rack,
                          "metric": "kafka_log_offline_log_directory_count", "labels": {},
                          "value": 0}
                producer.produce(prefix + "logdir-events", json.dumps(event).encode(),
                                 key=f"{chaos_sandbox.cluster_id}/{b.node_id}".encode())
                producer.produce(prefix + "broker-metrics", json.dumps(metric).encode(),
                                 key=f"{chaos_sandbox.cluster_id}/{b.node_id}".encode())
                odd.append(when)
        assert producer.flush(30) == 0
        # taken in: the job has dead-lettered those from the future (the past ones, sent
        # after them, come in the same batch: far below the per-trigger caps)
        s.wait(lambda: sum(b"2100-01-01" in m.value for m in s.readers["dead-letter"].messages)
               >= 2 * len(chaos_sandbox.brokers), "the dead letters of the records from the "
               "future", 120)
        broker = 0
        path = some_dir(chaos_sandbox, broker, s.topic)
        try:
            s.healed_once(broker, path, s.fail(broker, path))
            future = [d for d in (wire.record("dead-letter", m.value)
                                  for m in s.readers["dead-letter"].messages)
                      if "2100-01-01" in d["raw"]]
            assert len(future) == 2 * len(chaos_sandbox.brokers)
            assert all("in the future" in d["reason"] for d in future), future[0]["reason"]
            s.assert_proposed_once()
            s.assert_healthy()
            s.assert_history()
        finally:
            s.heal(broker, path)
