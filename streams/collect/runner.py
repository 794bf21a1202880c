"""The lifecycle every collector shares.

Signals (SIGTERM and SIGINT ask for a clean stop), progress lines on stderr, the
collector's own metrics endpoint, its producer, backoff-and-retry around anything that
talks to a network, and an exit that flushes the producer first.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import TypeVar

from core.config import Config
from streams.collect.backoff import Backoff
from streams.collect.sink import RecordSink
from streams.collect.telemetry import Telemetry

T = TypeVar("T")

FLUSH_TIMEOUT_SECONDS = 30.0


class CollectError(RuntimeError):
    """A ``--once`` round that failed; the message says what and what to do."""


class CollectorRun:
    """One collector process: use as ``with CollectorRun(...) as run:``."""

    def __init__(self, name: str, config: Config, http_port: int, once: bool = False) -> None:
        self.name = name
        self.config = config
        self.once = once
        self.stop = threading.Event()
        self.telemetry = Telemetry(name)
        self.sink: RecordSink | None = None
        self._http_port = http_port
        self._previous: dict[int, object] = {}

    def log(self, message: str) -> None:
        """One progress line on stderr."""
        stamp = time.strftime("%H:%M:%S")
        print(f"{stamp} [collect {self.name}] {message}", file=sys.stderr, flush=True)

    def __enter__(self) -> CollectorRun:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._on_signal)
        port = self.telemetry.serve(self.config.collect.http_host, self._http_port)
        self.log(f"own metrics at http://{self.config.collect.http_host}:{port}/metrics")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if self.sink is not None:
                left = self.sink.flush(FLUSH_TIMEOUT_SECONDS)
                if not left:
                    self.log("producer flushed")
        finally:
            self.telemetry.close()
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)  # type: ignore[arg-type]

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if not self.stop.is_set():
            self.log(f"{signal.Signals(signum).name}: stopping after the current step")
        self.stop.set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True as soon as a stop was asked for."""
        return self.stop.wait(max(0.0, seconds))

    def idle(self, seconds: float) -> bool:
        """Like `wait`, serving the producer's delivery reports meanwhile (so the
        records-produced count is current)."""
        deadline = time.monotonic() + seconds
        while not self.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self.sink is None:
                return self.wait(left)
            self.sink.poll(min(0.2, left))
        return True

    def backoff(self) -> Backoff:
        collect = self.config.collect
        return Backoff(collect.backoff_initial_seconds,
                       max(collect.backoff_initial_seconds, collect.backoff_max_seconds))

    def retry(self, what: str, action: Callable[[], T], hint: str,
              reason: str = "unreachable", call: str | None = None) -> T | None:
        """``action()`` until it works, backing off between failures; None if stopped.
        ``call``: the Admin call it makes, to name its ACL if denied (`core.acls`).

        With ``--once`` the first failure raises `CollectError` instead.
        """
        backoff = self.backoff()
        while not self.stop.is_set():
            try:
                return action()
            except Exception as exc:
                self.telemetry.failed(reason)
                if self.once:
                    raise CollectError(
                        f"{what} failed: {self.explain(exc, hint, call)}") from exc
                delay = backoff.failure()
                self.log(f"ERROR {what} failed: {self.explain(exc, hint, call)}; "
                         f"retrying in {delay:.1f} s")
                self.wait(delay)
        return None

    def explain(self, exc: BaseException, hint: str, call: str | None = None) -> str:
        """A failure and what to do: a denial names the ACL to add (``hint``, about
        reaching the cluster, would mislead); anything else, ``hint``."""
        from core.acls import denial
        from core.zk_session import ZooKeeperLoginRefused

        if isinstance(exc, ZooKeeperLoginRefused):
            return str(exc)  # says what to check; "is it running" would mislead
        security = self.config.bus_security if call == "CreateTopics" \
            else self.config.cluster_security
        denied = denial(exc, security, call)
        return denied if denied is not None else f"{_describe(exc)}; {hint}"

    def open_sink(self) -> RecordSink | None:
        """Create the selfheal.* topics if missing and open the producer; None if stopped."""
        from core.bus import ensure_topics

        servers = self.config.bus.bootstrap_servers
        created = self.retry(
            f"setting up the selfheal.* topics on the bus at {servers}",
            lambda: ensure_topics(self.config),
            "check that the bus runs and [bus] bootstrap_servers is right",
            call="CreateTopics")
        if created is None:
            return None
        if created:
            self.log(f"created topics {', '.join(created)}")
        origin = f"collect-{self.name}/{uuid.uuid4().hex[:12]}"  # this process, not its kind
        self.sink = RecordSink(self.config, self.telemetry, self.log, origin)
        self.log(f"producing to the bus at {servers}")
        return self.sink


def _describe(exc: BaseException) -> str:
    """A failure in words: a Kafka client's error by its name and text, anything else by
    its class (ConnectionRefusedError, NoNodeError ...) and message."""
    from confluent_kafka import KafkaException

    from core.bus import kafka_reason

    if isinstance(exc, KafkaException):
        return kafka_reason(exc)
    return f"{type(exc).__name__}: {str(exc) or 'no message'}"


class Periodic:
    """A step done every ``every`` seconds; after a failure, again after a backoff delay.

    ``due`` is a `time.monotonic()` time; set it to now to have the step run at once.
    """

    def __init__(self, run: CollectorRun, what: str, every: float, hint: str,
                 first_in: float = 0.0) -> None:
        self.run = run
        self.what = what
        self.every = every
        self.hint = hint
        self.due = time.monotonic() + first_in
        self._backoff = run.backoff()

    def is_due(self, now: float) -> bool:
        return now >= self.due

    def attempt(self, action: Callable[[], T]) -> tuple[bool, T | None]:
        """Run ``action`` and reschedule; (True, its result), or (False, None) after
        counting and reporting the failure."""
        started = time.monotonic()
        try:
            result = action()
        except Exception as exc:
            delay = self._backoff.failure()
            self.due = time.monotonic() + delay
            self.run.telemetry.failed("unreachable", time.monotonic() - started)
            self.run.log(f"ERROR {self.what} failed: {self.run.explain(exc, self.hint)}; "
                         f"retrying in {delay:.1f} s")
            return False, None
        self._backoff.success()
        self.due = time.monotonic() + self.every
        return True, result
