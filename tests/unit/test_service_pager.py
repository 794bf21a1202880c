"""The pager leg over a real store, the real HTTP service and a real local receiver
standing in for PagerDuty and Slack (it checks their public formats)."""

from __future__ import annotations

import copy
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from core.config import PagerConfig
from remediation.executor.actions import parse_action
from remediation.executor.lifecycle import State
from remediation.executor.store import ActionStore
from remediation.service import http
from remediation.service import pager_formats as fmt
from remediation.service.alerts import parse_webhook, receive
from remediation.service.approvals import Approvals
from remediation.service.links import LinkSigner
from remediation.service.metrics import Counters
from remediation.service.pager import Pager
from sandbox.pager_receiver import ROUTING_KEY, PagerReceiver, pagerduty_problems, slack_problems
from tests.unit.action_records import fix_offline, of_type
from tests.unit.test_service_alerts import alert, webhook

SECRET = b"p" * 32
TOKEN = "pager-test-token"


@pytest.fixture
def receiver() -> Iterator[PagerReceiver]:
    r = PagerReceiver().start()
    try:
        yield r
    finally:
        r.stop()


class World:
    """A store, its approvals and a pager aimed at `receiver`."""

    def __init__(self, path: Path, receiver: PagerReceiver, **config: Any) -> None:
        self.path = path
        self.store = ActionStore(path)
        self.signer = LinkSigner(SECRET, used=self.store)
        self.approvals = Approvals(self.store, self.signer, "http://serve.test", 3600)
        values = {"pagerduty_url": receiver.pagerduty_url,
                  "pagerduty_routing_key": ROUTING_KEY,
                  "slack_webhook_url": receiver.slack_url,
                  "retry_initial_seconds": 0.05, "retry_max_seconds": 0.2,
                  "request_timeout_seconds": 2.0, "link_wait_seconds": 0.0, **config}
        self.logged: list[str] = []
        self.pager = Pager(self.store, self.approvals, PagerConfig(**values), Counters(),
                           self.logged.append)

    def fix(self, state: State | None = State.AWAITING_APPROVAL, **over: Any) -> str:
        aid = self.store.propose(parse_action(fix_offline(**over))).row.id
        if state is not None:
            self.store.transition(aid, state, "policy", "needs approval")
        return aid

    def alert(self, status: str = "firing", **over: Any) -> None:
        body = webhook(alert(status=status, **over), status=status)
        receive(self.store, parse_webhook(json.dumps(body)))

    def passes(self, n: int = 1, pause: float = 0.0) -> None:
        for _ in range(n):
            self.pager.reconcile()
            self.pager.deliver()
            time.sleep(pause)

    def pager_audit(self) -> list[str]:
        return [e.reason for e in self.store.audit_since(0) if e.actor == "pager"]


def test_an_alert_with_a_fix_awaiting_approval_pages_both_channels_with_its_link(
        tmp_path: Path, receiver: PagerReceiver) -> None:
    w = World(tmp_path / "a.db", receiver)
    aid = w.fix()
    w.alert()
    w.passes()
    assert receiver.invalid() == []
    (pd,) = receiver.accepted("pagerduty")
    (slack,) = receiver.accepted("slack")
    assert pd.body["event_action"] == "trigger" and pd.body["dedup_key"] == "selfheal-f1"
    assert pd.body["payload"]["severity"] == "critical"  # the alert's severity=page
    (link,) = pd.body["links"]
    token = link["href"].removeprefix("http://serve.test/approve/")
    assert w.signer.verify(token, datetime.now(UTC), aid).action_id == aid
    (button,) = [e for b in slack.body["blocks"] if b["type"] == "actions"
                 for e in b["elements"]]
    assert button["url"].startswith("http://serve.test/approve/")
    assert w.signer.verify(button["url"].rsplit("/", 1)[1], datetime.now(UTC), aid)
    # The page changes nothing: the fix still waits for a human.
    assert w.store.get(aid).state is State.AWAITING_APPROVAL
    assert any("delivered (HTTP 202)" in r for r in w.pager_audit())
    w.passes(2)
    assert len(receiver.accepted()) == 2  # paged once, not on every pass


def test_a_storage_alert_waits_for_its_fix_then_pages_with_the_link(
        tmp_path: Path, receiver: PagerReceiver) -> None:
    w = World(tmp_path / "a.db", receiver, link_wait_seconds=60.0)
    w.alert()
    w.passes()
    assert receiver.received == []  # the fix is seconds away: the page waits for it
    aid = w.fix()
    w.passes()
    (pd,) = receiver.accepted("pagerduty")
    assert aid in pd.body["links"][0]["href"] or w.signer.verify(
        pd.body["links"][0]["href"].rsplit("/", 1)[1], datetime.now(UTC), aid)


def test_without_a_fix_in_time_it_pages_without_a_link_and_sends_the_link_later(
        tmp_path: Path, receiver: PagerReceiver) -> None:
    w = World(tmp_path / "a.db", receiver, link_wait_seconds=0.0)
    w.alert()
    w.passes()
    (first,) = receiver.accepted("pagerduty")
    assert "links" not in first.body
    (slack,) = receiver.accepted("slack")
    assert [b["type"] for b in slack.body["blocks"]] == ["section", "context"]  # no button
    aid = w.fix()
    w.passes()
    update = receiver.accepted("pagerduty")[-1]
    assert update.body["dedup_key"] == first.body["dedup_key"]  # the same PagerDuty alert
    assert w.signer.verify(update.body["links"][0]["href"].rsplit("/", 1)[1],
                           datetime.now(UTC), aid)
    assert "*Update:*" in receiver.accepted("slack")[-1].body["blocks"][0]["text"]["text"]
    assert receiver.invalid() == []


def test_a_page_carrying_an_operator_page_is_updated_when_the_fix_arrives(
        tmp_path: Path, receiver: PagerReceiver) -> None:
    """A detection proposes a fix and a page for what the fix cannot repair; the page may
    reach serve first. The pager then carries the fix's link as soon as it exists."""
    w = World(tmp_path / "a.db", receiver, slack_webhook_url=None, link_wait_seconds=60.0)
    operator = w.store.propose(parse_action(of_type("page_operator", seed="p"))).row.id
    w.store.transition(operator, State.AWAITING_APPROVAL, "policy", "a page")
    w.alert()
    w.passes()
    (first,) = receiver.accepted()
    assert w.signer.verify(_token(first), datetime.now(UTC), operator)
    fix = w.fix()
    w.passes(2)
    update = receiver.accepted()[-1]
    assert len(receiver.accepted()) == 2
    assert update.body["dedup_key"] == first.body["dedup_key"]
    assert w.signer.verify(_token(update), datetime.now(UTC), fix)
    assert w.store.page("f1").action_id == fix


def _token(received: Any) -> str:
    return received.body["links"][0]["href"].rsplit("/", 1)[1]


def test_the_page_resolves_when_the_alert_resolves_and_the_fix_is_done(
        tmp_path: Path, receiver: PagerReceiver) -> None:
    w = World(tmp_path / "a.db", receiver)
    aid = w.fix()
    w.alert()
    w.passes()
    w.store.transition(aid, State.APPROVED, "alice", "link")
    w.store.transition(aid, State.EXECUTING, "executor", "started")
    w.alert(status="resolved")
    w.passes()
    assert [r.body["event_action"] for r in receiver.accepted("pagerduty")] == ["trigger"]
    # the alert cleared while the fix still runs: the page stays open
    w.store.transition(aid, State.VERIFYING, "executor", "moved")
    w.store.transition(aid, State.SUCCEEDED, "executor", "verified")
    w.passes()
    assert [r.body["event_action"] for r in receiver.accepted("pagerduty")] \
        == ["trigger", "resolve"]
    resolve = receiver.accepted("pagerduty")[-1].body
    assert resolve == {"routing_key": ROUTING_KEY, "event_action": "resolve",
                       "dedup_key": "selfheal-f1"}
    assert "Resolved" in receiver.accepted("slack")[-1].body["text"]
    assert "succeeded" in receiver.accepted("slack")[-1].body["blocks"][0]["text"]["text"]
    assert w.store.pages("open") == ()


def test_a_pager_answering_500_is_retried_with_backoff_and_every_try_is_audited(
        tmp_path: Path, receiver: PagerReceiver) -> None:
    w = World(tmp_path / "a.db", receiver, slack_webhook_url=None)
    w.fix()
    w.alert()
    receiver.fail(3, 500)
    w.passes(12, pause=0.05)
    statuses = [r.status for r in receiver.received]
    assert statuses == [500, 500, 500, 202]
    audit = w.pager_audit()
    failed = [r for r in audit if "failed: HTTP 500" in r]
    assert len(failed) == 3
    delays = [float(r.rsplit("next try in ", 1)[1].split(" s")[0]) for r in failed]
    assert delays == [0.05, 0.1, 0.2]  # doubling, capped at retry_max_seconds
    assert "attempt 4: delivered (HTTP 202)" in audit[-1]


def test_a_down_pager_loses_nothing_across_a_serve_restart(
        tmp_path: Path, receiver: PagerReceiver) -> None:
    port = receiver.port
    receiver.stop()  # PagerDuty and Slack unreachable
    w = World(tmp_path / "a.db", receiver)
    aid = w.fix()
    w.alert()
    w.passes(3, pause=0.25)
    assert all("no answer" in r for r in w.pager_audit() if "attempt" in r)
    w.store.close()  # serve stops with the pages undelivered
    back = PagerReceiver(port=port).start()
    try:
        again = World(tmp_path / "a.db", back)  # a new serve on the same store
        again.passes(3, pause=0.25)
        assert sorted(r.channel for r in back.accepted()) == ["pagerduty", "slack"]
        assert back.invalid() == []
        (pd,) = back.accepted("pagerduty")
        assert again.signer.verify(pd.body["links"][0]["href"].rsplit("/", 1)[1],
                                   datetime.now(UTC), aid)
    finally:
        back.stop()


def test_a_pager_refusing_the_message_is_not_retried(tmp_path: Path,
                                                     receiver: PagerReceiver) -> None:
    w = World(tmp_path / "a.db", receiver, pagerduty_routing_key="not-the-key",
              slack_webhook_url=None)
    w.fix()
    w.alert()
    w.passes(4, pause=0.1)
    assert [r.status for r in receiver.received] == [400]
    assert any("refused: HTTP 400" in r and "not retried" in r for r in w.pager_audit())
    (msg,) = w.store.messages()
    assert msg.outcome == "refused"


def test_a_resolve_never_overtakes_its_trigger(tmp_path: Path,
                                                receiver: PagerReceiver) -> None:
    w = World(tmp_path / "a.db", receiver, slack_webhook_url=None, link_wait_seconds=0.0)
    w.alert(name="KafkaBrokerDown", fingerprint="b1")
    receiver.fail(2, 503)
    w.passes()  # trigger queued and failed once
    w.alert(status="resolved", name="KafkaBrokerDown", fingerprint="b1")
    w.passes(10, pause=0.1)
    assert [r.body["event_action"] for r in receiver.accepted()] == ["trigger", "resolve"]


def test_no_pager_configured_pages_nothing(tmp_path: Path, receiver: PagerReceiver) -> None:
    w = World(tmp_path / "a.db", receiver, pagerduty_routing_key=None, slack_webhook_url=None)
    w.fix()
    w.alert()
    w.passes()
    assert receiver.received == [] and w.store.messages() == ()


@pytest.fixture
def served(tmp_path: Path, receiver: PagerReceiver) -> Iterator[tuple[World, str]]:
    """The real HTTP service (its webhook) over the world's store."""
    w = World(tmp_path / "a.db", receiver)
    service = http.Service(w.store, w.approvals, TOKEN, Counters(), dict,
                           lambda: ("leader", "me"))
    server, _ = http.start("127.0.0.1", 0, service)
    try:
        yield w, server.url
    finally:
        server.shutdown()
        server.server_close()


def _post(url: str, body: Any, token: str | None) -> int:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url + "/alertmanager", data=json.dumps(body).encode(),
                                 method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


@pytest.mark.parametrize("version,token,status", [
    ("3", TOKEN, 400),  # another payload version
    ("4", None, 401),  # no token
    ("4", "wrong", 403),  # a wrong one
])
def test_a_webhook_that_is_refused_pages_nothing_and_changes_nothing(
        served: tuple[World, str], receiver: PagerReceiver, version: str,
        token: str | None, status: int) -> None:
    w, url = served
    aid = w.fix()
    body = {**webhook(alert()), "version": version}
    assert _post(url, body, token) == status
    w.passes(2)
    assert receiver.received == [] and w.store.alerts() == ()
    assert w.store.get(aid).state is State.AWAITING_APPROVAL
    assert _post(url, webhook(alert()), TOKEN) == 200  # the real one pages
    w.passes()
    assert len(receiver.accepted()) == 2 and receiver.invalid() == []
    assert w.store.get(aid).state is State.AWAITING_APPROVAL  # a page approves nothing


def test_following_the_paged_link_with_get_approves_nothing(
        served: tuple[World, str], receiver: PagerReceiver) -> None:
    """Slack and chat tools unfurl links with GET: that must only show the page."""
    w, url = served
    w.approvals.base_url = url
    aid = w.fix()
    assert _post(url, webhook(alert()), TOKEN) == 200
    w.passes()
    link = receiver.accepted("pagerduty")[0].body["links"][0]["href"]
    for _ in range(3):
        with urllib.request.urlopen(link, timeout=10) as resp:
            assert resp.status == 200 and b"Approve and run" in resp.read()
    assert w.store.get(aid).state is State.AWAITING_APPROVAL


def test_the_formats_pass_the_receivers_checks() -> None:
    content = fmt.PageContent(
        dedup_key="selfheal-x", alert_name="KafkaLogDirOffline",
        summary="Log dir <b>&</b> offline " + "x" * 2000, severity="weird", source="c1",
        labels={"broker": "1", "log_dir": "/d<1>"}, link_kind=fmt.APPROVE,
        link="https://s.example/approve/t", action_id="a" * 64, action_text="move 3",
        timestamp="2026-01-01T00:00:00.000Z")
    trigger = {"routing_key": ROUTING_KEY, **fmt.pagerduty_trigger(content)}
    assert pagerduty_problems(trigger) == []
    assert trigger["payload"]["severity"] == "error" and len(trigger["payload"]["summary"]) \
        == 1024
    assert pagerduty_problems({"routing_key": ROUTING_KEY,
                               **fmt.pagerduty_resolve(content)}) == []
    message = fmt.slack_trigger(content)
    assert slack_problems(message) == []
    section = message["blocks"][0]["text"]["text"]
    assert "&lt;b&gt;&amp;&lt;/b&gt;" in section  # a label can never become a Slack link
    assert slack_problems(fmt.slack_resolve(content, "done")) == []
    broken = copy.deepcopy(message)
    broken["blocks"][1]["elements"][0]["text"]["text"] = "x" * 80
    assert slack_problems(broken)  # the receiver does refuse what Slack would


def test_the_page_of_a_fix_says_how_long_the_fix_takes(tmp_path: Path,
                                                       receiver: PagerReceiver) -> None:
    w = World(tmp_path / "a.db", receiver)
    w.fix(summary={"partitions": 1, "bytes": 18 << 30, "brokers": [1, 2, 4],
                   "received": [{"broker": 4, "bytes": 18 << 30, "replicas": 22}]})
    w.alert()
    w.passes()
    (pd,) = receiver.accepted("pagerduty")
    (slack,) = receiver.accepted("slack")
    said = "(recovery: about 6 min at 50 MiB/s; broker 4 copies the most (18.0 GiB, 22 " \
           "replicas))"
    assert said in pd.body["payload"]["custom_details"]["fix"]
    assert said in json.dumps(slack.body)
