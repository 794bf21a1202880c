"""Real disk skew: topic data written onto one chosen log dir of one broker."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from sandbox.cluster import Progress, SandboxError, _quiet, client_config, resolve_dir
from sandbox.state import SandboxState
from sandbox.status import kafka_admin, log_dir_errors, placement

CHUNK = 256 * 1024  # bytes per message; incompressible, below the 1 MiB default limit


def fill_disk(
    state: SandboxState,
    broker_id: int,
    dir_ref: str,
    nbytes: int,
    partitions: int = 4,
    topic: str | None = None,
    progress: Progress = _quiet,
) -> str:
    """Write ``nbytes`` onto one log dir; returns the topic that holds them.

    A new topic whose ``partitions`` single replicas all sit on ``broker_id`` is pinned to
    the dir with AlterReplicaLogDirs while still empty, then filled. Several partitions,
    so a planner can even the disks out by moving some of them.
    """
    from confluent_kafka import Producer

    if nbytes <= 0:
        raise SandboxError("--bytes must be positive")
    path = resolve_dir(state, broker_id, dir_ref)
    index = state.broker(broker_id).log_dirs.index(path)
    topic = topic or f"selfheal-fill-b{broker_id}-d{index}-{int(time.time())}"
    _create_on_broker(state, topic, partitions, broker_id)
    pin_to_dir(state, topic, range(partitions), broker_id, path)
    progress(f"topic {topic}: {partitions} partitions on broker {broker_id}, dir {path}")

    producer = Producer({**client_config(state), "acks": "1", "linger.ms": 20,
                         "compression.type": "none", "message.max.bytes": CHUNK + 4096})
    payload = os.urandom(CHUNK)
    written, last = 0, 0
    while written < nbytes:
        size = min(CHUNK, nbytes - written)
        producer.produce(topic, payload[:size], partition=(written // CHUNK) % partitions)
        producer.poll(0)
        written += size
        if written - last >= 32 * CHUNK:
            producer.flush()
            last = written
            progress(f"  {written / 2**20:.1f} / {nbytes / 2**20:.1f} MiB")
    left = producer.flush(60)
    if left:
        raise SandboxError(f"{left} messages to {topic} were not acknowledged in 60 s")
    progress(f"wrote {written / 2**20:.1f} MiB to {path} on broker {broker_id}")
    return topic


def fill_until_full(state: SandboxState, broker_id: int, dir_ref: str, partner: int,
                    limit_bytes: int, progress: Progress = _quiet) -> tuple[str, int]:
    """Write into one log dir until its broker reports it offline (a full disk: ENOSPC).

    The topic's partitions have two replicas, led by ``broker_id`` on that dir and followed
    on ``partner``, so what the full disk held can be re-replicated. Gives up with an
    error after ``limit_bytes``. Returns the topic and the bytes acknowledged.
    """
    from confluent_kafka import Producer

    path = resolve_dir(state, broker_id, dir_ref)
    topic = f"selfheal-full-b{broker_id}-{int(time.time())}"
    from kafka.admin import NewTopic

    with kafka_admin(state) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=-1, replication_factor=-1,
                                      replica_assignments={p: [broker_id, partner]
                                                           for p in range(2)})])
    pin_to_dir(state, topic, range(2), broker_id, path)
    acked = [0]

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked[0] += CHUNK

    producer = Producer({**client_config(state), "acks": "1", "linger.ms": 20,
                         "compression.type": "none", "message.max.bytes": CHUNK + 4096,
                         "message.timeout.ms": 20000})
    payload = os.urandom(CHUNK)
    written = 0
    while True:
        for i in range(16):
            producer.produce(topic, payload, partition=i % 2, on_delivery=delivered)
            producer.poll(0)
        written += 16 * CHUNK
        producer.flush(30)
        if log_dir_errors(state, [broker_id]).get(broker_id, {}).get(path):
            progress(f"log dir {path} on broker {broker_id} went offline after "
                     f"{acked[0] / 2**20:.1f} MiB acknowledged")
            producer.flush(30)
            return topic, acked[0]
        if written > limit_bytes:
            raise SandboxError(f"wrote {written} bytes into {path} on broker {broker_id} "
                               "and it is still online: is it a small disk?")


def _create_on_broker(state: SandboxState, topic: str, partitions: int, broker_id: int) -> None:
    """A topic whose single replicas all sit on one broker (an explicit assignment)."""
    from kafka.admin import NewTopic

    with kafka_admin(state) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=-1, replication_factor=-1,
                                      replica_assignments={p: [broker_id]
                                                           for p in range(partitions)})])


def pin_to_dir(state: SandboxState, topic: str, partitions: Iterable[int], broker_id: int,
               path: str, timeout: float = 30.0) -> None:
    """Move ``broker_id``'s replicas of these partitions onto ``path`` (AlterReplicaLogDirs)
    and wait until the broker says they are there."""
    deadline = time.monotonic() + timeout
    wanted = set(partitions)
    with kafka_admin(state) as admin:
        moves = {(topic, p, broker_id): path for p in wanted}
        while True:
            try:
                admin.alter_replica_log_dirs(moves)
            except Exception:
                pass  # replicas not created yet: retry below
            reply = admin.describe_log_dirs(topic_partitions=[topic], brokers=[broker_id])[0]
            placed = set(placement(reply, topic).get(path, {}))
            if wanted <= placed:
                return
            if time.monotonic() > deadline:
                raise SandboxError(f"broker {broker_id} did not place {topic} on {path} "
                                   f"in {timeout:.0f} s (placed: {sorted(placed)})")
            time.sleep(0.3)
