"""Issue 35's acceptance on Kafka 4.4: an operator reassigns with the real
kafka-reassign-partitions tool and tunes throttles by hand while a log dir fails, and
`selfheal serve` never races, cancels or re-throttles what they do.

One topic, every partition on brokers [a, b]; three of them on the dir of b that fails:
- p_a: the operator's throttled reassignment to [a, c] runs when the dir fails: our fix
  is superseded ("being repaired by a reassignment in flight"), their throttle never
  raised, their --verify still sees it;
- p_b: started between our plan and its approval: respected (re-read before acting);
- p_c: our fix runs; broker a already had a lower rate (kept), and the operator raises
  broker c's rate while it runs (theirs stays at the end);
- p_d: the operator's reassignment to [a, c] can never finish (broker c stops while it
  runs): our fix is paged and waits, untouched, until they cancel theirs; then it runs
  under the cluster-wide default rate they set meanwhile, lower than ours (kept, and
  still there after).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from core.plan.formats import OfflinePlan, Reassignment
from remediation.executor.throttle import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
)
from sandbox import cluster, traffic
from sandbox.state import SandboxState
from sandbox.traffic import delete_topic
from schemas.plans import ANY_DIR, PartitionAssignment
from schemas.records import Trigger
from tests.integration.operator_support import (
    default_rates,
    in_flight,
    reassign_tool,
    set_configs,
)
from tests.integration.serve_harness import Bench, ServeProcess, audit_text, bench, placed_topic
from tests.integration.test_serve_offline_fix import prefill, throttles_set
from tests.polling import wait_until

pytestmark = pytest.mark.integration

THEIRS = 100_000  # B/s: the operator's --throttle, slow enough to stay in flight
OURS = 1024 * 1024  # B/s: the policy's inter-broker throttle
LOWER = 300_000  # B/s: what the operator had on broker a before our action
RAISED = str(8 * 1024 * 1024)  # B/s: what the operator sets on broker c while ours runs
DEFAULT = 700_000  # B/s: the cluster-wide default rate the operator sets for case D
POLICY = f"""
[actions]
fix_offline_replicas = "approve"
[limits]
inter_broker_throttle_bytes_per_s = {OURS}
"""


def test_an_operators_reassignments_and_throttles_stay_theirs(kraft_sandbox: SandboxState,
                                                              tmp_path: Path) -> None:
    state = kraft_sandbox
    ids = sorted(s.node_id for s in state.brokers)
    a, b, c = ids[0], ids[1], ids[2]
    topic = placed_topic(state, "share", {p: [a, b] for p in range(8)})
    prefill(state, topic, 8, 3 * 1024 * 1024)
    dirs = {p: traffic.log_dir_of(state, topic, p, b) for p in range(8)}
    failed, _ = Counter(dirs.values()).most_common(1)[0]
    p_a, p_b, p_c, p_d = [p for p in range(8) if dirs[p] == failed][:4]  # 8 on 2 dirs
    audits: dict[str, str] = {}
    try:
        with bench(state, tmp_path, POLICY) as bn:
            serve = bn.serve()
            # p_a: the operator's throttled reassignment is in flight when the dir fails.
            reassign_tool(state, tmp_path, "a", {(topic, p_a): [a, c]}, "--execute",
                          "--throttle", str(THEIRS))
            theirs = throttles_set(state, topic)
            assert theirs[f"broker:{a}"][LEADER_RATE] == str(THEIRS)
            cluster.fail_disk(state, b, failed)

            def fix_for(p: int) -> str:
                """Our fix for p: b's lost replica to c (the one broker that may take it;
                what plan_offline gives before any reassignment of p)."""
                def offline() -> bool:
                    m = bn.model()
                    return any((m.partitions[i].topic, m.partitions[i].partition) == (topic, p)
                               for i in m.partitions_with_offline_replicas)
                wait_until(offline, f"{topic}-{p} seen offline", 60)
                target = PartitionAssignment(topic, p, (a, c), (ANY_DIR, ANY_DIR))
                return bn.propose(bn.action(
                    "fix_offline_replicas", OfflinePlan(Reassignment((target,)), ()),
                    f"log dir {failed} on broker {b} failed", bytes_moved=3 * 1024 * 1024,
                    trigger=Trigger("logdir_event", b, failed)))

            aid = fix_for(p_a)
            shown = serve.wait_state(aid, {"superseded"})
            audits["in flight when the dir failed"] = audit_text(shown)
            assert f"{topic}-{p_a} is being repaired by a reassignment in flight" in \
                shown["audit"][-1]["reason"]
            assert throttles_set(state, topic) == theirs  # never raised, never removed

            # p_b: the operator starts theirs after our plan, before its approval.
            aid = fix_for(p_b)
            serve.wait_state(aid, {"awaiting_approval"})
            reassign_tool(state, tmp_path, "b", {(topic, p_b): [a, c]}, "--execute",
                          "--additional", "--throttle", str(THEIRS))
            theirs = throttles_set(state, topic)
            status, body = serve.api("POST", f"/actions/{aid}/approve", {"actor": "alice"})
            assert status == 200, body
            shown = serve.wait_state(aid, {"superseded"})
            audits["started between plan and approval"] = audit_text(shown)
            assert "re-read before acting" in shown["audit"][-1]["reason"]
            assert in_flight(state).get((topic, p_b), [a, c]) == [a, c]
            assert throttles_set(state, topic) == theirs  # never raised, never removed

            # Their own --verify sees theirs in progress or done at their target.
            for name, p in (("a", p_a), ("b", p_b)):
                out = reassign_tool(state, tmp_path, name, {(topic, p): [a, c]}, "--verify",
                                    "--preserve-throttles")
                assert (f"Reassignment of partition {topic}-{p} is still in progress" in out
                        or f"Reassignment of partition {topic}-{p} is completed" in out), out
            for name, p in (("a", p_a), ("b", p_b)):  # the operator calls it off
                if (topic, p) in in_flight(state):
                    reassign_tool(state, tmp_path, name, {(topic, p): [a, c]}, "--cancel")
            wait_until(lambda: not in_flight(state), "no reassignment in flight", 60)
            for broker in ids:  # --cancel clears the rates of the brokers it throttled
                set_configs(state, "broker", str(broker), {LEADER_RATE: None,
                                                           FOLLOWER_RATE: None})

            # p_c: ours runs; broker a had a lower rate, and the operator raises c's.
            set_configs(state, "broker", str(a), {LEADER_RATE: str(LOWER)})
            aid = fix_for(p_c)
            serve.wait_state(aid, {"awaiting_approval"})
            status, body = serve.api("POST", f"/actions/{aid}/approve", {"actor": "alice"})
            assert status == 200, body
            wait_until(lambda: throttles_set(state, topic).get(f"broker:{c}", {})
                       .get(FOLLOWER_RATE) == str(OURS), "our throttle on broker c", 60,
                       every=0.2)
            assert throttles_set(state, topic)[f"broker:{a}"][LEADER_RATE] == str(LOWER)
            set_configs(state, "broker", str(c), {FOLLOWER_RATE: RAISED})
            shown = serve.wait_state(aid, {"succeeded"}, timeout=300)
            audits["operator raised the throttle mid-way"] = audit_text(shown)
            reasons = [x["reason"] for x in shown["audit"]]
            assert (f"broker {a} keeps the existing {LOWER} B/s, lower than our 1 MiB/s "
                    f"({LEADER_RATE})") in reasons, reasons
            assert any(r.startswith(f"broker {c} {FOLLOWER_RATE} was changed to 8 MiB/s "
                                    "while the action ran") for r in reasons), reasons
            after = throttles_set(state, topic)
            assert after[f"broker:{a}"] == {LEADER_RATE: str(LOWER)}
            assert after[f"broker:{c}"] == {FOLLOWER_RATE: RAISED}

            audits["a reassignment that can never finish"] = never_finishes(
                state, bn, serve, tmp_path, topic, p_d, fix_for)
    finally:
        for name, text in audits.items():
            print(f"\n[{name}]\n{text}")
        down = [b for b in ids if b not in cluster.live_broker_ids(state.reload())]
        if down:
            cluster.start_brokers(state, down)
        for broker in ids:
            set_configs(state, "broker", str(broker), {LEADER_RATE: None, FOLLOWER_RATE: None})
        if str(DEFAULT) in default_rates(state, "--describe"):
            default_rates(state, "--alter", "--delete-config", f"{LEADER_RATE},{FOLLOWER_RATE}")
        if in_flight(state):
            with_cancel = {tp: [a, b] for tp in in_flight(state)}
            reassign_tool(state, tmp_path, "cleanup", with_cancel, "--cancel")
        if cluster.disk_failed(failed):
            cluster.heal_disk(state.reload(), b, failed)
        delete_topic(state, topic)


def never_finishes(state: SandboxState, bn: Bench, serve: ServeProcess, work: Path,
                   topic: str, p: int, fix_for: Callable[[int], str]) -> str:
    """Case D: the operator's throttled reassignment of p to [a, c] adds a replica on c,
    which then stops: it can never finish. Our fix pages with exactly that and waits (their
    reassignment untouched) until they cancel it; approved then, it runs. Its audit."""
    a, c = (sorted(s.node_id for s in state.brokers)[i] for i in (0, 2))
    reassign_tool(state, work, "d", {(topic, p): [a, c]}, "--execute", "--throttle",
                  str(THEIRS))
    cluster.kill_broker(state.reload(), c)  # 3 MiB at their 100 kB/s: c is still catching up
    wait_until(lambda: c not in bn.model().alive, f"broker {c} seen down", 60)
    aid = fix_for(p)
    shown = serve.wait_state(aid, {"awaiting_approval"})
    reason = shown["audit"][-1]["reason"]
    assert reason == (
        f"the operator's reassignment of {topic}-{p} in flight (to [{a}, {c}], adding "
        f"[{c}]) can never finish: broker {c}, which it adds, is down. Cancel it "
        "(kafka-reassign-partitions --cancel --preserve-throttles, as a broker it names is "
        "down: its rates are cleared by hand once it is back) or change its target; this "
        "fix waits for your decision"), reason
    assert shown["journal"]["decision"]["page"] is True
    page = serve.wait_line(f"PAGE: action {aid[:12]} ")
    # Waiting, nothing of ours on p: proposed again, it is the same open action; theirs runs.
    def duplicates() -> int:
        found = re.search(r'selfheal_intake_records_total\{outcome="duplicate"\} (\d+)',
                          serve.http("GET", "/metrics")[1])
        return int(found.group(1)) if found else 0

    seen = duplicates()
    assert fix_for(p) == aid
    wait_until(lambda: duplicates() > seen, "the second proposal seen", 30)
    assert serve.action(aid)["state"] == "awaiting_approval"
    assert in_flight(state)[(topic, p)] == [a, c]

    # Their decision, as the page says (a plain --cancel exits 1: it cancels, then times
    # out clearing the rate of c, which is down); their throttles go once c is back.
    reassign_tool(state, work, "d", {(topic, p): [a, c]}, "--cancel", "--preserve-throttles")
    wait_until(lambda: not in_flight(state), "their reassignment cancelled", 60)
    cluster.start_broker(state.reload(), c)
    for broker in sorted(s.node_id for s in state.brokers):
        set_configs(state, "broker", str(broker), {LEADER_RATE: None, FOLLOWER_RATE: None})
    set_configs(state, "topic", topic, {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None})
    # From now on they throttle every broker with a cluster-wide default, lower than ours.
    default_rates(state, "--alter", "--add-config",
                  f"{LEADER_RATE}={DEFAULT},{FOLLOWER_RATE}={DEFAULT}")
    wait_until(lambda: c in bn.model().alive, f"broker {c} seen up", 60)
    status, body = serve.api("POST", f"/actions/{aid}/approve", {"actor": "alice"})
    assert status == 200, body
    shown = serve.wait_state(aid, {"succeeded"}, timeout=300)
    reasons = [x["reason"] for x in shown["audit"]]
    assert any(r.startswith("re-read: the plan still applies to 1 of 1 partitions")
               for r in reasons), reasons
    for broker in (a, c):  # the source and the new replica: their default is the stricter
        assert (f"broker {broker} keeps the cluster-wide default {DEFAULT} B/s, lower than "
                f"our 1 MiB/s (leader/follower.replication.throttled.rate)") in reasons, reasons
    assert not {k: v for k, v in throttles_set(state, topic).items() if k.startswith("broker")}
    assert f"{LEADER_RATE}={DEFAULT}" in default_rates(state, "--describe")  # never deleted
    return f"  serve: {page}\n" + audit_text(shown)
