"""Sandbox figures: time from `up` to ready, resident memory per JVM, fault detection.

Brings up a ZooKeeper-mode and a KRaft-mode sandbox in turn (3 brokers x 2 log dirs),
fails the log dir under partition 0's leader in each and times how long until
DescribeLogDirs reports it offline.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from sandbox import cluster, processes, traffic
from sandbox.status import KAFKA_STORAGE_ERROR, log_dir_errors


def _one(mode: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix=f"selfheal-bench-{mode}-") as tmp:
        started = time.monotonic()
        state = cluster.up(Path(tmp), mode=mode)
        ready_s = time.monotonic() - started
        try:
            traffic.create_topic(state, "bench", partitions=6, replication_factor=3)
            traffic.produce(state, "bench", 2000)
            rss = {f"{s.role}-{s.node_id}": processes.rss_bytes(s.pid or 0)
                   for s in state.servers()}
            # a dir with data under traffic: an idle dir is noticed only at Kafka's next
            # write into it, which may be a minute away
            victim = traffic.leader_of(state, "bench", 0)
            path = traffic.log_dir_of(state, "bench", 0, victim)
            cluster.fail_disk(state, victim, path)
            failed_at = time.monotonic()
            traffic.produce(state, "bench", 50)
            while (log_dir_errors(state, [victim]).get(victim, {}).get(path)
                   != KAFKA_STORAGE_ERROR):
                if time.monotonic() - failed_at > 60:
                    break
                time.sleep(0.1)
            detect_s = time.monotonic() - failed_at
        finally:
            cluster.down(state)
    return {"mode": mode, "ready_s": ready_s, "detect_s": detect_s, "rss": rss}


def main() -> None:
    print("sandbox: 3 brokers x 2 log dirs, 3 racks")
    print(f"  {'mode':<7}{'up->ready':>11}{'dir offline in':>16}   resident memory per JVM")
    for mode in ("zk", "kraft"):
        r = _one(mode)
        rss: dict[str, int] = r["rss"]  # type: ignore[assignment]
        mem = ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in rss.items())
        print(f"  {r['mode']:<7}{r['ready_s']:>10.1f}s{r['detect_s']:>15.1f}s   {mem}")


if __name__ == "__main__":
    main()
