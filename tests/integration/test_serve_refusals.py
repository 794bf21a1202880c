"""Bad input to `selfheal serve`: each refused with a clear reason in the audit log, and
nothing executed. Malformed records and plans also reach the dead-letter topic."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from remediation.executor.store import ActionStore
from remediation.service.links import LinkSigner
from sandbox.state import SandboxState
from tests.integration.serve_harness import bench
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def test_bad_records_and_plans_are_refused_with_reasons(sandbox: SandboxState,
                                                        tmp_path: Path) -> None:
    with bench(sandbox, tmp_path) as b:
        serve = b.serve()
        good = b.action("rebalance_leaders", {
            "reassignment": {"version": 1, "partitions": [
                {"topic": "__consumer_offsets", "partition": 0, "replicas": [99, 0, 1]}]},
            "election": {"partitions": [{"topic": "__consumer_offsets", "partition": 0}]}},
            "names a broker the cluster does not have")
        altered = json.loads(good.to_json())
        altered["plan"]["reassignment"]["partitions"][0]["replicas"] = [2, 0, 1]
        b.produce(b"{not json", json.dumps({"version": 1, "type": "reboot_broker"}).encode(),
                  json.dumps(altered).encode(), good.to_json(), key=b"in-order")

        store = ActionStore(tmp_path / "actions.sqlite")
        try:
            rejected = wait_until(lambda: (r := store.rejected()) and len(r) >= 4 and r,
                                  "four refusals in the audit log", 60)
        finally:
            store.close()
        reasons = [r.reason for r in rejected]
        assert reasons[0].startswith("malformed action record: $: not JSON")
        assert reasons[1].startswith("malformed action record: cluster_id: required field is "
                                 "missing (schema action")
        assert "is not the hash of this record's cluster, type and plan" in reasons[2]
        assert reasons[3] == (
            "refused, nothing executed: the plan names broker 99, which cluster "
            f"{sandbox.cluster_id} does not have (its brokers: 0, 1, 2)")
        assert rejected[3].action_id == good.action_id
        assert [r.raw for r in rejected][0] == "{not json"
        assert all(re.fullmatch(rf"{re.escape(b.prefix)}actions\[\d+\]@\d+", r.source or "")
                   for r in rejected)

        status, body = serve.api("GET", "/actions")
        assert status == 200 and body["actions"] == []  # nothing became an action
        letters = b.read_topic("dead-letter", lambda found: len(found) >= 4)
        assert sorted(d["reason"] for d in letters) == sorted(reasons)
        assert {d["source_topic"] for d in letters} == {b.config.topic("actions")}
        status, text, _ = serve.http("GET", "/metrics")
        assert "selfheal_rejected_inputs 4" in text
        assert 'selfheal_intake_records_total{outcome="rejected"} 4' in text


def test_a_posted_record_serve_refuses_later_shows_refused_and_why(
        sandbox: SandboxState, tmp_path: Path) -> None:
    """POST /api/actions answers 202 (signed, well formed); the intake refuses it against
    the live cluster; the id's GET then shows the refusal, not 404 forever."""
    with bench(sandbox, tmp_path) as b:
        serve = b.serve()
        ghost = b.action("rebalance_leaders", {
            "reassignment": {"version": 1, "partitions": [
                {"topic": "__consumer_offsets", "partition": 1, "replicas": [77, 0, 1]}]},
            "election": {"partitions": [{"topic": "__consumer_offsets", "partition": 1}]}},
            "names a broker the cluster does not have")
        status, text, _ = serve.http(
            "POST", "/api/actions", ghost.to_json(),
            {"Authorization": f"Bearer {serve.token}", "Content-Type": "application/json"})
        assert status == 202, text

        def refused() -> dict[str, object] | None:
            code, body = serve.api("GET", f"/actions/{ghost.action_id}")
            return body if code == 200 else None

        shown = wait_until(refused, "the posted record's refusal under its id", 60)
        assert shown["state"] == "refused"
        assert shown["reason"] == (
            "refused, nothing executed: the plan names broker 77, which cluster "
            f"{sandbox.cluster_id} does not have (its brokers: 0, 1, 2)")
        assert [a["to"] for a in shown["audit"]] == ["rejected"]  # type: ignore[index]
        status, body = serve.api("GET", "/actions")
        assert body["actions"] == []  # a refusal is never listed as an action


def test_links_that_must_not_approve_are_refused_and_change_nothing(
        sandbox: SandboxState, tmp_path: Path) -> None:
    with bench(sandbox, tmp_path) as b:
        serve = b.serve()
        # A page about no dir stays open until a person closes it (one about a healthy
        # dir would resolve itself within seconds).
        page = b.action("page_operator", {"message": "look at broker 1 by hand",
                                          "brokers": [1], "log_dirs": []},
                        "refusal test")
        aid = b.propose(page)
        serve.wait_state(aid, {"awaiting_approval"})
        path = "/approve/" + serve.wait_line(rf"action {aid[:12]} .* awaits approval: ") \
            .rsplit("/approve/", 1)[1]
        token = path.removeprefix("/approve/")

        tampered = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
        status, text, _ = serve.http("GET", "/approve/" + tampered)
        assert status == 403 and "damaged or forged" in text and "<form" not in text
        expired = LinkSigner(b.secret.encode()).sign(aid, datetime.now(UTC) - timedelta(1))
        status, text, _ = serve.http("GET", "/approve/" + expired)
        assert status == 410 and "expired" in text

        status, text, _ = serve.http("GET", path)
        assert status == 200 and "Mark resolved" in text
        csrf = re.search(r'name="csrf" value="([^"]+)"', text).group(1)
        form = f"token={token}&csrf={csrf}".encode()
        plain = {"Content-Type": "application/x-www-form-urlencoded"}
        status, text, _ = serve.http("POST", "/approve", f"token={token}&csrf=x".encode(),
                                     plain)
        assert status == 403 and "did not come from the approval page" in text
        status, text, _ = serve.http("POST", "/approve", form,
                                     {**plain, "Origin": "http://evil.example"})
        assert status == 403 and "cross-site" in text.lower()
        assert serve.action(aid)["state"] == "awaiting_approval"  # nothing changed so far

        status, text, _ = serve.http("POST", "/approve", form, plain)
        assert status == 200 and "resolved" in text.lower()
        status, text, _ = serve.http("POST", "/approve", form, plain)  # replayed
        assert status in (403, 410) and "Nothing was changed" in text
        shown = serve.action(aid)
        assert shown["state"] == "succeeded"
        assert [a["to"] for a in shown["audit"]].count("succeeded") == 1

        store = ActionStore(tmp_path / "actions.sqlite")
        try:
            refused = [r.reason for r in store.rejected()]
        finally:
            store.close()
        assert any(r.startswith("approval link refused (tampered)") for r in refused)
        assert any(r.startswith("approval link refused (expired)") for r in refused)
        assert any("did not come from the approval page" in r for r in refused)
        assert any(r.startswith("approval link refused (wrong action)") or
                   r.startswith("approval link refused (already used)") for r in refused)


def test_the_api_wants_its_token(sandbox: SandboxState, tmp_path: Path) -> None:
    with bench(sandbox, tmp_path) as b:
        serve = b.serve()
        status, text, _ = serve.http("GET", "/api/actions")
        assert status == 401 and "Bearer" in text
        status, body = serve.api("GET", "/actions", token="wrong")
        assert status == 403 and body["error"] == "wrong API token"
        status, body = serve.api("POST", f"/actions/{'0' * 64}/approve", {"actor": "alice"})
        assert status == 404 and "no action" in body["error"]
