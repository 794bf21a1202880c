"""`/metrics`: the service's state in the Prometheus text format (version 0.0.4).

Gauges come from the store when scraped (so a standby reports the same actions as the
leader); counters are this process's own since it started.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from datetime import datetime

from core import clock
from remediation.executor.lifecycle import State
from remediation.executor.store import ActionStore

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Counters:
    """Thread-safe counters with labels, e.g. HTTP requests by route and status."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        with self._lock:
            key = (name, tuple(sorted(labels.items())))
            self._counts[key] = self._counts.get(key, 0) + amount

    def items(self) -> list[tuple[str, tuple[tuple[str, str], ...], float]]:
        with self._lock:
            return [(n, labels, v) for (n, labels), v in sorted(self._counts.items())]


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    inner = ",".join(f'{k}="{esc(v)}"' for k, v in pairs)
    return "{" + inner + "}" if inner else ""


HELP = {
    "selfheal_actions": ("gauge", "Actions in the store, by state."),
    "selfheal_rejected_inputs": ("gauge", "Inputs refused with a reason in the audit log "
                                 "(malformed records, bad plans, refused links)."),
    "selfheal_operator_pages": ("gauge", "Open actions whose decision paged the operator "
                                "(pages, and anything the circuit breaker stopped)."),
    "selfheal_oldest_pending_approval_age_seconds": ("gauge", "How long the action waiting "
                                                     "longest for approval has waited (0: none)."),
    "selfheal_move_remaining_bytes": ("gauge", "Bytes the executing actions still have to "
                                      "move: each action's planned bytes times the share of "
                                      "its partitions not yet at their target."),
    "selfheal_throttles_in_force": ("gauge", "Replication throttles set by actions and not "
                                    "yet restored, by kind (inter- or intra-broker)."),
    "selfheal_actions_stalled": ("gauge", "Executing actions that moved no bytes for the "
                                 "stall time ([serve] stall_seconds)."),
    "selfheal_circuit_breaker_open": ("gauge", "1 while the circuit breaker holds an open "
                                      "action for an operator."),
    "selfheal_executor_leader": ("gauge", "1 while this serve is the active executor."),
    "selfheal_executor_ticks_total": ("counter", "Executor passes over the open actions."),
    "selfheal_executor_errors_total": ("counter", "Cluster calls that failed and were retried."),
    "selfheal_executor_tick_seconds": ("gauge", "Duration of the last executor pass."),
    "selfheal_intake_records_total": ("counter", "Records read from the actions topic, by "
                                      "outcome."),
    "selfheal_status_published_total": ("counter", "Audit lines published to Kafka, by topic."),
    "selfheal_http_requests_total": ("counter", "HTTP requests, by route and status."),
    "selfheal_pages_sent_total": ("counter", "Pager messages delivered, by channel and event."),
    "selfheal_page_failures_total": ("counter", "Pager delivery attempts that failed, by "
                                     "channel and outcome (retry or refused)."),
}


Sample = tuple[str, tuple[tuple[str, str], ...], float]


def remediation_gauges(store: ActionStore, now: datetime | None = None) -> list[Sample]:
    """What only serve knows, read from the store: how long the oldest approval has
    waited, the bytes its executing actions still have to move, how many of them are
    stalled, the throttles they hold,
    and whether the circuit breaker holds anything back."""
    now = now or clock.now()
    rows = store.list()
    waiting = [clock.parse(r.updated_at) for r in rows if r.state is State.AWAITING_APPROVAL]
    oldest = max(((now - t).total_seconds() for t in waiting), default=0.0)
    left = 0.0
    for r in rows:
        if r.state is not State.EXECUTING:
            continue
        summary = r.record.get("summary", {})
        total = summary.get("partitions", 0)
        if total > 0:  # not reported yet: all of it is left
            left += summary.get("bytes", 0) * r.journal.get("partitions_left", total) / total
    stalled = sum(1 for r in rows if r.state is State.EXECUTING and r.journal.get("stalled"))
    throttles = {"inter": 0, "intra": 0}
    for r in rows:
        for kind, entry in r.journal.get("throttles", {}).items():
            if not entry.get("restored"):
                throttles[kind] = throttles.get(kind, 0) + 1
    breaker = any(reason.startswith("circuit breaker")
                  for r in rows if r.open
                  for reason in r.journal.get("decision", {}).get("reasons", ()))
    return [("selfheal_oldest_pending_approval_age_seconds", (), max(oldest, 0.0)),
            ("selfheal_move_remaining_bytes", (), left),
            ("selfheal_actions_stalled", (), float(stalled)),
            *(("selfheal_throttles_in_force", (("kind", k),), float(n))
              for k, n in sorted(throttles.items())),
            ("selfheal_circuit_breaker_open", (), 1.0 if breaker else 0.0)]


def render(store: ActionStore, counters: Counters, gauges: Callable[[], dict[str, float]]
           ) -> str:
    """The whole /metrics page."""
    samples: list[Sample] = [
        ("selfheal_actions", (("state", state),), n) for state, n in store.counts().items()]
    samples.append(("selfheal_rejected_inputs", (), store.rejected_count()))
    pages = sum(1 for r in store.open_actions() if r.journal.get("decision", {}).get("page"))
    samples.append(("selfheal_operator_pages", (), pages))
    samples.extend(remediation_gauges(store))
    samples.extend((name, (), value) for name, value in sorted(gauges().items()))
    samples.extend(counters.items())
    lines: list[str] = []
    seen: set[str] = set()
    for name, labels, value in samples:
        if name not in seen:
            kind, text = HELP.get(name, ("untyped", name))
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            seen.add(name)
        lines.append(f"{name}{_labels(labels)} {value:g}")
    return "\n".join(lines) + "\n"
