"""Detect, end to end on the KRaft sandbox (KIP-858 JBOD): no ZooKeeper, so the snapshot
collector's DescribeLogDirs probe reports the failed dir, and the job proposes the fix."""

from __future__ import annotations

import uuid

import pytest

from sandbox import cluster, loop, traffic
from tests.conftest import prove
from tests.e2e.loop_support import (
    dir_holding,
    drop_topics,
    fail_and_wait_for_fix,
    wait_for_batches,
    wait_reported_again,
)
from tests.integration.collect_support import TopicReader

pytestmark = pytest.mark.e2e


def test_a_failed_dir_on_kraft_yields_one_fix(kraft_sandbox, tmp_path_factory, record_property):
    state = kraft_sandbox
    prefix = f"e2ek{uuid.uuid4().hex[:6]}."
    the_loop = loop.start(
        state, tmp_path_factory.mktemp("detect-loop-kraft"),
        names=("collect-metrics", "collect-snapshots", "stream"),
        overrides={"bus": {"topic_prefix": prefix},
                   # a full snapshot every 5 s, not 15: the reports of the failed dir
                   # waited for below after the fix come sooner
                   "collect": {"snapshot_interval_seconds": 5.0},
                   "detect": {"leader_window_seconds": 86400.0,
                              "disk_skew_min_bytes": 1 << 40}})
    readers = {}
    topic = f"e2e-kraft-{uuid.uuid4().hex[:6]}"
    broker = 2
    path = None
    try:
        wait_for_batches(the_loop, 0)
        for name in ("actions", "logdir-events", "cluster-snapshots", "broker-metrics"):
            readers[name] = TopicReader(state, prefix + name)
            readers[name].start()
        traffic.create_topic(state, topic, partitions=6, replication_factor=2)
        traffic.produce(state, topic, 60)
        path = dir_holding(state, broker, topic)
        fix, latency = fail_and_wait_for_fix(state, the_loop, readers, broker, path, topic)
        record_property("figures", {"what": "detect (KRaft)",
                                    "dir offline event -> action on the bus s": latency})
        # The probe's event, the snapshot it triggers and the gauge all say it; the earliest
        # dates the fix.
        assert fix["trigger"]["kind"] in ("logdir_event", "snapshot", "metric")
        # More snapshots and the gauge report the same dir; still one fix.
        wait_reported_again(the_loop, readers, fix)
        fixes = [m for m in readers["actions"].messages if fix["action_id"].encode() in m.value]
        assert len(fixes) == 1
        prove(record_property, state, "detect")
    finally:
        for reader in readers.values():
            reader.stop()
        the_loop.stop_all()
        drop_topics(state, prefix)
        if path is not None and cluster.disk_failed(path):
            cluster.heal_disk(state, broker, path)
            state.reload()
