"""`selfheal collect snapshots`: full cluster snapshots -> selfheal.cluster-snapshots.

A snapshot is taken every ``interval`` seconds, and at once when something changed:

* an event on selfheal.logdir-events (from the ZooKeeper collector, or anyone else) for
  this cluster; events closer together than ``[collect] event_coalesce_seconds`` make
  one snapshot;
* its own probe, every ``probe_interval`` seconds: DescribeCluster plus DescribeLogDirs
  with an empty topic selection (kafka-python sends an empty array, so each broker
  answers with its dirs and their errors, no partitions), which is cheap enough to run
  every two seconds and catches a failed dir where no ZooKeeper tells anyone (KRaft).

In KRaft mode the collector also emits the events itself: log_dir_failure (source
describe_log_dirs) for each dir that went offline since the last look, and
broker_registered/deregistered (source metadata) as brokers join and leave.

Events are read with a plain assignment of every partition from the high watermark at
start-up: no consumer-group join to wait for and no offsets to commit, because every
start begins with a full snapshot anyway. The collector skips its own events (the
``selfheal-origin`` header), which would only echo a snapshot it just took.
"""

from __future__ import annotations

import contextlib
import functools
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from schemas import snapshot_chunks as chunking
from schemas.records import LogDirEvent
from schemas.registry import RecordError
from streams.collect.api_watch import ApiWatch
from streams.collect.coalesce import Coalescer
from streams.collect.events import DIR_FAILURE, ClusterView, change_event, view_changes
from streams.collect.placement_metrics import PlacementMetrics
from streams.collect.runner import CollectError, CollectorRun, Periodic
from streams.collect.sink import ORIGIN_HEADER, RecordSink, record_key

ASSIGN_TIMEOUT_SECONDS = 30.0
_HINT = "check that the brokers run and [cluster] bootstrap_servers is right"


class SnapshotCollector:
    """The admin connection, the placement memory and the last view of the cluster."""

    def __init__(self, run: CollectorRun) -> None:
        from core.live import PlacementMemory

        config = run.config
        self.run = run
        self.servers = config.require_bootstrap_servers()
        self.cluster_id = config.cluster.cluster_id
        self.kraft = config.cluster.mode == "kraft"
        self.timeout_ms = int(config.collect.request_timeout_seconds * 1000)
        self.security = config.cluster_security
        self.snapshot_topic = config.topic("cluster-snapshots")
        # An event's snapshot re-uses other brokers' dirs at most one interval old: the
        # interval's own snapshot describes every broker.
        self.reuse_seconds = config.collect.snapshot_interval_seconds
        self.event_topic = config.topic("logdir-events")
        self.memory = PlacementMemory()
        self.api_watch = ApiWatch(run.log)
        self.placement = PlacementMetrics(run.telemetry.registry)
        self.view: ClusterView | None = None
        self.sent_taken_at: str | None = None  # of the last full snapshot sent
        self._admin: Any = None
        self._stack = contextlib.ExitStack()

    def admin(self) -> Any:
        """The kafka-python admin client, opened on first use and after a failure."""
        from core.live import open_admin

        if self._admin is None:
            self._admin = self._stack.enter_context(open_admin(
                self.servers, client_id="selfheal-collect-snapshots",
                request_timeout_ms=self.timeout_ms, security=self.security))
        return self._admin

    def close_admin(self) -> None:
        self._admin = None
        with contextlib.suppress(Exception):
            self._stack.close()
        self._stack = contextlib.ExitStack()

    def snapshot(self, sink: RecordSink, reason: str, only: set[int] | None = None) -> bool:
        """Read, check and produce one snapshot; False if it broke the schema (it went to
        the dead-letter topic). Raises when the cluster cannot be read. ``only``: the
        brokers the trigger named; the others' dirs are re-used from the last read when
        still good (`core.live.read_snapshot`)."""
        import msgspec

        from core.live import read_snapshot
        from schemas.snapshot import SnapshotError, parse_snapshot

        started = time.monotonic()
        try:
            doc = read_snapshot(self.admin(), self.cluster_id, self.memory, only=only,
                                max_age=self.reuse_seconds)
        except Exception:
            self.close_admin()  # a fresh connection next time
            raise
        if self.memory.unanswered:
            # A registered broker did not answer DescribeLogDirs three times: its dirs in
            # this snapshot are the last known ones. The next read starts on a fresh
            # connection, in case the old one to that broker is what failed.
            self.close_admin()
            self.run.log("WARNING broker(s) " + ", ".join(map(str, sorted(
                self.memory.unanswered))) + " are registered but did not answer "
                "DescribeLogDirs: this snapshot carries their last known dirs; the next "
                "read reconnects")
        self.add_groups(doc)
        if only is None and self.api_watch.check(
                self.admin(), [b["id"] for b in doc["brokers"] if b["alive"]]):
            self.close_admin()  # the next read negotiates the brokers' current versions
        self.cluster_id = self.cluster_id or doc["cluster_id"]
        value = msgspec.json.encode(doc)
        try:
            snapshot = parse_snapshot(value)  # exactly what every reader will do with it
        except SnapshotError as exc:
            sink.dead_letter(value, exc, self.snapshot_topic, self.cluster_id)
            self.run.telemetry.failed("invalid_snapshot", time.monotonic() - started)
            return False
        try:
            chunks, manifest = chunking.split(doc, uuid.uuid4().hex,
                                              self.run.config.collect.snapshot_chunk_bytes)
        except chunking.ChunkError as exc:
            sink.dead_letter(value, exc, self.snapshot_topic, self.cluster_id)
            self.run.telemetry.failed("invalid_snapshot", time.monotonic() - started)
            return False
        # The chunks, then the manifest that makes them a snapshot: a stop half-way
        # leaves chunks no manifest names, which every reader ignores.
        for seq, chunk in enumerate(chunks):
            if not sink.send(self.snapshot_topic, chunk,
                             chunking.chunk_key(self.cluster_id, seq), self.run.stop):
                return False
        if not sink.send(self.snapshot_topic, manifest, self.cluster_id.encode(),
                         self.run.stop):
            return False
        self.sent_taken_at = doc["taken_at"]
        self.placement.update(snapshot)
        alive = {b["id"] for b in doc["brokers"] if b["alive"]}
        self.observe(sink, alive, {
            b["id"]: [d["path"] for d in b["log_dirs"] if not d["online"]]
            for b in doc["brokers"] if b["alive"]
        })
        seconds = time.monotonic() - started
        self.run.telemetry.succeeded(seconds)
        offline = len(self.view.offline) if self.view else 0
        self.run.log(f"snapshot ({reason}): {len(doc['brokers'])} brokers "
                     f"({len(alive)} alive), {len(doc['partitions'])} partitions, "
                     f"{offline} offline dirs, {len(doc.get('consumer_groups', []))} "
                     f"consumer groups, {len(value)} bytes in {len(chunks)} chunks, "
                     f"{seconds:.2f} s, "
                     f"{self.memory.last_described} of {len(doc['brokers'])} brokers' "
                     "dirs described")
        return True

    def delta(self, sink: RecordSink, brokers: set[int], reason: str) -> bool:
        """A failure's own evidence, small and at once: ``brokers``' dirs and partitions as
        a delta (schemas/snapshot_delta.py) ahead of the full snapshot. Keyed
        ``<cluster>/delta``: compaction keeps the cluster's manifest; the topic's one
        partition keeps the order."""
        import msgspec

        from core.live import read_snapshot
        from schemas.snapshot_delta import check_delta, make_delta

        started = time.monotonic()
        try:
            doc = read_snapshot(self.admin(), self.cluster_id, self.memory, only=brokers,
                                max_age=self.reuse_seconds)
        except Exception:
            self.close_admin()
            raise
        self.cluster_id = self.cluster_id or doc["cluster_id"]
        known = brokers & {b["id"] for b in doc["brokers"]}
        if not known:
            return False
        value = msgspec.json.encode(make_delta(doc, known, self.sent_taken_at, reason))
        try:
            check_delta(value)  # exactly what the job will do with it
        except RecordError as exc:
            sink.dead_letter(value, exc, self.snapshot_topic, self.cluster_id)
            return False
        if not sink.send(self.snapshot_topic, value, f"{self.cluster_id}/delta".encode(),
                         self.run.stop):
            return False
        self.run.log(f"delta ({reason}): broker(s) {', '.join(map(str, sorted(known)))}, "
                     f"{len(value)} bytes, {time.monotonic() - started:.2f} s")
        return True

    def add_groups(self, doc: dict[str, Any]) -> None:
        """Every consumer group and the brokers' replica selectors, into ``doc``.
        A failure here costs the groups of this one snapshot, never the snapshot: the
        disks and partitions it carries are what the healing loop depends on."""
        from core.groups import add_groups
        from core.live import open_admin

        try:
            # A connection of its own, for this read only: group and config calls to a
            # broker that is restarting must leave nothing behind in the client that
            # reads the disks (a snapshot after such a failure reported a replaced disk
            # still offline).
            with open_admin(self.servers, client_id="selfheal-collect-groups",
                            request_timeout_ms=self.timeout_ms,
                            security=self.security) as admin:
                add_groups(admin, doc)
        except Exception as exc:
            self.run.telemetry.error("consumer_groups")
            self.run.log("WARNING this snapshot has no consumer groups: ListGroups/"
                         "DescribeGroups/ConsumerGroupDescribe/DescribeConfigs failed "
                         f"({type(exc).__name__}: {exc}); the next snapshot tries again")

    def probe(self, sink: RecordSink) -> set[int] | None:
        """Dir errors and membership only; the brokers where they differ from the last
        look (empty: nothing changed; None: the first look)."""
        from core.live import broker_dirs, per_broker

        started = time.monotonic()
        try:
            admin = self.admin()
            cluster = admin.describe_cluster()
        except Exception:
            self.close_admin()
            raise
        alive = {b["broker_id"] for b in cluster["brokers"] if not b.get("is_fenced", False)}

        def offline(broker: int) -> list[str] | None:
            try:
                (reply,) = admin.describe_log_dirs(topic_partitions={}, brokers=[broker])
            except Exception:
                return None  # down or unreachable: its dirs keep what was last seen
            return [path for path, info in broker_dirs(reply).dirs.items() if not info["online"]]

        replies = per_broker(offline, alive)
        answered = {b: dirs for b, dirs in replies.items() if dirs is not None}
        if len(answered) < len(replies):
            self.close_admin()  # the next look on a fresh connection (see `snapshot`)
        for broker, dirs in answered.items():
            self.memory.forget_if_changed(broker, dirs)
        before = self.view
        self.observe(sink, alive, answered)
        self.run.telemetry.succeeded(time.monotonic() - started)
        if before is None or self.view is None:
            return None
        return before.differs(self.view)

    def observe(self, sink: RecordSink, alive: Iterable[int],
                answered: Mapping[int, Iterable[str]]) -> bool:
        """Take a new look; in KRaft mode emit what changed. True if anything did."""
        before = self.view
        self.view = ClusterView.observe(before, alive, answered)
        if self.kraft and self.cluster_id is not None:
            for change in view_changes(before, self.view):
                source = "describe_log_dirs" if change.kind == DIR_FAILURE else "metadata"
                event = change_event(self.cluster_id, change, source)
                sink.send(self.event_topic, event.to_json(),
                          record_key(self.cluster_id, event.broker), self.run.stop)
                where = f" {change.log_dir}" if change.log_dir else ""
                self.run.log(f"{change.kind}: broker {change.broker}{where} ({source})")
        return before is not None and self.view != before

    def is_trigger(self, msg: Any, sink: RecordSink) -> tuple[str, int | None] | None:
        """Why this selfheal.logdir-events message should trigger a snapshot and the
        broker it names, or None."""
        if msg.error() is not None:
            return None
        if (ORIGIN_HEADER, sink.origin) in (msg.headers() or []):
            return None  # our own event: we took a snapshot when we emitted it
        try:
            event = LogDirEvent.from_json(msg.value())
        except RecordError as exc:
            self.run.telemetry.error("bad_event")
            self.run.log(f"WARNING ignoring a bad record at {msg.topic()}-{msg.partition()}"
                         f"@{msg.offset()}: {exc}")
            return None
        if self.cluster_id is not None and event.cluster_id != self.cluster_id:
            return None  # another cluster's event on a shared bus
        who = "?" if event.broker is None else str(event.broker)
        return f"{event.kind} broker {who} ({event.source})", event.broker

    def close(self) -> None:
        self.close_admin()


def _events_consumer(run: CollectorRun, topic: str) -> Any:
    """A consumer assigned every partition of ``topic`` at its current end (the collector
    may have created the topic a moment ago: `end_offsets` waits until it is readable)."""
    from core.bus import consumer, end_offsets

    events = consumer(run.config, f"selfheal-collect-snapshots-{time.time_ns()}",
                      **{"enable.auto.commit": False})
    try:
        events.assign(end_offsets(events, topic, ASSIGN_TIMEOUT_SECONDS))
    except BaseException:
        events.close()
        raise
    return events


class _EventReader:
    """The collector's reader of ``topic``, assigned at its end. One that stops fetching
    while events wait (`core.bus.StallWatch`) is replaced by a new one at the current end;
    `stalled` says so, and the caller takes a full snapshot for the events it skipped (the
    2 s log-dir probe would see most of what they said, later)."""

    def __init__(self, run: CollectorRun, topic: str) -> None:
        from core.bus import StallWatch

        self.run, self.topic = run, topic
        self.consumer = _events_consumer(run, topic)
        self._next = {tp.partition: tp.offset for tp in self.consumer.assignment()}
        # asked inside the collector's loop: at most 1 s a partition, so an away bus
        # holds the probe back little
        self._watch = StallWatch(topic, sorted(self._next), ask_s=1.0)

    def consume(self, timeout: float) -> list[Any]:
        batch: list[Any] = self.consumer.consume(num_messages=100, timeout=timeout)
        for msg in batch:
            if msg.error() is None:
                self._next[msg.partition()] = msg.offset() + 1
                self._watch.read()
        return batch

    def stalled(self) -> str | None:
        """Why the reader was just replaced, or None."""
        stall = self._watch.check(self.consumer, self._next.__getitem__)
        if stall is None:
            return None
        why = f"the event reader stopped fetching ({stall}; librdkafka #5153)"
        try:
            fresh = _events_consumer(self.run, self.topic)
        except Exception as exc:  # the bus went away since it answered: keep the old one
            return f"{why}; no new reader yet ({exc}), asking again once the log grows"
        self.consumer.close()
        self.consumer = fresh
        self._next = {tp.partition: tp.offset for tp in fresh.assignment()}
        return f"{why}; replaced by a reader at the end, with a full snapshot"

    def close(self) -> None:
        self.consumer.close()


def run_snapshots(run: CollectorRun, interval: float, probe_interval: float) -> int:
    """The command's body; 0 after a clean stop (or a good ``--once``)."""
    collector = SnapshotCollector(run)
    sink = run.open_sink()
    if sink is None:
        return 0
    events = None
    try:
        if run.once:
            produced = run.retry(f"reading the cluster at {collector.servers}",
                                 lambda: collector.snapshot(sink, "once"), _HINT)
            if sink.flush(30.0) or not produced:
                raise CollectError("no snapshot reached the bus; see the errors above")
            return 0
        events = run.retry(f"reading {collector.event_topic} on the bus",
                           lambda: _EventReader(run, collector.event_topic),
                           "check that the bus runs")
        if events is None:
            return 0
        mode = "KRaft: emitting log-dir events too" if collector.kraft else "ZooKeeper"
        run.log(f"snapshots of {collector.servers} every {interval:g} s, probe every "
                f"{probe_interval:g} s, and on {collector.event_topic} events ({mode})")
        _loop(run, collector, sink, events, interval, probe_interval)
    finally:
        if events is not None:
            events.close()
        collector.close()
    return 0


def _loop(run: CollectorRun, collector: SnapshotCollector, sink: RecordSink,
          events: _EventReader, interval: float, probe_interval: float) -> None:
    coalescer = Coalescer(run.config.collect.event_coalesce_seconds)
    snapshots = Periodic(run, "snapshot", interval, _HINT)
    probes = Periodic(run, "log-dir probe", probe_interval, _HINT, first_in=probe_interval)
    first = True
    while not run.stop.is_set():
        now = time.monotonic()
        if coalescer.due(now) or snapshots.is_due(now):
            only = None
            if coalescer.due(now):
                only = None if first else coalescer.about()
                reason = coalescer.take()
            else:
                reason = "start-up" if first else "interval"
            first = False
            snapshots.attempt(functools.partial(collector.snapshot, sink, reason, only))
        if probes.is_due(now):
            _ok, changed = probes.attempt(lambda: collector.probe(sink))
            if changed:
                # The failure's own evidence first; the full snapshot follows at once.
                snapshots.attempt(functools.partial(collector.delta, sink, set(changed),
                                                    "the probe saw a change"))
                coalescer.note(time.monotonic(), "the probe saw a change", wait=False,
                               brokers=changed)
        wake = min(snapshots.due, probes.due, coalescer.due_at or float("inf"))
        for msg in events.consume(timeout=min(0.5, max(0.0, wake - time.monotonic()))):
            trigger = collector.is_trigger(msg, sink)
            if trigger is not None:
                why, broker = trigger
                if not first:
                    probes.due = time.monotonic()  # which brokers changed: their delta
                coalescer.note(time.monotonic(), why,
                               brokers=None if broker is None else [broker])
        if (replaced := events.stalled()) is not None:
            run.log(replaced)
            coalescer.note(time.monotonic(), "events may have been skipped", wait=False)
        sink.poll(0)
