"""The pager leg of a heal (heal_matrix.heal_under_traffic with ``paged``): the sandbox's
real Prometheus scrapes the brokers' exporters (over HTTPS with basic auth on a secured
sandbox) and fires KafkaLogDirOffline, a real Alertmanager hands it to `serve`, serve
pages a local receiver (sandbox/pager_receiver.py, PagerDuty and Slack formats) with the
fix's signed one-click link, and the fix is approved through that link: the approval
page's form, posted as its confirm button does."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from remediation.service.links import LinkSigner
from sandbox import alertmanager, loop, prometheus
from sandbox.pager_receiver import ROUTING_KEY, PagerReceiver, Received
from sandbox.state import SandboxState
from tests.e2e.loop_support import wait

_HIDDEN = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')


class PagedApproval:
    """Receiver, Alertmanager and Prometheus for one loop; `stop` takes them down."""

    def __init__(self, state: SandboxState, work: Path) -> None:
        self.state = state
        self.work = work
        self.receiver = PagerReceiver().start()
        self.am: alertmanager.Alertmanager | None = None
        self.prom: prometheus.Prometheus | None = None

    def overrides(self) -> dict[str, Any]:
        """The loop's [pager]: both channels on the receiver, quick retries."""
        return {"pagerduty_url": self.receiver.pagerduty_url,
                "pagerduty_routing_key": ROUTING_KEY,
                "slack_webhook_url": self.receiver.slack_url, "retry_initial_seconds": 0.5,
                "retry_max_seconds": 5.0, "link_wait_seconds": 90.0}

    def start(self, the_loop: loop.Loop) -> None:
        """Alertmanager paging serve, Prometheus alerting to it (serve must be up)."""
        self.am = alertmanager.start(self.work / "am", the_loop.serve_url.replace(
            "http://", f"http://selfheal:{the_loop.api_token}@") + "/alertmanager")
        self.prom = prometheus.start(self.state, alertmanager_url=self.am.url)

    def page_with_link(self, the_loop: loop.Loop, action_id: str) -> Received:
        """The PagerDuty trigger carrying ``action_id``'s link (a page may go out first
        without it, and be sent again with it)."""
        def linked() -> Received | None:
            return next((r for r in self.receiver.accepted("pagerduty")
                         if r.body.get("event_action") == "trigger" and r.body.get("links")
                         and r.body["payload"]["custom_details"].get("action_id")
                         == action_id), None)

        return wait(linked, "a page carrying the fix's approval link", the_loop, 120)

    def approve(self, the_loop: loop.Loop, fix: dict[str, Any]) -> float:
        """Approve ``fix`` through the link of its page: the link is signed for it, an
        unfurler's GET approves nothing, the page's confirm form does. When the page
        arrived (epoch seconds)."""
        page = self.page_with_link(the_loop, fix["id"])
        assert page.body["payload"]["class"] == "KafkaLogDirOffline"  # fired by Prometheus
        href = page.body["links"][0]["href"]
        token = href.split("/approve/", 1)[1]
        signer = LinkSigner(str(the_loop.config["serve"]["link_secret"]).encode())
        assert signer.verify(token, datetime.now(UTC), fix["id"]).action_id == fix["id"]
        # serve sends each channel on its own: Slack's page with the same link may come
        # a moment after PagerDuty's
        def on_slack() -> bool:
            return href in [e["url"] for r in self.receiver.accepted("slack")
                            for b in r.body["blocks"] if b["type"] == "actions"
                            for e in b["elements"]]

        wait(on_slack, "the Slack page with the same link", the_loop, 60)
        with urllib.request.urlopen(href, timeout=30) as resp:  # the unfurler's GET
            form = dict(_HIDDEN.findall(resp.read().decode()))
        assert set(form) == {"token", "csrf"} and form["token"] == token
        shown = urllib.request.Request(f"{the_loop.serve_url}/api/actions/{fix['id']}",
                                       headers={"Authorization":
                                                f"Bearer {the_loop.api_token}"})
        with urllib.request.urlopen(shown, timeout=30) as resp:
            assert json.load(resp)["state"] == "awaiting_approval"
        confirm = urllib.request.Request(
            f"{the_loop.serve_url}/approve", method="POST",
            data=urllib.parse.urlencode(form).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded"})
        with urllib.request.urlopen(confirm, timeout=30) as resp:
            assert resp.status == 200 and "Approved" in resp.read().decode()
        return page.at

    def pages(self) -> bytes:
        """Every body the pagers received, for the secrets check."""
        return json.dumps([r.body for r in self.receiver.received]).encode()

    def stop(self) -> None:
        if self.prom is not None:
            self.prom.stop()
        if self.am is not None:
            self.am.stop()
        self.receiver.stop()
