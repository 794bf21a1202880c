"""The HTTP service over a real store and a real socket (no Kafka needed for these routes)."""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from remediation.executor.actions import parse_action
from remediation.executor.lifecycle import State
from remediation.executor.store import ActionStore
from remediation.service import http
from remediation.service.approvals import Approvals
from remediation.service.links import LinkSigner
from remediation.service.metrics import Counters
from tests.unit.action_records import fix_offline, of_type
from tests.unit.test_service_alerts import alert, webhook

TOKEN = "api-token-for-tests"
SECRET = b"s" * 32


class Client:
    def __init__(self, server: http.ServiceServer, store: ActionStore,
                 approvals: Approvals) -> None:
        self.url = server.url
        self.store = store
        self.approvals = approvals

    def call(self, method: str, path: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, str]:
        req = urllib.request.Request(self.url + path, data=body, method=method,
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        status, text = self.call(method, "/api" + path, data,
                                 {"Authorization": f"Bearer {TOKEN}"})
        return status, json.loads(text)

    def waiting(self, record: dict[str, Any]) -> str:
        aid = self.store.propose(parse_action(record)).row.id
        self.store.transition(aid, State.AWAITING_APPROVAL, "policy", "needs approval")
        return aid


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    store = ActionStore(tmp_path / "a.db")
    approvals = Approvals(store, LinkSigner(SECRET, used=store), "http://x", 3600)
    service = http.Service(store, approvals, TOKEN, Counters(),
                           lambda: {"selfheal_executor_leader": 1.0},
                           lambda: ("leader", "me"))
    server, thread = http.start("127.0.0.1", 0, service)
    approvals.base_url = server.url
    try:
        yield Client(server, store, approvals)
    finally:
        server.shutdown()
        server.server_close()
        store.close()


def test_the_one_click_link_shows_the_page_and_its_button_approves_once(
        client: Client) -> None:
    aid = client.waiting(fix_offline())
    link = client.approvals.link(client.store.get(aid))  # type: ignore[arg-type]
    status, page = client.call("GET", link.url.removeprefix(client.url))
    assert status == 200 and "Approve and run" in page
    assert client.store.get(aid).state is State.AWAITING_APPROVAL  # a GET spends nothing
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    form = f"token={link.token}&csrf={csrf}".encode()
    status, page = client.call("POST", "/approve", form)
    assert status == 200 and "Approved" in page
    row = client.store.get(aid)
    assert row is not None and row.state is State.APPROVED
    assert client.store.audit(aid)[-1].actor.startswith("link ")
    status, page = client.call("POST", "/approve", form)
    assert status == 410 and "already used" in page.lower()


def test_an_expired_or_foreign_link_changes_nothing(client: Client) -> None:
    aid = client.waiting(fix_offline())
    old = LinkSigner(SECRET).sign(aid, datetime.now(UTC) - timedelta(seconds=1))
    status, page = client.call("GET", f"/approve/{old}")
    assert status == 410 and "expired" in page
    other = LinkSigner(b"o" * 32).sign(aid, datetime.now(UTC) + timedelta(hours=1))
    status, page = client.call("GET", f"/approve/{other}")
    assert status == 403 and "damaged or forged" in page
    assert client.store.get(aid).state is State.AWAITING_APPROVAL  # type: ignore[union-attr]
    assert len(client.store.rejected()) == 2


def test_the_api_lists_shows_and_decides(client: Client) -> None:
    fix = client.waiting(fix_offline())
    page = client.waiting(of_type("page_operator"))
    status, body = client.api("GET", "/actions?state=awaiting_approval")
    assert status == 200 and {a["id"] for a in body["actions"]} == {fix, page}
    status, shown = client.api("GET", f"/actions/{fix}")
    assert shown["approval_url"].startswith(client.url + "/approve/")
    assert [a["to"] for a in shown["audit"]] == ["proposed", "awaiting_approval"]
    status, body = client.api("POST", f"/actions/{page}/approve", {"actor": "carol"})
    assert status == 200 and body["state"] == "succeeded"  # a page approved is resolved
    status, body = client.api("POST", f"/actions/{fix}/reject",
                              {"actor": "dave", "reason": "wrong disk"})
    assert status == 200 and body["state"] == "cancelled"
    assert body["audit"][-1]["reason"] == "rejected by dave: wrong disk"
    status, body = client.api("POST", f"/actions/{fix}/approve", {"actor": "dave"})
    assert status == 409 and "is cancelled, not awaiting_approval" in body["error"]


def test_bad_api_requests_are_named(client: Client) -> None:
    aid = client.waiting(fix_offline())
    assert client.api("GET", "/actions?state=done")[0] == 400
    assert client.api("GET", f"/actions/{'f' * 64}")[0] == 404
    status, body = client.api("POST", f"/actions/{aid}/approve", {"actor": "<script>"})
    assert status == 400 and "actor must be" in body["error"]
    status, text = client.call("POST", f"/api/actions/{aid}/cancel", b"[1]",
                               {"Authorization": f"Bearer {TOKEN}"})
    assert status == 400 and "must be a JSON object" in text
    conn = HTTPConnection(client.url.removeprefix("http://"), timeout=10)
    conn.putrequest("POST", f"/api/actions/{aid}/cancel")
    conn.putheader("Authorization", f"Bearer {TOKEN}")
    conn.putheader("Content-Length", str(2 << 20))  # announced, never sent
    conn.endheaders()
    assert conn.getresponse().status == 413
    conn.close()
    assert client.store.get(aid).state is State.AWAITING_APPROVAL  # type: ignore[union-attr]


def test_the_webhook_takes_basic_auth_as_alertmanager_sends_it(client: Client) -> None:
    aid = client.waiting(fix_offline())
    body = json.dumps(webhook(alert())).encode()
    assert client.call("POST", "/alertmanager", body)[0] == 401
    basic = base64.b64encode(f"selfheal:{TOKEN}".encode()).decode()
    status, text = client.call("POST", "/alertmanager", body, {"Authorization": f"Basic {basic}"})
    assert status == 200 and json.loads(text)["alerts"][0]["action_id"] == aid
    status, page = client.call("GET", f"/actions/{aid}")
    assert status == 200 and "KafkaLogDirOffline" in page
    status, text = client.call("POST", "/alertmanager", b'{"version": "3"}',
                               {"Authorization": f"Basic {basic}"})
    assert status == 400 and "version" in text


def test_the_index_health_and_metrics(client: Client) -> None:
    client.waiting(fix_offline())
    status, page = client.call("GET", "/")
    assert status == 200 and "awaiting_approval" in page and "active executor" in page
    assert json.loads(client.call("GET", "/healthz")[1]) == {"role": "leader", "holder": "me"}
    status, text = client.call("GET", "/metrics")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("selfheal_actions", (("state", "awaiting_approval"),))] == 1
    assert samples[("selfheal_executor_leader", ())] == 1
    assert samples[("selfheal_http_requests_total", (("code", "200"), ("route", "index")))] == 1


def test_the_openapi_document_describes_every_route_and_the_token(client: Client) -> None:
    status, text = client.call("GET", "/openapi.json")
    document = json.loads(text)
    assert status == 200 and document["openapi"].startswith("3.")
    operations = {(method.upper(), path): op for path, ops in document["paths"].items()
                  for method, op in ops.items()}
    assert set(operations) == {
        ("GET", "/"), ("GET", "/metrics"), ("GET", "/healthz"), ("GET", "/actions/{action_id}"),
        ("GET", "/approve/{token}"), ("POST", "/approve"), ("POST", "/alertmanager"),
        ("POST", "/api/alertmanager"), ("GET", "/api/actions"), ("POST", "/api/actions"),
        ("GET", "/api/actions/{action_id}"), ("POST", "/api/actions/{action_id}/approve"),
        ("POST", "/api/actions/{action_id}/reject"), ("POST", "/api/actions/{action_id}/cancel")}
    secured = {key for key, op in operations.items() if op.get("security")}
    assert secured == {key for key in operations
                       if key[1].startswith("/api/") or key[1] == "/alertmanager"}
    assert set(document["components"]["securitySchemes"]) == {"token", "basic"}


def test_a_refused_record_shows_refused_and_why_under_its_id_until_an_action_takes_it(
        client: Client) -> None:
    record = fix_offline()
    aid = parse_action(record).action_id
    assert client.api("GET", f"/actions/{aid}")[0] == 404  # nothing known yet
    client.store.reject(json.dumps(record), "refused, nothing executed: the plan names "
                        "broker 9, which cluster c does not have", action_id=aid,
                        source="selfheal.actions[0]@4")
    status, body = client.api("GET", f"/actions/{aid}")
    assert status == 200 and body["state"] == "refused"
    assert body["reason"].endswith("names broker 9, which cluster c does not have")
    assert body["source"] == "selfheal.actions[0]@4"
    assert client.api("GET", "/actions")[1]["actions"] == []
    client.waiting(record)  # the same id accepted later: the action is what shows
    assert client.api("GET", f"/actions/{aid}")[1]["state"] == "awaiting_approval"
