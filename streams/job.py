"""The Spark Structured Streaming job behind `selfheal stream`.

    Kafka source (broker-metrics, logdir-events, cluster-snapshots)
      -> in the JVM, drop certainly-valid partition-size samples (streams/prescreen.py)
      -> mapInPandas: decode, validate with Great Expectations, keep what detection
         reads (streams/signals.py); bad records become dead letters here
      -> event-time watermark; groupBy(cluster) -> applyInPandasWithState on the RocksDB
         state store: the detector (streams/stateful.py, streams/detect.py)
      -> foreachBatch on the driver: plan (streams/propose.py), produce actions and dead
         letters, count (streams/metrics.py)

One query, so one checkpoint holds the Kafka offsets and the detector's state together:
a restart resumes both, and a replayed batch re-derives the same decisions from the same
state, hence the same action ids. The planners run on the driver: they need the whole
cluster model, which only the decisions that need it read back from the bus.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from core import clock
from core.config import Config
from streams.detect_types import Decision, DetectSettings
from streams.metrics import BatchOutput, StreamMetrics, progress_listener
from streams.propose import Proposer, describe
from streams.stateful import DEAD_LETTER, DECISION, NOTE, OUTCOME_DDL, STATE_DDL

INPUT_TOPICS = {"broker-metrics": "broker-metric", "logdir-events": "logdir-event",
                "cluster-snapshots": "cluster-snapshot"}
QUERY_NAME = "selfheal-detect"
PRESCREEN = "prescreen"  # the observed metrics of the fast path
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

Say = Callable[[str], None]


class JobError(RuntimeError):
    """The job cannot run here; the message says what to fix."""


@dataclass(frozen=True)
class JobOptions:
    """How to run the job; the defaults come from the `[stream]` config section."""

    checkpoint: Path
    trigger_seconds: float
    available_now: bool = False
    starting_offsets: str = "latest"
    master: str | None = None
    metrics_port: int = 0

    @classmethod
    def from_config(cls, config: Config, **overrides: Any) -> JobOptions:
        stream = config.stream
        values: dict[str, Any] = {
            "checkpoint": stream.checkpoint_dir / "detect",
            "trigger_seconds": stream.trigger_interval_seconds,
            "starting_offsets": stream.starting_offsets,
            "metrics_port": stream.metrics_http_port,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def spark_conf(config: Config, master: str | None) -> dict[str, str]:
    """The session settings the job needs on top of streams.spark's."""
    conf = {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        # Commit only the changes of each batch, not a full RocksDB checkpoint.
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.shuffle.partitions": str(config.stream.state_partitions),
        # The detector has no timeouts: a batch without data would only cost time.
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.ui.showConsoleProgress": "false",  # the job prints its own line per batch
    }
    if (master or os.environ.get("SELFHEAL_SPARK_MASTER", "local")).startswith("local") \
            and not submitted():
        # Python workers must be this interpreter (pandas, pyarrow, GX, this package);
        # on a cluster, spark-submit's PYSPARK_PYTHON says which.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return conf


class BatchSink:
    """The foreachBatch body: decisions become actions; actions and dead letters go to
    the bus; a failed delivery fails the batch, which Spark then runs again."""

    def __init__(self, config: Config, metrics: StreamMetrics, say: Say) -> None:
        from core.bus import producer
        from core.signing import signer
        from streams.snapshot_reader import SnapshotReader

        self.config = config
        self.metrics = metrics
        self.say = say
        self.reader = SnapshotReader(config)
        self.proposer = Proposer(self.reader, config.detect.disk_skew_threshold)
        self.producer = producer(config)
        self.signer = signer(config)
        self.actions_topic = config.topic("actions")
        self.dead_letter_topic = config.topic("dead-letter")

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = frame.collect()
        output = BatchOutput()
        errors: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(f"{msg.topic()}: {err}")

        for row in rows:
            if row.kind == DEAD_LETTER:
                letter = json.loads(row.body)
                self.producer.produce(self.dead_letter_topic, row.body.encode("utf-8"),
                                      letter["source_topic"].encode("utf-8"),
                                      on_delivery=delivered)
                self.metrics.dead_letters.labels(letter["source_topic"]).inc()
                output.dead_letters += 1
            elif row.kind == NOTE:
                self.say(f"note ({row.cluster_id}): {row.body}")
                self.metrics.notes.inc()
                output.notes += 1
        for row in rows:
            if row.kind != DECISION:
                continue
            decision = Decision.from_json(row.body)
            actions = self.proposer.actions(decision)
            if not actions:
                self.say(f"{decision.type} ({decision.cluster_id}): {decision.reason}; the "
                         "planner found nothing to do")
            for action in map(self.signer.sign_action, actions):
                self.producer.produce(self.actions_topic, action.to_json(), action.key(),
                                      on_delivery=delivered)
                latency = (clock.epoch_seconds(action.created_at)
                           - clock.epoch_seconds(action.event_time))
                self.metrics.actions.labels(action.type).inc()
                self.metrics.latency.labels(action.type).observe(max(latency, 0.0))
                output.actions[action.type] += 1
                self.say(f"action {describe(action)}")
        left = self.producer.flush(30.0)
        if errors or left:
            raise RuntimeError(f"batch {batch_id}: {len(errors) + left} record(s) not "
                               f"delivered to the bus ({'; '.join(errors[:3]) or 'timeout'})")
        self.metrics.batch_written(batch_id, output)

    def close(self) -> None:
        self.producer.flush(10.0)
        self.reader.close()


def _warm(frames: Any) -> Any:
    import pandas as pd

    from streams.validate import suites

    suites()  # imports GX and builds the suites in this Python worker
    for _ in frames:
        pass
    yield pd.DataFrame({"ready": [True]})


def warm_up(spark: Any) -> None:
    """Start the Python workers with GX loaded before the query does (the first batch
    would otherwise take seconds more), and fail here, plainly, if the executors'
    Python lacks what the job needs."""
    tasks = max(1, spark.sparkContext.defaultParallelism)
    try:
        spark.range(tasks, numPartitions=tasks).mapInPandas(_warm, "ready BOOLEAN").collect()
    except Exception as exc:
        raise JobError(
            "the Spark executors cannot run the job's Python code (they need this package "
            "with pandas, pyarrow and great-expectations; set PYSPARK_PYTHON to a Python "
            f"that has them): {str(exc).splitlines()[0]}") from exc


def build_query(spark: Any, config: Config, options: JobOptions, sink: BatchSink) -> Any:
    """Define and start the streaming query."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    from streams.facts import FactLimits
    from streams.prescreen import fast_path
    from streams.signals import SIGNAL_DDL, to_signals
    from streams.stateful import detect_group

    topics = {config.topic(name): schema for name, schema in INPUT_TOPICS.items()}
    stream = config.stream

    def read(name: str, limit: int | None = None) -> Any:
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", config.bus.bootstrap_servers)
            .option("subscribe", config.topic(name))
            .option("startingOffsets", options.starting_offsets)
            # The 500 ms default made every batch wait about a second for its last fetch.
            .option("kafka.fetch.max.wait.ms", "10")
        )
        if limit is not None:
            reader = reader.option("maxOffsetsPerTrigger", str(limit))
        return reader.load().select("topic", "partition", "offset", "timestamp", "value")

    # One source per topic, so each has its own limit: a backlog of metrics never holds
    # back a log-dir event (a shared limit is split by lag, one record per partition).
    metrics = (
        read("broker-metrics", stream.max_offsets_per_trigger)
        # Certainly-valid partition-size samples stop here, in the JVM: they are nearly
        # all the input and detection does not read them (streams/prescreen.py).
        .withColumn("fast", fast_path(config.topic("broker-metrics")))
        .observe(PRESCREEN, F.count(F.lit(1)).alias("rows"),
                 F.sum(F.col("fast").cast("long")).alias("fast"))
        .where(~F.col("fast"))
        .drop("fast")
    )
    source = metrics.unionByName(read("logdir-events")).unionByName(
        read("cluster-snapshots", stream.max_snapshots_per_trigger))
    # Not one validating task per topic partition: each GX run has a fixed cost, so
    # fewer, bigger frames are cheaper.
    tasks = stream.validate_tasks or spark.sparkContext.defaultParallelism
    signals = (
        source.coalesce(max(1, tasks))
        .mapInPandas(partial(to_signals, schemas=topics,
                             limits=FactLimits.from_config(config.detect)), SIGNAL_DDL)
        .withWatermark("event_ts", f"{stream.watermark_delay_seconds} seconds")
    )
    outcomes = signals.groupBy("key").applyInPandasWithState(
        detect_group(DetectSettings.from_config(config.detect)), OUTCOME_DDL, STATE_DDL,
        "append", GroupStateTimeout.NoTimeout)
    writer = (outcomes.writeStream.queryName(QUERY_NAME).foreachBatch(sink)
              .option("checkpointLocation", str(options.checkpoint)))
    if options.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{options.trigger_seconds} seconds")
    return writer.start()


def run(config: Config, options: JobOptions, say: Say | None = None) -> int:
    """Run the job until SIGTERM or Ctrl-C (or, with ``available_now``, until it has read
    what is there); then stop the query and the driver JVM. 0 on a clean stop, 1 when
    the query failed."""
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
        except ConfigError as exc:
            raise JobError(str(exc)) from None
        port = metrics.serve(config.stream.http_host, options.metrics_port)
        say(f"metrics on http://{config.stream.http_host}:{port}/metrics")
        spark = _session(config, options)
        spark.sparkContext.setLogLevel("ERROR")
        warm_up(spark)
        spark.streams.addListener(progress_listener(metrics, say, PRESCREEN))
        sink = BatchSink(config, metrics, say)
        query = build_query(spark, config, options, sink)
        say(f"running: query {query.id}, checkpoint {options.checkpoint}, "
            + ("available-now" if options.available_now
               else f"trigger every {options.trigger_seconds:g} s"))
        while not stop.is_set() and query.isActive:
            query.awaitTermination(0.5)
        failed = query.exception()
        if failed is not None:
            # The first lines say what broke; Spark logged the whole trace above.
            say("the query failed: " + " | ".join(str(failed).strip().splitlines()[:3]))
            return 1
        return 0
    finally:
        if query is not None and query.isActive:
            say("stopping the query")
            _between_batches(query)
            query.stop()
        if sink is not None:
            sink.close()
        if spark is not None:
            spark_session.stop(spark)
        metrics.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        say("stopped")


STOP_WAIT_SECONDS = 30.0


def _between_batches(query: Any, timeout: float = STOP_WAIT_SECONDS) -> None:
    """Wait (bounded) until no micro-batch is running. Stopping interrupts the batch in
    flight, and Spark then matches the Python error's whole text against a regex that
    overflows the JVM stack on long texts: the stream thread died with a
    StackOverflowError instead of stopping. Nothing is lost either way (the checkpoint
    re-runs an unfinished batch); this keeps the stop clean."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if not query.status.get("isTriggerActive", False):
                return
        except Exception:  # the query ended meanwhile: nothing to wait for
            return
        time.sleep(0.05)


def submitted() -> bool:
    """True under spark-submit, which starts the JVM and hands this process its gateway."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _session(config: Config, options: JobOptions) -> Any:
    """The session: under spark-submit, with the master, jars and Python that
    spark-submit was given; else streams.spark's (local, the connector it finds)."""
    if submitted() and options.master is None:
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName("selfheal-stream")
        for key, value in spark_conf(config, "submitted").items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    from streams import spark as spark_session

    return spark_session.session("selfheal-stream", master=options.master,
                                 extra_conf=spark_conf(config, options.master))


def _print(line: str) -> None:
    print(f"[stream] {line}", flush=True)


if __name__ == "__main__":
    # spark-submit [options] streams/job.py [selfheal stream options]
    from streams.cli import main

    sys.exit(main(sys.argv[1:]))
