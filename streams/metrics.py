"""The job's driver-side metrics (prometheus-client) and its one line per micro-batch.

Spark reports each finished micro-batch to a `StreamingQueryListener` (input rows and
rate, batch duration, rows the watermark dropped); the batch sink reports what it wrote
(actions by type, dead letters by source topic, detection latency) and how many rows
reached it. The listener joins the two by batch id into the progress line; the rows the
JVM's prescreen dropped are the difference. Not Spark's observed metrics: a progress
event that carries them costs the driver JVM a class lookup through py4j that searched
every jar, about a quarter of an idle batch's samples (docs/streaming.md).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LATENCY_BUCKETS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 20.0, 30.0, 60.0,
                   120.0, 300.0, 600.0)
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)
# A batch at least this long says where its time went (a quiet batch takes 1-2.5 s).
SLOW_BATCH_S = 5.0
# Spark's durationMs entry for the whole batch; every other entry is one phase of it.
WHOLE_BATCH = "triggerExecution"


@dataclass
class BatchOutput:
    """What the sink wrote for one micro-batch; ``phases``: the sink's own seconds by
    step (rows: computing the batch's rows, plan: the proposer with its snapshot
    read-back, send: the bus's acknowledgements); ``read``: the rows the sink collected,
    those the JVM's prescreen left (None: no report from the sink)."""

    actions: Counter[str] = field(default_factory=Counter)
    dead_letters: int = 0
    notes: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    read: int | None = None

    def fast(self, input_rows: int) -> int:
        """Of the batch's ``input_rows``, those the prescreen dropped in the JVM (the
        fast path): every row it left reaches the sink."""
        return max(0, input_rows - self.read) if self.read is not None else 0


class StreamMetrics:
    """Every metric of the job, on its own registry (two jobs in one process never clash)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.input_rows = Counter("selfheal_stream_input_rows",
                                  "Records read from the input topics", registry=r)
        self.input_rate = Gauge("selfheal_stream_input_rows_per_second",
                                "Input rate of the last micro-batch", registry=r)
        self.processed_rate = Gauge("selfheal_stream_processed_rows_per_second",
                                    "Rows per second of processing in the last micro-batch",
                                    registry=r)
        self.batch_duration = Histogram("selfheal_stream_batch_duration_seconds",
                                        "Micro-batch duration", buckets=DURATION_BUCKETS,
                                        registry=r)
        self.batch_phases = Counter("selfheal_stream_batch_phase_seconds",
                                    "Micro-batch seconds by Spark phase (latestOffset: "
                                    "asking the bus for its end offsets; addBatch: the "
                                    "batch itself; ...)", ["phase"], registry=r)
        self.actions = Counter("selfheal_stream_actions", "Actions proposed, by type",
                               ["type"], registry=r)
        self.dead_letters = Counter("selfheal_stream_dead_letters",
                                    "Records sent to the dead-letter topic, by source topic",
                                    ["topic"], registry=r)
        self.latency = Histogram("selfheal_stream_detection_latency_seconds",
                                 "Action creation time minus the event time of its trigger",
                                 ["type"], buckets=LATENCY_BUCKETS, registry=r)
        self.dropped_late = Counter("selfheal_stream_rows_dropped_by_watermark",
                                    "Rows a stateful operator dropped as late (expected 0)",
                                    registry=r)
        self.state_rows = Gauge("selfheal_stream_state_rows",
                                "Keys in the detector's state store", registry=r)
        self.fast_rows = Counter("selfheal_stream_fast_path_rows",
                                 "Valid partition-size samples dropped in the JVM, unread "
                                 "by detection (streams/prescreen.py)", registry=r)
        self.notes = Counter("selfheal_stream_notes",
                             "Things the operator should read that are not actions",
                             registry=r)
        self.query_restarts = Counter("selfheal_stream_query_restarts",
                                      "Times the job started its failed query again from "
                                      "the checkpoint (streams/job.py Restarts)", registry=r)
        self._server: Any = None
        self._pending: dict[int, BatchOutput] = {}
        self._lock = threading.Lock()

    def serve(self, host: str, port: int) -> int:
        """Serve /metrics over HTTP; returns the port (0 picks a free one)."""
        from prometheus_client import start_http_server

        self._server, _ = start_http_server(port, addr=host, registry=self.registry)
        return int(self._server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def batch_written(self, batch_id: int, output: BatchOutput) -> None:
        """The sink's report for one micro-batch."""
        with self._lock:
            self._pending[batch_id] = output

    def batch_output(self, batch_id: int) -> BatchOutput:
        with self._lock:
            return self._pending.pop(batch_id, BatchOutput())


def progress_line(batch_id: int, rows: int, seconds: float, output: BatchOutput,
                  fast: int = 0, spark_ms: dict[str, int] | None = None) -> str:
    """``batch 12: 4210 rows (4100 on the fast path), 1 action (fix_offline_replicas),
    0 dead letters, 0.84 s``; a batch of `SLOW_BATCH_S` or more adds where its time
    went: Spark's phases (``spark_ms``, the progress's durationMs) over 0.1 s, longest
    first, with the sink's own steps inside addBatch."""
    count = sum(output.actions.values())
    kinds = ", ".join(f"{n} {t}" if n > 1 else t for t, n in sorted(output.actions.items()))
    actions = f"{count} action{'s' if count != 1 else ''}" + (f" ({kinds})" if kinds else "")
    letters = f"{output.dead_letters} dead letter{'s' if output.dead_letters != 1 else ''}"
    read = f"{rows} rows" + (f" ({fast} on the fast path)" if fast else "")
    line = f"batch {batch_id}: {read}, {actions}, {letters}, {seconds:.2f} s"
    if seconds < SLOW_BATCH_S:
        return line
    return f"{line}; slow, where it went: {_phases(spark_ms or {}, output.phases)}"


def _phases(spark_ms: dict[str, int], sink: dict[str, float]) -> str:
    steps = sorted(((name, ms / 1000) for name, ms in spark_ms.items()
                    if name != WHOLE_BATCH and ms >= 100),
                   key=lambda step: -step[1])
    inside = ", ".join(f"{name} {s:.2f}" for name, s in sink.items())
    parts = [f"{name} {s:.2f} s" + (f" ({inside})" if name == "addBatch" and inside else "")
             for name, s in steps]
    if inside and "addBatch" not in dict(steps):
        parts.append(f"the sink: {inside}")
    return ", ".join(parts) or "no phase over 0.1 s"


def query_listener(on_progress: Callable[[dict[str, Any]], None],
                   on_terminated: Callable[[Any], None] | None = None) -> Any:
    """A `StreamingQueryListener` that hands each batch's progress, as Spark's own JSON of
    it (`StreamingQueryProgress.json`, decoded), to ``on_progress`` and a stopped query's
    event to ``on_terminated``.

    One py4j call a batch: pyspark's listener reads the progress field by field, each a
    call from Python into the driver JVM answered on the listener bus's thread, about 80
    for one batch of three sources (docs/streaming.md). Spark leaves a rate that is not a
    number out of the JSON."""
    from pyspark import SparkContext
    from pyspark.sql.streaming.listener import JStreamingQueryListener, StreamingQueryListener

    class Events(JStreamingQueryListener):  # type: ignore[misc]
        def onQueryStarted(self, jevent: Any) -> None:
            pass  # unread: not converted

        def onQueryProgress(self, jevent: Any) -> None:
            on_progress(json.loads(jevent.progress().json()))

        def onQueryIdle(self, jevent: Any) -> None:
            pass  # every 10 s while no data arrives; unread

    class Listener(StreamingQueryListener):  # type: ignore[misc]
        @property
        def _jlistener(self) -> Any:  # pyspark's, with `Events` in place of its own
            if not hasattr(self, "_jlistenerobj"):
                jvm: Any = SparkContext._jvm
                self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(Events(self))
            return self._jlistenerobj

        def onQueryStarted(self, event: Any) -> None:
            pass  # `Events` calls none of these three

        def onQueryProgress(self, event: Any) -> None:
            pass

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            if on_terminated is not None:
                on_terminated(event)

    return Listener()


def batch_done(metrics: StreamMetrics, say: Callable[[str], None],
               progress: dict[str, Any]) -> None:
    """One batch's Spark progress (its JSON) into ``metrics``, joined with the sink's
    report of it, and its line said."""
    rows = int(progress.get("numInputRows") or 0)
    metrics.input_rows.inc(rows)
    metrics.input_rate.set(progress.get("inputRowsPerSecond") or 0.0)
    metrics.processed_rate.set(progress.get("processedRowsPerSecond") or 0.0)
    seconds = (progress.get("batchDuration") or 0) / 1000
    metrics.batch_duration.observe(seconds)
    spark_ms = {name: int(ms) for name, ms in (progress.get("durationMs") or {}).items()}
    for phase, ms in spark_ms.items():
        if phase != WHOLE_BATCH:
            metrics.batch_phases.labels(phase).inc(ms / 1000)
    for op in progress.get("stateOperators") or ():
        metrics.dropped_late.inc(op.get("numRowsDroppedByWatermark") or 0)
        metrics.state_rows.set(op.get("numRowsTotal") or 0)
    output = metrics.batch_output(int(progress["batchId"]))
    fast = output.fast(rows)
    metrics.fast_rows.inc(fast)
    say(progress_line(int(progress["batchId"]), rows, seconds, output, fast, spark_ms))


def progress_listener(metrics: StreamMetrics, say: Callable[[str], None]) -> Any:
    """A `StreamingQueryListener` that updates ``metrics`` and says one line per batch."""

    def terminated(event: Any) -> None:
        if event.exception:
            say(f"query stopped with an error: {event.exception.splitlines()[0]}")

    return query_listener(lambda progress: batch_done(metrics, say, progress), terminated)
