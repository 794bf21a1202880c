"""Disk faults of another kind, and clock trouble: a dir broken while its broker is down
is found and healed when the broker comes back; records dated far in the future or the
past neither move the detector's clock nor hide a real failure."""

from __future__ import annotations

import json
import time

import pytest

from sandbox import cluster
from schemas import wire
from tests.chaos.chaos_support import scenario, some_dir

pytestmark = pytest.mark.chaos


def test_a_dir_broken_while_its_broker_is_stopped_is_healed_when_it_returns(
        sandbox, tmp_path):
    with scenario(sandbox, tmp_path / "loop", "stopped-disk") as s:
        broker = 1
        path = some_dir(sandbox, broker, s.topic)
        try:
            start = time.monotonic()
            cluster.kill_broker(sandbox, broker, graceful=True)
            cluster.fail_disk(sandbox, broker, path)  # the disk dies while the broker is down
            cluster.start_broker(sandbox, broker)
            sandbox.reload()
            s.healed_once(broker, path, start, "broker stopped")
            s.assert_proposed_once()
            s.assert_no_throttle_left()
            s.assert_healthy()
            s.assert_history()
        finally:
            s.heal(broker, path)


def test_records_from_the_far_future_or_past_hide_no_real_failure(sandbox, tmp_path):
    from confluent_kafka import Producer

    with scenario(sandbox, tmp_path / "loop", "clock") as s:
        prefix = s.loop.config["bus"]["topic_prefix"]
        producer = Producer({"bootstrap.servers": sandbox.bootstrap_servers})
        odd = []
        for when in ("2100-01-01T00:00:00.000Z", "1970-01-02T00:00:00.000Z"):
            for b in sandbox.brokers:
                event = {"version": 1, "cluster_id": sandbox.cluster_id, "event_time": when,
                         "source": "zookeeper", "kind": "broker_registered",
                         "broker": b.node_id, "log_dir": None, "znode": None,
                         "details": "chaos: a clock far off"}
                metric = {"version": 1, "cluster_id": sandbox.cluster_id, "event_time": when,
                          "broker": b.node_id, "rack": b.rack,
                          "metric": "kafka_log_offline_log_directory_count", "labels": {},
                          "value": 0}
                producer.produce(prefix + "logdir-events", json.dumps(event).encode(),
                                 key=f"{sandbox.cluster_id}/{b.node_id}".encode())
                producer.produce(prefix + "broker-metrics", json.dumps(metric).encode(),
                                 key=f"{sandbox.cluster_id}/{b.node_id}".encode())
                odd.append(when)
        assert producer.flush(30) == 0
        time.sleep(5)  # a few batches take them in
        broker = 0
        path = some_dir(sandbox, broker, s.topic)
        try:
            s.healed_once(broker, path, s.fail(broker, path))
            future = [d for d in (wire.record("dead-letter", m.value)
                                  for m in s.readers["dead-letter"].messages)
                      if "2100-01-01" in d["raw"]]
            assert len(future) == 2 * len(sandbox.brokers)
            assert all("in the future" in d["reason"] for d in future), future[0]["reason"]
            s.assert_proposed_once()
            s.assert_healthy()
            s.assert_history()
        finally:
            s.heal(broker, path)
