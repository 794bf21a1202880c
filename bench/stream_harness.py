"""The streaming bench's instruments (bench/stream_bench.py): the job run in this process
as `selfheal stream` runs it, the actions it puts on the bus with their arrival times, and
the peak memory of the job's processes."""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from sandbox.processes import children_by_parent


class Job:
    """The streaming query as `selfheal stream` runs it, with its progress recorded."""

    def __init__(self, config: Any) -> None:
        from core.bus import ensure_topics
        from streams import job, query, sink, spark
        from streams.metrics import StreamMetrics, query_listener

        ensure_topics(config)
        self.config = config
        self.spark = spark.session("selfheal-stream-bench",
                                   extra_conf=job.spark_conf())
        self.spark.sparkContext.setLogLevel("ERROR")
        self.progress: list[tuple[float, int, float]] = []  # (at, rows, seconds)
        # Spark's durationMs of each batch, in the same order (addBatch, queryPlanning, ...)
        self.phases: list[dict[str, int]] = []
        metrics = StreamMetrics()

        def progress(p: dict[str, Any]) -> None:
            self.progress.append((time.time(), p["numInputRows"],
                                  (p.get("batchDuration") or 0) / 1000))
            # with the sink's own steps (rows: collect, decode, detect; plan; send)
            sink_phases = metrics.batch_output(p["batchId"]).phases
            self.phases.append({**(p.get("durationMs") or {}),
                                **{f"sink {k}": round(v * 1000) for k, v in sink_phases.items()},
                                **collect_phases(collected.pop(p["batchId"], []),
                                                 tasks.pop(p["batchId"], []))})

        self.spark.streams.addListener(query_listener(progress))
        options = query.JobOptions.from_config(config)
        self.sink = sink.BatchSink(config, metrics, lambda line: None,
                                   options.checkpoint)
        # The collect's own share of the sink's rows (Spark's job: the Kafka read, the
        # prescreen), by batch: the bench's instrument, not the product's.
        collected: dict[int, list[float]] = {}
        tasks: dict[int, list[int]] = {}
        batch = [0]
        collect, write = self.sink._collect, self.sink.__call__

        def timed_collect(frame: Any) -> list[Any]:
            # the Kafka ranges (Spark's tasks) of the piece's job
            tasks.setdefault(batch[0], []).append(
                frame._jdf.queryExecution().toRdd().getNumPartitions())
            began = time.monotonic()
            try:
                return collect(frame)
            finally:
                # each of the batch's pieces (streams.query.pieces)
                collected.setdefault(batch[0], []).append(time.monotonic() - began)

        def timed_write(frame: Any, batch_id: int) -> None:
            batch[0] = batch_id
            write(frame, batch_id)

        self.sink._collect = timed_collect  # type: ignore[method-assign]
        self.query = query.build_query(self.spark, config, options, timed_write)
        self.sink.gate.query = self.query
        while not self.progress:  # the first batch resolves "latest"
            time.sleep(0.2)

    def stop(self) -> None:
        from streams import spark

        self.sink.gate.stop(self.query)  # at the end of a batch body, as the job stops
        self.sink.close()
        spark.stop(self.spark)


def send_round(servers: str, topic: str, began: Any, report: Any, lead: int) -> None:
    """In its own process: the largest whole-scrape round of the metric load's fleet
    (bench/stream_load.largest_round: the brokers whose keepalive falls in one scrape, as
    change-only publishing sends them), as fast as the producer goes; ``began`` gets a
    token once ``lead`` samples are on the bus, ``report`` (samples, seconds) at the end."""
    from confluent_kafka import Producer

    from bench import stream_load
    from core import clock

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 50,
                         "compression.type": "lz4", "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 2_000_000})
    samples = stream_load.scrape(clock.text(), stream_load.largest_round())
    started = time.monotonic()
    for k, sample in enumerate(samples):
        while True:
            try:
                producer.produce(topic, sample, str(k % stream_load.BROKERS))
                break
            except BufferError:
                producer.poll(0.05)
        if k + 1 == min(lead, len(samples)):
            producer.flush(30)  # on the bus, not only queued here
            began.put(True)
    producer.flush(120)
    report.put((len(samples), time.monotonic() - started))


# Samples of a round on the bus before the episode's event is sent: enough that the
# job's next trigger has a round's batch to take (up to `max_offsets_per_trigger`).
# The whole round (`--round-lead 210045`): its production done before the event, so
# that the batches the event meets are the job's alone, not shared with the producer.
ROUND_LEAD = 50_000


class OnRound:
    """Episodes placed on the metric load's whole-scrape round: each episode's event is
    sent once the largest round of the fleet's keepalive scrapes (bench/stream_load:
    201 brokers, 210,045 samples) is on its way to the bus, so that it lands in a
    trigger with the round's metrics, the worst case the random placement meets by
    luck; the next episode waits until the job has read the round."""

    def __init__(self, job: Job, config: Any, lead: int = ROUND_LEAD) -> None:
        self.job, self.config, self.lead = job, config, lead
        self.ctx = multiprocessing.get_context("spawn")
        self.began: Any = self.ctx.Queue()
        self.report: Any = self.ctx.Queue()
        self.process: Any = None
        self.mark = 0

    def start(self) -> None:
        self.mark = len(self.job.progress)
        self.process = self.ctx.Process(target=send_round, args=(
            self.config.bus.bootstrap_servers, self.config.topic("broker-metrics"),
            self.began, self.report, self.lead))
        self.process.start()
        self.began.get(timeout=120)

    def finish(self) -> None:
        sent, _took = self.report.get(timeout=300)
        self.process.join(60)
        deadline = time.time() + 120
        while (sum(rows for _, rows, _ in self.job.progress[self.mark:]) < sent
               and time.time() < deadline):
            time.sleep(0.5)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


class Actions:
    """Arrival times of the first fix or page on the bus, by cluster id."""

    TYPES = ("fix_offline_replicas", "page_operator")

    def __init__(self, config: Any) -> None:
        from core.bus import consumer

        self.arrived: dict[str, float] = {}
        self.created: dict[str, float] = {}
        self._stop = threading.Event()
        self._consumer = consumer(config, f"stream-bench-{uuid.uuid4().hex[:8]}")
        self._consumer.subscribe([config.topic("actions")])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        time.sleep(3)  # joined the group and positioned at the end

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self._consumer.poll(0.2)
            if msg is not None and not msg.error():
                action = json.loads(msg.value())
                if action.get("type") not in self.TYPES:
                    continue  # a fleet's leaders or disks may get actions of their own
                self.arrived.setdefault(action["cluster_id"], time.time())
                created = datetime.fromisoformat(action["created_at"].replace("Z", "+00:00"))
                self.created.setdefault(action["cluster_id"], created.timestamp())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()


def _status_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class MemoryWatch:
    """The job's processes (this one, the driver; the Spark driver JVM; Spark's Python
    workers under it), sampled every second: the peak of their summed RSS and each kind's
    largest RSS seen while watching. The sandbox's brokers and ZooKeeper and the metric
    load's producer are this process's children too: they are summed apart, never
    counted as the job's (before 2026-11-29 they were, and each process's lifetime
    VmHWM was reported, which held the bench's own snapshot generation)."""

    def __init__(self) -> None:
        self.peak_total = 0
        self.peak_outside = 0
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        import os

        me = os.getpid()
        while not self._stop.wait(1.0):
            tree = children_by_parent()
            seen: dict[str, int] = {"driver": _status_kib(me, "VmRSS")}
            outside = 0
            for child in tree.get(me, []):
                try:
                    spark = b"SparkSubmit" in Path(f"/proc/{child}/cmdline").read_bytes()
                except OSError:
                    continue
                todo = [child]
                while todo:
                    pid = todo.pop()
                    todo += tree.get(pid, [])
                    rss = _status_kib(pid, "VmRSS")
                    if not spark:
                        outside += rss
                    elif pid == child:
                        seen["JVM"] = rss
                    else:
                        seen["Python workers"] = seen.get("Python workers", 0) + rss
            for kind, rss in seen.items():
                self.peaks[kind] = max(self.peaks.get(kind, 0), rss)
            self.peak_total = max(self.peak_total, sum(seen.values()))
            self.peak_outside = max(self.peak_outside, outside)

    def report(self) -> str:
        each = ", ".join(f"{k} {v / 1024:,.0f} MiB" for k, v in self.peaks.items())
        return (f"peak RSS of the job's processes together {self.peak_total / 1024:,.0f} MiB "
                f"(each's own peak: {each}); apart, the sandbox and the metric load's "
                f"producer {self.peak_outside / 1024:,.0f} MiB")


def collect_phases(seconds: list[float], tasks: list[int]) -> dict[str, int]:
    """A batch's collects (one per piece, streams.query.pieces) as phases: in ms all of
    them and the first (the small topics' when there are two); how many; the tasks (Kafka
    ranges) of the first and of all."""
    return {"sink collect": round(sum(seconds) * 1000),
            "sink collect first": round(seconds[0] * 1000) if seconds else 0,
            "sink pieces": len(seconds), "sink tasks first": tasks[0] if tasks else 0,
            "sink tasks": sum(tasks)}


def pieces_report(phases: list[dict[str, int]]) -> str:
    """The batches collected in two pieces (streams.query.pieces): how many, and the
    median of the first collect's ms and tasks against the whole batch's."""
    import statistics

    two = [p for p in phases if p.get("sink pieces", 0) > 1]
    if not two:
        return f"batches in two pieces: 0 of {len(phases)}"

    def median(key: str) -> float:
        return statistics.median(p[key] for p in two)

    return (f"batches in two pieces: {len(two)} of {len(phases)}; median collect ms, "
            f"first piece {median('sink collect first'):.0f} of "
            f"{median('sink collect'):.0f}; tasks (Kafka ranges) "
            f"{median('sink tasks first'):.0f} of {median('sink tasks'):.0f}")


def phase_report(phases: list[dict[str, int]]) -> str:
    """Spark's phases of ``phases``' batches: median ms each, and the slowest batch's."""
    import statistics

    if not phases:
        return "no batch"
    names = sorted({k for p in phases for k in p}, key=lambda k: -statistics.median(
        [p.get(k, 0) for p in phases]))
    median = ", ".join(f"{k} {statistics.median([p.get(k, 0) for p in phases]):.0f}"
                       for k in names[:9])
    slow = max(phases, key=lambda p: p.get("triggerExecution", 0))
    worst = ", ".join(f"{k} {slow.get(k, 0)}" for k in names[:9])
    return f"median ms: {median}; the slowest batch: {worst}"
