"""The streaming bench's metric load (bench/stream_bench.py): a 1,000-broker cluster's
samples as the metrics collector publishes them, from a process of its own."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from core import clock
from streams.collect.changes import keepalive_due

RATE = 35_000  # samples/s: 1,000 brokers x ~1,050 samples per 30 s scrape
# Change-only publishing ([collect] metrics_keepalive_seconds, its default): a healthy
# cluster's brokers go whole once per keepalive, each in the scrape where its phase's
# window turns (streams/collect/changes.keepalive_due: about 100 brokers a phase), and
# nothing between. 0: every scrape whole, RATE samples/s steady (`--whole-scrapes`).
KEEPALIVE = 60.0
SCRAPE_INTERVAL = 10.0  # [collect] scrape_interval_seconds, its default
BROKERS = 1000
SIZES_PER_BROKER = 1040
DIRS_PER_BROKER = 4


def scrape(when: str, brokers: Iterable[int] | None = None) -> list[bytes]:
    """One scrape of every broker (or of ``brokers``): the samples a 30 s interval
    produces."""
    head = f'{{"version":1,"cluster_id":"bench-load","event_time":"{when}","broker":'
    out = []
    for b in range(BROKERS) if brokers is None else brokers:
        rack = f'"rack":"r{b % 3}",'
        for p in range(SIZES_PER_BROKER):
            out.append(f'{head}{b},{rack}"metric":"kafka_log_size","labels":{{"topic":'
                       f'"t{p % 40}","partition":"{p}"}},"value":{p * 1024}}}'.encode())
        for d in range(DIRS_PER_BROKER):
            out.append(f'{head}{b},{rack}"metric":"kafka_log_log_directory_offline",'
                       f'"labels":{{"log_dir":"/data/d{d}"}},"value":0}}'.encode())
        out.append(f'{head}{b},{rack}"metric":"kafka_log_offline_log_directory_count",'
                   f'"labels":{{}},"value":0}}'.encode())
    return out


def produce_load(servers: str, topic: str, rate: int, seconds: float,
                  report: Any, keepalive: float = 0.0) -> None:
    """In its own process: for ``seconds``, send ``rate`` samples/s steady (``keepalive``
    0), or one whole scrape of every broker each ``keepalive`` seconds, as fast as the
    producer goes (the collector's round), and nothing between; report the count."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 50,
                         "compression.type": "lz4", "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 2_000_000})
    sent, started, k = 0, time.monotonic(), 0

    def send(sample: bytes) -> None:
        while True:
            try:
                producer.produce(topic, sample, str(k % BROKERS))
                return
            except BufferError:
                producer.poll(0.05)

    if keepalive > 0:
        ticks, last = 0, None
        while time.monotonic() - started < seconds:
            due = started + ticks * SCRAPE_INTERVAL
            if time.monotonic() < due:
                time.sleep(min(0.2, due - time.monotonic()))
                continue
            # the scrape's brokers whose keepalive window turned (all of them at first)
            for sample in scrape(clock.text(), round_of(last, due, keepalive)):
                send(sample)
                k += 1
            sent, ticks, last = k, ticks + 1, due
            producer.poll(0)
    else:
        samples = scrape(clock.text())
        step = rate // 10
        while (elapsed := time.monotonic() - started) < seconds:
            if sent > rate * elapsed:  # ahead of schedule
                time.sleep(0.01)
                continue
            for _ in range(step):
                send(samples[k % len(samples)])
                k += 1
            sent += step
            producer.poll(0)
    producer.flush(120)
    report.put((sent, time.monotonic() - started))


def round_of(last: float | None, now: float, keepalive: float = KEEPALIVE) -> list[int]:
    """The brokers whose whole scrape goes at the scrape at ``now``, the one before at
    ``last`` (None: the first, where every broker goes)."""
    return [b for b in range(BROKERS)
            if last is None or keepalive_due(b, last, now, keepalive, BROKERS)]


def largest_round(keepalive: float = KEEPALIVE) -> list[int]:
    """The most brokers one scrape sends whole once the first has gone: the round a
    failure can land behind."""
    ticks = [i * SCRAPE_INTERVAL for i in range(round(keepalive / SCRAPE_INTERVAL) + 1)]
    return max((round_of(a, b, keepalive) for a, b in zip(ticks, ticks[1:], strict=False)), key=len)


def label() -> str:
    if KEEPALIVE > 0:
        per = BROKERS * (SIZES_PER_BROKER + DIRS_PER_BROKER + 1)
        most = len(largest_round()) * (SIZES_PER_BROKER + DIRS_PER_BROKER + 1)
        return (f"change-only metrics ({per:,} samples each {KEEPALIVE:.0f} s, "
                f"{per / KEEPALIVE:,.0f}/s on average, at most {most:,} in one "
                f"{SCRAPE_INTERVAL:.0f} s scrape)")
    return f"{RATE:,} samples/s"
