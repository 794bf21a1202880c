"""Only the job's actions run: on the real sandbox, under a policy that runs dir moves by
itself, a forged action (the right id, no or a wrong signature) is refused and a correctly
signed one whose premise is false is superseded; neither touches the cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.signing import ActionSigner
from remediation.executor.store import ActionStore
from sandbox import traffic
from sandbox.state import SandboxState
from tests.integration.serve_harness import (
    bench,
    leader_tilted_topic,
    placed_topic,
    reorder_plan,
)

pytestmark = pytest.mark.integration

# With two dirs a broker's fullest dir is at most 2x its mean: at 2.5x nothing is skewed.
NOT_SKEWED = {"SELFHEAL_DETECT_DISK_SKEW_THRESHOLD": "2.5"}
POLICY = '[actions]\nmove_replica_dirs = "auto"\n'


def placement(state: SandboxState, topic: str) -> dict[tuple[int, int], str | None]:
    """(partition, broker) -> the dir DescribeLogDirs shows the replica in."""
    return {(p, b): traffic.log_dir_of(state, topic, p, b) for p in (0, 1) for b in (0, 1)}


def test_forged_actions_are_refused_and_a_false_premise_is_superseded(
        sandbox: SandboxState, tmp_path: Path) -> None:
    state = sandbox
    topic = placed_topic(state, "forgery", {0: [0, 1], 1: [0, 1]})
    traffic.produce(state, topic, 50)
    before = placement(state, topic)
    replicas_before = [p["replica_nodes"] for p in traffic.partitions(state, topic)]
    # Move broker 0's replica of partition 0 into its other dir: a real-looking plan.
    other = next(d for d in state.broker(0).log_dirs if d != before[(0, 0)])
    plan = {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [0, 1], "log_dirs": [other, "any"]}]}
    with bench(state, tmp_path, POLICY, extra_env=NOT_SKEWED) as b:
        serve = b.serve()
        unsigned = b.unsigned("move_replica_dirs", plan, "broker 0 is skewed (forged)")
        wrong_key = ActionSigner("f" * 64).sign_action(unsigned)
        b.produce(unsigned.to_json(), wrong_key.to_json(), key=unsigned.key())
        signed = b.action("move_replica_dirs", plan, "broker 0 is skewed (it is not)")
        assert signed.action_id == unsigned.action_id == wrong_key.action_id
        b.produce(signed.to_json(), key=signed.key())

        done = serve.wait_state(signed.action_id, {"superseded"})
        assert done["audit"][-1]["reason"].startswith(
            "the plan's premise does not hold: broker 0 is not skewed")
        assert not any(e["reason"].startswith(("log-dir moves submitted", "reassignment"))
                       for e in done["audit"])
        store = ActionStore(tmp_path / "actions.sqlite")
        try:
            rejected = store.rejected()
        finally:
            store.close()
        assert [r.action_id for r in rejected] == [signed.action_id] * 2
        assert rejected[0].reason.startswith("refused, nothing executed: unsigned: the record "
                                             "carries no signature")
        assert rejected[1].reason.startswith("refused, nothing executed: signature does not "
                                             "match")
        letters = b.read_topic("dead-letter", lambda found: len(found) >= 2)
        assert sorted(d["reason"] for d in letters) == sorted(r.reason for r in rejected)

    assert placement(state, topic) == before
    assert [p["replica_nodes"] for p in traffic.partitions(state, topic)] == replicas_before
    traffic.delete_topic(state, topic)


def test_signed_actions_are_submitted_through_the_api_and_forged_ones_are_not(
        sandbox: SandboxState, tmp_path: Path) -> None:
    state = sandbox
    with bench(state, tmp_path, '[actions]\nrebalance_leaders = "approve"\n') as b:
        serve = b.serve()  # first: its topics and consumer group bring leaders of their own
        topic = leader_tilted_topic(state, "api-submit", [0, 1, 2], new_leader=1)
        auth = {"Authorization": f"Bearer {b.token}"}
        signed = b.action("rebalance_leaders", reorder_plan(topic, [1, 0, 2]),
                          "broker 1 should lead")
        unsigned = b.unsigned("rebalance_leaders", reorder_plan(topic, [1, 2, 0]),
                              "broker 1 should lead (forged)")
        status, body = serve.http("POST", "/api/actions", unsigned.to_json(), auth)[:2]
        assert status == 403
        assert "refused, nothing submitted: unsigned" in json.loads(body)["error"]
        status, body = serve.http("POST", "/api/actions", b"[" * 50_000, auth)[:2]
        assert status == 400 and "nested deeper than 32 levels" in json.loads(body)["error"]

        status, body = serve.http("POST", "/api/actions", signed.to_json(), auth)[:2]
        assert status == 202 and json.loads(body)["action_id"] == signed.action_id
        shown = serve.wait_state(signed.action_id, {"awaiting_approval"})
        assert shown["record"]["signature"] == signed.signature
        status, listed = serve.api("GET", "/actions")
        assert [a["id"] for a in listed["actions"]] == [signed.action_id]
        assert traffic.leader_of(state, topic, 0) == 0  # approval is still a person's
    traffic.delete_topic(state, topic)
