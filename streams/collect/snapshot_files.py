"""`selfheal snapshot --out FILE`: one snapshot to a file, read from the cluster or the
bus, checked as every reader checks it (for the planners' ``--snapshot FILE``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from core.config import Config


def write_snapshot(config: Config, out: str, say: Callable[[str], None]) -> None:
    """Read the cluster once, as a published snapshot would be read (groups included),
    check it as every reader does, and write it to ``out`` ("-": stdout) for the
    planners' ``--snapshot FILE``; no bus is needed. A file is replaced whole or not at
    all. Raises LiveReadError when the cluster cannot be read."""
    import msgspec

    from core.groups import add_groups
    from core.live import open_admin, read_snapshot
    from schemas.snapshot import parse_snapshot

    started = time.monotonic()
    with open_admin(config.require_bootstrap_servers(), client_id="selfheal-snapshot-file",
                    request_timeout_ms=int(config.collect.request_timeout_seconds * 1000),
                    security=config.cluster_security) as admin:
        doc = read_snapshot(admin, config.cluster.cluster_id)
        try:
            add_groups(admin, doc)
        except Exception as exc:  # noqa: BLE001 - the disks matter more than the groups
            say(f"WARNING the snapshot has no consumer groups: {type(exc).__name__}: {exc}")
    value = msgspec.json.encode(doc)
    parse_snapshot(value)  # a snapshot the planners would refuse is not written
    _write_out(value, out)
    offline = sum(1 for b in doc["brokers"] if b["alive"]
                  for d in b["log_dirs"] if not d["online"])
    say(f"snapshot of {doc['cluster_id']}: {len(doc['brokers'])} brokers, "
        f"{len(doc['partitions'])} partitions, {offline} offline dirs, "
        f"{len(doc.get('consumer_groups', []))} consumer groups, {len(value)} bytes, "
        f"{time.monotonic() - started:.2f} s -> {'stdout' if out == '-' else out}")


def write_from_bus(config: Config, out: str, say: Callable[[str], None]) -> None:
    """Write this cluster's latest snapshot on the bus (a chunked one assembled: what the
    job plans from) to ``out`` as one whole document, checked as every reader checks it.
    Raises SnapshotMissing when there is none, SnapshotError when it is refused."""
    from core.owner import cluster_name
    from schemas.snapshot import parse_snapshot
    from streams.snapshot_reader import read_latest

    started = time.monotonic()
    cluster = cluster_name(config)
    value = read_latest(config, cluster)
    snapshot = parse_snapshot(value)
    _write_out(value, out)
    say(f"snapshot of {cluster} taken at {snapshot.taken_at} (from "
        f"{config.topic('cluster-snapshots')}): {len(snapshot.brokers)} brokers, "
        f"{len(snapshot.partitions)} partitions, {len(value)} bytes, "
        f"{time.monotonic() - started:.2f} s -> {'stdout' if out == '-' else out}")


def _write_out(value: bytes, out: str) -> None:
    """``value`` to stdout ("-") or to the file ``out``, replaced whole or not at all."""
    if out == "-":
        sys.stdout.buffer.write(value + b"\n")
        sys.stdout.flush()
    else:
        target = Path(out)
        partial = target.with_name(f".{target.name}.partial")
        partial.write_bytes(value + b"\n")
        partial.replace(target)
