"""The approval and refusal pages: plain words, one POST button, everything escaped."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from remediation.executor.actions import parse_action
from remediation.service.alerts import parse_webhook
from remediation.service.pages import (
    current_replicas,
    describe_target,
    render_approval,
    render_refusal,
)
from tests.unit.action_records import fix_offline, of_type, with_id
from tests.unit.plan_snapshots import broker, doc, model, partition

FORM = {"form_action": "/actions/abc/approve", "csrf_token": "csrf-tok",
        "link_token": "link.tok"}


def test_each_partition_reads_as_what_moves_where() -> None:
    action = parse_action(fix_offline())
    (target,) = action.targets()
    assert describe_target(target, action.type, {("orders", 0): [1, 2, 3]}) == (
        "orders-0: replicas [1, 2, 3] -> [1, 2, 4], new replica on broker 4 in /data/d1, "
        "drops the replica on broker 3")
    assert describe_target(target, action.type, None) == (
        "orders-0: replicas now ? -> [1, 2, 4] (broker 4 in /data/d1)")


def test_leader_and_dir_moves_read_in_their_own_words() -> None:
    leaders = parse_action(of_type("rebalance_leaders"))
    assert describe_target(leaders.targets()[0], leaders.type, {("orders", 0): [1, 2, 3]}) == (
        "orders-0: replicas [1, 2, 3] -> [2, 1, 3], preferred leader becomes broker 2 "
        "(no data moves)")
    dirs = parse_action(of_type("move_replica_dirs"))
    assert describe_target(dirs.targets()[0], dirs.type, None) == (
        "orders-0: replica on broker 1 to /data/d2")


def test_the_approval_page_has_the_facts_and_one_post_button() -> None:
    hook = parse_webhook({"version": "4", "groupKey": "g", "status": "firing", "alerts": [{
        "status": "firing", "labels": {"alertname": "KafkaLogDirOffline", "broker": "3"},
        "annotations": {"summary": "log dir /data/d2 offline on broker 3"},
        "startsAt": "2026-11-22T03:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
        "fingerprint": "f"}]})
    page = render_approval(parse_action(fix_offline(bytes_=1536 * 1024 * 1024)), **FORM,
                           current={("orders", 0): [1, 2, 3]}, alert=hook.alerts[0],
                           reasons=["policy: fix_offline_replicas needs approval"],
                           expires_at=datetime(2026, 11, 22, 5, 0, tzinfo=UTC))
    assert "new replica on broker 4 in /data/d1" in page
    assert "1.5 GiB to copy" in page and "Risk:" in page
    assert "KafkaLogDirOffline" in page and "log dir /data/d2 offline on broker 3" in page
    assert "policy: fix_offline_replicas needs approval" in page
    assert "expires at 2026-11-22 05:00 UTC" in page
    assert page.count("<form") == 1 and page.count("<button") == 1
    assert '<form method="post" action="/actions/abc/approve">' in page
    assert '<input type="hidden" name="csrf" value="csrf-tok">' in page
    assert "<script" not in page


def test_a_page_action_asks_to_mark_it_resolved() -> None:
    page = render_approval(parse_action(of_type("page_operator")), **FORM)
    assert "replace the disk at /data/d2 on broker 3" in page and "Mark resolved" in page


def test_everything_from_outside_is_escaped() -> None:
    evil = "<script>alert(1)</script>"
    record = fix_offline(topic=evil, reason=f'"{evil}', log_dir=evil)
    record["plan"]["partitions"][0]["log_dirs"][2] = evil
    with_id(record)
    page = render_approval(parse_action(record), form_action='/x"><script>',
                           csrf_token='"><script>', link_token="<t>")
    assert "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;-0: replicas" in page
    assert re.search(r'action="/x&quot;&gt;&lt;script&gt;"', page)


def test_the_refusal_page_says_why_and_that_nothing_changed() -> None:
    page = render_refusal("already used", "this approval link was already used <b>")
    assert "Already used." in page and "Nothing was changed on the cluster." in page
    assert "&lt;b&gt;" in page and "<form" not in page


def test_the_current_replicas_come_from_the_snapshot() -> None:
    m = model(doc([broker(b) for b in (1, 2, 3, 4)], [partition("orders", 0, [1, 2, 3])]))
    action = parse_action(fix_offline())
    assert describe_target(action.targets()[0], action.type, current_replicas(m)).startswith(
        "orders-0: replicas [1, 2, 3] -> [1, 2, 4], new replica on broker 4 in /data/d1")


def test_a_fix_says_how_long_it_takes_at_the_throttle_and_who_copies_the_most() -> None:
    received = [{"broker": 4, "bytes": 18 << 30, "replicas": 22},
                {"broker": 5, "bytes": 10 << 30, "replicas": 19}]
    action = parse_action(fix_offline(summary={"partitions": 1, "bytes": 28 << 30,
                                               "brokers": [1, 2, 4, 5],
                                               "received": received}))
    page = render_approval(action, **FORM, throttle=50 << 20)
    assert ("Recovery: about 6 min at 50 MiB/s; broker 4 copies the most (18.0 GiB, 22 "
            "replicas).") in page
    assert "Copied per broker (replicas): 4: 18.0 GiB (22), 5: 10.0 GiB (19)." in page
    assert "about 12 min at 25 MiB/s" in render_approval(action, **FORM, throttle=25 << 20)
    # A record from before summaries carried it: no estimate, nothing made up.
    assert "Recovery" not in render_approval(parse_action(fix_offline()), **FORM)
