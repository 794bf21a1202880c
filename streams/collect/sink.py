"""Produce a collector's records to the event bus, counting what the bus acknowledged.

One idempotent, acks=all producer (`core.bus.producer`) per collector. A record whose
delivery fails is produced again after a second, oldest first, and what is sent while
records wait for that goes behind them (a record already in flight when an earlier one
fails can still arrive first), so a bus that comes back gets them: a chaos run lost a
ZooKeeper collector's broker registrations when every broker restarted at once
(librdkafka failed them with "Unknown partition" while the topic had no leader). Only a
record the bus can never take (too large), or one past the retry buffer's bound, is
lost, and that is said. Failures are reported on stderr, summed up at most every few
seconds so an outage does not flood the log; nothing fails unseen.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from core import clock
from core.bus import refusal_passes
from core.config import Config
from schemas.records import DeadLetter
from streams.collect.telemetry import Telemetry

# Marks the records a collector produced itself, so it can skip its own echo when it also
# consumes the topic (the snapshot collector emits KRaft log-dir events and reads them).
ORIGIN_HEADER = "selfheal-origin"
_REPORT_EVERY_SECONDS = 10.0
RETRY_AFTER_SECONDS = 1.0
# Records kept for another try while the bus refuses them; past this the oldest are lost
# (a long outage of a fleet's metrics must not exhaust the collector's memory).
RETRY_LIMIT_BYTES = 64 << 20


class RecordTooLarge(ValueError):
    """A record over the producer's size limit; the message says which limits to raise."""


def record_key(cluster_id: str, broker: int | None) -> bytes:
    """``<cluster>/<broker>``: one broker's records share a partition, so they stay in
    order, and two clusters on one bus never mix; ``<cluster>`` when the broker is
    unknown."""
    return (cluster_id if broker is None else f"{cluster_id}/{broker}").encode()


class RecordSink:
    """A producer on the bus that counts deliveries in ``telemetry``."""

    def __init__(self, config: Config, telemetry: Telemetry, log: Callable[[str], None],
                 origin: str) -> None:
        from core.bus import producer

        self._config = config
        self._producer = producer(config)
        self._telemetry = telemetry
        self._log = log
        self.origin = origin.encode()
        self._lock = threading.Lock()
        self._failures: dict[str, int] = {}  # error text -> count since the last report
        self._reported_at = 0.0
        self.failed = 0  # delivery attempts that failed
        self.lost = 0  # records given up on
        self._retry: deque[tuple[str, bytes, bytes | None]] = deque()
        self._retry_bytes = 0
        self._retry_at = 0.0

    def send(self, topic: str, value: bytes, key: bytes | None,
             stop: threading.Event | None = None) -> bool:
        """Queue one record; waits while the local queue is full (the bus is slow or
        down). False when ``stop`` was set while waiting: the record was not queued."""
        from confluent_kafka import KafkaError, KafkaException

        if self._retry:
            self._resend(force=False)
            if self._queue_behind(topic, value, key):
                return True
        while True:
            try:
                self._producer.produce(
                    topic, value, key, on_delivery=self._delivered,
                    headers=[(ORIGIN_HEADER, self.origin)])
                break
            except BufferError:
                if stop is not None and stop.is_set():
                    return False
                self._producer.poll(0.1)
            except KafkaException as exc:
                if refusal_passes(exc):  # the bus does not list the topic right now
                    self._refused(topic, value, key, exc)
                    return True
                if exc.args[0].code() != KafkaError.MSG_SIZE_TOO_LARGE:
                    raise
                raise RecordTooLarge(
                    f"a {len(value):,}-byte record for {topic} is over the producer's "
                    "message.max.bytes; raise core.bus.MAX_MESSAGE_BYTES and the "
                    "topic's max.message.bytes together") from None
        self._producer.poll(0)
        return True

    def dead_letter(self, raw: bytes | str, reason: str | Exception, source_topic: str,
                    cluster_id: str | None) -> None:
        """Send what could not be published as a valid record to the dead-letter topic."""
        record = DeadLetter.reject(raw, reason, source_topic, cluster_id=cluster_id,
                                   event_time=clock.text())
        self._telemetry.error("invalid_record")
        self._log(f"ERROR a {source_topic} record broke its schema ({reason}); sent to "
                  f"{self._config.topic('dead-letter')} instead. This is a bug: please "
                  "report it with that dead letter")
        self.send(self._config.topic("dead-letter"), record.to_json(), record.key())

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self._telemetry.produced(msg.topic())
            return
        from confluent_kafka import KafkaError

        self._telemetry.error("produce")
        value = msg.value() or b""
        final = err.code() == KafkaError.MSG_SIZE_TOO_LARGE or err.fatal()
        with self._lock:
            self.failed += 1
            text = f"{msg.topic()}: {err.str() if hasattr(err, 'str') else err}"
            if final:
                self.lost += 1
                text += " (lost: the bus cannot take it)"
            else:
                self._keep(msg.topic(), value, msg.key())
                text += " (sent again)"
            self._failures[text] = self._failures.get(text, 0) + 1

    def _refused(self, topic: str, value: bytes, key: bytes | None, exc: Exception) -> None:
        """A record produce() refused on the spot for now: it waits with the failed ones."""
        self._telemetry.error("produce")
        with self._lock:
            self.failed += 1
            self._keep(topic, value, key)
            text = f"{topic}: {exc.args[0].str()} (sent again)"
            self._failures[text] = self._failures.get(text, 0) + 1

    def _queue_behind(self, topic: str, value: bytes, key: bytes | None) -> bool:
        """While earlier records wait for another try, a new one waits behind them, so
        one broker's events reach the bus in the order they happened."""
        from core.bus import MAX_MESSAGE_BYTES

        with self._lock:
            if not self._retry or len(value) > MAX_MESSAGE_BYTES:  # too large: say so now
                return False
            self._retry.append((topic, value, key))
            self._retry_bytes += len(value)
            self._bound()
            return True

    def _keep(self, topic: str, value: bytes, key: bytes | None) -> None:
        """Keep a refused record for another try in a second (called with the lock held)."""
        self._retry.append((topic, value, key))
        self._retry_bytes += len(value)
        self._retry_at = max(self._retry_at, time.monotonic() + RETRY_AFTER_SECONDS)
        self._bound()

    def _bound(self) -> None:
        """Past the retry buffer's bound the oldest records are lost, and that is said
        (called with the lock held)."""
        while self._retry_bytes > RETRY_LIMIT_BYTES and len(self._retry) > 1:
            _topic, old, _key = self._retry.popleft()
            self._retry_bytes -= len(old)
            self.lost += 1
            self._failures["retry buffer full: oldest records lost"] = \
                self._failures.get("retry buffer full: oldest records lost", 0) + 1

    def _resend(self, force: bool) -> None:
        """Produce the failed records again, oldest first; those the local queue cannot
        take now wait for the next call."""
        if not force and time.monotonic() < self._retry_at:
            return
        while True:
            with self._lock:
                if not self._retry:
                    return
                topic, value, key = self._retry[0]
            try:
                self._producer.produce(topic, value, key, on_delivery=self._delivered,
                                       headers=[(ORIGIN_HEADER, self.origin)])
            except BufferError:
                return
            except Exception as exc:
                if not refusal_passes(exc):
                    raise
                with self._lock:  # still not listed: the next try in a second
                    self._retry_at = time.monotonic() + RETRY_AFTER_SECONDS
                return
            with self._lock:
                self._retry.popleft()
                self._retry_bytes -= len(value)

    @property
    def pending(self) -> int:
        """Records waiting for another try."""
        with self._lock:
            return len(self._retry)

    def poll(self, timeout: float = 0.0) -> None:
        """Serve delivery callbacks, send failed records again; report delivery failures
        at most every 10 s."""
        self._producer.poll(timeout)
        if self._retry:
            self._resend(force=False)
        self._report(force=False)

    def _report(self, force: bool) -> None:
        now = time.monotonic()
        with self._lock:
            if not self._failures or (not force and now - self._reported_at
                                      < _REPORT_EVERY_SECONDS):
                return
            failures, self._failures, self._reported_at = self._failures, {}, now
        for text, count in failures.items():
            self._log(f"ERROR {count} delivery attempt(s) to the bus failed ({text}); check "
                      f"that the bus at {self._config.bus.bootstrap_servers} runs and the "
                      "selfheal.* topics exist")

    def flush(self, timeout: float) -> int:
        """Wait up to ``timeout`` s for every record, those sent again included; returns
        how many are left."""
        deadline = time.monotonic() + timeout
        while True:
            if self._retry:
                self._resend(force=True)
            left = int(self._producer.flush(max(0.0, min(1.0, deadline - time.monotonic()))))
            left += self.pending
            if not left or time.monotonic() >= deadline:
                break
        self._report(force=True)
        if left:
            self._log(f"ERROR {left} record(s) still undelivered after {timeout:.0f} s; "
                      "they are lost. Check the bus, then rerun the collector")
        return left
