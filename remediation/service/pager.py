"""The pager leg: the alerts Alertmanager hands `serve` become pages on PagerDuty and/or
Slack that carry the one-click approval link of the proposed fix.

Level-triggered, like the executor: every pass reads the received alerts, the pages and
the actions from the store and does what is missing.

- A firing alert without a page gets one. A storage alert (alerts.OFFLINE_ALERTS, with a
  broker) waits up to `[pager] link_wait_seconds` for its fix, so the first page carries
  the link: the approval link while the fix waits for a human, the action's page while it
  runs by itself. Any other alert pages at once, without a link.
- A page sent without a link is sent again (same dedup key) once its alert links to a
  fix.
- A page is resolved when its alert has resolved and its fix (if any) is finished: a
  PagerDuty resolve event, and a Slack message saying so.

Messages go through the store's outbox (`store_pager.py`) and are retried with
exponential backoff while a pager is down, answers 5xx or 429, or times out; a 4xx
(a wrong routing key, a payload refused) is not retried. Every attempt is an audit line.
Every serve runs a pager; the outbox's claims keep two from sending one message.
"""

from __future__ import annotations

import json
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from core import clock
from core.config import PagerConfig
from core.plan import recovery
from remediation.executor.actions import stored_action
from remediation.executor.lifecycle import State, is_terminal
from remediation.executor.store import ActionRow, ActionStore
from remediation.executor.store_pager import Message, PageRow
from remediation.executor.store_side import AlertRow
from remediation.service import pager_formats as fmt
from remediation.service.alerts import (
    LINKABLE_TYPES,
    OFFLINE_ALERTS,
    link_alert,
    stored_alert,
)
from remediation.service.approvals import Approvals
from remediation.service.metrics import Counters

PASS_SECONDS = 0.5
RETRY_STATUSES = frozenset({408, 425, 429})  # plus every 5xx


class Pager:
    """Turns alerts into pages and delivers them; `run` in a thread, `poke` to hurry it."""

    def __init__(self, store: ActionStore, approvals: Approvals, config: PagerConfig,
                 counters: Counters | None = None,
                 log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
                 throttle: int = recovery.DEFAULT_RATE) -> None:
        self.store = store
        self.throttle = throttle  # the policy's inter-broker rate, for a fix's estimate
        self.approvals = approvals
        self.config = config
        self.counters = counters or Counters()
        self.log = log
        self._wake = threading.Event()

    @property
    def channels(self) -> dict[str, str]:
        """Configured channel -> URL."""
        found = {}
        if self.config.pagerduty_routing_key:
            found["pagerduty"] = self.config.pagerduty_url
        if self.config.slack_webhook_url:
            found["slack"] = self.config.slack_webhook_url
        return found

    def poke(self) -> None:
        self._wake.set()

    def run(self, stop: threading.Event) -> None:
        """Until `stop`: a pass every PASS_SECONDS (at once when poked)."""
        if not self.channels:
            self.log("no pager configured ([pager] pagerduty_routing_key or "
                     "slack_webhook_url): alerts are linked to fixes but not paged")
            return
        self.log("paging " + " and ".join(sorted(self.channels)))
        while not stop.is_set():
            try:
                self.reconcile()
                self.deliver()
            except Exception as exc:  # the store busy, a bug: say so, the next pass retries
                self.log(f"pager pass failed: {type(exc).__name__}: {exc}")
            self._wake.wait(PASS_SECONDS)
            self._wake.clear()

    # --- deciding -----------------------------------------------------------------------

    def reconcile(self) -> None:
        """Open, update and resolve pages from what the store holds now."""
        if not self.channels:
            return
        open_rows: tuple[ActionRow, ...] | None = None
        now = clock.now()
        wait = timedelta(seconds=self.config.link_wait_seconds)
        for found in self.store.unpaged_firing():
            alert = self.store.alert(found["group_key"], found["fingerprint"], "firing")
            if alert is None:
                continue
            if alert.action_id is None and _linkable(alert):
                if open_rows is None:
                    open_rows = self.store.open_actions()
                alert = self._link(alert, open_rows)
            action = self.store.get(alert.action_id) if alert.action_id else None
            pending = (action is None and _linkable(alert)) or (
                action is not None and action.state is State.PROPOSED)
            if pending and now - clock.parse(alert.received_at) < wait:
                continue  # the fix (or the policy's decision on it) is seconds away
            content = self._content(alert, action)
            if self.store.open_page(alert.fingerprint, alert.group_key, _name(alert),
                                    action.id if action else None, content.link_kind,
                                    self._messages(content, "trigger"),
                                    _opened(content, self.channels)):
                self.log(_opened(content, self.channels))
                self.poke()
        for page in self.store.pages("open"):
            self._follow(page)

    def _follow(self, page: PageRow) -> None:
        firing = self.store.alert(page.group_key, page.fingerprint, "firing")
        if firing is None:
            return
        action = self.store.get(page.action_id) if page.action_id else None
        better = self._better(firing, page, action)
        if better is not None:
            content = self._content(firing, better)
            reason = (f"page of {page.name} updated with the "
                      f"{'approval link' if content.link_kind == fmt.APPROVE else 'link'}"
                      f" of action {better.id[:12]} ({better.type})")
            if self.store.relink_page(page.fingerprint, better.id, content.link_kind,
                                      self._messages(content, "update"), reason):
                self.log(reason)
                self.poke()
            return
        if not self.store.alert_resolved(page.fingerprint):
            return
        if action is not None and not is_terminal(action.state):
            return  # the alert cleared, the fix still runs (or waits): the page stays open
        outcome = ("The alert resolved." if action is None else
                   f"The alert resolved; action {action.id[:12]} ({action.type}) "
                   f"{action.state.value}.")
        content = self._content(firing, action)
        if self.store.resolve_page(page.fingerprint, self._messages(content, "resolve",
                                                                      outcome),
                                   f"page of {page.name} resolved: {outcome}"):
            self.log(f"page of {page.name} resolved: {outcome}")
            self.poke()

    def _better(self, firing: AlertRow, page: PageRow, action: ActionRow | None
                ) -> ActionRow | None:
        """An action the open page should link to instead of what it carries: a first
        one for a page sent without, or a fix where it carries an operator page (a page
        and its fix come from one detection, the page may arrive first)."""
        if action is not None and action.type == LINKABLE_TYPES[0]:
            return None
        if page.link == fmt.NONE and firing.action_id is not None:
            found = self.store.get(firing.action_id)  # linked by the webhook since
        elif _linkable(firing):
            found = link_alert(stored_alert(firing), self.store.open_actions())
        else:
            return None
        if found is None or found.state is State.PROPOSED or (
                action is not None and found.id == action.id):
            return None
        if action is not None and LINKABLE_TYPES.index(found.type) >= LINKABLE_TYPES.index(
                action.type):
            return None
        if found.id != firing.action_id:
            self.store.set_alert_action(firing.group_key, firing.fingerprint, "firing",
                                        found.id)
        return found

    def _link(self, alert: AlertRow, open_rows: tuple[ActionRow, ...]) -> AlertRow:
        row = link_alert(stored_alert(alert), open_rows)
        if row is None:
            return alert
        self.store.set_alert_action(alert.group_key, alert.fingerprint, alert.status, row.id)
        return self.store.alert(alert.group_key, alert.fingerprint, alert.status) or alert

    def _content(self, alert: AlertRow, action: ActionRow | None) -> fmt.PageContent:
        labels = dict(alert.labels)
        name = _name(alert)
        summary = alert.annotations.get("summary") or name
        kind, link, text = fmt.NONE, None, ""
        base = self.approvals.base_url
        if action is not None and action.state is not State.PROPOSED:
            record = stored_action(action.record)
            text = _action_text(action, record.reason)
            got = record.summary.received
            if record.type == "fix_offline_replicas" and got:
                text += f" (recovery: {recovery.estimate(got, self.throttle)})"
            if action.state is State.AWAITING_APPROVAL:
                kind, link = fmt.APPROVE, self.approvals.link(action).url
            else:
                kind, link = fmt.FOLLOW, f"{base}/actions/{action.id}"
        return fmt.PageContent(
            dedup_key=f"selfheal-{alert.fingerprint}", alert_name=name, summary=summary,
            severity=labels.get("severity", "error"),
            source=labels.get("cluster") or labels.get("cluster_id") or "kafka-selfheal",
            description=alert.annotations.get("description", ""), labels=labels,
            link_kind=kind, link=link, action_id=action.id if action else None,
            action_text=text, timestamp=alert.starts_at, client_url=base)

    def _messages(self, c: fmt.PageContent, event: str, outcome: str = ""
                  ) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for channel in self.channels:
            if channel == "pagerduty":
                out[channel] = (fmt.pagerduty_resolve(c) if event == "resolve"
                                else fmt.pagerduty_trigger(c))
            else:
                out[channel] = (fmt.slack_resolve(c, outcome) if event == "resolve"
                                else fmt.slack_trigger(c, update=event == "update"))
        return out

    # --- delivering ---------------------------------------------------------------------

    def deliver(self) -> int:
        """Send what is due; returns how many messages the pagers took."""
        timeout = self.config.request_timeout_seconds
        delivered = 0
        for message in self.store.claim_due(lease_seconds=timeout + 30):
            if self._send(message, timeout):
                delivered += 1
        return delivered

    def _send(self, m: Message, timeout: float) -> bool:
        attempt = m.attempts + 1
        what = f"page {m.event} ({m.fingerprint[:12]}) to {m.channel}, attempt {attempt}"
        url = self.channels.get(m.channel)
        if url is None:
            self.store.delivery_attempted(
                m.id, delivered=False, refused=True, error="channel no longer configured",
                retry_at=None, reason=f"{what}: not sent, [pager] no longer configures "
                f"{m.channel}")
            return False
        body: Mapping[str, Any] = m.payload
        if m.channel == "pagerduty":
            body = {"routing_key": self.config.pagerduty_routing_key, **m.payload}
        status, error = post_json(url, body, timeout)
        if status is not None and 200 <= status < 300:
            self.store.delivery_attempted(m.id, delivered=True, refused=False, error=None,
                                          retry_at=None, reason=f"{what}: delivered "
                                          f"(HTTP {status})")
            self.counters.inc("selfheal_pages_sent_total", channel=m.channel, event=m.event)
            return True
        retry = status is None or status >= 500 or status in RETRY_STATUSES
        if retry:
            delay = min(self.config.retry_max_seconds,
                        self.config.retry_initial_seconds * 2 ** m.attempts)
            reason = f"{what} failed: {error}; next try in {delay:g} s"
            self.store.delivery_attempted(m.id, delivered=False, refused=False, error=error,
                                          retry_at=clock.now() + timedelta(seconds=delay),
                                          reason=reason)
        else:
            key = "pagerduty_routing_key" if m.channel == "pagerduty" else "slack_webhook_url"
            reason = f"{what} refused: {error}; not retried (check [pager] {key})"
            self.store.delivery_attempted(m.id, delivered=False, refused=True, error=error,
                                          retry_at=None, reason=reason)
        self.counters.inc("selfheal_page_failures_total", channel=m.channel,
                          outcome="retry" if retry else "refused")
        self.log(reason)
        return False


def post_json(url: str, body: Mapping[str, Any], timeout: float) -> tuple[int | None, str]:
    """POST JSON; (HTTP status, what went wrong) or (None, why no answer came)."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              "User-Agent": fmt.CLIENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, ""
    except urllib.error.HTTPError as exc:
        text = exc.read(300).decode("utf-8", "replace").strip()
        return exc.code, f"HTTP {exc.code}" + (f" {text}" if text else "")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, f"no answer ({type(exc).__name__}: {reason})"


def _name(alert: AlertRow) -> str:
    return alert.labels.get("alertname", "alert")


def _linkable(alert: AlertRow) -> bool:
    """A storage alert about one broker: a fix for it is expected."""
    return _name(alert) in OFFLINE_ALERTS and alert.labels.get("broker", "").isdigit()


def _action_text(action: ActionRow, reason: str | None) -> str:
    head = f"action {action.id[:12]} ({action.type})"
    return f"{head}: {reason}" if reason else head


def _opened(c: fmt.PageContent, channels: Mapping[str, str]) -> str:
    link = {fmt.APPROVE: "with the approval link of action",
            fmt.FOLLOW: "with the link of the running action"}.get(c.link_kind)
    tail = f"{link} {c.action_id[:12]}" if link and c.action_id else "without a fix to link"
    return f"paging {c.alert_name} ({c.dedup_key}) to {', '.join(sorted(channels))} {tail}"
