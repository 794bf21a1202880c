"""`selfheal collect metrics`: every broker's JMX exporter -> selfheal.broker-metrics.

Each exporter is scraped on its own schedule with its own backoff, in parallel, so one
dead or slow exporter delays nobody else. Which broker an exporter belongs to is decided
in `streams.collect.targets`; racks come from discovery (DescribeCluster), refreshed
every minute.
"""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from core import clock
from core.security import HttpAuth, exporter_settings
from schemas.records import METRICS, BrokerMetric
from schemas.registry import dumps
from streams.collect.backoff import Backoff
from streams.collect.changes import ChangeOnly, anything_wrong
from streams.collect.exporter import (
    ExporterFormatError,
    Scrape,
    parse_exporter_text,
    wire_values,
)
from streams.collect.runner import CollectError, CollectorRun
from streams.collect.sink import RecordSink, record_key
from streams.collect.targets import (
    BrokerInfo,
    ExporterTarget,
    ExporterUrls,
    known_exporters,
    resolve_targets,
)

DISCOVERY_EVERY_SECONDS = 60.0
MAX_PARALLEL_SCRAPES = 8
_HINT = ("check that the broker runs with the JMX exporter agent (-javaagent:"
         "jmx_prometheus_javaagent...) and that [cluster] exporter_urls is right")


@dataclass
class Outcome:
    """One scrape's result: the parsed samples, or why it failed."""

    seconds: float
    scrape: Scrape | None = None
    reason: str = ""  # unreachable | timeout | http_status | bad_format | no_metrics
    message: str = ""
    hint: str = _HINT  # what to do about it


@dataclass
class _Schedule:
    target: ExporterTarget
    backoff: Backoff
    due: float = 0.0
    failures: int = 0


@dataclass
class _Discovery:
    backoff: Backoff
    cluster_id: str | None
    brokers: dict[int, BrokerInfo] | None = None
    due: float = 0.0
    problems: frozenset[str] = field(default_factory=frozenset)


def fetch(url: str, timeout: float, auth: HttpAuth | None = None) -> str:
    """The exporter's text (HTTPError on a non-2xx answer), over HTTPS and with basic
    auth as [cluster.exporter_security] says."""
    request = urllib.request.Request(url)
    context = None
    if auth is not None:
        context = auth.context
        if auth.authorization is not None:
            request.add_unredirected_header("Authorization", auth.authorization)
    with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
        return resp.read().decode("utf-8", errors="replace")


class MetricsCollector:
    """Scrapes the exporters and produces one record per kept sample."""

    def __init__(self, run: CollectorRun, urls: ExporterUrls, interval: float) -> None:
        self.run = run
        self.config = run.config
        self.urls = urls
        self.interval = interval
        self.timeout = self.config.collect.request_timeout_seconds
        self.auth = exporter_settings(self.config.cluster_exporter_security)
        self.topic = self.config.topic("broker-metrics")
        self.known, self.known_racks = known_exporters(self.config)
        self.discovery = _Discovery(run.backoff(), self.config.cluster.cluster_id)
        self.schedules: dict[int, _Schedule] = {}
        self.changes = ChangeOnly(self.config.collect.metrics_keepalive_seconds)
        if self.config.cluster.bootstrap_servers is None and self.discovery.cluster_id is None:
            raise CollectError(
                "no cluster to name the samples after: set [cluster] cluster_id, or "
                "[cluster] bootstrap_servers so it can be asked")

    # --- discovery --------------------------------------------------------------------

    def discover(self) -> bool:
        """DescribeCluster for brokers, racks and the cluster id; False if it failed."""
        from core.live import open_admin

        servers = self.config.cluster.bootstrap_servers
        d = self.discovery
        if servers is None:  # nothing to ask: the operator mapped every exporter
            d.due = float("inf")
            self._retarget()
            return True
        started = time.monotonic()
        try:
            with open_admin(servers, client_id="selfheal-collect-metrics",
                            request_timeout_ms=int(self.timeout * 1000),
                            security=self.config.cluster_security) as admin:
                info = admin.describe_cluster()
        except Exception as exc:
            delay = d.backoff.failure()
            d.due = time.monotonic() + delay
            self.run.telemetry.error("discovery")
            self.run.log(f"ERROR cannot list the brokers at {servers} ({exc}); racks and "
                         f"exporter mapping from the last answer; retrying in {delay:.1f} s")
            self._retarget()
            return False
        d.backoff.success()
        d.due = time.monotonic() + DISCOVERY_EVERY_SECONDS
        first = d.brokers is None
        d.brokers = {
            b["broker_id"]: BrokerInfo(b["broker_id"], b["host"], b.get("rack") or None)
            for b in info["brokers"]
        }
        d.cluster_id = d.cluster_id or info.get("cluster_id")
        if first:
            listing = ", ".join(f"{b.id} ({b.rack or 'no rack'})"
                                for b in sorted(d.brokers.values(), key=lambda b: b.id))
            self.run.log(f"cluster {d.cluster_id} at {servers}: brokers {listing} "
                         f"({time.monotonic() - started:.2f} s)")
        self._retarget()
        return True

    def _retarget(self) -> None:
        collect = self.config.collect
        targets, problems = resolve_targets(self.urls, self.known, self.discovery.brokers,
                                            collect.exporter_port, collect.exporter_path)
        for problem in sorted(set(problems) - self.discovery.problems):
            self.run.telemetry.error("unmapped_exporter")
            self.run.log(f"ERROR {problem}")
        self.discovery.problems = frozenset(problems)
        current = {s.target for s in self.schedules.values()}
        if set(targets) == current:
            return
        kept = {s.target: s for s in self.schedules.values()}
        self.schedules = {
            t.broker: kept.get(t) or _Schedule(t, self.run.backoff()) for t in targets
        }
        self.changes.keep_only(set(self.schedules))
        listing = ", ".join(f"broker {t.broker} {t.url}" for t in targets) or "none"
        self.run.log(f"scraping every {self.interval:g} s: {listing}")

    def rack(self, broker: int) -> str | None:
        brokers = self.discovery.brokers
        if brokers is not None and broker in brokers:
            return brokers[broker].rack
        return self.known_racks.get(broker)

    # --- scraping ---------------------------------------------------------------------

    def scrape(self, target: ExporterTarget, cluster_id: str) -> Outcome:
        """Fetch and parse one exporter (runs on a worker thread)."""
        started = time.monotonic()

        def failed(reason: str, message: str, hint: str = _HINT) -> Outcome:
            return Outcome(time.monotonic() - started, reason=reason, message=message,
                           hint=hint)

        try:
            text = fetch(target.url, self.timeout, self.auth)
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                return failed("http_status", f"HTTP {exc.code} {exc.reason}",
                              "check [cluster.exporter_security] username and password")
            return failed("http_status", f"HTTP {exc.code} {exc.reason}")
        except TimeoutError:
            return failed("timeout", f"no answer within {self.timeout:g} s")
        except (urllib.error.URLError, OSError) as exc:
            why = getattr(exc, "reason", exc)
            if isinstance(why, TimeoutError):
                return failed("timeout", f"no answer within {self.timeout:g} s")
            if isinstance(why, ssl.SSLError):
                return failed("unreachable", f"TLS: {getattr(why, 'verify_message', None) or why}",
                              "check [cluster.exporter_security] ssl_ca_file (the CA that "
                              "signed the exporters' certificates) and ssl_check_hostname")
            return failed("unreachable", str(why))
        try:
            scrape = parse_exporter_text(text, cluster_id, target.broker,
                                         self.rack(target.broker), clock.text())
        except ExporterFormatError as exc:
            return failed("bad_format", f"{exc}; is this URL a JMX exporter's /metrics?")
        if not scrape.records and not scrape.rejected:
            return failed("no_metrics", "it answers but exposes none of the metrics "
                          f"kafka-selfheal reads ({', '.join(METRICS[:2])}, ...); give the "
                          "exporter the rules of sandbox/jmx-exporter.yml")
        return Outcome(time.monotonic() - started, scrape=scrape)

    def round(self, sink: RecordSink, pool: ThreadPoolExecutor, everything: bool = False
              ) -> list[Outcome]:
        """Scrape the exporters that are due (``everything``: all) and produce."""
        cluster_id = self.discovery.cluster_id
        if cluster_id is None:
            return []
        now = time.monotonic()
        due = [s for s in self.schedules.values() if everything or s.due <= now]
        outcomes = list(pool.map(lambda s: self.scrape(s.target, cluster_id), due))
        whole = self._anything_wrong(due, outcomes)
        for schedule, outcome in zip(due, outcomes, strict=True):
            self._handle(schedule, outcome, sink, cluster_id, whole)
        sink.poll(0)
        return outcomes

    def _anything_wrong(self, due: list[_Schedule], outcomes: list[Outcome]) -> bool:
        """A dir reads offline on any broker, or an exporter does not answer: every scrape
        then goes whole (streams/collect/changes.py says why)."""
        scraping = {s.target.broker for s in due}
        return (any(o.scrape is None or anything_wrong(o.scrape.records) for o in outcomes)
                or any(s.failures for b, s in self.schedules.items() if b not in scraping)
                or bool(self.changes.offline_brokers() - scraping))

    def _handle(self, schedule: _Schedule, outcome: Outcome, sink: RecordSink,
                cluster_id: str, whole: bool = True) -> None:
        telemetry, target = self.run.telemetry, schedule.target
        telemetry.target(target.url, outcome.scrape is not None)
        if outcome.scrape is None:
            self.changes.forget(target.broker)
            telemetry.failed(outcome.reason, outcome.seconds)
            delay = schedule.backoff.failure()
            schedule.failures += 1
            schedule.due = time.monotonic() + delay
            self.run.log(f"ERROR exporter {target.url} (broker {target.broker}): "
                         f"{outcome.message}; {outcome.hint}; retrying in {delay:.1f} s "
                         "(the other exporters are still scraped)")
            return
        for line in outcome.scrape.rejected:
            telemetry.error("rejected_sample")
            self.run.log(f"WARNING broker {target.broker}: sample not kept: {line}")
        records = self.changes.select(target.broker, outcome.scrape.records,
                                      time.monotonic(), whole)
        self._produce(records, sink, cluster_id, target.broker)
        telemetry.succeeded(outcome.seconds)
        if schedule.failures:
            self.run.log(f"exporter {target.url} (broker {target.broker}) answers again "
                         f"after {schedule.failures} failed scrape(s)")
        schedule.failures = 0
        schedule.backoff.success()
        schedule.due = time.monotonic() + self.interval

    def _produce(self, records: list[BrokerMetric], sink: RecordSink, cluster_id: str,
                 broker: int) -> None:
        values, bad = wire_values(records)
        for record, error in bad:
            sink.dead_letter(dumps(record.to_dict()), error, self.topic, cluster_id)
        key = record_key(cluster_id, broker)
        for value in values:
            if not sink.send(self.topic, value, key, self.run.stop):
                return

    def next_due(self) -> float:
        dues = [s.due for s in self.schedules.values()]
        return min([self.discovery.due, *dues])


def run_metrics(run: CollectorRun, urls: ExporterUrls, interval: float) -> int:
    """The command's body; 0 after a clean stop, or the ``--once`` result."""
    collector = MetricsCollector(run, urls, interval)
    sink = run.open_sink()
    if sink is None:
        return 0
    with ThreadPoolExecutor(MAX_PARALLEL_SCRAPES, thread_name_prefix="scrape") as pool:
        if run.once:
            return _once(run, collector, sink, pool)
        while not run.stop.is_set():
            if time.monotonic() >= collector.discovery.due:
                collector.discover()
            if collector.discovery.cluster_id is None:
                run.wait(max(0.1, collector.discovery.due - time.monotonic()))
                continue
            collector.round(sink, pool)
            run.idle(collector.next_due() - time.monotonic())
    return 0


def _once(run: CollectorRun, collector: MetricsCollector, sink: RecordSink,
          pool: ThreadPoolExecutor) -> int:
    collector.discover()
    if collector.discovery.cluster_id is None:
        raise CollectError("the cluster did not answer DescribeCluster and [cluster] "
                           "cluster_id is unset; nothing to name the samples after")
    outcomes = collector.round(sink, pool, everything=True)
    scraped = [o.scrape for o in outcomes if o.scrape is not None]
    run.log(f"one round: {len(scraped)} of {len(outcomes)} exporters scraped, "
            f"{sum(len(s.records) for s in scraped)} records")
    undelivered = sink.flush(30.0)
    ok = outcomes and len(scraped) == len(outcomes) and not collector.discovery.problems
    return 0 if ok and not undelivered else 1
