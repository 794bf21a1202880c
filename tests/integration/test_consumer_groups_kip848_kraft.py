"""A KIP-848 group beside a classic one on Kafka 4.4: the snapshot records each with its
protocol and assignor (the broker's `uniform` for the new one, whose members' racks the
reader cannot see); the stream job proposes an assign_consumers for the classic group
reading across racks and none for the KIP-848 group, whose page names what the operator
can set (the brokers' group.consumer.assignors, the consumers' client.rack); the opt-in
helper refuses the KIP-848 group.

Real confluent-kafka consumers, one group each way; the snapshots are read with the
collector's own code and produced to a job on topics of its own, a window apart.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from core import groups
from core.live import open_admin
from core.locality import locality
from core.model import ClusterModel
from remediation.consumers import ConfigError, RackAwareConsumer
from schemas.snapshot import snapshot_from_dict
from tests.integration.serve_harness import placed_topic
from tests.integration.stream_job_support import awaited, cid, running_stream
from tests.integration.test_consumer_groups_snapshot import Consumer
from tests.integration.test_stream_consumers import WINDOW, _at, _snapshot, _stable
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def test_a_kip848_group_is_recorded_measured_and_paged_never_assigned(kraft_sandbox, tmp_path):
    state = kraft_sandbox
    cluster_id = cid("kip848")
    # RF 1, two partitions per broker (rack1, rack2, rack3).
    topic = placed_topic(state, "kip848", {0: [0], 1: [0], 2: [1], 3: [1], 4: [2], 5: [2]})
    classic = f"classic-{uuid.uuid4().hex[:6]}"
    new = f"kip848-{uuid.uuid4().hex[:6]}"
    members = [Consumer(state.bootstrap_servers, classic, topic, f"c-{rack}", rack,
                        strategy="roundrobin") for rack in ("rack1", "rack2", "rack3")]
    members += [Consumer(state.bootstrap_servers, new, topic, f"n-{rack}", rack, strategy=None)
                for rack in ("rack1", "rack2", "rack3")]
    try:
        wait_until(lambda: all(len(m.assigned) == 2 for m in members),
                   "both groups consuming every partition", 120)
        base = wait_until(lambda: _stable(_snapshot(state, cluster_id, [classic, new]),
                                          {classic: 3, new: 3}),
                          "a snapshot with both groups stable", 60)
        with open_admin(state.bootstrap_servers) as admin:
            # DescribeGroups does not describe a KIP-848 group: ConsumerGroupDescribe does.
            answer = groups.describe(admin, [new])[new]
            print(f"DescribeGroups on the KIP-848 group: error={answer.get('error')!r}, "
                  f"state={answer.get('group_state')!r}, {len(answer.get('members', []))} "
                  "members")
            assert groups.group_record(new, answer) is None
        # The opt-in helper, configured classic, meets the group the cluster runs as
        # KIP-848: it refuses at construction and says why (before reading any target).
        with pytest.raises(ConfigError, match="runs as a KIP-848 group on the cluster"):
            RackAwareConsumer({"bootstrap.servers": state.bootstrap_servers, "group.id": new,
                               "client.rack": "rack1",
                               "partition.assignment.strategy": "range"}, [topic],
                              timeout=10.0)
    finally:
        for m in members:
            m.stop()

    found = {g["group"]: g for g in base["consumer_groups"]}
    assert (found[classic]["group_protocol"], found[classic]["protocol"]) == (
        "classic", "roundrobin")
    assert sorted(m["rack"] for m in found[classic]["members"]) == ["rack1", "rack2", "rack3"]
    assert (found[new]["group_protocol"], found[new]["protocol"]) == ("consumer", "uniform")
    assert found[new]["racks_known"] is False
    assert sorted(p for m in found[new]["members"] for a in m["assignment"]
                  for p in a["partitions"]) == list(range(6))
    model = ClusterModel(snapshot_from_dict(base))
    loaded = {g.group: g for g in model.snapshot.consumer_groups}
    assert locality(model, loaded[classic]).ratio <= 0.5  # the premise: reading across
    unknown = locality(model, loaded[new])
    assert (unknown.ratio, unknown.partitions) == (None, 6)  # unknown, not 0

    stream = contextlib.contextmanager(running_stream)(state, tmp_path, "k8", {
        "consumer_locality_window_seconds": WINDOW, "consumer_locality_margin": 0.10,
        "skew_window_seconds": 86400.0, "leader_window_seconds": 86400.0})
    with stream as (job, bus):
        start = datetime.now(UTC)
        bus.send("cluster-snapshots", _at(base, start), cluster_id.encode())
        bus.send("cluster-snapshots", _at(base, start + timedelta(seconds=WINDOW + 1)),
                 cluster_id.encode())
        sent = time.monotonic()
        (action,) = awaited(job, lambda: bus.actions(cluster_id, "assign_consumers"),
                            "assign_consumers for the classic group")
        (page,) = awaited(job, lambda: [a for a in bus.actions(cluster_id, "page_operator")
                                        if new in a["reason"]], "the KIP-848 group's page")
        print(f"assign_consumers and the KIP-848 page on the bus {time.monotonic() - sent:.1f}"
              " s after the snapshot that closed the window")
        assert action["plan"]["group"] == classic and action["plan"]["cross_rack"] == 0
        reason = page["reason"]
        assert "group.consumer.assignors" in reason and "client.rack" in reason
        assert "assignor uniform" in reason and "cannot be read" in reason
        # Later snapshots propose nothing more, for either group.
        bus.send("cluster-snapshots", _at(base, start + timedelta(seconds=3 * WINDOW)),
                 cluster_id.encode())
        bus.settle()
        assert [a["plan"]["group"] for a in bus.actions(cluster_id, "assign_consumers")] == [
            classic]
        assert len([a for a in bus.actions(cluster_id, "page_operator")
                    if new in a["reason"]]) == 1
