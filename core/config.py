"""The one typed configuration: a TOML file, then ``SELFHEAL_*`` environment overrides.

Precedence, lowest first: the defaults below, the file (``path`` or ``$SELFHEAL_CONFIG``),
the environment (``SELFHEAL_<SECTION>_<KEY>``, e.g. ``SELFHEAL_DETECT_DISK_SKEW_THRESHOLD``;
``SELFHEAL_POLICY`` for the policy path). When no bootstrap servers are configured, a
registered cluster fallback fills in the cluster: the sandbox registers one (from above,
see `register_cluster_fallback`), so every command works on it with no configuration.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from core.config_fields import (
    ConfigError,
    _at_least,
    _field,
    _key,
    _one_of,
    _opt,
    _port,
    _positive,
    _servers,
    _topic_prefix,
    _url,
)
from core.security import ExporterSecurity, KafkaSecurity, ZooKeeperSecurity
from schemas.registry import DEFAULT_PREFIX, TOPICS

__all__ = ["ConfigError", "Config", "load", "register_cluster_fallback"]

ENV_PREFIX = "SELFHEAL_"
CONFIG_ENV = "SELFHEAL_CONFIG"
POLICY_ENV = "SELFHEAL_POLICY"

def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/kafka-selfheal`` (next to the sandbox's own state)."""
    base = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state"))
    return base / "kafka-selfheal"


def _checkpoints() -> Path:
    return default_state_dir() / "checkpoints"


def _sqlite() -> Path:
    return default_state_dir() / "actions.sqlite"


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterConfig:
    """The monitored Kafka cluster."""

    bootstrap_servers: str | None = _field(None, _opt(_servers))
    zookeeper_connect: str | None = _field(None)
    # KRaft by default: every Kafka 4.x cluster; "zk" for Kafka 3.9 and older on ZooKeeper
    mode: str = _field("kraft", _one_of("zk", "kraft"))
    cluster_id: str | None = _field(None)
    exporter_urls: tuple[str, ...] = _field(())
    # HMAC key over every action on the bus: the job and the CLI sign with it, serve runs
    # only what it verifies (core/signing.py). One long random secret per cluster.
    action_signing_key: str | None = _field(None, _opt(_key), secret=True)


@dataclasses.dataclass(frozen=True, slots=True)
class BusConfig:
    """The Kafka that carries the selfheal.* topics; unset, the monitored cluster."""

    bootstrap_servers: str | None = _field(None, _opt(_servers))
    topic_prefix: str = _field(DEFAULT_PREFIX, _topic_prefix)


@dataclasses.dataclass(frozen=True, slots=True)
class CollectConfig:
    scrape_interval_seconds: float = _field(10.0, _positive)
    snapshot_interval_seconds: float = _field(60.0, _positive)
    request_timeout_seconds: float = _field(5.0, _positive)
    backoff_initial_seconds: float = _field(1.0, _positive)
    backoff_max_seconds: float = _field(60.0, _positive)
    # With no [cluster] exporter_urls, scrape http://<broker host>:<exporter_port><path>
    # for every broker the Admin API lists.
    exporter_port: int | None = _field(None, _opt(_port))
    exporter_path: str = _field("/metrics")
    # Cheap DescribeLogDirs probe (dir errors only, no partitions) between full snapshots.
    log_dir_probe_interval_seconds: float = _field(2.0, _positive)
    # The ZooKeeper collector re-reads both paths this often, in case a watch was lost.
    zk_resync_interval_seconds: float = _field(30.0, _positive)
    # Log-dir events closer together than this make one snapshot.
    event_coalesce_seconds: float = _field(0.2, _at_least(0.0))
    # Each collector's own Prometheus endpoint; port 0 picks a free one and prints it.
    http_host: str = _field("127.0.0.1")
    metrics_http_port: int = _field(0, _port)
    zk_http_port: int = _field(0, _port)
    snapshots_http_port: int = _field(0, _port)
    # A snapshot crosses the bus in chunks of at most this many bytes of JSON, then a
    # manifest (schemas/snapshot_chunks.py); 4 KiB to the 8 MiB a chunk record may be.
    snapshot_chunk_bytes: int = _field(4 << 20, lambda v: None if 4096 <= v <= 8 << 20
                                       else "must be 4096 to 8388608")


@dataclasses.dataclass(frozen=True, slots=True)
class DetectConfig:
    # A dir is skewed above threshold x its broker's mean usage ratio (plan/disks.py).
    disk_skew_threshold: float = _field(1.10, _at_least(1.0))
    # Skew must last this long before a move is proposed: a burst of writes is not skew.
    skew_window_seconds: float = _field(300.0, _positive)
    # A broker leading more than threshold x its fair share of partitions is imbalanced.
    leader_imbalance_threshold: float = _field(1.10, _at_least(1.0))
    # Skew smaller than this (bytes above the limit) is not worth a move: near-empty
    # dirs are "skewed" by a few segments.
    disk_skew_min_bytes: int = _field(1 << 30, _at_least(0))
    # Leaders must stay unbalanced this long; Kafka's own preferred-leader rebalance
    # (leader.imbalance.check.interval.seconds, 300 s) gets the first go.
    leader_window_seconds: float = _field(600.0, _positive)
    # A log-dir failure signal that names no dir (a ZooKeeper notification) is tied to
    # the dir a gauge or snapshot shows offline within this long.
    signal_window_seconds: float = _field(120.0, _positive)
    # An offline dir is planned from a snapshot taken after its first signal (the
    # collector takes one at once): an older one may not know partitions created since.
    # Past this wait with none, the latest snapshot is used, the dir marked offline.
    fresh_snapshot_wait_seconds: float = _field(15.0, _at_least(0.0))
    # A broker that stops while one of its dirs is failed is paged unless it is back
    # within this long (an operator restarting it after replacing the disk).
    broker_return_grace_seconds: float = _field(60.0, _at_least(0.0))
    # A broker gone (deregistered, or fenced) this long with no log-dir failure open gets
    # its replicas re-replicated on the others; back before that, nothing is done.
    broker_death_grace_seconds: float = _field(60.0, _at_least(0.0))
    # A record dated more than this ahead of the job's clock is dead-lettered: one record
    # from the far future would move event time (and the watermark) for its whole cluster.
    max_clock_ahead_seconds: float = _field(300.0, _positive)
    # A consumer group whose rack locality stays this far below what its KIP-881 plan
    # achieves (a share, 0..1) for consumer_locality_window_seconds gets an
    # assign_consumers action; a rebalance in progress is not a reason.
    consumer_locality_margin: float = _field(0.10, _at_least(0.0))
    consumer_locality_window_seconds: float = _field(300.0, _positive)


@dataclasses.dataclass(frozen=True, slots=True)
class StreamConfig:
    checkpoint_dir: Path = dataclasses.field(default_factory=_checkpoints)
    # One micro-batch per second: a failure reaches selfheal.actions within ~2-3 s
    # (snapshot ~1 s after the event, then up to a trigger interval plus a batch).
    trigger_interval_seconds: float = _field(1.0, _positive)
    # Event-time watermark delay: how late a record may come and still date a failure.
    watermark_delay_seconds: float = _field(60.0, _positive)
    # Caps a micro-batch after downtime, so catching up never loads hours at once:
    # broker-metrics records per batch, and snapshots (tens of MB each) per batch.
    # Log-dir events are never held back.
    max_offsets_per_trigger: int = _field(250_000, _positive)
    # Snapshot records (chunks of up to [collect] snapshot_chunk_bytes, and manifests).
    max_snapshots_per_trigger: int = _field(32, _positive)
    # Where a job with a new checkpoint starts; afterwards the checkpoint says.
    starting_offsets: str = _field("latest", _one_of("latest", "earliest"))
    # The job's Prometheus endpoint; port 0 picks a free one and prints it.
    http_host: str = _field("127.0.0.1")
    metrics_http_port: int = _field(0, _port)
    # Tasks that decode and validate a micro-batch: each Great Expectations run costs
    # ~0.15 s before its first row, so one task per batch suits a small machine; 0 is
    # one per core (Spark's default parallelism).
    validate_tasks: int = _field(1, _at_least(0))
    # Partitions of the detector's state (keyed by cluster). Fixed when a checkpoint is
    # created: more only pay off with many monitored clusters.
    state_partitions: int = _field(1, _positive)
    # A query that fails while it runs (a bus outage in mid-batch: an executor's fetch or
    # the sink's delivery timed out) is started again from its checkpoint, this many times
    # in a row, 5 s apart and doubling up to a minute; a query that ran 10 minutes since
    # resets the count. 0: a failed query ends the job (exit 1).
    query_restarts: int = _field(5, _at_least(0))


@dataclasses.dataclass(frozen=True, slots=True)
class ServeConfig:
    sqlite_path: Path = dataclasses.field(default_factory=_sqlite)
    http_host: str = _field("127.0.0.1")
    http_port: int = _field(8787, _port)
    link_secret: str | None = _field(None, secret=True)  # signs one-click approval links
    api_token: str | None = _field(None, secret=True)  # bearer token for the HTTP API
    # What approval links start with (they go into pager alerts); unset: http://host:port.
    link_base_url: str | None = _field(None, _opt(_url))
    # ZooKeeper for the one-active-executor lock; unset: the cluster's own ZooKeeper, and
    # in KRaft without one, a lease through a Kafka consumer group on the bus.
    lock_zookeeper: str | None = _field(None)
    intake_group: str = _field("selfheal-executor")  # consumer group on selfheal.actions
    tick_seconds: float = _field(1.0, _positive)  # how often the executor re-reads the cluster
    execution_timeout_seconds: float = _field(3600.0, _positive)  # then reverted: failed
    verify_timeout_seconds: float = _field(120.0, _positive)  # target state not seen: failed


@dataclasses.dataclass(frozen=True, slots=True)
class PagerConfig:
    """Where `serve` sends pages (the alerts Alertmanager hands it, with the fix's one-click
    link): PagerDuty's Events API v2 and/or a Slack incoming webhook. Neither set: no pages."""

    pagerduty_url: str = _field("https://events.pagerduty.com/v2/enqueue", _url)
    # The Events API v2 integration key of the PagerDuty service; unset: PagerDuty is off.
    pagerduty_routing_key: str | None = _field(None, secret=True)
    # A Slack incoming-webhook URL (it is the secret); unset: Slack is off.
    slack_webhook_url: str | None = _field(None, _opt(_url), secret=True)
    # A page that could not be delivered (pager down, 5xx, 429, timeout) is tried again
    # after retry_initial_seconds, doubling up to retry_max_seconds, until it is delivered.
    retry_initial_seconds: float = _field(1.0, _positive)
    retry_max_seconds: float = _field(300.0, _positive)
    request_timeout_seconds: float = _field(10.0, _positive)
    # A storage alert waits this long for the fix to be proposed, so its first page carries
    # the one-click link; past it, it pages without one (the link follows when it exists).
    link_wait_seconds: float = _field(30.0, _at_least(0.0))


SECTIONS: dict[str, type] = {
    "cluster": ClusterConfig,
    "bus": BusConfig,
    "collect": CollectConfig,
    "detect": DetectConfig,
    "stream": StreamConfig,
    "serve": ServeConfig,
    "pager": PagerConfig,
    "cluster.security": KafkaSecurity,
    "bus.security": KafkaSecurity,  # unset while the bus is the cluster: the cluster's
    "cluster.zookeeper_security": ZooKeeperSecurity,
    "cluster.exporter_security": ExporterSecurity,
}


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    cluster: ClusterConfig = dataclasses.field(default_factory=ClusterConfig)
    bus: BusConfig = dataclasses.field(default_factory=BusConfig)
    collect: CollectConfig = dataclasses.field(default_factory=CollectConfig)
    detect: DetectConfig = dataclasses.field(default_factory=DetectConfig)
    stream: StreamConfig = dataclasses.field(default_factory=StreamConfig)
    serve: ServeConfig = dataclasses.field(default_factory=ServeConfig)
    pager: PagerConfig = dataclasses.field(default_factory=PagerConfig)
    cluster_security: KafkaSecurity = dataclasses.field(default_factory=KafkaSecurity)
    bus_security: KafkaSecurity = dataclasses.field(default_factory=KafkaSecurity)
    cluster_zookeeper_security: ZooKeeperSecurity = dataclasses.field(
        default_factory=ZooKeeperSecurity)
    cluster_exporter_security: ExporterSecurity = dataclasses.field(
        default_factory=ExporterSecurity)
    policy: Path | None = None  # the executor's policy TOML; None: its built-in defaults
    # Where the values came from, lowest precedence first, for `--explain` style output.
    sources: tuple[str, ...] = ()

    def topic(self, name: str) -> str:
        """``topic("actions")`` -> ``"selfheal.actions"`` with the configured prefix."""
        suffix = name.removeprefix(DEFAULT_PREFIX)
        if suffix not in TOPICS:
            raise ValueError(f"unknown topic {name!r}; known: {', '.join(TOPICS)}")
        return self.bus.topic_prefix + suffix

    def require_bootstrap_servers(self) -> str:
        """The monitored cluster's bootstrap servers, or a ConfigError saying how to set them."""
        if self.cluster.bootstrap_servers is None:
            raise ConfigError(
                "no Kafka cluster configured: set [cluster] bootstrap_servers in the config "
                f"file (${CONFIG_ENV}) or SELFHEAL_CLUSTER_BOOTSTRAP_SERVERS, or start the "
                "sandbox with `selfheal sandbox up`")
        return self.cluster.bootstrap_servers


def _base(hint: Any) -> Any:
    """``X | None`` -> X."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return inner
    return hint


def _shown(raw: Any, secret: bool) -> str:
    return f"a value of {len(str(raw))} characters" if secret else repr(raw)


def _coerce(raw: Any, hint: Any, key: str, where: str, from_env: bool,
            relative_to: Path | None, secret: bool = False) -> Any:
    """Turn a TOML value or an environment string into the field's type."""
    optional = type(None) in typing.get_args(hint)
    kind = _base(hint)

    def bad(expected: str) -> ConfigError:
        return ConfigError(f"{key} {where}: expected {expected}, got {_shown(raw, secret)}")

    if from_env and raw == "" and optional:
        return None  # an empty variable unsets a value the file gave
    if kind is str:
        if not isinstance(raw, str):
            raise bad("a string")
        return raw
    if kind is bool:
        if from_env and raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        if not isinstance(raw, bool):
            raise bad("true or false")
        return raw
    if kind is int:
        if from_env:
            try:
                return int(raw)
            except ValueError:
                raise bad("an integer") from None
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise bad("an integer")
        return raw
    if kind is float:
        if from_env:
            try:
                return float(raw)
            except ValueError:
                raise bad("a number") from None
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise bad("a number")
        return float(raw)
    if kind is Path:
        if not isinstance(raw, str) or not raw:
            raise bad("a path")
        path = Path(raw).expanduser()
        # Relative paths in a file mean "next to the file", so a config dir can move.
        return relative_to / path if relative_to is not None and not path.is_absolute() else path
    if typing.get_origin(kind) is tuple:
        items = raw.split(",") if isinstance(raw, str) else raw
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise bad("a list of strings (or one comma-separated string)")
        return tuple(i.strip() for i in items if i.strip())
    raise TypeError(f"config field {key} has unsupported type {hint}")


class _Builder:
    """Collects values section by section, remembering which keys were set explicitly."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
        self.policy: Path | None = None
        self.sources: list[str] = []

    def set(self, section: str, key: str, raw: Any, where: str, from_env: bool,
            relative_to: Path | None = None) -> None:
        cls = SECTIONS[section]
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if key not in fields:
            raise ConfigError(f"unknown key {section}.{key} {where}; known: "
                              + ", ".join(fields))
        hints = typing.get_type_hints(cls)
        full = f"{section}.{key}"
        secret = not fields[key].repr  # _field(secret=True): never echoed in an error
        value = _coerce(raw, hints[key], full, where, from_env, relative_to, secret)
        check = fields[key].metadata.get("check")
        problem = check(value) if check and value is not None else None
        if problem:
            raise ConfigError(f"{full} {where}: {problem}, got {_shown(raw, secret)}")
        self.values[section][key] = value

    def is_set(self, section: str, key: str) -> bool:
        return key in self.values[section]


def _read_file(builder: _Builder, path: Path) -> None:
    where = f"in {path}"
    try:
        with path.open("rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; fix ${CONFIG_ENV} or the "
                          "--config path, or leave both unset for the defaults") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    for name, body in doc.items():
        if name == "policy":
            builder.policy = _coerce(body, Path | None, "policy", where, False, path.parent)
        elif name in SECTIONS:
            if not isinstance(body, dict):
                raise ConfigError(f"{name} {where}: expected a [{name}] table")
            for key, raw in body.items():
                if f"{name}.{key}" in SECTIONS and isinstance(raw, dict):  # [cluster.security]
                    for sub, value in raw.items():
                        builder.set(f"{name}.{key}", sub, value, where, False, path.parent)
                else:
                    builder.set(name, key, raw, where, False, path.parent)
        else:
            raise ConfigError(f"unknown section or key {name!r} {where}; known: "
                              + ", ".join([*SECTIONS, "policy"]))
    builder.sources.append(str(path))


def _read_env(builder: _Builder, env: Mapping[str, str]) -> None:
    used = False
    for var, raw in sorted(env.items()):
        if var == POLICY_ENV:
            builder.policy = None if raw == "" else Path(raw).expanduser()
            used = True
            continue
        # Longest section first: SELFHEAL_CLUSTER_SECURITY_PROTOCOL is [cluster.security].
        for section in sorted(SECTIONS, key=len, reverse=True):
            head = f"{ENV_PREFIX}{section.upper().replace('.', '_')}_"
            if var.startswith(head):
                key = var[len(head):].lower()
                builder.set(section, key, raw, f"from {var}", True)
                used = True
                break
    if used:
        builder.sources.append("environment")


# A source of cluster defaults for when none is configured: (values, where) or None.
# The product ships none; a layer above it (the sandbox) registers one, so every command
# works on the local cluster with no configuration while the product never imports it.
ClusterFallback = Callable[[Mapping[str, str]], "tuple[Mapping[str, Any], str] | None"]
_CLUSTER_FALLBACKS: list[ClusterFallback] = []


def register_cluster_fallback(fallback: ClusterFallback) -> None:
    """Let ``fallback`` fill the [cluster] keys a user left unset (once per function)."""
    if fallback not in _CLUSTER_FALLBACKS:
        _CLUSTER_FALLBACKS.append(fallback)


def _from_fallbacks(builder: _Builder, env: Mapping[str, str]) -> None:
    """Fill the cluster section from the first registered fallback that has a cluster."""
    for fallback in _CLUSTER_FALLBACKS:
        found = fallback(env)
        if found is None:
            continue
        values, where = found
        for key, value in values.items():
            if not builder.is_set("cluster", key) and value is not None:
                builder.values["cluster"][key] = value
        builder.sources.append(where)
        return


def load(path: str | Path | None = None, env: Mapping[str, str] | None = None,
         use_fallbacks: bool = True) -> Config:
    """The configuration from defaults, ``path`` (else ``$SELFHEAL_CONFIG``) and ``env``."""
    env = os.environ if env is None else env
    builder = _Builder()
    file = path if path is not None else env.get(CONFIG_ENV) or None
    if file is not None:
        _read_file(builder, Path(file).expanduser())
    _read_env(builder, env)
    if use_fallbacks and not builder.is_set("cluster", "bootstrap_servers"):
        _from_fallbacks(builder, env)
    cluster_servers = builder.values["cluster"].get("bootstrap_servers")
    bus_servers = builder.values["bus"].get("bootstrap_servers")
    if bus_servers is None and cluster_servers:
        builder.values["bus"]["bootstrap_servers"] = cluster_servers
    if bus_servers in (None, cluster_servers) and not builder.values["bus.security"]:
        builder.values["bus.security"] = dict(builder.values["cluster.security"])
    sections = {name.replace(".", "_"): cls(**builder.values[name])
                for name, cls in SECTIONS.items()}
    _check_cluster(sections["cluster"], builder.sources)
    return Config(**sections, policy=builder.policy, sources=tuple(builder.sources))


def _check_cluster(cluster: Any, sources: list[str]) -> None:
    """What no single key shows: a ZooKeeper named for a KRaft cluster."""
    if cluster.mode == "kraft" and cluster.zookeeper_connect:
        raise ConfigError(
            f"[cluster] zookeeper_connect is set ({', '.join(sources) or 'defaults'}) but "
            "[cluster] mode is \"kraft\": a KRaft cluster (every Kafka 4.x) has no "
            "ZooKeeper; remove zookeeper_connect, or set mode = \"zk\" if the cluster runs "
            "on ZooKeeper (Kafka 3.9 or older)")
