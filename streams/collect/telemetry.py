"""A collector's own Prometheus metrics and the HTTP endpoint that serves them.

Each collector process has its own registry (not prometheus-client's global one), so
the endpoint shows only what that collector did. The ``collector`` label lets one
Prometheus job scrape all three and still tell them apart.
"""

from __future__ import annotations

import time
from typing import Any

# Scrapes of an exporter take milliseconds; a full snapshot of a big cluster, seconds.
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Telemetry:
    """The metrics one collector keeps about itself."""

    def __init__(self, collector: str) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.collector = collector
        self.registry = CollectorRegistry(auto_describe=True)
        self.scrapes = Counter(
            "selfheal_collect_scrapes", "Rounds of work (an exporter scrape, a ZooKeeper "
            "re-read, a snapshot or probe), by result", ["collector", "result"],
            registry=self.registry)
        self.records = Counter(
            "selfheal_collect_records_produced", "Records the event bus acknowledged",
            ["collector", "topic"], registry=self.registry)
        self.errors = Counter(
            "selfheal_collect_errors", "Failures, by reason", ["collector", "reason"],
            registry=self.registry)
        self.last_success = Gauge(
            "selfheal_collect_last_success_timestamp_seconds",
            "Unix time of the last successful round", ["collector"], registry=self.registry)
        self.duration = Histogram(
            "selfheal_collect_scrape_duration_seconds", "How long one round took",
            ["collector"], registry=self.registry, buckets=_DURATION_BUCKETS)
        self.target_up = Gauge(
            "selfheal_collect_target_up", "1 while the last attempt on this target worked",
            ["collector", "target"], registry=self.registry)
        self._server: Any = None

    def succeeded(self, seconds: float) -> None:
        """One round worked and took ``seconds``."""
        self.scrapes.labels(self.collector, "ok").inc()
        self.duration.labels(self.collector).observe(seconds)
        self.last_success.labels(self.collector).set(time.time())

    def failed(self, reason: str, seconds: float | None = None) -> None:
        """One round failed for ``reason`` (a short token: unreachable, timeout, ...)."""
        self.scrapes.labels(self.collector, "error").inc()
        self.error(reason)
        if seconds is not None:
            self.duration.labels(self.collector).observe(seconds)

    def error(self, reason: str) -> None:
        """A failure that is not a whole round (a record the bus refused, a bad event)."""
        self.errors.labels(self.collector, reason).inc()

    def produced(self, topic: str, count: int = 1) -> None:
        self.records.labels(self.collector, topic).inc(count)

    def target(self, name: str, up: bool) -> None:
        self.target_up.labels(self.collector, name).set(1 if up else 0)

    def serve(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on ``host:port`` (0: a free port); returns the port."""
        from prometheus_client import start_http_server

        self._server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return int(self._server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
