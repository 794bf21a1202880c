"""The job's fixed cost: CPU per idle micro-batch, and the idle job's cores.

Brings up a 3-broker ZooKeeper sandbox and runs the job's query in this process (the
product's defaults: trigger 1 s, one validating task, one state partition), on topics of
its own. An *idle batch* is what one scrape of a quiet 3-broker cluster brings: per
broker its partition sizes (dropped in the JVM), one offline gauge per dir at 0 and the
offline-dir count at 0, ~40 records. Each batch is sent alone and waited for, and the
CPU of every process of the job (this one, the driver JVM, Spark's Python workers) is
read from /proc around it. Then nothing is sent for a while: the idle job's own cost
between batches (Spark asking the bus for offsets every trigger). The idle job's cores
at the default 10 s scrape follow from the two.

With ``--keepalive S``, the idle job as the metrics collector's change-only publishing
makes it on an idle cluster: one whole scrape per S seconds and nothing between.

Figures are printed, never asserted. `python -m bench.stream_cost_bench [--batches N]`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from core import clock
from sandbox import cluster
from sandbox.processes import children_by_parent

SCRAPE_S = 10.0  # [collect] scrape_interval_seconds' default
TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    """CPU seconds of ``pid`` so far, its reaped children's included (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11:15]) / TICK  # utime stime cutime cstime


def tree_cpu() -> dict[str, float]:
    """CPU seconds so far of the job's processes, by kind: this process (``driver``), the
    Spark driver JVM (``jvm``) and everything under it (``python-worker``). The sandbox's
    brokers and ZooKeeper are this process's children too (`cluster.up`): their CPU is
    kept apart as ``sandbox``, never counted as the job's (before 2026-11-29 it was, in
    ``jvm``: the quiet job's ~0.1 core was mostly the idle sandbox)."""
    tree = children_by_parent()
    out = {"driver": _cpu(os.getpid()), "jvm": 0.0, "python-worker": 0.0, "sandbox": 0.0}
    for child in tree.get(os.getpid(), []):
        try:
            spark = b"SparkSubmit" in Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        todo = [child]
        while todo:
            pid = todo.pop()
            todo += tree.get(pid, [])
            kind = "sandbox" if not spark else "jvm" if pid == child else "python-worker"
            out[kind] += _cpu(pid)
    return out


# The driver JVM's own threads by what they do, from their names (HotSpot's and G1's):
# what of its share is the JIT still compiling and the collector, not Spark's work.
JVM_THREADS = {"jit": ("C1 CompilerThre", "C2 CompilerThre"),
               "gc": ("G1 ", "GC Thread", "VM Thread")}


def jvm_threads_cpu() -> dict[str, float]:
    """CPU seconds so far of the Spark driver JVM's JIT compiler and GC threads (Linux
    keeps a thread's first 15 characters of name in ``comm``); threads that ended are
    not counted."""
    out = dict.fromkeys(JVM_THREADS, 0.0)
    for child in children_by_parent().get(os.getpid(), []):
        try:
            if b"SparkSubmit" not in Path(f"/proc/{child}/cmdline").read_bytes():
                continue
            tasks = list(Path(f"/proc/{child}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                name = (task / "comm").read_text().strip()
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            for kind, prefixes in JVM_THREADS.items():
                if name.startswith(prefixes):
                    out[kind] += (int(fields[11]) + int(fields[12])) / TICK
    return out


def job_cpu(kinds: dict[str, float]) -> float:
    """The job's share of `tree_cpu`'s figures."""
    return sum(v for k, v in kinds.items() if k != "sandbox")


def _minus(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}


def scrape(cluster_id: str, brokers: int = 3, dirs: int = 2, sizes: int = 10,
           gauges: bool = True) -> list[bytes]:
    """One scrape of a quiet cluster, as the metrics collector writes it; without
    ``gauges``, only the partition sizes (every record stops in the JVM)."""
    when = clock.text()
    head = f'{{"version":1,"cluster_id":"{cluster_id}","event_time":"{when}","broker":'
    out = []
    for b in range(brokers):
        rack = f'"rack":"rack{b % 3 + 1}",'
        out += [f'{head}{b},{rack}"metric":"kafka_log_size","labels":{{"topic":"t",'
                f'"partition":"{p}"}},"value":{p * 1024}}}'.encode() for p in range(sizes)]
        if not gauges:
            continue
        out += [f'{head}{b},{rack}"metric":"kafka_log_log_directory_offline","labels":'
                f'{{"log_dir":"/data/d{d}"}},"value":0}}'.encode() for d in range(dirs)]
        out.append(f'{head}{b},{rack}"metric":"kafka_log_offline_log_directory_count",'
                   f'"labels":{{}},"value":0}}'.encode())
    return out


class CostJob:
    """The job's query with a listener that records each batch's Spark phases."""

    def __init__(self, config: Any, conf: dict[str, str] | None = None) -> None:
        from core.bus import ensure_topics
        from streams import job, query, sink, spark
        from streams.metrics import StreamMetrics, query_listener

        ensure_topics(config)
        self.spark = spark.session("selfheal-stream-cost",
                                   extra_conf={**job.spark_conf(), **(conf or {})})
        self.spark.sparkContext.setLogLevel("ERROR")
        self.progress: list[tuple[int, dict[str, int]]] = []
        # the job's own kind of listener: what it costs a batch is the job's
        self.spark.streams.addListener(query_listener(lambda p: self.progress.append(
            (p["numInputRows"], dict(p.get("durationMs") or {})))))
        options = query.JobOptions.from_config(config)
        self.sink = sink.BatchSink(config, StreamMetrics(), lambda line: None,
                                   options.checkpoint)
        self.query = query.build_query(self.spark, config, options, self.sink)
        self.sink.gate.query = self.query
        self.wait_batches(1)  # the first batch resolves "latest"

    def wait_batches(self, count: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.progress) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        if len(self.progress) < count:
            raise RuntimeError(f"no batch {count} within {timeout:.0f} s: "
                               f"{self.query.exception()}")

    def stop(self) -> None:
        from streams import spark

        self.sink.gate.stop(self.query)
        self.sink.close()
        spark.stop(self.spark)


def _send_scrape(send: Any, topic: str, cluster_id: str, gauges: bool = True) -> None:
    """One quiet scrape of the cluster onto the bus, acknowledged."""
    for record in scrape(cluster_id, gauges=gauges):
        send.produce(topic, record, cluster_id.encode())
    send.flush(10)


def measure(job: CostJob, config: Any, batches: int, quiet_s: float, warm: int = 4,
            gauges: bool = True, prewarm: int = 0) -> dict[str, Any]:
    """CPU per idle batch (by process kind, and of the driver JVM's its JIT and GC
    threads), Spark's phases, the quiet job's cost. ``prewarm`` batches first, one a
    trigger: the JIT of a job that has run a while."""
    from core.bus import producer

    send = producer(config, **{"linger.ms": 0})
    topic = config.topic("broker-metrics")
    cluster_id = f"cost-{uuid.uuid4().hex[:6]}"
    per_batch: list[dict[str, float]] = []
    phases: dict[str, list[int]] = {}
    rows: list[int] = []
    for _ in range(prewarm):  # one batch a trigger
        before_n = len(job.progress)
        _send_scrape(send, topic, cluster_id, gauges)
        job.wait_batches(before_n + 1)
    for k in range(warm + batches):
        before_n = len(job.progress)
        time.sleep(1.5)  # the previous batch's commit is over
        before, threads = tree_cpu(), jvm_threads_cpu()
        _send_scrape(send, topic, cluster_id, gauges)
        job.wait_batches(before_n + 1)
        time.sleep(1.0)  # the trigger after it: Spark's end-of-batch work
        spent = _minus(tree_cpu(), before)
        spent.update({f"jvm {kind}": v
                      for kind, v in _minus(jvm_threads_cpu(), threads).items()})
        if k >= warm:  # the first batches load classes and warm the JIT
            per_batch.append(spent)
            n, ms = job.progress[before_n]
            rows.append(n)
            for name, value in ms.items():
                phases.setdefault(name, []).append(value)
    before, began = tree_cpu(), time.monotonic()
    time.sleep(quiet_s)
    quiet_kinds = _minus(tree_cpu(), before)
    quiet = job_cpu(quiet_kinds) / (time.monotonic() - began)
    totals = [job_cpu({k: v for k, v in b.items() if not k.startswith("jvm ")})
              for b in per_batch]
    kinds = {k: statistics.median(b.get(k, 0.0) for b in per_batch) for k in per_batch[0]}
    batch_cpu = statistics.median(totals)
    # One batch per scrape; between them the quiet job's own cost (2.5 s of every batch's
    # window above is quiet time too, counted once).
    cores = (batch_cpu + quiet * max(0.0, SCRAPE_S - 2.5)) / SCRAPE_S
    return {"rows": statistics.median(rows), "batch_cpu": batch_cpu,
            "batch_cpu_range": (min(totals), max(totals)), "kinds": kinds,
            "phases": {k: statistics.median(v) for k, v in phases.items()},
            "quiet_cores": quiet, "quiet_kinds": quiet_kinds, "cores": cores}


def measure_keepalive(job: CostJob, config: Any, keepalive: float, windows: int
                      ) -> dict[str, Any]:
    """The idle job as change-only publishing makes it (streams/collect/changes.py): per
    keepalive window, one whole scrape and then nothing (an idle cluster's gauges do not
    change; its sizes go only with the whole scrape). CPU of the job over each window."""
    from core.bus import producer

    send = producer(config, **{"linger.ms": 0})
    topic = config.topic("broker-metrics")
    cluster_id = f"keep-{uuid.uuid4().hex[:6]}"
    cores: list[float] = []
    sandbox: list[float] = []
    split: list[dict[str, float]] = []
    for k in range(windows):
        print(f"    keepalive window {k + 1} of {windows} ({keepalive:g} s)", flush=True)
        before, threads, began = tree_cpu(), jvm_threads_cpu(), time.monotonic()
        _send_scrape(send, topic, cluster_id)
        time.sleep(keepalive)
        spent, seconds = _minus(tree_cpu(), before), time.monotonic() - began
        cores.append(job_cpu(spent) / seconds)
        sandbox.append(spent["sandbox"] / seconds)
        split.append({k: v / seconds for k, v in _minus(jvm_threads_cpu(), threads).items()})
    return {"cores": statistics.median(cores), "range": (min(cores), max(cores)),
            "sandbox": statistics.median(sandbox),
            "jvm": {k: statistics.median(w[k] for w in split) for k in split[0]}}


def report(label: str, m: dict[str, Any]) -> None:
    low, high = m["batch_cpu_range"]
    kinds = ", ".join(f"{k} {v:.2f}" for k, v in sorted(m["kinds"].items()))
    phases = ", ".join(f"{k} {v:.0f}" for k, v in sorted(m["phases"].items(),
                                                           key=lambda kv: -kv[1]) if v)
    print(f"  {label}: CPU per idle batch {m['batch_cpu']:.2f} s (range {low:.2f}-{high:.2f};"
          f" {kinds}); {m['rows']:.0f} rows a batch")
    print(f"    Spark's phases, ms (median): {phases}")
    quiet = ", ".join(f"{k} {v:.2f}" for k, v in sorted(m["quiet_kinds"].items()))
    print(f"    quiet job {m['quiet_cores']:.3f} cores ({quiet} CPU s); idle job at a "
          f"{SCRAPE_S:.0f} s scrape {m['cores']:.3f} cores (target 0.05), an idle batch "
          "target 0.3 CPU s")


def main(argv: list[str] | None = None) -> None:
    from bench.stream_bench import _config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=10, help="idle batches measured")
    parser.add_argument("--quiet", type=float, default=20.0, help="seconds with no input")
    parser.add_argument("--prewarm", type=int, default=0,
                        help="idle batches run first, one a trigger, unmeasured: the JIT of "
                             "a job that has run a while (the 4 warm-up batches follow)")
    parser.add_argument("--conf", action="append", default=[],
                        help="a Spark setting for the job, key=value (a lever to try)")
    parser.add_argument("--trigger", type=float, default=None,
                        help="the trigger interval, seconds (default: the product's)")
    parser.add_argument("--sizes-only", action="store_true",
                        help="then, in the same job, idle batches of partition sizes only: "
                             "what a batch costs when no record reaches Python")
    parser.add_argument("--keepalive", type=float, action="append", default=[],
                        help="then, in the same job, windows of this many seconds with one "
                             "whole scrape each: the idle job under change-only publishing "
                             "([collect] metrics_keepalive_seconds), or at every scrape with "
                             "the scrape interval (10: what it was); repeatable")
    parser.add_argument("--windows", type=int, default=3, help="keepalive windows measured")
    args = parser.parse_args(argv)
    conf = dict(c.split("=", 1) for c in args.conf)
    print(f"stream cost: the job's fixed cost on a 3-broker sandbox, load {os.getloadavg()}"
          + (f"; with {conf}" if conf else "")
          + (f"; trigger {args.trigger:g} s" if args.trigger is not None else ""))
    with tempfile.TemporaryDirectory(prefix="selfheal-bench-cost-") as tmp:
        work = Path(tmp)
        state = cluster.up(work / "sandbox")
        try:
            config = _config(state, work, f"cost{uuid.uuid4().hex[:4]}.")
            if args.trigger is not None:
                config = dataclasses.replace(config, stream=dataclasses.replace(
                    config.stream, trigger_interval_seconds=args.trigger))
            job = CostJob(config, conf)
            try:
                report("idle", measure(job, config, args.batches, args.quiet,
                                       prewarm=args.prewarm))
                if args.sizes_only:
                    report("sizes only", measure(job, config, args.batches, args.quiet,
                                                 warm=1, gauges=False))
                for keepalive in args.keepalive:
                    k = measure_keepalive(job, config, keepalive, args.windows)
                    low, high = k["range"]
                    print(f"  a whole scrape every {keepalive:g} s and nothing between: idle "
                          f"job {k['cores']:.3f} cores (range {low:.3f}-{high:.3f}; target "
                          f"0.05; of it the driver JVM's JIT {k['jvm']['jit']:.3f}, GC "
                          f"{k['jvm']['gc']:.3f}); the sandbox's brokers and ZooKeeper "
                          f"{k['sandbox']:.3f}")
            finally:
                job.stop()
        finally:
            cluster.down(state)
    print(f"  load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
