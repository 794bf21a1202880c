"""Detection latency, end to end: a log dir fails on the sandbox -> the ZooKeeper collector
sees the notification -> the snapshot collector takes a snapshot at once -> the Spark job
proposes `fix_offline_replicas` on selfheal.actions.

Latency is measured from the event time the job dates the failure by (the collector's
sighting of the znode, `event_time` on the action) to the moment this process reads the
action from the bus. The sandbox is ZooKeeper mode, 3 brokers x 2 dirs; each round fails
a dir holding data under traffic, waits for the action, then heals the dir (a broker
restart) before the next. `SELFHEAL_BENCH_FAILURES` sets the rounds (default 20).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from core import clock
from sandbox import cluster, loop, traffic
from sandbox.state import SandboxState


def _wait_batches(the_loop: loop.Loop, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while "[stream] batch" not in the_loop.pieces["stream"].log_tail(200):
        the_loop.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError("the stream job ran no batch:\n"
                               + the_loop.pieces["stream"].log_tail())
        time.sleep(0.5)


def _round(state: SandboxState, tail: traffic.TopicTail, topic: str, broker: int,
           path: str) -> tuple[float, float] | None:
    cluster.fail_disk(state, broker, path)
    try:
        nudge = traffic.produce_in_background(state, topic, 12)
        found = tail.wait_for(
            lambda a: a["type"] == "fix_offline_replicas"
            and a["trigger"].get("broker") == broker and a["trigger"].get("log_dir") == path,
            timeout=60)
        nudge.join(timeout=150)
    finally:
        cluster.heal_disk(state, broker, path)
        state.reload()
    if found is None:
        return None
    action, read_at = found
    event = clock.epoch_seconds(action["event_time"])
    return read_at - event, clock.epoch_seconds(action["created_at"]) - event


def main() -> None:
    rounds = int(os.environ.get("SELFHEAL_BENCH_FAILURES", "20"))
    with tempfile.TemporaryDirectory(prefix="selfheal-bench-detect-") as tmp:
        state = cluster.up(Path(tmp) / "sandbox")
        the_loop = None
        try:
            prefix = f"bench{uuid.uuid4().hex[:6]}."
            the_loop = loop.start(
                state, Path(tmp) / "loop",
                names=("collect-metrics", "collect-zk", "collect-snapshots", "stream"),
                overrides={"bus": {"topic_prefix": prefix},
                           "detect": {"leader_window_seconds": 86400.0,
                                      "disk_skew_min_bytes": 1 << 40}})
            _wait_batches(the_loop)
            topic = "bench-detect"
            traffic.create_topic(state, topic, partitions=6, replication_factor=2)
            traffic.produce(state, topic, 600)
            tail = traffic.TopicTail(state, prefix + "actions")
            to_bus: list[float] = []
            to_created: list[float] = []
            missed = 0
            targets = [(b.node_id, d) for b in state.brokers for d in b.log_dirs]
            for i in range(rounds):
                broker, path = targets[i % len(targets)]
                result = _round(state, tail, topic, broker, path)
                if result is None:
                    missed += 1
                    print(f"  round {i + 1}: broker {broker} {Path(path).name}: no action "
                          "within 60 s", flush=True)
                    continue
                to_bus.append(result[0])
                to_created.append(result[1])
                print(f"  round {i + 1}: broker {broker} {Path(path).name}: "
                      f"{result[0]:.2f} s to the bus", flush=True)
            tail.close()
        finally:
            if the_loop is not None:
                the_loop.stop_all()
            cluster.down(state)
    if not to_bus:
        print("detection latency: no round produced an action")
        return
    to_bus.sort()
    p99 = to_bus[min(len(to_bus) - 1, round(0.99 * (len(to_bus) - 1)))]
    print(f"detection latency over {len(to_bus)} failures ({missed} missed), event -> action "
          f"read from selfheal.actions: p50 {statistics.median(to_bus):.2f} s, "
          f"p99 {p99:.2f} s, max {to_bus[-1]:.2f} s; event -> action created in the job: "
          f"p50 {statistics.median(to_created):.2f} s")


if __name__ == "__main__":
    main()
