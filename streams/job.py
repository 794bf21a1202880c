"""The Spark Structured Streaming job behind `selfheal stream`.

    Kafka source (broker-metrics, logdir-events, cluster-snapshots)
      -> in the JVM, drop certainly-valid partition-size samples (streams/prescreen.py)
      -> foreachBatch on the driver (streams/sink.py), one collect a batch:
         decode, validate with Great Expectations, keep what detection reads
         (streams/signals.py; bad records become dead letters here);
         the detector per cluster (streams/stateful.py, streams/detect.py) from the state
         the batch before left in the checkpoint (streams/batch_state.py);
         plan (streams/propose.py), sign and produce actions and dead letters, count
         (streams/metrics.py)

The query is defined in streams/query.py; this module is the job's lifecycle: session,
start, the stop between batches, the exit code.

One query, one checkpoint: Spark's offset and commit logs, and the detector's state
per batch beside them, so a restart resumes both, and a replayed batch re-derives the
same decisions from the same state, hence the same action ids. Everything after the
JVM's prescreen runs on the driver: what reaches Python is small (gauges, events,
snapshots), and each Spark stage or Python worker a batch needs costs it time however
few rows it has (docs/streaming.md).
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import sys
import threading
import time
from typing import Any

from core.config import Config
from streams.metrics import StreamMetrics, progress_listener
from streams.query import INPUT_TOPICS, JobError, JobOptions, Say, build_query
from streams.sink import BatchSink


def spark_conf() -> dict[str, str]:
    """The session settings the job needs on top of streams.spark's."""
    return {
        # A batch without data would only cost time (the query has no stateful operator,
        # so Spark would run none anyway; said here so that none is ever added unnoticed).
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.ui.showConsoleProgress": "false",  # the job prints its own line per batch
        **LOCAL_CHECKPOINT,
    }


# Spark's offset and commit logs through Hadoop's FileSystem on the raw local file system.
# Its default, FileContext over the checksummed local file system, wrote each log file
# with a .crc beside it and, without Hadoop's native library, forked two `chmod` and eight
# `readlink` for each: 20 processes a batch, ~80 ms of CPU (docs/streaming.md). The
# checkpoint is a local folder (the detector's state is written there by Python,
# streams/batch_state.py), where a rename is atomic, which is what Spark asks of the
# FileSystem manager. Given up:
# the checksums, and a rename that refuses to replace (this manager checks that the file
# is absent, then renames): a second job writing the same checkpoint at the same instant
# was refused, now only short of that instant; one job per checkpoint is the rule anyway
# (its detector state is the job's own).
LOCAL_CHECKPOINT = {
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileSystemBasedCheckpointFileManager",
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
}


def run(config: Config, options: JobOptions, say: Say | None = None) -> int:
    """Run the job until SIGTERM or Ctrl-C (or, with ``available_now``, until it has read
    what is there); then stop the query and the driver JVM. 0 on a clean stop, 1 when
    the query failed and its restarts (`Restarts`) ran out."""
    from core.bus import ensure_topics
    from core.config import ConfigError
    from core.signing import signer
    from streams import spark as spark_session

    say = say or _print
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGTERM,
                                                                       signal.SIGINT)}
    metrics = StreamMetrics()
    spark = sink = query = None
    try:
        created = ensure_topics(config)
        if created:
            say(f"created topics: {', '.join(created)}")
        try:
            signer(config)  # before Spark starts: every action the job writes is signed
            options = _own_checkpoint(config, options, say)
        except ConfigError as exc:
            raise JobError(str(exc)) from None
        port = metrics.serve(config.stream.http_host, options.metrics_port)
        say(f"metrics on http://{config.stream.http_host}:{port}/metrics")
        spark = _session(config, options)
        spark.sparkContext.setLogLevel("ERROR")
        spark.streams.addListener(progress_listener(metrics, say))
        sink = BatchSink(config, metrics, say, options.checkpoint)
        restarts = Restarts(config.stream.query_restarts)
        while True:
            query = _start(spark, config, options, sink)
            started = time.monotonic()
            say(f"running: query {query.id}, checkpoint {options.checkpoint}, "
                + ("available-now" if options.available_now
                   else f"trigger every {options.trigger_seconds:g} s"))
            failed = await_query(query, stop)
            if failed is DRIVER_GONE:
                say("the Spark driver stopped with the signal; the checkpoint re-runs any "
                    "unfinished batch")
                query = None
                return 0
            if failed is None:
                return 0
            # Said while the driver is up: the failure's text is read through the JVM.
            reason = spark_reason(failed)
            delay = None if stop.is_set() else restarts.next_delay(time.monotonic() - started)
            if delay is None:
                say(f"the query failed: {reason}" + (
                    f" ({restarts.limit} restarts in a row did not help: see the Spark log "
                    "above for the cause)" if restarts.limit and not stop.is_set() else ""))
                return 1
            metrics.query_restarts.inc()
            say(f"the query failed: {reason}; it starts again from its checkpoint in "
                f"{delay:g} s, once the bus answers (restart {restarts.done} of "
                f"{restarts.limit} in a row)")
            if stop.wait(delay) or not wait_for_bus(config, stop, say):
                return 0
    finally:
        try:
            if query is not None and query.isActive:
                say("stopping the query")
                if sink is not None:
                    sink.gate.stop(query)  # at the end of a batch body (streams/stopping.py)
                else:
                    query.stop()
        except Exception as exc:
            if not stop.is_set():
                raise
            say(f"the Spark driver was gone before the query stopped ({type(exc).__name__}); "
                "the checkpoint re-runs any unfinished batch")
        if sink is not None:
            sink.close()
        if spark is not None:
            try:
                spark_session.stop(spark)
            except Exception:
                if not stop.is_set():
                    raise
        metrics.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        say("stopped")


def _start(spark: Any, config: Config, options: JobOptions, sink: BatchSink) -> Any:
    """Start the query; a start Spark refuses is a JobError that says what to do."""
    from pyspark.errors import PySparkException

    try:
        query = build_query(spark, config, options, sink)
    except PySparkException as exc:  # its text comes through the JVM: read it now
        reason = spark_reason(exc).rstrip(".")
        raise JobError(
            f"the query could not start: {reason}. If that names the checkpoint "
            f"{options.checkpoint}, move it away: a new checkpoint starts from the "
            "cluster's latest snapshot"
        ) from None
    sink.gate.query = query
    return query


RESTART_FIRST_DELAY_S = 5.0
RESTART_MAX_DELAY_S = 60.0
RESTART_RESET_AFTER_S = 600.0  # a query that ran this long was healthy: count afresh


@dataclasses.dataclass
class Restarts:
    """When a failed query starts again: at most ``limit`` restarts in a row, 5 s after
    the failure and doubling up to a minute; a query that ran 10 minutes resets the count.

    Why: the executors read the bus with the Kafka consumer's own timeouts, and Spark in
    local mode retries no failed task, so a bus outage in mid-batch fails the query (a
    fetch's "position could not be determined", or the sink's delivery timing out). Its
    checkpoint has the offsets and the detector's state of the last committed batch: a
    restart runs the failed batch again and proposes the same action ids. The job waits
    for the bus before each restart (`wait_for_bus`), so an outage uses up no restarts."""

    limit: int
    done: int = 0

    def next_delay(self, ran_seconds: float) -> float | None:
        """Seconds to wait before the next start, or None: no more restarts."""
        if ran_seconds >= RESTART_RESET_AFTER_S:
            self.done = 0
        if self.done >= self.limit:
            return None
        self.done += 1
        return min(RESTART_MAX_DELAY_S, RESTART_FIRST_DELAY_S * 2 ** (self.done - 1))


BUS_PROBE_TIMEOUT_S = 10.0
BUS_WAIT_SAY_EVERY_S = 30.0


def wait_for_bus(config: Config, stop: threading.Event, say: Say,
                 probe: Any = None) -> bool:
    """Wait until every partition of the job's input topics answers for its end offset,
    as the failed batch's fetches need to when it runs again; however long the bus is
    away (the collectors and serve wait for it too), saying so every 30 s. False when
    ``stop`` came first. ``probe`` (topic -> None, or raises BusError) stands in for
    the bus in unit tests."""
    from core.bus import BusError

    reader = None
    if probe is None:
        from core.bus import consumer, end_offsets

        reader = consumer(config, "selfheal-stream-bus-probe")

        def probe(topic: str) -> None:
            end_offsets(reader, topic, BUS_PROBE_TIMEOUT_S)

    topics = [config.topic(name) for name in INPUT_TOPICS]
    said = -BUS_WAIT_SAY_EVERY_S
    began = time.monotonic()
    try:
        while not stop.is_set():
            try:
                for topic in topics:
                    probe(topic)
                return True
            except BusError as exc:
                waited = time.monotonic() - began
                if waited - said >= BUS_WAIT_SAY_EVERY_S:
                    said = waited
                    say(f"waiting for the bus ({waited:.0f} s so far): {exc}")
            stop.wait(1.0)
        return False
    finally:
        if reader is not None:
            reader.close()


# What `await_query` answers when the driver went away under a stop signal.
DRIVER_GONE = RuntimeError("the Spark driver stopped with the signal")


def await_query(query: Any, stop: threading.Event) -> BaseException | None:
    """Wait until ``stop`` is set or the query ends; the query's failure, if it failed.

    `awaitTermination` raises the failure of a query that failed on its own. Under
    spark-submit the driver JVM shares our process group, so a signal to the group stops
    it under us: any error then, with ``stop`` set within a second, is `DRIVER_GONE`."""
    from pyspark.errors import StreamingQueryException

    try:
        while not stop.is_set() and query.isActive:
            query.awaitTermination(0.5)
        failed: BaseException | None = query.exception()
        return failed
    except Exception as exc:
        if stop.wait(1.0):
            return DRIVER_GONE
        if isinstance(exc, StreamingQueryException):
            return exc
        raise


_PYTHON_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Deferred)): (.+)$")


def spark_reason(error: BaseException) -> str:
    """A Spark failure's own lines, without the JVM stack trace pyspark appends (Spark
    logs the whole trace itself): at most three, joined by " | ". A failure of the batch
    body carries its Python traceback; then the reason is what the body raised."""
    text = str(error).split("JVM stacktrace:", 1)[0]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if "Traceback (most recent call last):" in text:
        raised = [m for line in lines if (m := _PYTHON_ERROR.match(line))]
        if raised:
            kind, message = raised[-1].groups()
            reason = f"the batch body raised {kind.rsplit('.', 1)[-1]}: {message.strip()}"
            causes = [line for line in lines if line.startswith("Caused by: ")]
            # A Spark job the body ran (its collect) failed: the JVM's root cause says why
            return f"{reason} ({causes[-1]})" if causes else reason
    return " | ".join(lines[:3]) or type(error).__name__


def _own_checkpoint(config: Config, options: JobOptions, say: Say) -> JobOptions:
    """The checkpoint of this cluster and bus (keyed, or a named one that records them),
    and, when it is fresh, where its snapshot source starts (streams/starting.py)."""
    from core.owner import claim_checkpoint, identify, keyed_checkpoint_root
    from streams.starting import is_fresh, snapshot_offsets

    owner = identify(config)
    if not options.checkpoint_given:
        options = dataclasses.replace(
            options, checkpoint=keyed_checkpoint_root(config, owner) / "detect")
    claim_checkpoint(options.checkpoint, owner)
    if options.starting_offsets == "latest" and is_fresh(options.checkpoint):
        start = snapshot_offsets(config, owner.cluster)
        say(f"new checkpoint: snapshots from {start} (the latest of cluster "
            f"{owner.cluster}), the other topics from their end")
        options = dataclasses.replace(options, snapshot_offsets=start)
    return options


def submitted() -> bool:
    """True under spark-submit, which starts the JVM and hands this process its gateway."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _session(config: Config, options: JobOptions) -> Any:
    """The session: under spark-submit, with the master, jars and Python that
    spark-submit was given; else streams.spark's (local, the connector it finds)."""
    if submitted() and options.master is None:
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName("selfheal-stream")
        for key, value in spark_conf().items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    from streams import spark as spark_session

    return spark_session.session("selfheal-stream", master=options.master,
                                 extra_conf=spark_conf())


def _print(line: str) -> None:
    # stamped like the collectors' lines, so a batch is placed against their events
    print(f"{time.strftime('%H:%M:%S')} [stream] {line}", flush=True)


if __name__ == "__main__":
    # spark-submit [options] streams/job.py [selfheal stream options]
    from streams.cli import main

    sys.exit(main(sys.argv[1:]))
