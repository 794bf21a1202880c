"""Consumer-group detection: a group trailing its KIP-881 plan for the window gets one
assign_consumers; members without client.rack get a page naming the line to set."""

from __future__ import annotations

from typing import Any

import msgspec

from schemas.registry import validate
from schemas.snapshot_types import RACK_AWARE_SELECTOR
from streams.detect_types import (
    ASSIGN_CONSUMERS,
    PAGE,
    SNAPSHOT,
    Decision,
    DetectSettings,
    GroupFacts,
    SnapshotFacts,
    SnapshotRef,
    SnapshotSeen,
)
from streams.facts import snapshot_facts
from streams.propose import Proposer
from tests.unit.plan_snapshots import GIB, broker, doc, partition
from tests.unit.test_stream_detect import Run

T0 = 1_800_000_000_000
WINDOW = 60_000
SETTINGS = DetectSettings(consumer_locality_margin=0.10, consumer_locality_window_ms=WINDOW)


def facts(ratio: float | None = 0.2, planned: float | None = 0.9, stable: bool = True,
          membership: str = "m1", no_rack: tuple[tuple[str, str], ...] = ()) -> GroupFacts:
    return GroupFacts(ratio, planned, "range", stable, membership, no_rack,
                      ("r0", "r1", "r2"), "broker(s) 0 lead its partitions without ...")


def seen(t: int, **groups: GroupFacts) -> SnapshotSeen:
    f = SnapshotFacts(dirs={0: {"/d1": True}}, alive={0: True}, groups=groups)
    return SnapshotSeen(t, SnapshotRef("selfheal.cluster-snapshots", 0, t, t), f)


def test_a_group_below_its_plan_for_the_window_gets_one_assign_consumers():
    run = Run(SETTINGS)
    assert run.batch(seen(T0, g=facts())) == []
    assert run.batch(seen(T0 + WINDOW - 1, g=facts())) == []
    (d,) = run.batch(seen(T0 + WINDOW, g=facts()))
    assert (d.type, d.group, d.trigger_kind, d.broker) == (ASSIGN_CONSUMERS, "g", SNAPSHOT, None)
    assert "reads 20%" in d.reason and "range plan 90%" in d.reason
    assert "broker(s) 0 lead" in d.reason  # the diagnosis travels with it
    # Still below: proposed already, nothing more batch after batch.
    assert run.batch(seen(T0 + 2 * WINDOW, g=facts())) == []
    assert run.batch(seen(T0 + 5 * WINDOW, g=facts())) == []


def test_within_the_margin_or_above_the_plan_nothing_is_proposed():
    run = Run(SETTINGS)
    for t in (T0, T0 + WINDOW, T0 + 2 * WINDOW):
        assert run.batch(seen(t, a=facts(0.85, 0.9), b=facts(1.0, 0.9),
                              c=facts(None, 0.9), d=facts(0.1, None))) == []
    assert run.state.consumers == {}


def test_a_recovery_ends_the_spell_and_a_new_lag_is_proposed_again():
    run = Run(SETTINGS)
    run.batch(seen(T0, g=facts()))
    assert len(run.batch(seen(T0 + WINDOW, g=facts()))) == 1
    assert run.batch(seen(T0 + WINDOW + 1000, g=facts(0.9, 0.9))) == []
    assert run.batch(seen(T0 + 2 * WINDOW, g=facts())) == []  # a new spell starts here
    (again,) = run.batch(seen(T0 + 3 * WINDOW, g=facts()))
    assert again.type == ASSIGN_CONSUMERS


def test_a_rebalancing_group_is_not_judged_and_a_new_membership_starts_over():
    run = Run(SETTINGS)
    run.batch(seen(T0, g=facts()))
    assert run.batch(seen(T0 + WINDOW, g=facts(stable=False))) == []
    # Settled with other members: the old spell does not count for the new membership.
    assert run.batch(seen(T0 + WINDOW + 1, g=facts(membership="m2"))) == []
    (d,) = run.batch(seen(T0 + 2 * WINDOW + 1, g=facts(membership="m2")))
    assert d.group == "g"


def test_members_without_client_rack_are_paged_once_with_the_line_to_set():
    run = Run(SETTINGS)
    lacking = facts(0.9, 0.9, no_rack=(("rdkafka-7f", "orders-app"),))
    assert run.batch(seen(T0, g=lacking)) == []
    (page,) = run.batch(seen(T0 + WINDOW, g=lacking))
    assert (page.type, page.group) == (PAGE, "g")
    assert "member rdkafka-7f (client.id orders-app)" in page.reason
    assert "client.rack=<rack>" in page.reason and "r0, r1, r2" in page.reason
    assert run.batch(seen(T0 + 2 * WINDOW, g=lacking)) == []
    # Another member without a rack joins: paged for that one alone.
    more = facts(0.9, 0.9, no_rack=(("rdkafka-7f", "orders-app"), ("rdkafka-99", "")))
    (second,) = run.batch(seen(T0 + 3 * WINDOW, g=more))
    assert "rdkafka-99" in second.reason and "rdkafka-7f" not in second.reason


def test_a_cluster_without_racks_pages_nobody_for_client_rack():
    run = Run(SETTINGS)
    bare = GroupFacts(0.0, 0.0, "range", True, "m", (("m1", "c"),), (), "")
    for t in (T0, T0 + WINDOW, T0 + 3 * WINDOW):
        assert run.batch(seen(t, g=bare)) == []


def test_the_group_spells_survive_the_state_store_round_trip():
    run = Run(SETTINGS)
    run.batch(seen(T0, g=facts(no_rack=(("m9", "c"),))))
    assert set(run.state.consumers) == {"g"} and set(run.state.rackless) == {"g"}
    decisions = run.batch(seen(T0 + WINDOW, g=facts(no_rack=(("m9", "c"),))))
    assert sorted(d.type for d in decisions) == [ASSIGN_CONSUMERS, PAGE]


# --- from a real snapshot to an action ---------------------------------------------


def _snapshot() -> dict[str, Any]:
    """3 racks, follower fetching on; topic t: RF 2, every leader on r0. The group's
    members (r1, r2) were given partitions whose replicas miss their racks."""
    brokers = [broker(b, f"r{b}") for b in range(3)]
    for b in brokers:
        b["replica_selector"] = RACK_AWARE_SELECTOR
    parts = [partition("t", i, [(b, "/d1", GIB) for b in r])
             for i, r in enumerate([[0, 1], [0, 2], [0, 1], [0, 2]])]
    members = [
        {"member_id": "a", "client_id": "ca", "rack": "r1", "topics": ["t"],
         "assignment": [{"topic": "t", "partitions": [1, 3]}]},
        {"member_id": "b", "client_id": "cb", "rack": "r2", "topics": ["t"],
         "assignment": [{"topic": "t", "partitions": [0, 2]}]},
        {"member_id": "c", "client_id": "cc", "rack": None, "topics": ["t"],
         "assignment": []},
    ]
    return doc(brokers, parts, [{"group": "g", "protocol_type": "consumer",
                                 "protocol": "cooperative-sticky", "state": "Stable",
                                 "members": members}])


def test_a_snapshot_s_facts_carry_the_group_s_locality_and_its_plan():
    from schemas.snapshot import snapshot_from_dict

    g = snapshot_facts(snapshot_from_dict(_snapshot())).groups["g"]
    # Balanced first: the rackless member takes one partition, read across racks.
    assert (g.ratio, g.planned, g.strategy, g.stable) == (0.0, 0.75, "cooperative-sticky", True)
    assert g.no_rack == (("c", "cc"),) and g.racks == ("r0", "r1", "r2")
    assert "c (client.id cc)" in g.diagnosis
    again = SnapshotFacts.from_json(snapshot_facts(snapshot_from_dict(_snapshot())).to_json())
    assert again.groups["g"] == g


def test_the_proposer_turns_the_decision_into_a_valid_assign_consumers_action():
    raw = msgspec.json.encode(_snapshot())
    ref = SnapshotRef("selfheal.cluster-snapshots", 0, 7, T0)
    proposer = Proposer(lambda r, c: raw)
    decision = Decision(ASSIGN_CONSUMERS, "test", T0, SNAPSHOT, None, None, ref, (),
                        "consumer group g reads 0% on its members' racks", group="g")
    (action,) = proposer.actions(decision, created_at="2026-11-25T10:00:00Z")
    validate("action", action.to_dict() if hasattr(action, "to_dict") else
             msgspec.json.decode(action.to_json()))
    assert action.type == ASSIGN_CONSUMERS and action.plan["group"] == "g"
    assigned = {m: sorted(tp["partition"] for tp in tps)
                for m, tps in action.plan["assignment"].items()}
    assert set(assigned["a"]) <= {0, 2} and set(assigned["b"]) <= {1, 3}
    assert sorted(len(ps) for ps in assigned.values()) == [1, 1, 2]
    assert action.plan["cross_rack"] == 0 and action.summary.partitions == 4
    assert "Target: 0 cross-rack" in action.reason
    # The same decision again: the same action id, so the executor runs it once.
    (twice,) = proposer.actions(decision, created_at="2026-11-25T10:05:00Z")
    assert twice.action_id == action.action_id


def test_a_group_that_left_the_snapshot_proposes_nothing():
    raw = msgspec.json.encode(_snapshot())
    ref = SnapshotRef("selfheal.cluster-snapshots", 0, 7, T0)
    decision = Decision(ASSIGN_CONSUMERS, "test", T0, SNAPSHOT, None, None, ref, (),
                        "x", group="other")
    assert Proposer(lambda r, c: raw).actions(decision) == []


def test_a_rackless_member_page_is_a_page_operator_action_with_the_message():
    ref = SnapshotRef("selfheal.cluster-snapshots", 0, 7, T0)
    message = "consumer group g: member c set(s) no client.rack ... client.rack=<rack>"
    decision = Decision(PAGE, "test", T0, SNAPSHOT, None, None, ref, (), message, group="g")
    (page,) = Proposer(lambda r, c: b"").actions(decision, created_at="2026-11-25T10:00:00Z")
    assert page.type == PAGE and page.plan["message"] == message
    assert page.plan["brokers"] == [] and page.plan["log_dirs"] == []


def test_a_planner_failure_leaves_the_group_unjudged_and_the_other_facts_intact(monkeypatch):
    import core.locality
    from schemas.snapshot import snapshot_from_dict

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(core.locality, "plan_consumers", broken)
    f = snapshot_facts(snapshot_from_dict(_snapshot()))
    g = f.groups["g"]
    assert g.planned is None and g.ratio == 0.0
    assert "no KIP-881 plan could be made (RuntimeError: boom)" in g.diagnosis
    assert f.alive == {0: True, 1: True, 2: True}
    run = Run(SETTINGS)
    assert run.batch(SnapshotSeen(T0, seen(T0).ref, f)) == []
    later = SnapshotSeen(T0 + WINDOW, seen(T0 + WINDOW).ref, f)
    assert [d.type for d in run.batch(later)] == [PAGE]  # the rackless member, not a plan
