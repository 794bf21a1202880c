"""The sandbox's defaults, plugged into the product from above.

The product never imports the sandbox. When the root CLI (or a test session, or a bench)
runs next to a checkout with the sandbox, `install()` registers three things:

- a cluster fallback (`core.config`): with no [cluster] bootstrap_servers configured, the
  running sandbox's state file names the cluster, its ZooKeeper, mode, id and exporters;
- an exporter source (`streams.collect.targets`): which broker exports which URL, and each
  broker's rack, when the monitored cluster is the sandbox;
- the Spark connector jars (`streams.spark`): the repo-local copy Maven put in jvm/lib,
  so the job runs offline; without it Spark resolves the connector by its coordinate.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.config import Config, ConfigError, register_cluster_fallback
from sandbox.jars import JarsMissing, spark_connector_jars
from sandbox.state import SandboxNotRunning, load


def cluster_fallback(env: Mapping[str, str]) -> tuple[dict[str, Any], str] | None:
    """The running sandbox's cluster, or None when none is running."""
    work_dir = env.get("SELFHEAL_SANDBOX_DIR")
    try:
        state = load(Path(work_dir).expanduser() if work_dir else None)
    except SandboxNotRunning:
        return None  # nothing configured and nothing running: require_bootstrap_servers() says so
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"the sandbox state file is unreadable ({exc}); bring the sandbox up again with "
            "`selfheal sandbox up`, or set SELFHEAL_CLUSTER_BOOTSTRAP_SERVERS") from None
    found = {
        "bootstrap_servers": state.bootstrap_servers,
        "zookeeper_connect": state.zookeeper_connect,
        "mode": state.mode,
        "cluster_id": state.cluster_id,
        "exporter_urls": tuple(b.exporter_url for b in state.brokers if b.exporter_url),
        "action_signing_key": state.action_signing_key,
    }
    return found, f"sandbox {state.path}"


def exporters(config: Config) -> tuple[dict[str, int], dict[int, str | None]]:
    """URL -> broker and broker -> rack from the sandbox state, when the monitored
    cluster is that sandbox: the config came from it, or names its cluster id or its
    exact bootstrap servers. A state file of some other cluster must not relabel
    brokers."""
    try:
        state = load()
    except (SandboxNotRunning, OSError, ValueError, KeyError, TypeError):
        return {}, {}
    cluster = config.cluster
    servers = set((cluster.bootstrap_servers or "").split(","))
    same = (any(source.startswith("sandbox ") for source in config.sources)
            or cluster.cluster_id == state.cluster_id
            or servers == set(state.bootstrap_servers.split(",")))
    if not same:
        return {}, {}
    urls = {b.exporter_url: b.node_id for b in state.brokers if b.exporter_url}
    return urls, {b.node_id: b.rack for b in state.brokers}


def connector_jars() -> list[Path]:
    """The connector jars Maven copied into jvm/lib/spark; none when not fetched."""
    try:
        return spark_connector_jars()
    except JarsMissing:
        return []


def install() -> None:
    """Register the sandbox's defaults with the product (idempotent)."""
    from streams.collect.targets import register_exporter_source
    from streams.spark import register_connector_jars

    register_cluster_fallback(cluster_fallback)
    register_exporter_source(exporters)
    register_connector_jars(connector_jars)
