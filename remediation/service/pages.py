"""The approval page and the refusal page: plain HTML in plain words, no JavaScript.

Everything that comes from a record or an alert is escaped: topic names, log dirs and
alert labels are outside input, and this page is opened from a pager by someone who
trusts it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from html import escape
from typing import TYPE_CHECKING

from core.plan import recovery
from core.plan.formats import human_bytes
from remediation.executor.actions import stored_action
from remediation.executor.store import ActionRow, AuditEntry
from remediation.service.alerts import Alert
from remediation.service.plan_picture import plan_svg
from schemas.plans import PartitionAssignment
from schemas.records import Action

if TYPE_CHECKING:
    from core.model import ClusterModel

MAX_LINES = 200  # a page with 10 000 lines helps nobody; the plan JSON has them all
ANY_DIR = "any"

Current = Mapping[tuple[str, int], Sequence[int]]  # (topic, partition) -> replicas now


class LiveView(dict[tuple[str, int], tuple[int, ...]]):
    """The replica lists of the executor's latest read (a `Current`), with the read itself
    for the plan's picture (racks, offline replicas, dir sizes)."""

    def __init__(self, replicas: Mapping[tuple[str, int], tuple[int, ...]],
                 model: ClusterModel) -> None:
        super().__init__(replicas)
        self.model = model

_RISK = {
    "fix_offline_replicas": "Copies replicas between brokers, throttled; the partitions stay "
    "under-replicated until the copies catch up. Producers and consumers keep working.",
    "move_replica_dirs": "Moves replicas between disks of the same broker, throttled; no "
    "replica changes broker and clients see nothing.",
    "rebalance_leaders": "Reorders replica lists and elects preferred leaders; no data "
    "moves, clients reconnect to the new leaders within seconds.",
    "assign_consumers": "Changes which consumer reads which partition; the group "
    "rebalances once.",
    "page_operator": "Software cannot do this: a person has to act on the brokers named "
    "below, then mark it resolved here.",
}
_TITLE = {
    "fix_offline_replicas": "Restore replicas lost on a failed disk or broker",
    "move_replica_dirs": "Even out the disks of a broker",
    "rebalance_leaders": "Rebalance partition leaders across racks",
    "assign_consumers": "Assign consumers to partitions on their own rack",
    "page_operator": "An operator is needed",
}
_STYLE = ("td,th{padding:.2rem .6rem;text-align:left}"
          "body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;"
          "padding:0 1rem;line-height:1.45}li{font-family:ui-monospace,monospace}"
          ".risk{background:#fff4d6;padding:.6rem}.refused{background:#fde2e1;padding:.6rem}"
          "button{font-size:1.1rem;padding:.5rem 1.4rem}"
          "figure{margin:1rem 0;overflow-x:auto}figcaption{font-size:.9rem;color:#52606d}")


def current_replicas(model: ClusterModel) -> dict[tuple[str, int], tuple[int, ...]]:
    """The replica lists of the latest snapshot, for the 'now -> then' lines."""
    return {(p.topic, p.partition): tuple(r.broker for r in p.replicas)
            for p in model.partitions}


def describe_target(t: PartitionAssignment, action_type: str, current: Current | None) -> str:
    """One partition in plain words, e.g. 'orders-0: replicas [1, 2, 3] -> [1, 2, 4], new
    replica on broker 4 in /data/d1'."""
    name = f"{t.topic}-{t.partition}"
    known = current.get((t.topic, t.partition)) if current is not None else None
    now = list(known) if known is not None else None
    target = list(t.replicas)
    dirs = dict(zip(t.replicas, t.log_dirs or (), strict=False))
    if action_type == "move_replica_dirs":
        moves = [f"on broker {b} to {d}" for b, d in dirs.items() if d != ANY_DIR]
        return f"{name}: replica " + (", ".join(moves) or "stays where it is")
    arrow = f"replicas {now} -> {target}" if now is not None else f"replicas now ? -> {target}"
    if action_type == "rebalance_leaders":
        return f"{name}: {arrow}, preferred leader becomes broker {target[0]} (no data moves)"
    new = [b for b in target if now is None or b not in now]
    if now is None:
        placed = [f"broker {b} in {dirs[b]}" for b in new if dirs.get(b, ANY_DIR) != ANY_DIR]
        return f"{name}: {arrow}" + (f" ({', '.join(placed)})" if placed else "")
    parts = [f"broker {b} in {dirs[b]}" if dirs.get(b, ANY_DIR) != ANY_DIR
             else f"broker {b} (the broker picks the dir)" for b in new]
    words = f"{name}: {arrow}"
    if parts:
        lead = ", new replica on " if len(parts) == 1 else ", new replicas on "
        words += lead + " and ".join(parts)
    dropped = [b for b in now if b not in target]
    if dropped:
        words += ", drops the replica on broker " + ", ".join(map(str, dropped))
    return words


def render_approval(action: Action, *, form_action: str, csrf_token: str, link_token: str,
                    current: Current | None = None, alert: Alert | None = None,
                    reasons: Iterable[str] = (), expires_at: datetime | None = None,
                    throttle: int = recovery.DEFAULT_RATE) -> str:
    """The page a pager link opens: what will change, how long it takes at `throttle`
    (bytes/s per broker), the risk, and one confirm button."""
    lines = _plan_lines(action, current)
    shown = lines[:MAX_LINES]
    more = (f"<p>... and {len(lines) - MAX_LINES} more partitions (see the plan JSON).</p>"
            if len(lines) > MAX_LINES else "")
    s = action.summary
    facts = [
        f"Cluster {action.cluster_id}; action {action.action_id[:12]} ({action.type}).",
        f"Why: {action.reason}" if action.reason else "",
        f"{s.partitions} partitions, {human_bytes(s.bytes)} to copy, brokers "
        f"{', '.join(map(str, s.brokers)) or 'none'}." if not action.is_page else "",
        *recovery_lines(action, throttle),
        f"This link expires at {expires_at:%Y-%m-%d %H:%M} UTC." if expires_at else "",
    ]
    button = "Mark resolved" if action.is_page else "Approve and run"
    body = [
        f"<h1>{escape(_TITLE[action.type])}</h1>",
        *(f"<p>{escape(f)}</p>" for f in facts if f),
        _alert_html(alert),
        "<h2>What changes</h2>",
        _picture(action, current),
        "<ul>" + "".join(f"<li>{escape(line)}</li>" for line in shown) + "</ul>" + more,
        f'<p class="risk"><strong>Risk:</strong> {escape(_RISK[action.type])}</p>',
        ("<h2>Why it waits for you</h2><ul>"
         + "".join(f"<li>{escape(r)}</li>" for r in reasons) + "</ul>") if reasons else "",
        (f'<form method="post" action="{escape(form_action)}">'
        f'<input type="hidden" name="csrf" value="{escape(csrf_token)}">'
        f'<input type="hidden" name="token" value="{escape(link_token)}">'
        f'<button type="submit">{button}</button></form>'),
        "<p>Nothing happens until you press the button. Closing this page changes nothing.</p>",
    ]
    return _page(_TITLE[action.type], body)


def render_done(row: ActionRow, what: str) -> str:
    """After the confirm button: what happened, and where to follow the action."""
    return _page("Done", [
        f"<h1>{escape(what.split(';')[0].capitalize())}</h1>",
        f"<p>Action {escape(row.id[:12])} is {escape(what)}.</p>",
        f'<p><a href="/actions/{escape(row.id)}">Follow it here</a>.</p>',
    ])


def render_refusal(reason: str, message: str) -> str:
    """The page for a link or a request we refuse: the reason, and that nothing changed."""
    return _page("Not approved", [
        "<h1>Not approved</h1>",
        (f'<p class="refused"><strong>{escape(reason.capitalize())}.</strong> '
        f"{escape(message)}</p>"),
        "<p>Nothing was changed on the cluster.</p>",
    ])


def render_index(rows: Sequence[ActionRow], role: str, holder: str | None) -> str:
    """The home page: who runs the executor, then every action, open ones first."""
    ordered = sorted(rows, key=lambda r: (not r.open, r.updated_at), reverse=False)
    items = []
    for r in ordered:
        title = _TITLE.get(r.type, r.type)
        items.append(f'<tr><td><a href="/actions/{escape(r.id)}">{escape(r.id[:12])}</a></td>'
                     f"<td>{escape(r.state.value)}</td><td>{escape(title)}</td>"
                     f"<td>{escape(r.updated_at)}</td></tr>")
    leader = ("this serve is the active executor" if role == "leader"
              else f"standby; the active executor is {holder or 'unknown'}")
    return _page("Actions", [
        "<h1>kafka-selfheal actions</h1>",
        f"<p>{escape(leader)}.</p>",
        ("<table><tr><th>action</th><th>state</th><th>what</th><th>last change (UTC)</th></tr>"
         + "".join(items) + "</table>") if items else "<p>No actions yet.</p>",
    ])


def render_action(row: ActionRow, audit: Iterable[AuditEntry], alerts: Iterable[Alert],
                  current: Current | None = None,
                  throttle: int = recovery.DEFAULT_RATE) -> str:
    """One action for reading: state, plan in plain words, how long it takes, alerts, the
    audit trail."""
    action = stored_action(row.record)
    lines = _plan_lines(action, current)
    progress = row.journal.get("progress")
    trail = "".join(
        f"<li>{escape(a.at)} {escape(_change(a))} by {escape(a.actor)}: {escape(a.reason)}</li>"
        for a in audit)
    return _page(_TITLE[action.type], [
        f"<h1>{escape(_TITLE[action.type])}</h1>",
        f"<p>Action {escape(row.id)}: <strong>{escape(row.state.value)}</strong>"
        f" (attempt {row.attempts}).</p>",
        f"<p>{escape(action.reason)}</p>",
        *(f"<p>{escape(line)}</p>" for line in recovery_lines(action, throttle)),
        f"<p>Progress: {escape(str(progress))}</p>" if progress and row.open else "",
        f'<p class="refused">{escape(row.error)}</p>' if row.error else "",
        *(_alert_html(a) for a in alerts),
        "<h2>What changes</h2>" + _picture(action, current) + "<ul>"
        + "".join(f"<li>{escape(line)}</li>" for line in lines[:MAX_LINES]) + "</ul>",
        f'<p class="risk"><strong>Risk:</strong> {escape(_RISK[action.type])}</p>',
        "<h2>Audit</h2><ul>" + trail + "</ul>",
    ])


def recovery_lines(action: Action, throttle: int) -> list[str]:
    """A re-replication's time at the throttle and what each broker copies; none for
    other actions, or a record from before summaries carried it."""
    got = action.summary.received
    if action.type != "fix_offline_replicas" or not got:
        return []
    return [f"Recovery: {recovery.estimate(got, throttle)}.",
            f"Copied per broker (replicas): {recovery.per_broker(got, limit=20)}."]


def _picture(action: Action, current: Current | None) -> str:
    """The plan drawn (plan_picture.py), in a figure; "" when there is nothing to draw."""
    model = current.model if isinstance(current, LiveView) else None
    svg = plan_svg(action, current, model)
    if not svg:
        return ""
    caption = ("Usage of each disk before and after the moves." if action.type ==
               "move_replica_dirs" else "Where the replicas are, by broker and rack, "
               "before and after.")
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def _change(a: AuditEntry) -> str:
    if a.from_state == a.to_state:
        return f"({a.to_state})"  # a note: what was done, no state change
    return f"{a.from_state or 'new'} -> {a.to_state}"


def _plan_lines(action: Action, current: Current | None) -> list[str]:
    if action.is_page:
        plan = action.plan
        return [str(plan["message"]),
                "brokers: " + (", ".join(map(str, plan["brokers"])) or "none"),
                "log dirs: " + (", ".join(plan["log_dirs"]) or "none")]
    if action.type == "assign_consumers":
        return [json.dumps(action.plan, sort_keys=True)]
    return [describe_target(t, action.type, current) for t in action.targets()]


def _alert_html(alert: Alert | None) -> str:
    if alert is None:
        return ""
    labels = ", ".join(f"{k}={v}" for k, v in sorted(alert.labels.items()))
    summary = alert.annotations.get("summary") or alert.annotations.get("description") or ""
    return (f"<h2>The alert</h2><p>{escape(alert.name)} ({escape(alert.status)} since "
            f"{alert.starts_at:%Y-%m-%d %H:%M} UTC): {escape(summary)}</p>"
            f"<p><small>{escape(labels)}</small></p>")


def _page(title: str, body: Iterable[str]) -> str:
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<meta name=\"referrer\" content=\"no-referrer\">"  # the URL holds the token
            f"<title>{escape(title)} - kafka-selfheal</title><style>{_STYLE}</style></head>"
            "<body>" + "".join(b for b in body if b) + "</body></html>")
