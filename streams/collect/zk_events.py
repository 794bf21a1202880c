"""`selfheal collect zk`: ZooKeeper log-dir notifications and broker registrations ->
selfheal.logdir-events.

Two watchers (`LogDirNotificationWatcher`, `BrokerRegistrationWatcher`) hand their
events to this thread through a queue; only this thread produces. kazoo reconnects by
itself; on every reconnect (a SUSPENDED connection back, or a new session after LOST)
both watchers re-read their path, which reports whatever changed while away and re-arms
the watches kazoo dropped. A re-read every ``interval`` seconds is the safety net for a
watch lost any other way.
"""

from __future__ import annotations

import json
import queue
import time
from typing import Any

from schemas.records import LogDirEvent
from streams.collect.broker_watch import BROKERS_PATH, BrokerRegistrationWatcher
from streams.collect.events import REGISTERED, Change, change_event, notification_event
from streams.collect.logdir_watch import NOTIFICATION_PATH, LogDirNotificationWatcher
from streams.collect.runner import CollectError, CollectorRun, Periodic
from streams.collect.sink import RecordSink, record_key

SESSION_TIMEOUT_SECONDS = 10.0
_HINT = "check that ZooKeeper runs and [cluster] zookeeper_connect is right"


def read_cluster_id(zk: Any) -> str:
    """Kafka's cluster id from ``/cluster/id`` (``{"version":"1","id":"..."}``)."""
    raw, _ = zk.get("/cluster/id")
    return str(json.loads(raw)["id"])


class ZkCollector:
    """The connection, the two watchers, and the queue between them and the producer."""

    def __init__(self, run: CollectorRun, interval: float) -> None:
        self.run = run
        self.interval = interval
        self.hosts = run.config.cluster.zookeeper_connect or ""
        self.topic = run.config.topic("logdir-events")
        self.cluster_id = run.config.cluster.cluster_id
        self.inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.client: Any = None
        self.notifications: LogDirNotificationWatcher | None = None
        self.brokers: BrokerRegistrationWatcher | None = None
        self.away = False  # the connection dropped since the last re-read

    # --- called from kazoo's threads: hand over, never block ----------------------------

    def _on_state(self, state: Any) -> None:
        self.inbox.put(("state", str(state)))

    def _on_error(self, exc: Exception) -> None:
        self.inbox.put(("error", exc))

    def _on_notification(self, notification: Any) -> None:
        assert self.cluster_id is not None
        self.inbox.put(("event", notification_event(self.cluster_id, notification)))

    def _on_change(self, change: Change) -> None:
        assert self.cluster_id is not None
        self.inbox.put(("event", change_event(self.cluster_id, change, "zookeeper")))

    # --- this thread ------------------------------------------------------------------

    def connect(self) -> Any:
        """Start a session (kazoo then keeps it up, reconnecting with backoff)."""
        from kazoo.retry import KazooRetry  # type: ignore[import-untyped]

        from core.zk_session import start, zk_client

        collect = self.run.config.collect
        retry = KazooRetry(max_tries=-1, delay=collect.backoff_initial_seconds, backoff=2,
                           max_delay=collect.backoff_max_seconds)
        client = zk_client(self.hosts, self.run.config.cluster_zookeeper_security,
                           timeout=SESSION_TIMEOUT_SECONDS, connection_retry=retry)
        # closes itself on failure; a refused SASL login is one line (run.retry's)
        start(client, self.hosts, collect.request_timeout_seconds)
        self.client = client
        client.add_listener(self._on_state)
        return client

    def start_watching(self) -> list[int]:
        """Read both paths as the baseline and arm the watches; the registered brokers."""
        if self.cluster_id is None:
            self.cluster_id = read_cluster_id(self.client)
        self.notifications = LogDirNotificationWatcher(
            self.client, self._on_notification, on_error=self._on_error)
        self.brokers = BrokerRegistrationWatcher(
            self.client, self._on_change, on_error=self._on_error)
        self.notifications.start()
        self.brokers.start()
        return sorted(self.brokers.registered())

    def resync(self) -> None:
        assert self.notifications is not None and self.brokers is not None
        started = time.monotonic()
        self.notifications.resync()
        self.brokers.resync()
        self.run.telemetry.succeeded(time.monotonic() - started)

    def send(self, sink: RecordSink, event: LogDirEvent) -> None:
        assert self.cluster_id is not None
        sink.send(self.topic, event.to_json(), record_key(self.cluster_id, event.broker),
                  self.run.stop)
        where = f" ({event.znode})" if event.znode else ""
        who = "unknown broker" if event.broker is None else f"broker {event.broker}"
        self.run.log(f"{event.kind}: {who}{where}")

    def close(self) -> None:
        if self.client is not None:
            self.client.stop()
            self.client.close()
            self.client = None

    def handle(self, kind: str, item: Any, sink: RecordSink) -> None:
        """One item from the watchers or kazoo's connection thread."""
        if kind == "event":
            self.send(sink, item)
        elif kind == "error":
            self.away = True  # a watch callback failed: re-read to re-arm it
            self.run.telemetry.error("watch")
            self.run.log(f"ERROR re-reading after a watch failed ({item}); will re-read "
                         "once connected")
        elif item == "CONNECTED":
            if self.away:
                self.run.log(f"reconnected to ZooKeeper at {self.hosts}; re-reading what "
                             "changed while away")
            self.run.telemetry.target(self.hosts, True)
        else:
            self.away = True
            self.run.telemetry.error(f"zk_{item.lower()}")
            self.run.telemetry.target(self.hosts, False)
            what = ("connection lost" if item == "SUSPENDED"
                    else "session expired; a new session follows")
            self.run.log(f"ERROR ZooKeeper {what} ({item}); kazoo reconnects with backoff; "
                         f"{_HINT}")


def run_zk(run: CollectorRun, interval: float) -> int:
    """The command's body; 0 after a clean stop (or a good ``--once``)."""
    collector = ZkCollector(run, interval)
    sink = run.open_sink()
    if sink is None:
        return 0
    try:
        if run.retry(f"connecting to ZooKeeper at {collector.hosts}", collector.connect,
                     _HINT) is None:
            return 0
        ids = run.retry(f"reading /cluster/id, {BROKERS_PATH} and {NOTIFICATION_PATH}",
                        collector.start_watching, _HINT)
        if ids is None:
            return 0
        run.log(f"watching {NOTIFICATION_PATH} and {BROKERS_PATH} on {collector.hosts} "
                f"(cluster {collector.cluster_id}); brokers {ids} registered")
        run.telemetry.target(collector.hosts, True)
        if run.once:
            return _once(run, collector, sink, ids)
        _loop(run, collector, sink)
    finally:
        collector.close()
    return 0


def _loop(run: CollectorRun, collector: ZkCollector, sink: RecordSink) -> None:
    rereads = Periodic(run, "re-reading ZooKeeper", collector.interval, _HINT,
                       first_in=collector.interval)
    while not run.stop.is_set():
        try:
            kind, item = collector.inbox.get(timeout=0.2)
            collector.handle(kind, item, sink)
        except queue.Empty:
            pass
        sink.poll(0)
        connected = collector.client is not None and collector.client.connected
        if connected and (collector.away or rereads.is_due(time.monotonic())):
            collector.away = False  # after a failure, the backoff says when to retry
            rereads.attempt(collector.resync)


def _once(run: CollectorRun, collector: ZkCollector, sink: RecordSink,
          ids: list[int]) -> int:
    assert collector.notifications is not None and collector.cluster_id is not None
    pending = collector.notifications.pending()
    for broker in ids:
        collector.send(sink, change_event(collector.cluster_id, Change(REGISTERED, broker),
                                          "zookeeper"))
    for notification in pending:
        collector.send(sink, notification_event(collector.cluster_id, notification))
    if sink.flush(30.0):
        raise CollectError("the bus did not take every event; see the errors above")
    return 0
