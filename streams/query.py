"""The job's streaming query: Kafka sources and the JVM prescreen, into the foreachBatch
sink (streams/sink.py), which decodes, validates and detects on the driver."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.config import Config

INPUT_TOPICS = {"broker-metrics": "broker-metric", "logdir-events": "logdir-event",
                "cluster-snapshots": "cluster-snapshot"}
QUERY_NAME = "selfheal-detect"
# What the sink collects of each row, projected here, once: built in the batch body, the
# same projection cost a py4j lookup of a class by its short name per column, each miss
# of which searched every jar on the driver's classpath.
SINK_COLUMNS = ("topic", "partition", "offset", "unix_millis(timestamp) AS ms", "value")
STATE_STORE = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"

Say = Callable[[str], None]

# How the driver asks the bus for its latest offsets each trigger (Spark's admin
# listOffsets). With the clients' defaults, a ListOffsets sent to a leader that had just
# died waited on it for a 30 s request timeout, twice, before the metadata named the new
# leader: a micro-batch stalled ~60 s after every broker death or failed dir under a bus
# partition (a thread dump showed the query thread in `listOffsets`). A short request
# timeout makes the admin look the leader up again within seconds; Spark retries a failed
# fetch on a fresh admin, so the job still rides out a bus outage of
# numRetries x (api timeout + interval), about 5 minutes, before it stops.
# The API timeout is short too: an admin listOffsets that saw a bus partition without a
# leader (the moment a dir fails under it) waits for a node until its deadline, "Timed
# out waiting for a node assignment", whatever the cluster does meanwhile; at 15 s that
# cost every such fault ~16 s (demo: fault -> fix 20.6-22.2 s in 4 runs of 9; at 6 s,
# 5.2-8.2 s in 12 runs of 12).
OFFSET_FETCH = {
    "kafka.request.timeout.ms": "5000",
    "kafka.default.api.timeout.ms": "6000",
    "fetchOffset.numRetries": "45",
    "fetchOffset.retryIntervalMs": "1000",
}


UNION = "org.apache.spark.rdd.UnionRDD"
SCAN = "DataSourceRDD"


def pieces(frame: Any, metrics_topic: str) -> list[Any]:
    """A batch's DataFrame as the batch body collects it, in order: the small topics'
    rows (log-dir events, snapshots), then ``metrics_topic``'s (the prescreen's survivors
    of up to `max_offsets_per_trigger` samples). Two pieces only when both have Kafka
    ranges in the batch; else ``[frame]``, one Spark job as before.

    A filter on the batch's ``topic`` prunes nothing: foreachBatch hands the body its
    batch as an RDD already planned (a LogicalRDD), so `frame.where(...)` reads every
    source partition. The pieces are that RDD's own union children, one per source
    with records in the batch (Spark leaves out a source with none), each with its
    projection and filter; a child is the metrics' when its first Kafka range names
    that topic. Each range is read once, in the job of its piece. Nothing here starts a
    Spark job."""
    from pyspark.sql import DataFrame

    rdd = frame._jdf.queryExecution().toRdd()
    while rdd.getClass().getName() != UNION:
        deps = rdd.dependencies()
        if deps.size() != 1:
            return [frame]
        rdd = deps.head().rdd()
    sources = rdd.rdds()
    bulk: list[Any] = []
    small: list[Any] = []
    for child in (sources.apply(i) for i in range(sources.size())):
        (bulk if _reads(child, metrics_topic) else small).append(child)
    if len(bulk) != 1 or not small:
        return [frame]
    for more in small[1:]:
        small[0] = small[0].union(more)
    session = frame.sparkSession
    schema = frame._jdf.schema()
    return [DataFrame(session._jsparkSession.internalCreateDataFrame(part, schema, False),
                      session) for part in (small[0], bulk[0])]


def _reads(source: Any, topic: str) -> bool:
    """True if ``source`` (a union child: projections over a Kafka scan) reads ``topic``:
    its first Kafka range (Spark's partition of it) names the topic-partition."""
    scan = source
    while scan.getClass().getSimpleName() != SCAN:
        deps = scan.dependencies()
        if deps.size() != 1:
            return False
        scan = deps.head().rdd()
    ranges = scan.partitions()
    return bool(ranges) and f"({topic}-" in ranges[0].inputPartition().toString()


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
    # The checkpoint was named (--checkpoint); else it is keyed by cluster and bus when
    # [stream] checkpoint_dir is the default (core/owner.py).
    checkpoint_given: bool = False
    # A fresh checkpoint's start on the snapshot topic (streams/starting.py): Spark's
    # startingOffsets JSON; None: `starting_offsets` as for the other topics.
    snapshot_offsets: str | None = None

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
        values["checkpoint_given"] = overrides.get("checkpoint") is not None
        return cls(**values)


def build_query(spark: Any, config: Config, options: JobOptions,
                sink: Callable[[Any, int], None]) -> Any:
    """Define and start the streaming query."""
    from core.security import spark_options
    from streams.prescreen import fast_path

    stream = config.stream

    def read(name: str, limit: int | None = None) -> Any:
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", config.bus.bootstrap_servers)
            .options(**spark_options(config.bus_security))
            .option("subscribe", config.topic(name))
            .option("startingOffsets", options.snapshot_offsets
                    if name == "cluster-snapshots" and options.snapshot_offsets
                    else options.starting_offsets)
            # The 500 ms default made every batch wait about a second for its last fetch.
            .option("kafka.fetch.max.wait.ms", "10")
        )
        for key, value in OFFSET_FETCH.items():
            reader = reader.option(key, value)
        if limit is not None:
            reader = reader.option("maxOffsetsPerTrigger", str(limit))
        return reader.load().select("topic", "partition", "offset", "timestamp", "value")

    # One source per topic, so each has its own limit: a backlog of metrics never holds
    # back a log-dir event (a shared limit is split by lag, one record per partition).
    metrics = (
        read("broker-metrics", stream.max_offsets_per_trigger)
        # Certainly-valid partition-size samples stop here, in the JVM: they are nearly
        # all the input and detection does not read them (streams/prescreen.py). How
        # many: the batch's input rows less what the sink collected (streams/metrics.py).
        .where(~fast_path(config.topic("broker-metrics")))
    )
    source = metrics.unionByName(read("logdir-events")).unionByName(
        read("cluster-snapshots", stream.max_snapshots_per_trigger)).selectExpr(*SINK_COLUMNS)
    # Decoding, validation and detection happen in the sink, on the driver: one collect a
    # batch, no Python worker, no shuffle, no state store (docs/streaming.md).
    writer = (source.writeStream.queryName(QUERY_NAME).foreachBatch(sink)
              .option("checkpointLocation", str(options.checkpoint)))
    if options.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{options.trigger_seconds} seconds")
    return writer.start()
