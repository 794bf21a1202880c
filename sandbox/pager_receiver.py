"""A local HTTP receiver standing in for PagerDuty and Slack (the pager of `selfheal demo`
and of the pager tests): a small threading http.server on 127.0.0.1 that checks every
request against the public formats and answers as they do.

- POST /pagerduty: PagerDuty Events API v2 (https://developer.pagerduty.com/docs/events-api-v2/
  trigger-events/): 202 {"status": "success", ...} for a valid event, 400
  {"status": "invalid event", "errors": [...]} otherwise.
- POST /slack: a Slack incoming webhook (https://api.slack.com/messaging/webhooks, Block
  Kit): 200 "ok", or 400 "invalid_blocks" / "invalid_payload".

Written from the public documentation, not from the product's code, so a payload the
product gets wrong is refused here. `fail(n, status)` answers the next n requests with
`status` (a pager having a bad day); `stop()` takes it down, `start()` on the same port
brings it back.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ROUTING_KEY = "R0UT1NGKEY0123456789abcdefABCDEF"  # 32 characters, as PagerDuty's are
PD_TOP = {"routing_key", "event_action", "dedup_key", "payload", "images", "links",
          "client", "client_url"}
PD_PAYLOAD = {"summary", "source", "severity", "timestamp", "component", "group", "class",
              "custom_details"}
PD_SEVERITIES = {"critical", "error", "warning", "info"}
SLACK_BLOCKS = {"section", "actions", "context", "divider", "header"}
_URL = re.compile(r"https?://[^\s]+")


@dataclass
class Received:
    channel: str
    body: Any
    problems: list[str]
    status: int
    at: float = field(default_factory=time.time)  # when it arrived (epoch seconds)


def pagerduty_problems(body: Any, routing_key: str = ROUTING_KEY) -> list[str]:
    """What is wrong with an Events API v2 event (empty: valid)."""
    if not isinstance(body, dict):
        return ["not a JSON object"]
    out = [f"unknown field {k}" for k in body if k not in PD_TOP]
    if body.get("routing_key") != routing_key:
        out.append("routing_key: wrong or missing")
    action = body.get("event_action")
    if action not in ("trigger", "acknowledge", "resolve"):
        out.append(f"event_action: {action!r}")
    dedup = body.get("dedup_key")
    if dedup is not None and (not isinstance(dedup, str) or not 0 < len(dedup) <= 255):
        out.append("dedup_key: must be 1-255 characters")
    if action in ("acknowledge", "resolve") and dedup is None:
        out.append("dedup_key: required to acknowledge or resolve")
    if action == "trigger":
        p = body.get("payload")
        if not isinstance(p, dict):
            return [*out, "payload: required for a trigger"]
        out += [f"payload: unknown field {k}" for k in p if k not in PD_PAYLOAD]
        summary = p.get("summary")
        if not isinstance(summary, str) or not 0 < len(summary) <= 1024:
            out.append("payload.summary: 1-1024 characters")
        if not isinstance(p.get("source"), str) or not p["source"]:
            out.append("payload.source: required")
        if p.get("severity") not in PD_SEVERITIES:
            out.append(f"payload.severity: {p.get('severity')!r}")
        if "timestamp" in p:
            try:
                datetime.fromisoformat(str(p["timestamp"]).replace("Z", "+00:00"))
            except ValueError:
                out.append("payload.timestamp: not ISO 8601")
        if "custom_details" in p and not isinstance(p["custom_details"], dict):
            out.append("payload.custom_details: must be an object")
        links = body.get("links", [])
        if not isinstance(links, list):
            out.append("links: must be a list")
        else:
            for i, link in enumerate(links):
                if not isinstance(link, dict) or not _URL.fullmatch(str(link.get("href"))):
                    out.append(f"links[{i}].href: must be a URL")
                elif not isinstance(link.get("text", ""), str):
                    out.append(f"links[{i}].text: must be a string")
    elif "payload" in body or "links" in body:
        out.append(f"{action}: takes no payload or links")
    return out


def slack_problems(body: Any) -> list[str]:
    """What is wrong with an incoming-webhook message (empty: valid)."""
    if not isinstance(body, dict):
        return ["not a JSON object"]
    out = []
    text, blocks = body.get("text"), body.get("blocks")
    if text is None and blocks is None:
        out.append("needs text or blocks")
    if text is not None and not isinstance(text, str):
        out.append("text: must be a string")
    if blocks is None:
        return out
    if not isinstance(blocks, list) or not 0 < len(blocks) <= 50:
        return [*out, "blocks: 1-50 blocks"]
    for i, b in enumerate(blocks):
        kind = b.get("type") if isinstance(b, dict) else None
        if kind not in SLACK_BLOCKS:
            out.append(f"blocks[{i}].type: {kind!r}")
        elif kind == "section":
            out += _text_problems(b.get("text"), f"blocks[{i}].text", 3000)
        elif kind == "context":
            elements = b.get("elements")
            if not isinstance(elements, list) or not 0 < len(elements) <= 10:
                out.append(f"blocks[{i}].elements: 1-10")
            else:
                for j, e in enumerate(elements):
                    out += _text_problems(e, f"blocks[{i}].elements[{j}]", 3000)
        elif kind == "actions":
            elements = b.get("elements")
            if not isinstance(elements, list) or not 0 < len(elements) <= 25:
                out.append(f"blocks[{i}].elements: 1-25")
                continue
            for j, e in enumerate(elements):
                where = f"blocks[{i}].elements[{j}]"
                if not isinstance(e, dict) or e.get("type") != "button":
                    out.append(f"{where}: only buttons here")
                    continue
                label = e.get("text")
                if not isinstance(label, dict) or label.get("type") != "plain_text":
                    out.append(f"{where}.text: plain_text")
                else:
                    out += _text_problems(label, f"{where}.text", 75)
                url = e.get("url")
                if url is not None and (not _URL.fullmatch(str(url)) or len(url) > 3000):
                    out.append(f"{where}.url: a URL of up to 3000 characters")
                if e.get("style") not in (None, "primary", "danger"):
                    out.append(f"{where}.style: {e.get('style')!r}")
                if len(str(e.get("action_id", ""))) > 255:
                    out.append(f"{where}.action_id: up to 255 characters")
    return out


def _text_problems(obj: Any, where: str, limit: int) -> list[str]:
    if not isinstance(obj, dict) or obj.get("type") not in ("mrkdwn", "plain_text"):
        return [f"{where}: a mrkdwn or plain_text object"]
    text = obj.get("text")
    if not isinstance(text, str) or not 0 < len(text) <= limit:
        return [f"{where}.text: 1-{limit} characters"]
    return []


class PagerReceiver:
    """PagerDuty and Slack on one local port; every request kept in `received`."""

    def __init__(self, port: int = 0, routing_key: str = ROUTING_KEY) -> None:
        self.routing_key = routing_key
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        self._failures: list[int] = []
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def pagerduty_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/pagerduty"

    @property
    def slack_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/slack"

    def fail(self, times: int, status: int = 500) -> None:
        with self.lock:
            self._failures += [status] * times

    def start(self) -> PagerReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                channel = self.path.strip("/")
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                status, reply = receiver._answer(channel, body)
                data = reply.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if channel ==
                                 "pagerduty" else "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _answer(self, channel: str, body: Any) -> tuple[int, str]:
        if channel == "pagerduty":
            problems = pagerduty_problems(body, self.routing_key)
        elif channel == "slack":
            problems = slack_problems(body)
        else:
            problems = [f"no such endpoint /{channel}"]
        with self.lock:
            status = self._failures.pop(0) if self._failures else None
            if status is None:
                status = (202 if channel == "pagerduty" else 200) if not problems else 400
            self.received.append(Received(channel, body, problems, status))
            self.arrived.notify_all()
        if status >= 400 and not problems:
            return status, json.dumps({"status": "error", "message": "try again later"})
        if channel == "pagerduty":
            if problems:
                return status, json.dumps({"status": "invalid event",
                                           "message": "Event object is invalid",
                                           "errors": problems})
            return status, json.dumps({"status": "success", "message": "Event processed",
                                       "dedup_key": body.get("dedup_key")})
        return status, ("ok" if not problems else "invalid_blocks")

    # --- reading ----------------------------------------------------------------------

    def accepted(self, channel: str | None = None) -> list[Received]:
        """What was taken (2xx), in arrival order."""
        with self.lock:
            return [r for r in self.received if r.status < 300
                    and (channel is None or r.channel == channel)]

    def invalid(self) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.problems]

    def wait_for(self, check: Any, timeout: float, what: str) -> Any:
        """Wait until check(received list) returns something true; AssertionError after."""
        with self.lock:
            ok = self.arrived.wait_for(lambda: check(list(self.received)), timeout)
            if not ok:
                raise AssertionError(f"the pager never received {what} within {timeout:.0f} "
                                     f"s; it got {[(r.channel, r.status) for r in self.received]}")
            return check(list(self.received))
