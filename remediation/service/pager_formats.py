"""The messages `serve` sends to pagers: PagerDuty Events API v2 and Slack incoming webhooks.

Pure functions over one `PageContent`. PagerDuty: a `trigger` event with `dedup_key`,
`payload` (summary, source, severity, ...), and the one-click link in `links`; later a
`resolve` event with the same `dedup_key`. The routing key is added when a message is
sent, so it is never stored. Slack: a message with a section and one button whose `url`
is the link (Slack opens it in the browser: a GET, which only shows the approval page);
an incoming webhook cannot edit what it posted, so the update and the resolve are new
messages naming the same alert, marked as updates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PD_SEVERITIES = ("critical", "error", "warning", "info")
_SEVERITY = {"critical": "critical", "page": "critical", "error": "error",
             "warning": "warning", "info": "info", "none": "info"}
CLIENT = "kafka-selfheal"
PD_SUMMARY_MAX = 1024
SLACK_TEXT_MAX = 3000
SLACK_BUTTON_MAX = 75

APPROVE = "approve"  # the link approves the fix (one click, then a confirm button)
FOLLOW = "follow"  # the fix runs without approval; the link shows it
NONE = "none"  # no fix linked (yet)


@dataclass(frozen=True, slots=True)
class PageContent:
    """What a page says, whichever pager carries it."""

    dedup_key: str
    alert_name: str
    summary: str
    severity: str  # the alert's own severity label
    source: str  # the cluster
    description: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    link_kind: str = NONE
    link: str | None = None  # the approval link, or the action page for FOLLOW
    action_id: str | None = None
    action_text: str = ""  # the fix in a few words
    timestamp: str | None = None  # when the alert started (RFC 3339)
    client_url: str | None = None  # serve's own pages

    @property
    def pd_severity(self) -> str:
        return _SEVERITY.get(self.severity.lower(), "error")


def pagerduty_trigger(c: PageContent) -> dict[str, Any]:
    """An Events API v2 trigger (without routing_key); a repeat with the same dedup_key
    updates the open alert in PagerDuty."""
    details: dict[str, Any] = {"labels": dict(c.labels), "description": c.description}
    if c.action_id:
        details["action_id"] = c.action_id
        details["fix"] = c.action_text
    payload: dict[str, Any] = {
        "summary": _cut(c.summary, PD_SUMMARY_MAX),
        "source": c.source,
        "severity": c.pd_severity,
        "class": c.alert_name,
        "custom_details": details,
    }
    if c.timestamp:
        payload["timestamp"] = c.timestamp
    if "broker" in c.labels:
        payload["component"] = f"broker {c.labels['broker']}"
    if c.labels.get("cluster"):
        payload["group"] = c.labels["cluster"]
    event: dict[str, Any] = {"event_action": "trigger", "dedup_key": c.dedup_key,
                             "payload": payload, "client": CLIENT}
    if c.client_url:
        event["client_url"] = c.client_url
    if c.link:
        event["links"] = [{"href": c.link, "text": _link_text(c)}]
    return event


def pagerduty_resolve(c: PageContent) -> dict[str, Any]:
    return {"event_action": "resolve", "dedup_key": c.dedup_key}


def slack_trigger(c: PageContent, update: bool = False) -> dict[str, Any]:
    """A message with a button to the link (no button without one)."""
    head = ("*Update:* " if update else "") + f":rotating_light: *{_esc(c.alert_name)}*: " \
        + _esc(c.summary)
    lines = [head]
    if c.description:
        lines.append(_esc(c.description))
    if c.link_kind == APPROVE:
        lines.append(f"*Proposed fix:* {_esc(c.action_text)} (waits for your approval)")
    elif c.link_kind == FOLLOW:
        lines.append(f"*Fix running:* {_esc(c.action_text)} (no approval needed)")
    else:
        lines.append("No fix proposed yet; kafka-selfheal sends the link when there is one.")
    blocks: list[dict[str, Any]] = [_section("\n".join(lines))]
    if c.link:
        button: dict[str, Any] = {
            "type": "button", "action_id": f"selfheal-{c.link_kind}",
            "text": {"type": "plain_text", "text": _button_text(c), "emoji": False},
            "url": c.link}
        if c.link_kind == APPROVE:
            button["style"] = "primary"
        blocks.append({"type": "actions", "elements": [button]})
    blocks.append(_context(c))
    return {"text": _cut(f"{c.alert_name}: {c.summary}", SLACK_TEXT_MAX), "blocks": blocks}


def slack_resolve(c: PageContent, outcome: str) -> dict[str, Any]:
    """The resolve as a new message (an incoming webhook cannot edit the first one)."""
    text = (f":white_check_mark: *Resolved:* *{_esc(c.alert_name)}*: {_esc(c.summary)}\n"
            f"{_esc(outcome)}")
    return {"text": _cut(f"Resolved: {c.alert_name}: {c.summary}", SLACK_TEXT_MAX),
            "blocks": [_section(text), _context(c)]}


def _link_text(c: PageContent) -> str:
    if c.link_kind == APPROVE:
        return f"Review and approve the fix: {c.action_text}"[:PD_SUMMARY_MAX]
    return f"Follow the fix: {c.action_text}"[:PD_SUMMARY_MAX]


def _button_text(c: PageContent) -> str:
    return "Review and approve the fix" if c.link_kind == APPROVE else "Follow the fix"


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": _cut(text, SLACK_TEXT_MAX)}}


def _context(c: PageContent) -> dict[str, Any]:
    where = ", ".join(f"{k}={v}" for k, v in sorted(c.labels.items())
                      if k in ("cluster", "broker", "rack", "log_dir"))
    return {"type": "context", "elements": [
        {"type": "mrkdwn", "text": _cut(_esc(f"{c.source} | {where} | key {c.dedup_key}"),
                                        SLACK_TEXT_MAX)}]}


def _esc(text: str) -> str:
    """Slack's mrkdwn escapes: &, < and > (an alert label must not become a link)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
