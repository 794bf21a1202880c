"""Whose state this is: the job's checkpoint and serve's store belong to one cluster (and
the checkpoint to one bus).

A checkpoint holds Kafka offsets of one bus and the detector's state of its clusters; a
store holds one cluster's actions. Used against another cluster or a recreated bus, the
first makes Spark fail with "Some data may have been lost" and the second mixes two
clusters' actions. So the defaults are keyed: `<state>/checkpoints/<cluster>/<bus id>/`
and `<state>/actions/<cluster>.sqlite`; and a configured path records its owner (a
marker file in the checkpoint, a setting in the store) and refuses any other, saying
what to do.

The cluster is named by `[cluster] cluster_id`, else by the Kafka cluster id the
monitored cluster reports; the bus by the Kafka cluster id it reports, which changes
when it is recreated even at the same address.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from core.config import Config, ConfigError, default_state_dir
from core.security import KafkaSecurity, confluent_settings

MARKER = "selfheal-owner.json"
TIMEOUT_SECONDS = 15.0


class OwnerError(ConfigError):
    """State that belongs to another cluster or bus, or an owner that cannot be told."""


@dataclass(frozen=True)
class Owner:
    cluster: str  # [cluster] cluster_id, else the monitored cluster's Kafka id
    bus: str | None = None  # the bus's Kafka cluster id; None: not asked
    bus_servers: str | None = None

    def describe(self) -> str:
        bus = f", bus {self.bus} at {self.bus_servers}" if self.bus else ""
        return f"cluster {self.cluster}{bus}"

    def conflict(self, other: Owner) -> str | None:
        """Why state recorded for ``other`` must not be used by this owner, or None."""
        if other.cluster != self.cluster:
            return f"it belongs to cluster {other.cluster}, this is cluster {self.cluster}"
        if other.bus and self.bus and other.bus != self.bus:
            return (f"it was written on bus {other.bus} (at {other.bus_servers}), this bus "
                    f"is {self.bus} (at {self.bus_servers}): the bus was recreated or "
                    "replaced, and the offsets it holds mean nothing here")
        return None


def safe_name(text: str) -> str:
    """``text`` as one folder or file name (a cluster id may hold anything)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", text).strip(".") or "_"
    return name[:100]


def _kafka_id(servers: str, security: KafkaSecurity, what: str, timeout: float) -> str:
    """The cluster id the Kafka at ``servers`` reports."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from core.bus import _quiet_logger

    settings: dict[str, Any] = {"bootstrap.servers": servers, "logger": _quiet_logger(),
                                **confluent_settings(security, what)}
    admin = AdminClient(settings)
    try:
        found = admin.list_topics(timeout=timeout).cluster_id
    except KafkaException as exc:
        raise OwnerError(f"cannot reach Kafka at {servers} to learn its cluster id: {exc}"
                         ) from None
    if not found:
        raise OwnerError(f"Kafka at {servers} reports no cluster id")
    return str(found)


def cluster_name(config: Config, timeout: float = TIMEOUT_SECONDS) -> str:
    """The monitored cluster's name: [cluster] cluster_id, else its Kafka cluster id."""
    if config.cluster.cluster_id:
        return config.cluster.cluster_id
    servers = config.require_bootstrap_servers()
    try:
        return _kafka_id(servers, config.cluster_security, "[cluster.security]", timeout)
    except OwnerError as exc:
        raise OwnerError(f"{exc}; set [cluster] cluster_id to name the cluster without "
                         "asking it") from None


def identify(config: Config, timeout: float = TIMEOUT_SECONDS) -> Owner:
    """The cluster and the bus this process works for (asks the bus for its id)."""
    servers = config.bus.bootstrap_servers
    if servers is None:
        raise OwnerError("no event bus configured: set [bus] bootstrap_servers (or [cluster] "
                         "bootstrap_servers)")
    bus = _kafka_id(servers, config.bus_security, "[bus.security]", timeout)
    if config.cluster.cluster_id:
        cluster = config.cluster.cluster_id
    elif config.cluster.bootstrap_servers in (None, servers):
        cluster = bus  # the bus is the monitored cluster
    else:
        cluster = cluster_name(config, timeout)
    return Owner(cluster, bus, servers)


# --- checkpoints ------------------------------------------------------------------------


def default_checkpoints() -> Path:
    return default_state_dir() / "checkpoints"


def keyed_checkpoint_root(config: Config, owner: Owner) -> Path:
    """``[stream] checkpoint_dir``, under a folder per cluster and bus when it is the
    default; a configured one is used as it is (its marker guards it)."""
    root = config.stream.checkpoint_dir
    if root != default_checkpoints():
        return root
    return root / safe_name(owner.cluster) / safe_name(owner.bus or "bus")


def claim_checkpoint(path: Path, owner: Owner) -> None:
    """Record ``owner`` in the checkpoint at ``path``, or refuse one recorded for another
    cluster or bus. A checkpoint without a marker (older, or new) is claimed."""
    marker = path / MARKER
    recorded: Owner | None = None
    if marker.exists():
        try:
            recorded = Owner(**json.loads(marker.read_text()))
        except (ValueError, TypeError) as exc:
            raise OwnerError(f"{marker} is unreadable ({exc}); delete it if {path} is this "
                             f"{owner.describe()}'s checkpoint") from None
        why = owner.conflict(recorded)
        if why:
            raise OwnerError(
                f"the checkpoint {path} is not this job's: {why}. Point [stream] "
                "checkpoint_dir (or --checkpoint) at a folder of this cluster's own, or, to "
                f"start this cluster afresh, delete {path}")
        if recorded == owner:
            return
        owner = replace(owner, bus=owner.bus or recorded.bus)  # same cluster, new address
    path.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(owner), indent=1) + "\n")
    os.replace(tmp, marker)  # never half-written


# --- the action store -------------------------------------------------------------------


def default_store() -> Path:
    return default_state_dir() / "actions.sqlite"


def keyed_store(config: Config, cluster: str) -> Path:
    """``[serve] sqlite_path``, one file per cluster when it is the default."""
    path = config.serve.sqlite_path
    if path != default_store():
        return path
    return default_state_dir() / "actions" / f"{safe_name(cluster)}.sqlite"


def store_refusal(path: Path, recorded: str, cluster: str) -> str | None:
    """The refusal when the store at ``path`` records another cluster, else None."""
    if recorded == cluster:
        return None
    return (f"the action store {path} belongs to cluster {recorded}, this is cluster "
            f"{cluster}: its actions, approvals and audit are that cluster's. Point [serve] "
            "sqlite_path (or --sqlite) at a file of this cluster's own, or leave it unset "
            "for one per cluster")


def claim_store(store: Any, path: Path, cluster: str) -> None:
    """Record ``cluster`` in the store's settings (an ActionStore's `setting`), or refuse
    a store that records another."""
    why = store_refusal(path, store.setting("cluster_id", lambda: cluster), cluster)
    if why:
        raise OwnerError(why)
