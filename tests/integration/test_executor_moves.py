"""The executor's other moves on the real sandbox: disks evened out by intra-broker moves
(throttled), leaders where the plan puts them, and a stale plan left alone."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from core.plan import plan_disks, plan_leaders
from core.plan.disks import broker_usage, mean_ratio, over_limit
from remediation.executor.throttle import DIR_RATE
from sandbox import traffic
from sandbox.fill import fill_disk
from sandbox.state import SandboxState
from sandbox.status import kafka_admin
from sandbox.traffic import delete_topic
from tests.conftest import prove
from tests.integration.serve_harness import (
    bench,
    lead_by_hand,
    leader_tilted_topic,
    placed_topic,
    reorder_plan,
)
from tests.polling import wait_until

pytestmark = pytest.mark.integration

DIR_THROTTLE = 2 * 1024 * 1024  # bytes/s: ~12 MiB of moves take a few seconds
THRESHOLD = 1.10  # the planner's (and the detector's) default


def dir_throttles(state: SandboxState) -> dict[int, str]:
    from kafka.admin import ConfigResource, ConfigResourceType

    with kafka_admin(state) as admin:
        reply = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(b.node_id))
                                        for b in state.brokers])
    return {int(name): configs[DIR_RATE]["value"]
            for name, configs in reply.get("broker", {}).items() if DIR_RATE in configs}


def test_a_skewed_broker_is_evened_out_by_itself(sandbox: SandboxState, tmp_path: Path,
                                                  record_property) -> None:
    even_out_a_skewed_broker(sandbox, tmp_path)
    prove(record_property, sandbox, "disk moves")


def even_out_a_skewed_broker(state: SandboxState, tmp_path: Path) -> None:
    """The body, on any sandbox (test_executor_moves_kraft.py runs it on 4.4)."""
    policy = f'[actions]\nmove_replica_dirs = "auto"\n[limits]\n' \
             f"intra_broker_throttle_bytes_per_s = {DIR_THROTTLE}\n"
    broker = 1
    topic = fill_disk(state, broker, "0", 24 * 1024 * 1024, partitions=6)
    try:
        with bench(state, tmp_path, policy) as b:
            serve = b.serve()
            model = b.model()
            assert any(over_limit(d.used, THRESHOLD * mean_ratio(usage) * d.capacity)
                       for usage in [broker_usage(model, broker)] for d in usage)
            plan = plan_disks(model, THRESHOLD)
            # This broker's moves only, as the job proposes them (earlier tests may have left
            # other brokers skewed; their moves would race the throttle check below).
            mine = [m for m in plan.moves if m.broker == broker]
            assert mine
            moved = sum(m.size_bytes for m in mine)
            wanted = {(m.topic, m.partition) for m in mine}
            targets = [{**t.to_json(), "log_dirs": [
                d if r == broker else "any" for r, d in zip(t.replicas, t.log_dirs or (),
                                                            strict=True)]}
                for t in plan.reassignment.partitions if (t.topic, t.partition) in wanted]
            aid = b.propose(b.action("move_replica_dirs", {"version": 1, "partitions": targets},
                                     f"broker {broker} is skewed", bytes_moved=moved))
            serve.wait_state(aid, {"executing", "verifying", "succeeded"})
            seen = wait_until(lambda: dir_throttles(state).get(broker),
                              "the log-dir move throttle on the broker", 30, every=0.2)
            assert seen == str(DIR_THROTTLE)
            done = serve.wait_state(aid, {"succeeded"}, timeout=180)
            assert dir_throttles(state) == {}
            assert any(a["reason"].startswith("throttle removed") for a in done["audit"])

            after = b.model()
            usage = broker_usage(after, broker)
            mean = mean_ratio(usage)
            assert not [d.path for d in usage
                        if over_limit(d.used, THRESHOLD * mean * d.capacity)], usage
            assert not [m for m in plan_disks(after, THRESHOLD).moves if m.broker == broker]
    finally:
        delete_topic(state, topic)


def test_rebalance_leaders_puts_each_leader_where_the_plan_says(sandbox: SandboxState,
                                                                tmp_path: Path,
                                                                record_property) -> None:
    rebalance_leaders_as_planned(sandbox, tmp_path)
    prove(record_property, sandbox, "leaders")


def rebalance_leaders_as_planned(state: SandboxState, tmp_path: Path) -> None:
    """The body, on any sandbox (test_executor_moves_kraft.py runs it on 4.4)."""
    # every partition led by broker 0: badly skewed
    placed_topic(state, "serve-leaders", {p: [0, 1 + p % 2, 2 - p % 2] for p in range(6)})
    # The planner evens leaders out cluster-wide (serve supersedes a plan that does not),
    # so on this session's sandbox it also takes in every earlier test's topics: the
    # per-action partition limit must not send it to approval.
    policy = ('[actions]\nrebalance_leaders = "auto"\n'
              "[limits]\nmax_partitions_per_action = 100000\n")
    with bench(state, tmp_path, policy) as b:
        serve = b.serve()
        model = b.model()
        plan = plan_leaders(model)
        assert plan.election, "broker 0 leads the whole topic: the planner must move some"
        aid = b.propose(b.action("rebalance_leaders", plan, "broker 0 leads too much"))
        done = serve.wait_state(aid, {"succeeded"}, timeout=120)
        assert any(a["reason"].startswith("preferred election run") for a in done["audit"])
        # Every state change is on the compacted action-status topic, keyed by the action.
        statuses = b.read_topic("action-status", lambda found: any(
            r["state"] == "succeeded" for r in found))
        assert [r["state"] for r in statuses if r["action_id"] == aid] == [
            "proposed", "approved", "executing", "verifying", "succeeded"]
        assert {r["cluster_id"] for r in statuses} == {state.cluster_id}
        # The plan's replica order where it reorders, else the order it found; the first
        # replica leads.
        target = {(p.topic, p.partition): tuple(r.broker for r in p.replicas)
                  for p in model.partitions}
        target.update({(t.topic, t.partition): t.replicas for t in plan.reassignment.partitions})

        def differing() -> list[str]:
            # whichever partitions the planner chose; a topic Metadata left out counts too
            now = {(p.topic, p.partition): p for p in b.model().partitions}
            return [f"{tp}: {now.get((tp.topic, tp.partition))}" for tp in plan.election
                    if (p := now.get((tp.topic, tp.partition))) is None
                    or tuple(r.broker for r in p.replicas) != target[(tp.topic, tp.partition)]
                    or p.leader != target[(tp.topic, tp.partition)][0]]

        try:
            wait_until(lambda: not differing(), "every elected leader where planned", 30)
        except AssertionError:
            raise AssertionError(f"not where the plan says: {differing()}") from None


def test_a_plan_already_carried_out_by_hand_is_superseded_and_changes_nothing(
        sandbox: SandboxState, tmp_path: Path) -> None:
    state = sandbox
    topic = placed_topic(state, "serve-stale", {0: [0, 1, 2]})
    plan = reorder_plan(topic, [1, 0, 2])
    with bench(state, tmp_path, '[actions]\nrebalance_leaders = "auto"\n') as b:
        action = b.action("rebalance_leaders", plan, "broker 1 should lead")
        # An operator does exactly this by hand before the action arrives.
        lead_by_hand(state, topic, 0, [1, 0, 2])
        before = traffic.partitions(state, topic)[0]

        serve = b.serve()
        aid = b.propose(action)
        done = serve.wait_state(aid, {"superseded"})
        assert "already in the plan's target state" in done["audit"][-1]["reason"]
        assert not any(a["reason"].startswith(("reassignment submitted", "preferred election"))
                       for a in done["audit"])
        assert done["attempts"] == 0
        time.sleep(1)
        assert traffic.partitions(state, topic)[0] == before


def test_a_finished_action_reopens_only_when_the_problem_is_back(sandbox: SandboxState,
                                                                 tmp_path: Path) -> None:
    state = sandbox
    topic = leader_tilted_topic(state, "serve-again", [0, 1, 2], new_leader=1)
    plan = reorder_plan(topic, [1, 0, 2])
    with bench(state, tmp_path, '[actions]\nrebalance_leaders = "auto"\n') as b:
        serve = b.serve()
        action = b.action("rebalance_leaders", plan, "broker 1 should lead")
        aid = b.propose(action)
        serve.wait_state(aid, {"succeeded"})
        assert traffic.leader_of(state, topic, 0) == 1

        b.propose(action)  # a replay while the cluster is as planned: nothing happens
        shown = wait_until(lambda: (s := serve.action(aid)) and s["audit"][-1]["reason"]
                           .startswith("not re-opened") and s, "the replay noted", 30)
        assert "already in the plan's target state" in shown["audit"][-1]["reason"]
        assert shown["state"] == "succeeded" and shown["attempts"] == 1

        lead_by_hand(state, topic, 0, [0, 1, 2])  # the problem comes back

        b.propose(action)
        again = wait_until(lambda: (s := serve.action(aid)) and s["attempts"] == 2
                           and s["state"] == "succeeded" and s, "the second attempt", 60)
        reopened = [a for a in again["audit"] if a["from"] == "succeeded"
                    and a["to"] == "proposed"]
        assert len(reopened) == 1 and "re-proposed, the problem is back (attempt 2" in \
            reopened[0]["reason"]
        assert traffic.leader_of(state, topic, 0) == 1
