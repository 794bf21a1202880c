"""`/metrics`: the service's state in the Prometheus text format (version 0.0.4).

Gauges come from the store when scraped (so a standby reports the same actions as the
leader); counters are this process's own since it started.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

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


def render(store: ActionStore, counters: Counters, gauges: Callable[[], dict[str, float]]
           ) -> str:
    """The whole /metrics page."""
    samples: list[tuple[str, tuple[tuple[str, str], ...], float]] = [
        ("selfheal_actions", (("state", state),), n) for state, n in store.counts().items()]
    samples.append(("selfheal_rejected_inputs", (), store.rejected_count()))
    pages = sum(1 for r in store.open_actions() if r.journal.get("decision", {}).get("page"))
    samples.append(("selfheal_operator_pages", (), pages))
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
