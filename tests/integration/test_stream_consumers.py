"""The stream job on real consumer groups: a group reading across racks although its KIP-881
plan would read on them gets one assign_consumers once the window has passed; a member
with no client.rack gets a page naming it and the line to set.

The groups are real (confluent-kafka consumers on the sandbox); their snapshots are read
with the collector's own code (core.live + core.groups) and produced to a job on topics of
its own, dated as the collector would date them a window apart.
"""

from __future__ import annotations

import copy
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core import clock
from core.groups import add_groups
from core.live import open_admin, read_snapshot
from core.locality import locality
from core.model import ClusterModel
from schemas.snapshot import snapshot_from_dict
from tests.conftest import prove
from tests.integration.serve_harness import placed_topic
from tests.integration.stream_job_support import awaited, cid, running_stream
from tests.integration.test_consumer_groups_snapshot import Consumer
from tests.polling import wait_until

pytestmark = pytest.mark.integration

WINDOW = 5.0


@pytest.fixture(scope="module")
def consumer_stream(sandbox, tmp_path_factory):
    yield from running_stream(sandbox, tmp_path_factory.mktemp("stream-consumers"), "sc", {
        "consumer_locality_window_seconds": WINDOW, "consumer_locality_margin": 0.10,
        # Disks and leaders of the shared sandbox are not what this is about.
        "skew_window_seconds": 86400.0, "leader_window_seconds": 86400.0})


def _snapshot(sandbox, cluster_id: str, groups: list[str]) -> dict[str, Any]:
    """What the snapshot collector publishes, restricted to ``groups``."""
    with open_admin(sandbox.bootstrap_servers) as admin:
        doc = read_snapshot(admin, cluster_id)
        add_groups(admin, doc)
    doc["consumer_groups"] = [g for g in doc["consumer_groups"] if g["group"] in groups]
    return doc


def _at(doc: dict[str, Any], when: datetime) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out["taken_at"] = clock.text(when)
    return out


def test_a_group_reading_across_racks_gets_one_assignment_and_a_rackless_member_a_page(
        sandbox, consumer_stream, record_property):
    job, bus = consumer_stream
    cluster_id = cid("groups")
    # RF 1, two partitions per broker (rack1, rack2, rack3): round robin over three
    # members in three racks hands each member partitions of two racks; the plan one.
    topic = placed_topic(sandbox, "stream-groups", {0: [0], 1: [0], 2: [1], 3: [1], 4: [2],
                                                    5: [2]})
    across = f"across-{uuid.uuid4().hex[:6]}"
    rackless = f"rackless-{uuid.uuid4().hex[:6]}"
    members = [Consumer(sandbox.bootstrap_servers, across, topic, f"c-{rack}", rack,
                        strategy="roundrobin") for rack in ("rack1", "rack2", "rack3")]
    members += [Consumer(sandbox.bootstrap_servers, rackless, topic, "has-rack", "rack1"),
                Consumer(sandbox.bootstrap_servers, rackless, topic, "forgot-rack", None)]
    try:
        wait_until(lambda: all(len(m.assigned) == 2 for m in members[:3])
                   and sorted(p for m in members[3:] for p in m.assigned) == list(range(6)),
                   "both groups consuming every partition", 120)
        base = wait_until(lambda: _stable(_snapshot(sandbox, cluster_id, [across, rackless]),
                                          {across: 3, rackless: 2}),
                          "a snapshot with both groups stable", 60)
    finally:
        for m in members:
            m.stop()
    model = ClusterModel(snapshot_from_dict(base))
    groups = {g.group: g for g in model.snapshot.consumer_groups}
    assert locality(model, groups[across]).ratio <= 0.5  # the premise: reading across

    start = datetime.now(UTC)
    bus.send("cluster-snapshots", _at(base, start), cluster_id.encode())
    bus.settle()
    assert bus.actions(cluster_id, "assign_consumers") == []  # the window has not passed
    bus.send("cluster-snapshots", _at(base, start + timedelta(seconds=WINDOW + 1)),
             cluster_id.encode())
    sent = time.monotonic()
    (action,) = awaited(job, lambda: bus.actions(cluster_id, "assign_consumers"),
                        "assign_consumers")
    print(f"assign_consumers on the bus {time.monotonic() - sent:.1f} s after the snapshot "
          "that closed the window")
    assert action["plan"]["group"] == across and action["plan"]["cross_rack"] == 0
    target = {m.member_id: {tp["partition"] for tp in action["plan"]["assignment"][m.member_id]}
              for m in groups[across].members}
    rack_of = {m.member_id: m.rack for m in groups[across].members}
    home = {"rack1": {0, 1}, "rack2": {2, 3}, "rack3": {4, 5}}
    assert {m: home[rack_of[m]] for m in target} == target
    assert "reads" in action["reason"] and "plan 100%" in action["reason"]

    pages = awaited(job, lambda: [a for a in bus.actions(cluster_id, "page_operator")
                                  if rackless in a["reason"]], "the client.rack page")
    (page,) = pages
    forgot = next(m for m in groups[rackless].members if m.client_id == "forgot-rack")
    assert forgot.member_id in page["reason"] and "client.rack=<rack>" in page["reason"]
    assert "has-rack" not in page["reason"]

    # Later snapshots of the same groups propose nothing again.
    bus.send("cluster-snapshots", _at(base, start + timedelta(seconds=3 * WINDOW)),
             cluster_id.encode())
    bus.settle()
    assert len(bus.actions(cluster_id, "assign_consumers")) == 1
    assert len([a for a in bus.actions(cluster_id, "page_operator")
                if rackless in a["reason"]]) == 1
    prove(record_property, sandbox, "consumer locality")


def _stable(doc: dict[str, Any], sizes: dict[str, int]) -> dict[str, Any] | None:
    found = {g["group"]: g for g in doc["consumer_groups"]}
    ok = all(g in found and found[g]["state"] == "Stable" and len(found[g]["members"]) == n
             and all(m["assignment"] for m in found[g]["members"])
             for g, n in sizes.items())
    return doc if ok else None
