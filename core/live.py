"""Read a live Kafka cluster into a cluster snapshot (the planners' format).

The one place that turns Admin API replies into `schemas/cluster-snapshot.schema.json`:
the snapshot collector publishes what it returns, and the executor re-reads the cluster
with it before acting. Calls: DescribeCluster (brokers, racks, fenced), Metadata
(partitions, leaders, ISR), and DescribeLogDirs of every broker, a bounded number at a
time (dirs, sizes, which dir holds which replica).

A failed dir has no replicas in DescribeLogDirs. To still say which partitions sat on
it, a `PlacementMemory` carried from one read to the next keeps every replica's last
known dir, every broker's rack and dirs; with it the replicas of a failed dir keep their
path (the dir is `online: false`), and a dead broker keeps its rack and dirs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from core import clock
from core.security import KafkaSecurity, kafka_python_settings

# Kafka's error code for a log dir the broker has taken offline.
KAFKA_STORAGE_ERROR = 56

ReplicaKey = tuple[str, int, int]  # (topic, partition, broker)

# DescribeLogDirs in flight at once. One at a time, a fleet's snapshot waited on every
# broker in turn (each answer takes longer the more replicas the broker holds); the admin
# client runs concurrent callers' requests on its one I/O thread, and a bound keeps a
# fleet of hundreds from asking every broker at the same moment.
DESCRIBE_CONCURRENCY = 8

# How old the admin client's own broker list may get. kafka-python refreshes it when a
# connection fails, so a broker stopped for a moment drops out of it, and by default it
# comes back only on the next refresh, five minutes on: until then every call naming
# that broker fails (unknown broker id) and snapshots carry its last known dirs
# (tests/integration/test_live_snapshot.py shows it; a CI run's dir that failed while
# its broker was down got no fix in 180 s, most likely so). The admin asks for brokers
# only (no topics), so a refresh every few seconds costs little.
ADMIN_METADATA_MAX_AGE_MS = 5000

T = TypeVar("T")


class LiveReadError(RuntimeError):
    """The cluster could not be read; the message says which call failed and why."""


@dataclasses.dataclass
class PlacementMemory:
    """What earlier reads saw, for what the current one cannot see (failed dirs, dead brokers)."""

    replica_dirs: dict[ReplicaKey, str] = dataclasses.field(default_factory=dict)
    replica_sizes: dict[ReplicaKey, int] = dataclasses.field(default_factory=dict)
    racks: dict[int, str | None] = dataclasses.field(default_factory=dict)
    broker_dirs: dict[int, dict[str, dict[str, Any]]] = dataclasses.field(default_factory=dict)
    # Each broker's last DescribeLogDirs answer and when (monotonic): a read that names
    # the brokers an event is about re-uses the others' (`read_snapshot(only=...)`).
    answers: dict[int, tuple[float, BrokerDirs]] = dataclasses.field(default_factory=dict)
    last_described: int = 0  # how many brokers the last read described
    # Registered brokers the last read asked and got no answer from: their dirs in that
    # snapshot are the last known ones (a broker just restarted with a new disk still
    # shows the old one offline).
    unanswered: frozenset[int] = frozenset()

    def forget_if_changed(self, broker: int, offline: Collection[str]) -> None:
        """A lighter look (dirs only) saw ``offline`` on ``broker``: a kept answer that
        says otherwise is stale and is not re-used."""
        kept = self.answers.get(broker)
        if kept is not None and {p for p, i in kept[1].dirs.items()
                                 if not i["online"]} != set(offline):
            del self.answers[broker]


@dataclasses.dataclass(frozen=True)
class BrokerDirs:
    """One broker's DescribeLogDirs answer, reduced to what a snapshot needs."""

    # path -> {"online", "total_bytes", "usable_bytes"[, "cordoned": True]}
    dirs: dict[str, dict[str, Any]]
    replicas: dict[tuple[str, int], tuple[str, int]]  # (topic, partition) -> (dir, size)
    future: dict[tuple[str, int], str]  # replicas being moved: (topic, partition) -> dir
    # the bytes each future replica holds so far
    future_bytes: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)


@contextlib.contextmanager
def open_admin(bootstrap_servers: str, client_id: str = "selfheal",
               request_timeout_ms: int = 10000, *,
               security: KafkaSecurity | None = None) -> Iterator[Any]:
    """A kafka-python KafkaAdminClient (it has the log-dir and reassignment calls),
    closed on exit. The product passes ``security`` ([cluster.security]); None is an
    unsecured cluster (the sandbox, tests)."""
    from kafka import KafkaAdminClient

    secured = kafka_python_settings(security or KafkaSecurity())
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id=client_id,
                                 request_timeout_ms=request_timeout_ms,
                                 metadata_max_age_ms=ADMIN_METADATA_MAX_AGE_MS, **secured)
    except Exception as exc:
        raise LiveReadError(
            f"cannot reach Kafka at {bootstrap_servers} ({exc}); check that the brokers "
            "run and that [cluster] bootstrap_servers is right") from exc
    # what it was made with, for a client of the other library reaching the same cluster
    # (core/kip848.py: ConsumerGroupDescribe through confluent-kafka)
    admin.selfheal_security = security or KafkaSecurity()
    try:
        yield admin
    finally:
        admin.close()


class LogDirsDenied(LiveReadError):
    """DescribeLogDirs answered no dirs at all: what Kafka answers a principal without
    Describe on Cluster (only a top-level error code, which kafka-python does not read).
    Never "a broker with no dirs": a snapshot from it would say nothing is wrong."""


DENIED_DIRS_FIX = ("grant the principal Describe on Cluster: kafka-acls.sh --bootstrap-server "
                   "<brokers> --add --allow-principal User:<selfheal user> --operation "
                   "Describe --cluster (docs/security.md lists every ACL)")


def _size(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and value >= 0 else None


def broker_dirs(reply: dict[str, Any]) -> BrokerDirs:
    """Reduce one broker's DescribeLogDirs reply (kafka-python's dict form)."""
    dirs: dict[str, dict[str, Any]] = {}
    replicas: dict[tuple[str, int], tuple[str, int]] = {}
    future: dict[tuple[str, int], str] = {}
    future_bytes: dict[tuple[str, int], int] = {}
    if not reply["log_dirs"]:  # every broker has at least one dir, online or not
        raise LogDirsDenied(f"broker {reply.get('broker', '?')} answered DescribeLogDirs with "
                            f"no log dirs, which means not authorized; {DENIED_DIRS_FIX}")
    for d in reply["log_dirs"]:
        path = d["log_dir"]
        online = d["error_code"] == 0
        dirs[path] = {
            "online": online,
            "total_bytes": _size(d.get("total_bytes")) if online else None,
            "usable_bytes": _size(d.get("usable_bytes")) if online else None,
        }
        if d.get("is_cordoned"):  # DescribeLogDirs v5 (Kafka 4.3+); left out otherwise
            dirs[path]["cordoned"] = True
        for t in d.get("topics", ()):
            for p in t["partitions"]:
                key = (t["name"], p["partition_index"])
                if p.get("is_future_key"):
                    future[key] = path
                    future_bytes[key] = max(0, int(p["partition_size"]))
                else:
                    replicas[key] = (path, max(0, int(p["partition_size"])))
    return BrokerDirs(dirs, replicas, future, future_bytes)


def describe_dirs(admin: Any, broker: int, attempts: int = 3,
                  pause: float = 0.5) -> BrokerDirs | None:
    """DescribeLogDirs of one broker; None when the broker does not answer.

    Asked again when a call fails: the first call to a broker that restarted since the
    last read fails on the admin's old connection, and a broker that has just registered
    answers "not ready" for a moment. A None here makes the snapshot report the broker's
    last known dirs (a replaced disk still offline, its new replicas nowhere): a chaos
    run's snapshot taken the moment a broker came back with a new disk said the old one
    was still offline, and the job proposed its page again. So the later tries wait
    ``pause``, then twice that (1.5 s in all, only for a broker that does not answer)."""
    for attempt in range(attempts):
        if attempt:
            time.sleep(pause * attempt)
        try:
            (reply,) = admin.describe_log_dirs(brokers=[broker])
        except Exception:
            continue
        return broker_dirs(reply)
    return None


def per_broker(ask: Callable[[int], T], brokers: Iterable[int],
               concurrency: int = DESCRIBE_CONCURRENCY) -> dict[int, T]:
    """``ask(broker)`` for every broker, at most ``concurrency`` at a time; broker -> answer
    in broker order. ``ask`` handles its own errors (one broker's must not cost the rest)."""
    ordered = sorted(brokers)
    if len(ordered) <= 1 or concurrency <= 1:
        return {b: ask(b) for b in ordered}
    with ThreadPoolExecutor(max_workers=min(concurrency, len(ordered)),
                            thread_name_prefix="describe-log-dirs") as pool:
        return dict(zip(ordered, pool.map(ask, ordered), strict=True))


def read_snapshot(admin: Any, cluster_id: str | None = None,
                  memory: PlacementMemory | None = None,
                  only: Collection[int] | None = None, max_age: float = 0.0) -> dict[str, Any]:
    """A snapshot of the cluster ``admin`` talks to, as plain JSON data.

    ``cluster_id`` defaults to Kafka's own cluster id. ``memory`` is read for what this
    read cannot see and updated with what it saw; pass the same object every time.

    ``only`` (with a ``memory``): the brokers to describe again, those an event names.
    Every other broker's last answer is re-used when it is at most ``max_age`` seconds
    old and still lists every replica the metadata places on that broker; otherwise
    that broker is described too. Metadata (leaders, ISR, replica lists) is always read.
    """
    try:
        cluster = admin.describe_cluster()
        topics = admin.describe_topics()
    except Exception as exc:
        raise LiveReadError(f"DescribeCluster/Metadata failed: {exc}") from exc
    memory = memory if memory is not None else PlacementMemory()
    registered = {
        b["broker_id"]: b for b in cluster["brokers"] if not b.get("is_fenced", False)
    }
    for b in cluster["brokers"]:
        memory.racks[b["broker_id"]] = b.get("rack") or None
    kept = {} if only is None else _still_good(memory, topics, set(registered) - set(only),
                                               max_age)
    asked_at = time.monotonic()
    asked = per_broker(lambda b: describe_dirs(admin, b), set(registered) - set(kept))
    memory.answers.update({b: (asked_at, a) for b, a in asked.items() if a is not None})
    answers = {**kept, **asked}
    memory.last_described = len(asked)
    memory.unanswered = frozenset(b for b, a in asked.items() if a is None)

    partitions = []
    mentioned: set[int] = set()
    for t in sorted(topics, key=lambda t: t["name"]):
        if t.get("error_code", 0) != 0:
            continue  # deleted meanwhile, or not authorized: not ours to heal
        for p in sorted(t["partitions"], key=lambda p: p["partition_index"]):
            key = (t["name"], p["partition_index"])
            replicas = []
            for broker in p["replica_nodes"]:
                mentioned.add(broker)
                replicas.append(_replica(key, broker, answers.get(broker), memory))
            partitions.append({
                "topic": key[0],
                "partition": key[1],
                "leader": p["leader_id"] if p["leader_id"] is not None else -1,
                "isr": list(p["isr_nodes"]),
                "replicas": replicas,
            })

    brokers = []
    for broker in sorted(set(registered) | mentioned | set(memory.broker_dirs)):
        answer = answers.get(broker)
        if answer is not None:
            memory.broker_dirs[broker] = answer.dirs
        dirs = memory.broker_dirs.get(broker, {})
        used = {r["log_dir"] for p in partitions for r in p["replicas"]
                if r["broker"] == broker and r["log_dir"] is not None}
        for path in used - set(dirs):
            dirs = {**dirs, path: {"online": False, "total_bytes": None, "usable_bytes": None}}
        if broker not in registered and not dirs and broker not in mentioned:
            continue
        brokers.append({
            "id": broker,
            "rack": memory.racks.get(broker),
            "alive": broker in registered,
            "log_dirs": [{"path": path, **info} for path, info in sorted(dirs.items())],
        })
    return {
        "version": 1,
        "cluster_id": cluster_id or cluster.get("cluster_id") or "unknown",
        "taken_at": clock.text(),
        "brokers": brokers,
        "partitions": partitions,
        "metadata_level": metadata_level(admin),
    }


def metadata_level(admin: Any) -> int | None:
    """The finalized metadata.version feature level (ApiVersions' finalized features, the
    DescribeFeatures read); None on ZooKeeper, which finalizes none, or when unread: the
    level only gates log-dir cordons, so a failed read costs nothing else."""
    try:
        features = admin.describe_features()
    except Exception:  # noqa: BLE001 - unknown means "do not cordon", said in one line
        return None
    return finalized_level(features)


def finalized_level(features: dict[str, Any]) -> int | None:
    """metadata.version's finalized level in kafka-python's describe_features answer
    ({name: {"supported": .., "finalized": (min, max)}}; its docstring's
    {"finalized_features": {name: (min, max)}} shape is read too)."""
    found = features.get("finalized_features", features).get("metadata.version")
    if isinstance(found, dict):
        found = found.get("finalized")
    return int(found[1]) if found else None


def _still_good(memory: PlacementMemory, topics: list[dict[str, Any]],
                brokers: Iterable[int], max_age: float) -> dict[int, BrokerDirs]:
    """Of ``brokers``, those whose kept answer is young enough and lists every replica
    the metadata now places on them (a replica it lacks was created or moved since, and
    would be put on a guessed dir), with that answer."""
    oldest = time.monotonic() - max_age
    kept = {b: memory.answers[b][1] for b in brokers
            if b in memory.answers and memory.answers[b][0] >= oldest}
    if not kept:
        return {}
    for t in topics:
        if t.get("error_code", 0) != 0:
            continue
        for p in t["partitions"]:
            key = (t["name"], p["partition_index"])
            for broker in p["replica_nodes"]:
                answer = kept.get(broker)
                if answer is not None and key not in answer.replicas:
                    del kept[broker]
    return kept


def _replica(key: tuple[str, int], broker: int, answer: BrokerDirs | None,
             memory: PlacementMemory) -> dict[str, Any]:
    rkey = (key[0], key[1], broker)
    if answer is not None and key in answer.replicas:
        listed, size = answer.replicas[key]
        memory.replica_dirs[rkey] = listed
        memory.replica_sizes[rkey] = size
        return {"broker": broker, "log_dir": listed, "size_bytes": size}
    # Not listed: its dir failed (a failed dir lists nothing), its broker is down, or it
    # is being created by a reassignment. Keep the last known dir only if that dir is
    # no longer online, so a fresh replica is never pinned to a dir it is not on.
    path: str | None = memory.replica_dirs.get(rkey)
    if path is not None and answer is not None and answer.dirs.get(path, {}).get("online"):
        path = None
    if path is None and answer is not None and rkey not in memory.replica_dirs:
        # Never seen (a topic made just before the failure): every replica lives in some
        # dir, so with exactly one dir offline, that is where it was.
        offline = [p for p, info in answer.dirs.items() if not info["online"]]
        if len(offline) == 1:
            path = offline[0]
    return {"broker": broker, "log_dir": path, "size_bytes": memory.replica_sizes.get(rkey, 0)}


def offline_dirs(snapshot: dict[str, Any]) -> set[tuple[int, str]]:
    """(broker, path) of every dir an alive broker reports offline."""
    return {
        (b["id"], d["path"])
        for b in snapshot["brokers"] if b["alive"]
        for d in b["log_dirs"] if not d["online"]
    }
