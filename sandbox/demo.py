"""`selfheal demo`: the sandbox, traffic, a broken disk, and the cluster before and after."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from remediation.cli import CliError


def _say(message: str) -> None:
    print(message, flush=True)


def _partition_table(state, topic: str) -> str:
    """Leader, replicas, ISR and offline replicas per partition, from Metadata."""
    from sandbox.status import kafka_admin

    with kafka_admin(state) as admin:
        parts = admin.describe_topics([topic])[0]["partitions"]
    rows = [f"    {'partition':<10}{'leader':<8}{'replicas':<12}{'isr':<12}offline"]
    for p in sorted(parts, key=lambda p: p["partition_index"]):
        rows.append(
            f"    {p['partition_index']:<10}{p['leader_id']:<8}"
            f"{','.join(map(str, p['replica_nodes'])):<12}"
            f"{','.join(map(str, p['isr_nodes'])):<12}"
            f"{','.join(map(str, p['offline_replicas'])) or '-'}"
        )
    return "\n".join(rows)


def run(args: argparse.Namespace) -> int:
    from sandbox import cluster, status, traffic
    from sandbox.cli import quiet_kafka_python

    quiet_kafka_python()
    def progress(message: str) -> None:
        print(f"  [sandbox] {message}", file=sys.stderr, flush=True)

    _say("== 1. bring up the sandbox: ZooKeeper + 3 brokers x 2 log dirs over 3 racks")
    try:
        state = cluster.up(args.work_dir, mode=args.mode, progress=progress)
    except cluster.SandboxError as exc:
        raise CliError(str(exc), code=1) from None
    try:
        topic = "demo-orders"
        _say(f"\n== 2. topic {topic} (6 partitions, RF 3), 2,000 messages produced and consumed")
        traffic.create_topic(state, topic, partitions=6, replication_factor=3)
        acked = traffic.produce(state, topic, 2000)
        got = traffic.consume_all(state, topic, expected=len(acked), timeout=60)
        _say(f"   produced {len(acked)} (acks=all, idempotent), consumed {len(got)}")
        _say("\n== 3. the cluster before the fault")
        _say(status.render(status.status(state)))
        _say(_partition_table(state, topic))

        victim = traffic.leader_of(state, topic, 0)
        dir_path = traffic.log_dir_of(state, topic, 0, victim)
        _say(f"\n== 4. break the disk under partition 0's leader: broker {victim}, {dir_path}")
        cluster.fail_disk(state, victim, dir_path, progress=progress)
        started = time.monotonic()
        traffic.produce(state, topic, 200)  # writes make the broker notice at once
        moved = traffic.wait_leader_moves(state, topic, 0, away_from=victim, timeout=60)
        _say(f"   partition 0 has a new leader, broker {moved}, "
             f"{time.monotonic() - started:.1f} s after the fault")
        _say("\n== 5. the cluster after the fault")
        _say(status.render(status.status(state)))
        _say(_partition_table(state, topic))
        _say("\n   The replicas on the failed dir are offline: this is what kafka-selfheal "
             "detects and repairs\n   (`selfheal plan offline` proposes the reassignment).")
    finally:
        if args.keep:
            _say(f"\nsandbox left running; `selfheal sandbox --work-dir {state.work_dir} down`")
        else:
            _say("\n== 6. tear down")
            cluster.down(state, progress=progress)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo", help="bring up the sandbox, break a disk, show the cluster before and after"
    )
    p.add_argument("--work-dir", type=Path, default=None,
                   help="sandbox folder (default: the standard sandbox location)")
    p.add_argument("--mode", choices=("zk", "kraft"), default="zk")
    p.add_argument("--keep", action="store_true", help="leave the sandbox running at the end")
    p.set_defaults(func=run)
