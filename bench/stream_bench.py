"""Streaming job figures: broker-metrics throughput, detection latency, real-time mode.

Brings up a ZooKeeper-mode sandbox and runs the job in this process (as `selfheal
stream` does: same session settings, same query) on topics of its own, then:

1. throughput: a separate producer process sends synthetic broker metrics of a
   1,000-broker cluster (99% of them kafka_log_size, the rest per-dir offline gauges and
   counts) for a minute, as the metrics collector publishes them with the product's
   defaults (change-only, streams/collect/changes.py: a healthy cluster's whole scrape
   once per keepalive, 60 s, each broker in the scrape where its phase falls, about 100
   brokers a phase, and nothing between, since no gauge changes), or with
   `--whole-scrapes` as before change-only publishing (every 30 s scrape whole: 35,000
   samples/s, steady); prints the rate produced, the rate the job read, its batch
   durations and how long it took to catch up after;
2. latency: failure episodes as the collectors send them (a ZooKeeper notification,
   then the snapshot taken ~1 s later showing the dir offline), each for a new cluster
   id, idle and under the metric load; prints event -> action on selfheal.actions;
3. a fleet: the same episodes on the reference fleet's snapshot (bench/synthetic.FULL:
   1,000 brokers, 12,000 dirs, 300,000 replicas; ~30 MB of JSON, sent as the collector
   sends it: chunks of at most 4 MiB, then the manifest) with the metric load running:
   fault -> action p50/p99, batch durations, and the peak memory of the job's processes;
4. real-time mode: the stateless event path (log-dir events in, failures out, Kafka to
   Kafka) with trigger(realTime=...), against the same path in 0 s micro-batches.

Figures are printed, never asserted. `python -m bench.stream_bench [--seconds N]`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import stream_load
from bench.stream_harness import (
    ROUND_LEAD,
    Actions,
    Job,
    MemoryWatch,
    OnRound,
    percentile,
    phase_report,
    pieces_report,
)
from core import clock
from core.config import load
from core.live import open_admin, read_snapshot
from sandbox import cluster, traffic
from schemas.snapshot_delta import make_delta


def _config(state: Any, work: Path, prefix: str) -> Any:
    # A `[stream]` setting to try (e.g. SELFHEAL_STREAM_MAX_OFFSETS_PER_TRIGGER) passes
    # through from the environment; the bench's own keys win.
    tried = {k: v for k, v in os.environ.items() if k.startswith("SELFHEAL_STREAM_")}
    if tried:
        print(f"  [stream] settings from the environment: {tried}")
    env = {**tried, "SELFHEAL_SANDBOX_DIR": state.work_dir,
           "SELFHEAL_BUS_TOPIC_PREFIX": prefix,
           "SELFHEAL_STREAM_CHECKPOINT_DIR": str(work / "checkpoints"),
           "SELFHEAL_STREAM_STARTING_OFFSETS": "latest"}
    return load(env=env)


# --- throughput ----------------------------------------------------------------------


def throughput(job: Job, config: Any, seconds: float) -> None:
    ctx = multiprocessing.get_context("spawn")
    report: Any = ctx.Queue()
    topic = config.topic("broker-metrics")
    producer = ctx.Process(
        target=stream_load.produce_load,
        args=(config.bus.bootstrap_servers, topic, stream_load.RATE, seconds, report,
              stream_load.KEEPALIVE))
    mark = len(job.progress)
    started = time.time()
    producer.start()
    sent, took = report.get(timeout=seconds + 300)
    producer.join(60)
    stopped = time.time()

    def read_all() -> float | None:
        """When the job had read everything sent (the batches' rows add up)."""
        total = 0
        for at, rows, _ in job.progress[mark:]:
            total += rows
            if total >= sent:
                return at
        return None

    while read_all() is None and time.time() - stopped < 300:
        time.sleep(0.5)
    caught_up = max(0.0, (read_all() or time.time()) - stopped)
    batches = [(at, rows, s) for at, rows, s in job.progress[mark:] if rows]
    steady = [b for b in batches if b[0] > started + 10 and b[0] <= stopped]
    durations = [s for _, _, s in steady] or [0.0]
    read = sum(rows for _, rows, _ in batches)
    capacity = max((rows / s for _, rows, s in steady if s), default=0.0)
    print(f"  producer: {sent:,} samples in {took:.1f} s = {sent / took:,.0f}/s "
          f"({stream_load.label()})")
    print(f"  job read {read:,} rows; steady batches: {len(steady)}, "
          f"{sum(r for _, r, _ in steady) / max(1e-9, sum(durations)):,.0f} rows/s of batch time, "
          f"best batch {capacity:,.0f} rows/s")
    print(f"  batch duration under load: p50 {statistics.median(durations):.2f} s, "
          f"p95 {percentile(durations, 0.95):.2f} s, max {max(durations):.2f} s; "
          f"caught up {caught_up:.1f} s after the producer stopped")


# --- latency -------------------------------------------------------------------------


CHUNK_BYTES = 4 << 20  # the collector's default ([collect] snapshot_chunk_bytes)
DELTAS = True  # send the collector's failure delta (schemas/snapshot_delta.py)


Templates = tuple[list[bytes], list[bytes], str, bytes]


def _templates(base: dict[str, Any]) -> Templates:
    """The snapshot before and after one dir of the second broker fails, as the chunks
    the collector would send, with the cluster id, time and snapshot id left to fill in
    (a fleet's snapshot is ~30 MB: split once, not per episode); and the (broker, dir)
    in a description."""
    from schemas.snapshot_chunks import split

    broker = base["brokers"][1]["id"]
    path = base["brokers"][1]["log_dirs"][1]["path"]
    doc = {**base, "cluster_id": "@@CID@@", "taken_at": "@@TAKEN@@"}
    before, _ = split(doc, "@@SID@@", CHUNK_BYTES)
    failed = {**doc, "brokers": [
        {**b, "log_dirs": [{**d, "online": False, "total_bytes": None, "usable_bytes": None}
                           if d["path"] == path else d for d in b["log_dirs"]]}
        if b["id"] == broker else b for b in doc["brokers"]]}
    after, _ = split(failed, "@@SID@@", CHUNK_BYTES)
    delta = json.dumps(make_delta(failed, {broker}, "@@BASE@@", "bench")).encode()
    return before, after, f"broker {broker} {path}", delta


def _send_snapshot(send: Any, topic: str, template: list[bytes], cid: str,
                   taken_at: str) -> None:
    """One snapshot as the collector sends it: its chunks, then its manifest."""
    from schemas.snapshot_chunks import chunk_key, manifest_of

    sid = uuid.uuid4().hex
    chunks = [c.replace(b"@@CID@@", cid.encode(), 1).replace(b"@@TAKEN@@", taken_at.encode(), 1)
              .replace(b"@@SID@@", sid.encode(), 1) for c in template]
    for seq, chunk in enumerate(chunks):
        send.produce(topic, chunk, chunk_key(cid, seq))
    send.produce(topic, manifest_of(cid, taken_at, sid, chunks), cid.encode())


def latency(job: Job, config: Any, base: dict[str, Any], episodes: int, label: str,
            templates: Templates | None = None,
            one_at_a_time: bool = False, on_round: OnRound | None = None) -> list[float]:
    """Failure episodes, each on a new cluster id: the snapshot, a ZooKeeper notification
    a second later, the snapshot showing the dir offline a second after that; the next
    episode 2 s later, or (``one_at_a_time``) 2 s after this one's action arrived;
    ``on_round``: each event sent once a whole-scrape round is on its way. Prints event ->
    first fix or page, and the slowest batch each episode met; returns the received
    latencies."""
    from core.bus import producer

    before, after, _where, delta = templates or _templates(base)
    mark = len(job.progress)
    send = producer(config, **{"linger.ms": 0})
    actions = Actions(config)
    started: dict[str, float] = {}
    for _ in range(episodes):
        cid = f"bench-{uuid.uuid4().hex[:8]}"
        taken = clock.text(datetime.now(UTC) - timedelta(seconds=5))
        _send_snapshot(send, config.topic("cluster-snapshots"), before, cid, taken)
        send.flush(10)
        time.sleep(1.0)
        if on_round is not None:
            on_round.start()
        now = datetime.now(UTC)
        event = {"version": 1, "cluster_id": cid, "event_time": clock.text(now),
                 "source": "zookeeper", "kind": "log_dir_failure", "broker": None,
                 "log_dir": None, "znode": "/log_dir_event_notification/log_dir_event_1",
                 "details": None}
        started[cid] = now.timestamp()
        send.produce(config.topic("logdir-events"), json.dumps(event).encode())
        send.flush(10)
        if DELTAS:  # the collector's probe names the broker, and its delta goes at once
            time.sleep(0.2)
            send.produce(config.topic("cluster-snapshots"),
                         delta.replace(b"@@CID@@", cid.encode(), 1)
                         .replace(b"@@TAKEN@@", clock.text().encode(), 1)
                         .replace(b"@@BASE@@", taken.encode(), 1),
                         f"{cid}/delta".encode())
            send.flush(10)
        time.sleep(1.0)  # the snapshot collector reads the cluster at once: ~1 s
        _send_snapshot(send, config.topic("cluster-snapshots"), after, cid, clock.text())
        send.flush(10)
        waited = time.time() + 180
        while one_at_a_time and cid not in actions.arrived and time.time() < waited:
            time.sleep(0.2)
        if on_round is not None:
            on_round.finish()
        time.sleep(2.0)
    deadline = time.time() + 60 + 10 * episodes
    while len(actions.arrived) < episodes and time.time() < deadline:
        time.sleep(0.5)
    actions.close()
    took = [actions.arrived[c] - t for c, t in started.items() if c in actions.arrived]
    made = [actions.created[c] - t for c, t in started.items() if c in actions.created]
    missing = episodes - len(took)
    if not took:
        print(f"  {label}: no action arrived")
        return []
    batches = [sec for _, _, sec in job.progress[mark:]]
    print(f"  {label}: {len(batches)} batches meanwhile, p50 "
          f"{statistics.median(batches):.2f} s, max {max(batches):.2f} s")
    for what, values in (("event -> action received", took), ("event -> action created", made)):
        print(f"  {label}, {len(values)} episodes: {what} p50 {statistics.median(values):.2f} s, "
              f"p95 {percentile(values, 0.95):.2f} s, p99 {percentile(values, 0.99):.2f} s, "
              f"max {max(values):.2f} s" + (f"; {missing} missing" if missing else ""))
    def met(began: float, ended: float) -> str:
        """The slowest batch that ran between an event and its action's arrival."""
        ran = [(s, rows) for at, rows, s in job.progress[mark:] if at >= began
               and at - s <= ended]
        s, rows = max(ran, default=(0.0, 0))
        return f"{s:.1f} s/{rows:,}"

    print(f"  {label}, each episode (event -> received / created, s; the slowest batch "
          f"meanwhile, s/rows read): " + ", ".join(
              f"{actions.arrived[c] - t:.2f}/{actions.created.get(c, t) - t:.2f} "
              f"({met(t, actions.arrived[c])})"
              for c, t in started.items() if c in actions.arrived))
    return took


def loaded_latency(job: Job, config: Any, base: dict[str, Any], episodes: int,
                   label: str = "",
                   templates: Templates | None = None,
                   seconds_each: float = 4.0) -> list[float]:
    ctx = multiprocessing.get_context("spawn")
    report: Any = ctx.Queue()
    load_seconds = episodes * seconds_each + 20
    producer = ctx.Process(
        target=stream_load.produce_load,
        args=(config.bus.bootstrap_servers, config.topic("broker-metrics"), stream_load.RATE,
              load_seconds, report, stream_load.KEEPALIVE))
    producer.start()
    time.sleep(10)
    try:
        return latency(job, config, base, episodes, label or f"under {stream_load.label()}",
                       templates, one_at_a_time=seconds_each > 4.0)
    finally:
        if seconds_each > 4.0:
            producer.terminate()  # its time was only an upper bound
        producer.join(load_seconds + 120)


# --- a fleet ---------------------------------------------------------------------------


def fleet(job: Job, config: Any, episodes: int, placements: list[str],
          round_episodes: int, round_lead: int = ROUND_LEAD) -> None:
    """The reference fleet (bench/synthetic.FULL: 1,000 brokers, 12,000 dirs, 100,000
    partitions at RF 3) as chunked snapshots, under the metric load: fault -> action,
    with the episodes where they fall against the load's whole-scrape rounds
    (``random``) and each on a round (``round``)."""
    from bench import synthetic

    started = time.perf_counter()
    base = synthetic.generate(**synthetic.FULL, failed_dir_every=0, seed=7)
    replicas = sum(len(p["replicas"]) for p in base["partitions"])
    templates = _templates(base)
    del base
    sizes = [len(c) for c in templates[0]]
    print(f"  snapshot: {replicas:,} replicas, {sum(sizes) / 1e6:.1f} MB in {len(sizes)} "
          f"chunks of at most {max(sizes) / 1e6:.1f} MB and a manifest (built in "
          f"{time.perf_counter() - started:.1f} s); the fault: {templates[2]}")
    for placement in placements:
        mark = len(job.phases)
        with MemoryWatch() as memory:
            # One failure at a time (each waits for the last one's action), as a fleet's
            # disks fail.
            if placement == "round":  # the load is the rounds the episodes bring
                latency(job, config, {}, round_episodes,
                        "fleet, each event on a whole-scrape round", templates,
                        one_at_a_time=True, on_round=OnRound(job, config, round_lead))
            else:  # the metric load runs throughout
                loaded_latency(job, config, {}, episodes,
                               f"fleet under {stream_load.label()}", templates,
                               seconds_each=60.0)
        print(f"  {placement}: {memory.report()}")
        print(f"  {placement}: the batches' phases (Spark's durationMs): "
              f"{phase_report(job.phases[mark:])}")
        print(f"  {placement}: {pieces_report(job.phases[mark:])}")


# --- real-time mode ------------------------------------------------------------------


def realtime(state: Any, config: Any, work: Path) -> None:
    """The stateless event path, Kafka to Kafka: real-time trigger vs 0 s micro-batches."""
    from pyspark.sql import functions as F

    from core.bus import consumer, producer
    from schemas.spark import struct_type
    from streams.spark import session, stop

    servers = config.bus.bootstrap_servers
    send = producer(config, **{"linger.ms": 0})
    for mode in ("realTime", "processingTime"):
        src_topic = f"rtm-in-{uuid.uuid4().hex[:6]}"
        out_topic = f"rtm-out-{uuid.uuid4().hex[:6]}"
        traffic.create_topic(state, src_topic, partitions=1, replication_factor=1)
        traffic.create_topic(state, out_topic, partitions=1, replication_factor=1)
        # Real-time mode runs every stage at once: a slot per source partition and more.
        rt = session("selfheal-rtm-bench", master="local[4]")
        events = (rt.readStream.format("kafka").option("kafka.bootstrap.servers", servers)
                  .option("subscribe", src_topic).option("startingOffsets", "earliest")
                  .option("kafka.fetch.max.wait.ms", "10").load()
                  .select(F.from_json(F.col("value").cast("string"),
                                      struct_type("logdir-event")).alias("e"))
                  .where("e.kind = 'log_dir_failure'")
                  .select(F.to_json(F.struct("e.cluster_id", "e.event_time", "e.broker"))
                          .alias("value")))
        writer = (events.writeStream.format("kafka").option("kafka.bootstrap.servers", servers)
                  .option("topic", out_topic).outputMode("update")
                  .option("checkpointLocation", str(work / f"rtm-{mode}")))
        try:
            if mode == "realTime":
                writer = writer.trigger(realTime="5 seconds")
            else:
                writer = writer.trigger(processingTime="0 seconds")
            query = writer.start()
        except Exception as exc:
            print(f"  {mode}: could not start: {str(exc).splitlines()[0][:200]}")
            stop(rt)
            continue
        reader = consumer(config, f"rtm-bench-{uuid.uuid4().hex[:6]}",
                          **{"auto.offset.reset": "earliest"})
        reader.subscribe([out_topic])
        time.sleep(8)
        sent: dict[str, float] = {}
        got: dict[str, float] = {}
        for i in range(20):
            key = f"rtm-{i}-{uuid.uuid4().hex[:4]}"
            sent[key] = time.time()
            send.produce(src_topic, json.dumps({
                "version": 1, "cluster_id": key, "event_time": clock.text(), "source": "zookeeper",
                "kind": "log_dir_failure", "broker": 1}).encode())
            send.flush(5)
            deadline = time.time() + 0.5
            while time.time() < deadline:
                msg = reader.poll(0.05)
                if msg is not None and not msg.error():
                    got.setdefault(json.loads(msg.value()).get("cluster_id"), time.time())
        deadline = time.time() + 30
        while len(got) < len(sent) and time.time() < deadline:
            msg = reader.poll(0.1)
            if msg is not None and not msg.error():
                got.setdefault(json.loads(msg.value()).get("cluster_id"), time.time())
        reader.close()
        failure = query.exception()
        query.stop()
        stop(rt)
        took = [got[k] - t for k, t in sent.items() if k in got]
        if failure is not None:
            print(f"  {mode}: the query failed: {str(failure).splitlines()[0][:200]}")
        elif took:
            print(f"  {mode}: {len(took)}/{len(sent)} events, produce -> output p50 "
                  f"{statistics.median(took) * 1000:.0f} ms, max {max(took) * 1000:.0f} ms")
        else:
            print(f"  {mode}: no output within 30 s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="load duration")
    parser.add_argument("--episodes", type=int, default=15, help="failures per latency run")
    parser.add_argument("--parts", default="idle,throughput,loaded,fleet,realtime",
                        help="which figures, comma-separated (default: all)")
    parser.add_argument("--fleet-episodes", type=int, default=10,
                        help="failures on the fleet-sized snapshot")
    parser.add_argument("--placement", default="random,round",
                        help="where the fleet's episodes fall: random (against the load's "
                             "rounds, wherever they fall), round (each event on a "
                             "whole-scrape round); comma-separated (default: both)")
    parser.add_argument("--round-episodes", type=int, default=5,
                        help="fleet failures placed on a whole-scrape round")
    parser.add_argument("--round-lead", type=int, default=ROUND_LEAD,
                        help="samples of the round on the bus before the event is sent")
    parser.add_argument("--no-delta", action="store_true",
                        help="no failure delta: the fix waits for the full snapshot")
    parser.add_argument("--whole-scrapes", action="store_true",
                        help=f"the metric load as before change-only publishing: every scrape "
                             f"whole, {stream_load.RATE:,} samples/s steady")
    args = parser.parse_args(argv)
    global DELTAS
    DELTAS = not args.no_delta
    stream_load.KEEPALIVE = (0.0 if args.whole_scrapes
                             else load(env={}).collect.metrics_keepalive_seconds)
    parts = set(args.parts.split(","))
    print(f"stream: the detection job on a 3-broker sandbox, local[2]; metric load: "
          f"{stream_load.label()}")
    with tempfile.TemporaryDirectory(prefix="selfheal-bench-stream-") as tmp:
        work = Path(tmp)
        state = cluster.up(work / "sandbox")
        try:
            config = _config(state, work, f"bench{uuid.uuid4().hex[:4]}.")
            # Partitions a failed dir's replicas can move to (RF 2 on 3 brokers).
            traffic.create_topic(state, "bench-rf2", partitions=12, replication_factor=2)
            with open_admin(state.bootstrap_servers) as admin:
                base = read_snapshot(admin, "bench")
            job = Job(config)
            try:
                if "idle" in parts:
                    print("latency (event time of the notification -> first action):")
                    latency(job, config, base, args.episodes, "idle")
                if "throughput" in parts:
                    print(f"throughput ({args.seconds:.0f} s of {stream_load.label()}):")
                    throughput(job, config, args.seconds)
                if "loaded" in parts:
                    print("latency again, with the metric load running:")
                    loaded_latency(job, config, base, args.episodes)
                if "fleet" in parts:
                    print("a fleet: 1,000 brokers, 300k replicas a snapshot, the metric load "
                          "running:")
                    fleet(job, config, args.fleet_episodes, args.placement.split(","),
                          args.round_episodes, args.round_lead)
            finally:
                job.stop()
            if "realtime" in parts:
                print("real-time mode, stateless event path (Kafka -> Kafka):")
                realtime(state, config, work)
        finally:
            cluster.down(state)


if __name__ == "__main__":
    main()
