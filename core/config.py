"""The one typed configuration: a TOML file, then ``SELFHEAL_*`` environment overrides.

Precedence, lowest first: the defaults below, the file (``path`` or ``$SELFHEAL_CONFIG``),
the environment (``SELFHEAL_<SECTION>_<KEY>``, e.g. ``SELFHEAL_DETECT_DISK_SKEW_THRESHOLD``;
``SELFHEAL_POLICY`` for the policy path). When no bootstrap servers are configured, a
registered cluster fallback fills in the cluster: the sandbox registers one (from above,
see `register_cluster_fallback`), so every command works on it with no configuration.

Every key is declared once below with its type, default, check and meaning (`doc`);
docs/config-reference.md and core/selfheal.example.toml are generated from these
declarations (`make config-reference`), and a test fails when either is stale.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from core.config_values import (
    CONFIG_ENV,
    Builder,
    ConfigError,
    at_least,
    env_var,
    one_of,
    optional,
    port,
    positive,
    read_env,
    read_file,
    servers,
    signing_key,
    topic_prefix,
    url,
)
from core.config_values import field as _field
from core.security import ExporterSecurity, KafkaSecurity, ZooKeeperSecurity
from schemas.registry import DEFAULT_PREFIX, TOPICS

__all__ = ["SECTIONS", "Config", "ConfigError", "default_state_dir", "env_var", "load",
           "register_cluster_fallback"]


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/kafka-selfheal`` (next to the sandbox's own state)."""
    base = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state"))
    return base / "kafka-selfheal"


def _checkpoints() -> Path:
    return default_state_dir() / "checkpoints"


def _sqlite() -> Path:
    return default_state_dir() / "actions.sqlite"


_STATE = "$XDG_STATE_HOME/kafka-selfheal"  # $XDG_STATE_HOME unset: ~/.local/state


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterConfig:
    """The monitored Kafka cluster. Unset, the running sandbox's (`selfheal sandbox up`)."""

    bootstrap_servers: str | None = _field(
        None, optional(servers), example='"kafka-1:9092,kafka-2:9092"',
        doc="The monitored cluster's bootstrap servers, host:port[,host:port...].")
    zookeeper_connect: str | None = _field(
        None, example='"zk-1:2181"',
        doc="Its ZooKeeper, for a cluster in ZooKeeper mode (Kafka 3.9 and older) only.")
    mode: str = _field(
        "kraft", one_of("zk", "kraft"),
        doc="\"kraft\" (every Kafka 4.x) or \"zk\" for Kafka 3.9 and older on ZooKeeper.")
    cluster_id: str | None = _field(
        None, example='"prod-eu-1"',
        doc="The name actions, checkpoints and stores are keyed by; unset, the id Kafka "
            "reports.")
    exporter_urls: tuple[str, ...] = _field(
        (), example='["1=http://kafka-1:7071/metrics"]',
        doc="One JMX exporter per broker as <broker id>=<url>; a plain URL is matched to "
            "the one broker on its host. Empty: see [collect] exporter_port.")
    action_signing_key: str | None = _field(
        None, optional(signing_key), secret=True, example='"<64 hex>"',
        doc="HMAC key over every action on the bus: the job and `selfheal execute` sign "
            "with it, serve runs only what it verifies. Required by stream, serve and "
            "execute; one long random secret per cluster "
            "(`python3 -c 'import secrets; print(secrets.token_hex(32))'`).")


@dataclasses.dataclass(frozen=True, slots=True)
class BusConfig:
    """The Kafka that carries the selfheal.* topics; unset, the monitored cluster."""

    bootstrap_servers: str | None = _field(
        None, optional(servers), example='"bus-1:9092"',
        doc="The bus's bootstrap servers; unset, [cluster] bootstrap_servers.")
    topic_prefix: str = _field(
        DEFAULT_PREFIX, topic_prefix, doc="Prefix of every selfheal topic's name.")


@dataclasses.dataclass(frozen=True, slots=True)
class CollectConfig:
    """The three collectors (`selfheal collect metrics|zk|snapshots`)."""

    scrape_interval_seconds: float = _field(10.0, positive,
                                            doc="How often the JMX exporters are scraped.")
    metrics_keepalive_seconds: float = _field(
        60.0, lambda v: None if 0 <= v <= 60 else "must be 0 to 60",
        doc="While no dir reads offline and every exporter answers, an exporter's samples "
            "go on the bus whole this often, and in between only a gauge whose value "
            "changed (a dir going offline goes at once): an idle job runs no batch per "
            "scrape. Otherwise every scrape goes whole. 0: every scrape whole. At most 60: "
            "the job's stalled alert expects a batch every 2 minutes. Past 100 brokers the "
            "brokers' keepalives are spread over the interval, about 100 a phase.")
    snapshot_interval_seconds: float = _field(
        60.0, positive, doc="How often a full cluster snapshot (Metadata, DescribeLogDirs, "
                            "consumer groups) is taken; events trigger more.")
    request_timeout_seconds: float = _field(5.0, positive,
                                            doc="One scrape or Admin request at most.")
    backoff_initial_seconds: float = _field(
        1.0, positive, doc="After a failed scrape or request, wait this long, doubling ...")
    backoff_max_seconds: float = _field(60.0, positive, doc="... up to this.")
    exporter_port: int | None = _field(
        None, optional(port), example="7071",
        doc="With no [cluster] exporter_urls, every broker the Admin API lists is scraped "
            "at http://<its host>:<exporter_port><exporter_path>.")
    exporter_path: str = _field("/metrics", doc="The exporters' path (see exporter_port).")
    log_dir_probe_interval_seconds: float = _field(
        2.0, positive, doc="A cheap DescribeLogDirs probe (dir errors only, no partitions) "
                           "between full snapshots; any change triggers one.")
    zk_resync_interval_seconds: float = _field(
        30.0, positive, doc="The ZooKeeper collector re-reads both paths this often, in "
                            "case a watch was lost.")
    event_coalesce_seconds: float = _field(
        0.2, at_least(0.0), doc="Log-dir events closer together than this make one snapshot.")
    http_host: str = _field("127.0.0.1", doc="Where each collector serves its /metrics.")
    metrics_http_port: int = _field(0, port, doc="`collect metrics`'s /metrics port; 0 "
                                                 "picks a free one and prints it.")
    zk_http_port: int = _field(0, port, doc="`collect zk`'s /metrics port (0: a free one).")
    snapshots_http_port: int = _field(0, port, doc="`collect snapshots`'s /metrics port "
                                                   "(0: a free one).")
    snapshot_chunk_bytes: int = _field(
        4 << 20, lambda v: None if 4096 <= v <= 8 << 20 else "must be 4096 to 8388608",
        doc="A snapshot crosses the bus in chunks of at most this many bytes of JSON, then "
            "a manifest; 4 KiB to the 8 MiB a chunk record may be.")


@dataclasses.dataclass(frozen=True, slots=True)
class DetectConfig:
    """What the job counts as wrong, and how long it waits before acting."""

    disk_skew_threshold: float = _field(
        1.10, at_least(1.0), doc="A dir is skewed above this x its broker's mean usage "
                                 "ratio (as the disk planner measures it).")
    skew_window_seconds: float = _field(
        300.0, positive, doc="Skew must last this long before a move is proposed: a burst "
                             "of writes is not skew.")
    leader_imbalance_threshold: float = _field(
        1.10, at_least(1.0), doc="A broker leading more than this x its fair share of "
                                 "partitions is imbalanced.")
    disk_skew_min_bytes: int = _field(
        1 << 30, at_least(0), doc="Skew smaller than this (bytes above the limit) is not "
                                  "worth a move: near-empty dirs are skewed by a few segments.")
    leader_window_seconds: float = _field(
        600.0, positive, doc="Leaders must stay unbalanced this long; Kafka's own preferred-"
                             "leader rebalance (300 s) gets the first go.")
    signal_window_seconds: float = _field(
        120.0, positive, doc="A failure signal that names no dir (a ZooKeeper notification) "
                             "is tied to the dir a gauge or snapshot shows offline within this.")
    fresh_snapshot_wait_seconds: float = _field(
        15.0, at_least(0.0), doc="An offline dir is planned from a snapshot taken after its "
                                 "first signal; past this wait with none, from the latest "
                                 "one with the dir marked offline.")
    broker_return_grace_seconds: float = _field(
        60.0, at_least(0.0), doc="A broker that stops while one of its dirs is failed is "
                                 "paged unless back within this (a restart after a disk "
                                 "replacement).")
    broker_death_grace_seconds: float = _field(
        60.0, at_least(0.0), doc="A broker gone this long with no log-dir failure open has "
                                 "its replicas re-replicated on the others.")
    max_clock_ahead_seconds: float = _field(
        300.0, positive, doc="A record dated further ahead of the job's clock is dead-"
                             "lettered: it would move event time for its whole cluster.")
    consumer_locality_margin: float = _field(
        0.10, at_least(0.0), doc="A consumer group reading this share (0..1) less on its "
                                 "own racks than its KIP-881 plan achieves ...")
    consumer_locality_window_seconds: float = _field(
        300.0, positive, doc="... for this long gets an assign_consumers action.")
    returned_trust_seconds: float = _field(
        900.0, positive, doc="A log dir that failed and came back online stays cordoned "
                             "(Kafka 4.3+) until online this long.")


@dataclasses.dataclass(frozen=True, slots=True)
class StreamConfig:
    """The detection job (`selfheal stream`)."""

    checkpoint_dir: Path = _field(
        factory=_checkpoints, shown=f"{_STATE}/checkpoints",
        example='"/var/lib/kafka-selfheal/checkpoints"',
        doc="Spark's checkpoint (offsets and the detector's state), one folder per cluster "
            "and bus inside it ($XDG_STATE_HOME unset: ~/.local/state). Back it up with the job "
            "stopped.")
    trigger_interval_seconds: float = _field(
        1.0, positive, doc="One micro-batch this often: latency is about a snapshot (~1 s) "
                           "plus this plus a batch.")
    watermark_delay_seconds: float = _field(
        60.0, positive, doc="How late a record may come and still date a failure.")
    max_offsets_per_trigger: int = _field(
        250_000, positive, doc="Broker-metrics records per micro-batch at most, so catching "
                               "up never loads hours at once (log-dir events are never held "
                               "back).")
    max_snapshots_per_trigger: int = _field(
        32, positive, doc="Snapshot records (chunks and manifests) per micro-batch at most.")
    starting_offsets: str = _field(
        "latest", one_of("latest", "earliest"),
        doc="Where a job with a new checkpoint starts (the snapshots: at the cluster's "
            "last one); afterwards the checkpoint says.")
    http_host: str = _field("127.0.0.1", doc="Where the job serves its /metrics.")
    metrics_http_port: int = _field(0, port, doc="The job's /metrics port (0: a free one, "
                                                 "printed).")
    # Read, no longer used: validation and the detector's state moved to the driver
    # (docs/streaming.md); kept so that files naming them still load.
    validate_tasks: int = _field(
        1, at_least(0), doc="Unused: records are validated on the driver, in one batch "
                            "(kept so that files naming it still load).")
    state_partitions: int = _field(
        1, positive, doc="Unused: the detector's state is the driver's, in the checkpoint "
                         "(kept so that files naming it still load).")
    query_restarts: int = _field(
        5, at_least(0), doc="A query that fails while it runs starts again from its "
                            "checkpoint this many times in a row (5 s apart, doubling to a "
                            "minute; 10 healthy minutes reset the count). 0: the job exits 1.")


@dataclasses.dataclass(frozen=True, slots=True)
class ServeConfig:
    """`selfheal serve`: the executor, the approval pages, the API and the webhook."""

    sqlite_path: Path = _field(
        factory=_sqlite, shown=f"{_STATE}/actions.sqlite",
        example='"/var/lib/kafka-selfheal/actions.sqlite"',
        doc="The action store (SQLite, WAL): actions, audit, approvals, pages. Shared by "
            "every serve of the cluster ($XDG_STATE_HOME unset: ~/.local/state); back it up "
            "with `sqlite3 .backup`.")
    http_host: str = _field("127.0.0.1", doc="Where serve listens.")
    http_port: int = _field(8787, port, doc="serve's port (0: a free one, printed).")
    link_secret: str | None = _field(
        None, secret=True, example='"..."',
        doc="Signs one-click approval links; unset, serve makes one and keeps it in the "
            "store.")
    api_token: str | None = _field(
        None, secret=True, example='"..."',
        doc="Bearer token of the HTTP API and the Alertmanager webhook; unset, serve makes "
            "one, keeps it in the store and prints it.")
    link_base_url: str | None = _field(
        None, optional(url), example='"https://selfheal.example.com"',
        doc="What approval links start with (they go into pages); unset, http://host:port.")
    lock_zookeeper: str | None = _field(
        None, example='"zk-1:2181"',
        doc="ZooKeeper for the one-active-executor lock; unset, the cluster's own, and in "
            "KRaft without one a consumer-group lease on the bus.")
    intake_group: str = _field("selfheal-executor",
                               doc="Consumer group reading the actions topic.")
    tick_seconds: float = _field(1.0, positive,
                                 doc="How often the executor re-reads the cluster.")
    execution_timeout_seconds: float = _field(
        3600.0, positive, doc="Moves not done by then are reverted and the action fails.")
    verify_timeout_seconds: float = _field(
        120.0, positive, doc="Target state not seen this long after the moves: failed.")
    stall_seconds: float = _field(
        300.0, positive, doc="An executing action that moves no bytes this long is reported "
                             "stalled (audit, selfheal_actions_stalled, the dashboard).")


@dataclasses.dataclass(frozen=True, slots=True)
class PagerConfig:
    """Where `serve` sends pages (the alerts Alertmanager hands it, with the fix's one-click
    link): PagerDuty's Events API v2 and/or a Slack incoming webhook. Neither set: no pages."""

    pagerduty_url: str = _field("https://events.pagerduty.com/v2/enqueue", url,
                                doc="The Events API v2 endpoint.")
    pagerduty_routing_key: str | None = _field(
        None, secret=True, example='"..."',
        doc="The PagerDuty service's Events API v2 integration key; unset, PagerDuty is off.")
    slack_webhook_url: str | None = _field(
        None, optional(url), secret=True, example='"https://hooks.slack.com/services/..."',
        doc="A Slack incoming-webhook URL (it is the secret); unset, Slack is off.")
    retry_initial_seconds: float = _field(
        1.0, positive, doc="An undelivered page (pager down, 5xx, 429, timeout) is tried "
                           "again after this, doubling ...")
    retry_max_seconds: float = _field(300.0, positive,
                                      doc="... up to this, until it is delivered.")
    request_timeout_seconds: float = _field(10.0, positive, doc="One delivery attempt.")
    link_wait_seconds: float = _field(
        30.0, at_least(0.0), doc="A storage alert waits this long for its fix, so its first "
                                 "page carries the link; past it, it pages without one.")


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

POLICY_DOC = ("The executor's policy file (what runs by itself, limits, the breaker); "
              "relative to this file. Unset: the built-in defaults.")


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
    policy: Path | None = None  # POLICY_DOC; None: the executor's built-in defaults
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


# A source of cluster defaults for when none is configured: (values, where) or None.
# The product ships none; a layer above it (the sandbox) registers one, so every command
# works on the local cluster with no configuration while the product never imports it.
ClusterFallback = Callable[[Mapping[str, str]], "tuple[Mapping[str, Any], str] | None"]
_CLUSTER_FALLBACKS: list[ClusterFallback] = []


def register_cluster_fallback(fallback: ClusterFallback) -> None:
    """Let ``fallback`` fill the [cluster] keys a user left unset (once per function)."""
    if fallback not in _CLUSTER_FALLBACKS:
        _CLUSTER_FALLBACKS.append(fallback)


def _from_fallbacks(builder: Builder, env: Mapping[str, str]) -> None:
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
    builder = Builder(SECTIONS)
    file = path if path is not None else env.get(CONFIG_ENV) or None
    if file is not None:
        read_file(builder, Path(file).expanduser())
    read_env(builder, env)
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
