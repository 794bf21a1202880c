"""JVM start-ups with and without class-data sharing (sandbox/cds.py), per kind of JVM:
a sandbox up to ready (its brokers, controller or ZooKeeper, KRaft's format tool), one of
Kafka's tools against it (LogDirsCommand), a Spark driver to its first micro-batch from
Kafka. Wall seconds and CPU seconds (the JVMs' own, from /proc and the reaped children),
the load average beside each; off and on alternate run by run, so load hits both alike.

The archives are made first in a folder of the bench's own (a fresh clone's first run:
record, then dump), and what making them cost is printed too.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sandbox import cds, cluster, jvm, traffic, versions
from sandbox.state import SandboxState

LAYOUTS = (("4.4", "kraft"), ("3.9", "zk"))
TOPIC = "bench-cds"
_TICK = os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _proc_cpu(pid: int | None) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _load() -> float:
    return os.getloadavg()[0]


def _up(kafka: str, mode: str, work: Path) -> tuple[SandboxState, dict[str, float]]:
    load, cpu0, t0 = _load(), _children_cpu(), time.monotonic()
    state = cluster.up(work, kafka=kafka, mode=mode)
    wall = time.monotonic() - t0
    servers = sum(_proc_cpu(s.pid) for s in state.servers())
    return state, {"wall": wall, "cpu": servers + _children_cpu() - cpu0, "load": load}


def _tool(state: SandboxState) -> dict[str, float]:
    line = versions.line(state.kafka)
    cmd = [*jvm.tool_cmd(line, "256m", line.log_dirs_tool),
           "--bootstrap-server", state.bootstrap_servers, "--describe"]
    load, cpu0, t0 = _load(), _children_cpu(), time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and '"brokers"' in done.stdout, done.stdout + done.stderr
    return {"wall": time.monotonic() - t0, "cpu": _children_cpu() - cpu0, "load": load}


def _spark(state: SandboxState, share: bool) -> dict[str, float]:
    env = jvm.small_machine_env(os.environ, share_classes=share)
    load = _load()
    done = subprocess.run([sys.executable, "-m", "bench.jvm_start_bench", "spark-child",
                           state.bootstrap_servers], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]), load=load)


def spark_child(bootstrap: str) -> None:
    """A driver from nothing to its first micro-batch from Kafka; prints its figures."""
    from streams.spark import session, stop

    t0, py0 = time.monotonic(), time.process_time()
    spark = session("bench-cds", master="local[1]")
    pid = spark.sparkContext._gateway.proc.pid
    batches: list[int] = []
    query = (spark.readStream.format("kafka")
             .option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC)
             .option("startingOffsets", "earliest").load()
             .writeStream.trigger(availableNow=True)
             .foreachBatch(lambda frame, n: batches.append(frame.count()))
             .start())
    query.awaitTermination(300)
    wall, jvm_cpu = time.monotonic() - t0, _proc_cpu(pid)
    stop(spark)
    assert batches and batches[0] > 0, batches
    print(json.dumps({"wall": wall, "cpu": jvm_cpu, "py_cpu": time.process_time() - py0}))


def _round(kafka: str, mode: str, share: bool, spark: bool) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="selfheal-bench-cds-") as tmp:
        state, up = _up(kafka, mode, Path(tmp))
        try:
            figures = {"up": up, "tool": _tool(state)}
            if spark:
                traffic.create_topic(state, TOPIC, partitions=2, replication_factor=3)
                traffic.produce(state, TOPIC, 200)
                figures["spark"] = _spark(state, share)
        finally:
            cluster.down(state)
    return figures


def _row(name: str, runs: list[dict[str, float]]) -> str:
    def spread(key: str) -> str:
        values = sorted(r[key] for r in runs)
        return f"{values[len(values) // 2]:.1f} ({values[0]:.1f}-{values[-1]:.1f})"

    return f"  {name:<34}{spread('wall'):>20}{spread('cpu'):>20}{spread('load'):>16}"


def main(runs: int = 3) -> None:
    print("JVM start-ups, off = no archive, on = class-data sharing (sandbox/cds.py);"
          " median (min-max) of", runs)
    with tempfile.TemporaryDirectory(prefix="selfheal-bench-cds-archives-") as archives:
        os.environ[cds.DIR_ENV] = archives
        making = []
        for kafka, mode in LAYOUTS:  # a fresh clone: the first start records...
            making.append(_round(kafka, mode, True, spark=kafka == "4.4"))
        cds.SETTLE_SECONDS = 0.0  # ...the next one dumps (the lists were complete at down)
        for kafka, mode in LAYOUTS:
            making.append(_round(kafka, mode, True, spark=kafka == "4.4"))
        print(f"  recording rounds, then dumping rounds: {json.dumps(making)}")
        made = sorted((p.name, p.stat().st_size // 2**20) for p in Path(archives).glob("*.jsa"))
        print(f"  archives (name, MiB): {made}")
        for refused in Path(archives).glob("*.refused"):
            print(f"  refused: {refused.name}: {refused.read_text()}")
        results: dict[str, list[dict[str, float]]] = {}
        for _ in range(runs):
            for kafka, mode in LAYOUTS:
                for share in (False, True):
                    os.environ[cds.DIR_ENV] = archives if share else "off"
                    found = _round(kafka, mode, share, spark=kafka == "4.4")
                    for kind, figures in found.items():
                        name = f"{kind} {kafka} {mode} {'on' if share else 'off'}"
                        results.setdefault(name, []).append(figures)
                        print(f"    {name}: {json.dumps(figures)}", flush=True)
        print(f"  {'':<34}{'wall s':>20}{'CPU s':>20}{'load avg':>16}")
        for name in sorted(results):
            print(_row(name, results[name]))


if __name__ == "__main__":
    if sys.argv[1:2] == ["spark-child"]:
        spark_child(sys.argv[2])
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
