"""Where the DAGs act: the Kafka cluster, `selfheal serve`, the signing key, the data dir.

Each comes from Airflow first, then from the selfheal configuration every `selfheal`
command reads ($SELFHEAL_CONFIG, SELFHEAL_* variables, then the running sandbox), so with
nothing set up the DAGs find the sandbox:

- connection ``selfheal_kafka``: extra ``{"bootstrap_servers": "h1:9092,h2:9092",
  "cluster_id": "..."}`` (or host:port for one broker); else [cluster] bootstrap_servers
  and cluster_id.
- connection ``selfheal_serve``: host, port, schema (http/https), password = serve's API
  token; else http://[serve] http_host:http_port with [serve] api_token.
- variable ``selfheal_action_signing_secret``: the HMAC key serve verifies; else
  [cluster] action_signing_key (the sandbox makes one).
- variable ``selfheal_data_dir``: where snapshots, plans and reports are written; else
  $SELFHEAL_AIRFLOW_DATA_DIR, else $AIRFLOW_HOME/selfheal-runs.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from core.security import KafkaSecurity

CLUSTER_CONN = "selfheal_kafka"
SERVE_CONN = "selfheal_serve"
SIGNING_VARIABLE = "selfheal_action_signing_secret"
DATA_DIR_VARIABLE = "selfheal_data_dir"


class TargetError(RuntimeError):
    """Something the DAGs need is not configured; the message says how to set it."""


@dataclasses.dataclass(frozen=True)
class Targets:
    bootstrap_servers: str
    cluster_id: str
    serve_url: str
    api_token: str
    signing_key: str
    where: dict[str, str]  # what came from where, for the task log
    security: KafkaSecurity = KafkaSecurity()  # the selfheal config's [cluster.security]

    def describe(self) -> str:
        return (f"cluster {self.cluster_id} at {self.bootstrap_servers} ({self.where['cluster']});"
                f" serve {self.serve_url} ({self.where['serve']}); signing key from "
                f"{self.where['signing']}")


def _connection(conn_id: str) -> Any | None:
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None


def _variable(key: str) -> str | None:
    from airflow.sdk import Variable

    try:
        value = Variable.get(key, default=None)
    except Exception:  # no metadata database to ask (a bare parse): not set
        return None
    return value or None


def selfheal_config() -> Any:
    """The selfheal configuration with the sandbox's defaults plugged in when installed."""
    from core.config import load
    from selfheal.cli import install_sandbox_defaults

    install_sandbox_defaults()
    return load()


def resolve() -> Targets:
    """The cluster, serve and key for this run; `TargetError` naming what to set."""
    config = selfheal_config()
    where: dict[str, str] = {}

    conn = _connection(CLUSTER_CONN)
    if conn is not None:
        extra = conn.extra_dejson or {}
        servers = extra.get("bootstrap_servers") or (
            f"{conn.host}:{conn.port}" if conn.port else conn.host)
        cluster_id = extra.get("cluster_id") or config.cluster.cluster_id
        where["cluster"] = f"connection {CLUSTER_CONN}"
    else:
        servers = config.cluster.bootstrap_servers
        cluster_id = config.cluster.cluster_id
        where["cluster"] = "selfheal config: " + (", ".join(config.sources) or "defaults")
    if not servers:
        raise TargetError(
            f"no Kafka cluster: add the Airflow connection {CLUSTER_CONN} (extra "
            '{"bootstrap_servers": "host:port,...", "cluster_id": "..."}), set '
            "SELFHEAL_CLUSTER_BOOTSTRAP_SERVERS for the Airflow workers, or start the sandbox "
            "(`selfheal sandbox up`)")
    if not cluster_id:
        raise TargetError(
            f"no cluster id: put \"cluster_id\" in the extra of connection {CLUSTER_CONN} or "
            "set [cluster] cluster_id; it must be the id serve watches")

    conn = _connection(SERVE_CONN)
    if conn is not None:
        host = conn.host or "127.0.0.1"
        if host.startswith(("http://", "https://")):
            url = host.rstrip("/")
        else:
            scheme = conn.schema if conn.schema in ("http", "https") else "http"
            url = f"{scheme}://{host}" + (f":{conn.port}" if conn.port else "")
        token = conn.password or config.serve.api_token
        where["serve"] = f"connection {SERVE_CONN}"
    else:
        url = f"http://{config.serve.http_host}:{config.serve.http_port}"
        token = config.serve.api_token
        where["serve"] = "selfheal config [serve] http_host/http_port"
    if not token:
        raise TargetError(
            f"no API token for serve at {url}: set the password of the Airflow connection "
            f"{SERVE_CONN}, or [serve] api_token (SELFHEAL_SERVE_API_TOKEN) for both serve "
            "and the Airflow workers")

    key = _variable(SIGNING_VARIABLE)
    where["signing"] = f"variable {SIGNING_VARIABLE}"
    if key is None:
        key = config.cluster.action_signing_key
        where["signing"] = "[cluster] action_signing_key"
    if not key:
        raise TargetError(
            f"no action signing key: set the Airflow variable {SIGNING_VARIABLE} (or [cluster] "
            "action_signing_key) to the key serve verifies with; serve refuses unsigned "
            "actions")
    return Targets(servers, cluster_id, url, token, key, where, config.cluster_security)


def data_dir() -> Path:
    """Where runs keep their snapshots, plans and reports (created)."""
    found = (_variable(DATA_DIR_VARIABLE) or os.environ.get("SELFHEAL_AIRFLOW_DATA_DIR")
             or str(Path(os.environ.get("AIRFLOW_HOME", "~/airflow")) / "selfheal-runs"))
    path = Path(found).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path
