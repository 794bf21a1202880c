"""Change-only publishing with a keepalive (streams/collect/changes.py), and the metrics
collector deciding from real exporter answers (local HTTP servers) what goes whole."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from core.config import ConfigError, load
from schemas import wire
from schemas.records import BrokerMetric
from streams.collect.broker_metrics import MetricsCollector
from streams.collect.changes import (
    ROUND_BROKERS,
    ChangeOnly,
    anything_wrong,
    keepalive_due,
    keepalive_phase,
)
from streams.collect.runner import CollectorRun

OFFLINE = "kafka_log_log_directory_offline"
COUNT = "kafka_log_offline_log_directory_count"
SIZE = "kafka_log_size"


def scrape(d1: float = 0, size: float = 100, broker: int = 1) -> list[BrokerMetric]:
    def m(metric: str, value: float, **labels: str) -> BrokerMetric:
        return BrokerMetric("c", "2026-11-29T00:00:00Z", broker, metric, value, None, labels)

    return [m(OFFLINE, 0, log_dir="/d0"), m(OFFLINE, d1, log_dir="/d1"), m(COUNT, d1),
            m(SIZE, size, topic="t", partition="0")]


def names(records: list[BrokerMetric]) -> list[tuple[str, float]]:
    return [(r.metric, r.value) for r in records]


def test_the_first_scrape_goes_whole_then_only_what_changed_until_the_keepalive():
    changes = ChangeOnly(keepalive=60)
    assert changes.select(1, scrape(), now=0) == scrape()
    assert changes.select(1, scrape(size=200), now=10) == []  # a size change waits
    failed = changes.select(1, scrape(d1=1, size=300), now=20)
    assert names(failed) == [(OFFLINE, 1), (COUNT, 1)]  # at once, without the sizes
    assert changes.select(1, scrape(d1=1, size=300), now=30) == []
    assert names(changes.select(1, scrape(size=300), now=40)) == [(OFFLINE, 0), (COUNT, 0)]
    assert changes.select(1, scrape(size=400), now=59.9) == []
    assert changes.select(1, scrape(size=400), now=60) == scrape(size=400)  # keepalive
    assert changes.select(1, scrape(size=400), now=70) == []


def test_each_broker_keeps_its_own_memory_and_a_failed_scrape_makes_the_next_whole():
    changes = ChangeOnly(keepalive=60)
    changes.select(1, scrape(broker=1), now=0)
    assert changes.select(2, scrape(broker=2), now=5) == scrape(broker=2)
    assert changes.select(1, scrape(broker=1), now=10) == []
    changes.forget(1)
    assert changes.select(1, scrape(broker=1), now=20) == scrape(broker=1)


def test_whole_is_asked_for_and_keepalive_0_sends_every_scrape_whole():
    changes = ChangeOnly(keepalive=60)
    changes.select(1, scrape(), now=0)
    assert changes.select(1, scrape(size=5), now=1, whole=True) == scrape(size=5)
    every = ChangeOnly(keepalive=0)
    for t in range(3):
        assert every.select(1, scrape(), now=t) == scrape()


def test_a_new_gauge_is_sent_and_one_that_vanished_is_forgotten():
    changes = ChangeOnly(keepalive=60)
    changes.select(1, scrape()[:1], now=0)  # only /d0
    assert names(changes.select(1, scrape(), now=10)) == [(OFFLINE, 0), (COUNT, 0)]
    assert changes.select(1, scrape()[:1], now=20) == []
    assert names(changes.select(1, scrape(), now=30)) == [(OFFLINE, 0), (COUNT, 0)]


def test_what_counts_as_wrong_and_the_brokers_remembered_offline():
    changes = ChangeOnly(keepalive=60)
    assert not anything_wrong(scrape(size=10**12))
    assert anything_wrong(scrape(d1=1))
    changes.select(1, scrape(d1=1, broker=1), now=0)
    changes.select(2, scrape(broker=2), now=0)
    assert changes.offline_brokers() == {1}
    changes.select(1, scrape(broker=1), now=10)
    assert changes.offline_brokers() == set()
    changes.select(1, scrape(d1=1, broker=1), now=20)
    changes.keep_only({2})
    assert changes.offline_brokers() == set()


def test_a_small_cluster_keeps_one_round_a_fleet_spreads_its_keepalive_over_the_interval():
    assert {keepalive_phase(b, 60, 3) for b in range(3)} == {0.0}
    changes = ChangeOnly(keepalive=60)
    changes.keep_only(set(range(1000)))
    for b in range(1000):
        changes.select(b, scrape(broker=b), now=0)  # the first scrape: all of them whole
    per_scrape = []
    for now in range(10, 130, 10):  # two keepalives of 10 s scrapes
        per_scrape.append(sum(changes.select(b, scrape(broker=b), now=now) != []
                              for b in range(1000)))
    assert sum(per_scrape[:6]) == 1000 and sum(per_scrape[6:]) == 1000  # each once
    assert max(per_scrape) <= 2 * ROUND_BROKERS + 10, per_scrape  # no fleet-wide round
    assert min(per_scrape) > 0


def test_a_broker_goes_whole_once_per_keepalive_whatever_its_phase():
    for broker in range(200):
        for start in (0.0, 3.7, 1234.5):
            last, wholes, gaps = start, 1, []
            for now in (start + 10 * i for i in range(1, 61)):  # ten minutes of scrapes
                if keepalive_due(broker, last, now, 60, 1000):
                    gaps.append(now - last)
                    last, wholes = now, wholes + 1
            assert wholes in (10, 11), (broker, start, wholes)  # the first may come early
            assert all(g == pytest.approx(60) for g in gaps[1:]) and gaps[0] <= 60 + 1e-9, gaps


@pytest.mark.parametrize("value", ["-1", "61"])
def test_the_keepalive_is_0_to_60_seconds(value, monkeypatch):
    monkeypatch.setenv("SELFHEAL_COLLECT_METRICS_KEEPALIVE_SECONDS", value)
    with pytest.raises(ConfigError, match="metrics_keepalive_seconds.*must be 0 to 60"):
        load()


# --- the collector, on real HTTP answers -------------------------------------------------

class Exporters:
    """One local HTTP server per broker whose text the test changes; `None`: a 503."""

    def __init__(self, brokers: list[int]) -> None:
        self.text: dict[int, str | None] = {b: self.body() for b in brokers}
        self.servers: dict[int, ThreadingHTTPServer] = {}
        owner = self
        for broker in brokers:

            class Handler(BaseHTTPRequestHandler):
                def do_GET(self, b: int = broker) -> None:  # noqa: N802
                    text = owner.text[b]
                    self.send_response(200 if text is not None else 503)
                    self.end_headers()
                    self.wfile.write((text or "").encode())

                def log_message(self, *args: object) -> None:
                    pass

            server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers[broker] = server

    @staticmethod
    def body(d1: int = 0, size: int = 100) -> str:
        return (f"# TYPE {OFFLINE} gauge\n{OFFLINE}{{log_dir=\"/d0\"}} 0.0\n"
                f"{OFFLINE}{{log_dir=\"/d1\"}} {d1}.0\n# TYPE {COUNT} gauge\n{COUNT} {d1}.0\n"
                f"# TYPE {SIZE} gauge\n{SIZE}{{partition=\"0\",topic=\"t\"}} {size}.0\n")

    def urls(self) -> str:
        return ",".join(f"{b}=http://127.0.0.1:{s.server_port}/metrics"
                        for b, s in self.servers.items())

    def close(self) -> None:
        for server in self.servers.values():
            server.shutdown()
            server.server_close()


class Sent:
    """Where the collector's records go instead of the bus: the sink's interface."""

    def __init__(self) -> None:
        self.records: list[dict] = []

    def send(self, topic, value, key, stop=None) -> bool:
        self.records.append(wire.record("broker-metric", value))
        return True

    def poll(self, timeout: float) -> None:
        pass

    def take(self) -> list[tuple[int, str, float]]:
        out = sorted((r["broker"], r["metric"], r["value"]) for r in self.records)
        self.records.clear()
        return out


@pytest.fixture
def exporters() -> Iterator[Exporters]:
    e = Exporters([1, 2])
    yield e
    e.close()


def collector(exporters: Exporters, monkeypatch) -> MetricsCollector:
    monkeypatch.setenv("SELFHEAL_CLUSTER_CLUSTER_ID", "c")
    monkeypatch.setenv("SELFHEAL_CLUSTER_EXPORTER_URLS", exporters.urls())
    monkeypatch.setenv("SELFHEAL_COLLECT_BACKOFF_INITIAL_SECONDS", "30")
    config = load()
    from streams.collect.targets import parse_exporter_urls

    c = MetricsCollector(CollectorRun("metrics", config, 0), parse_exporter_urls(
        config.cluster.exporter_urls), interval=10)
    c.discover()  # no bootstrap servers asked: the URLs name every broker
    return c


def test_an_idle_cluster_sends_nothing_between_keepalives_and_a_failure_at_once(
        exporters, monkeypatch):
    c, sent = collector(exporters, monkeypatch), Sent()
    with ThreadPoolExecutor(2) as pool:
        c.round(sent, pool, everything=True)
        assert len(sent.take()) == 8  # both brokers whole
        exporters.text[1] = exporters.body(size=999)
        c.round(sent, pool, everything=True)
        assert sent.take() == []
        exporters.text[2] = exporters.body(d1=1)
        c.round(sent, pool, everything=True)
        # broker 2's dir: at once; and since a dir is offline, every scrape goes whole
        assert sent.take() == sorted([(2, OFFLINE, 0.0), (2, OFFLINE, 1.0), (2, COUNT, 1.0),
                                      (2, SIZE, 100.0), (1, OFFLINE, 0.0), (1, OFFLINE, 0.0),
                                      (1, COUNT, 0.0), (1, SIZE, 999.0)])
        c.round(sent, pool, everything=True)
        assert len(sent.take()) == 8
        exporters.text[2] = exporters.body()
        c.round(sent, pool, everything=True)
        assert sent.take() == sorted([(2, COUNT, 0.0), (2, OFFLINE, 0.0)])  # back online
        c.round(sent, pool, everything=True)
        assert sent.take() == []


def test_while_an_exporter_does_not_answer_the_others_go_whole_every_scrape(
        exporters, monkeypatch):
    c, sent = collector(exporters, monkeypatch), Sent()
    with ThreadPoolExecutor(2) as pool:
        c.round(sent, pool, everything=True)
        sent.take()
        exporters.text[2] = None
        c.round(sent, pool, everything=True)
        assert {b for b, _, _ in sent.take()} == {1}
        c.schedules[1].due = 0
        c.round(sent, pool)  # only broker 1 is due: broker 2 is backing off
        assert len(sent.take()) == 4
        exporters.text[2] = exporters.body()
        c.round(sent, pool, everything=True)
        again = sent.take()  # broker 2 answers again: whole; broker 1, nothing new
        assert {b for b, _, _ in again} == {2} and len(again) == 4
        c.round(sent, pool, everything=True)
        assert sent.take() == []
