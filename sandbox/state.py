"""The sandbox's one state file: what runs where, so every later command can find it.

`selfheal sandbox up` writes it; every other `selfheal` command run without configuration
reads it to find the bootstrap servers, ZooKeeper, the exporters and the PIDs.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_VERSION = 1


def default_work_dir() -> Path:
    """``$SELFHEAL_SANDBOX_DIR``, else ``~/.local/state/kafka-selfheal/sandbox``."""
    env = os.environ.get("SELFHEAL_SANDBOX_DIR")
    if env:
        return Path(env).expanduser().resolve()
    base = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state"))
    return (base / "kafka-selfheal" / "sandbox").resolve()


def _new_key() -> str:
    # secrets loads hashlib and OpenSSL (~10 ms of a cold start): every `selfheal`
    # command that reads configuration imports this module, few of them make a key.
    import secrets

    return secrets.token_hex(32)


class SandboxNotRunning(RuntimeError):
    """No state file: the sandbox was never brought up (or was taken down)."""


@dataclass
class ServerState:
    """One JVM the sandbox runs."""

    role: str  # "zookeeper" | "broker" | "controller"
    node_id: int
    port: int
    pid: int | None
    config: str  # its properties file; its path is also the PID marker
    log_file: str
    exporter_port: int | None = None
    rack: str | None = None
    log_dirs: list[str] = field(default_factory=list)
    metadata_dir: str | None = None
    # The Kafka line this server runs when it is not the sandbox's (a rolling upgrade
    # restarts the brokers one at a time on the new line's jars)
    kafka: str | None = None
    exporter_scheme: str = "http"  # https with basic auth in the secured sandbox

    @property
    def marker(self) -> str:
        return self.config

    @property
    def exporter_url(self) -> str | None:
        if self.exporter_port is None:
            return None
        return f"{self.exporter_scheme}://127.0.0.1:{self.exporter_port}/metrics"


@dataclass
class SecurityState:
    """What the sandbox's state file keeps of its security: never a secret itself."""

    mode: str  # "sasl_ssl" | "mtls"
    folder: str  # secrets/: the CA, certificates, keys, password files
    principals: list[str]

    @property
    def protocol(self) -> str:
        return "SASL_SSL" if self.mode == "sasl_ssl" else "SSL"

    def ca(self) -> Path:
        return Path(self.folder) / "ca.pem"

    def password_file(self, principal: str) -> Path:
        return Path(self.folder) / f"{principal}.password"

    def password(self, principal: str) -> str:
        return self.password_file(principal).read_text().strip()

    def keystore(self, principal: str) -> Path:
        return Path(self.folder) / f"{principal}.keystore.pem"

    def exporter_config(self) -> Path:
        """The JMX exporters' configuration: the rules, HTTPS and basic auth."""
        return Path(self.folder) / "jmx-exporter.yml"

    def secrets(self) -> dict[str, str]:
        """Every secret the sandbox made, by its file's name (for the tests that look for
        them where they must not be)."""
        return {p.name: p.read_text().strip()
                for p in sorted(Path(self.folder).glob("*.password"))}


@dataclass
class SandboxState:
    mode: str  # "zk" | "kraft"
    work_dir: str
    cluster_id: str
    brokers: list[ServerState]
    kafka: str = "3.9"  # the Kafka line (sandbox/versions.py); state files before it ran 3.9
    # how the KRaft quorum was formatted: "static" (controller.quorum.voters) or "dynamic"
    # (controller.quorum.bootstrap.servers); it stays so across a rolling upgrade
    quorum: str = "static"
    # the metadata version the cluster was formatted at (`format --release-version`); a
    # rolling upgrade leaves it, and a replaced disk is formatted at it
    release: str = "3.9"
    # TLS, SASL and ACLs when brought up with --security (sandbox/secure.py); None: plain
    security: SecurityState | None = None
    zookeeper: ServerState | None = None
    controller: ServerState | None = None
    version: int = STATE_VERSION
    # Signs the actions the loop's processes exchange (core/signing.py); one per sandbox.
    action_signing_key: str = field(default_factory=_new_key, repr=False)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)

    @property
    def zookeeper_connect(self) -> str | None:
        return f"127.0.0.1:{self.zookeeper.port}" if self.zookeeper else None

    @property
    def path(self) -> Path:
        return state_path(Path(self.work_dir))

    def broker(self, broker_id: int) -> ServerState:
        for b in self.brokers:
            if b.node_id == broker_id:
                return b
        known = ", ".join(str(b.node_id) for b in self.brokers)
        raise KeyError(f"no broker {broker_id} in the sandbox; brokers are {known}")

    def kafka_of(self, server: ServerState) -> str:
        """The Kafka line ``server`` runs."""
        return server.kafka or self.kafka

    def servers(self) -> list[ServerState]:
        """Every JVM, in start order."""
        head = [s for s in (self.zookeeper, self.controller) if s is not None]
        return head + list(self.brokers)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["bootstrap_servers"] = self.bootstrap_servers
        data["zookeeper_connect"] = self.zookeeper_connect
        return data

    def save(self) -> None:
        path = self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        tmp.replace(path)

    def reload(self) -> SandboxState:
        """Re-read the state file in place (another command may have changed PIDs)."""
        fresh = load(Path(self.work_dir))
        self.brokers, self.zookeeper, self.controller = (
            fresh.brokers, fresh.zookeeper, fresh.controller)
        return self

    @classmethod
    def from_dict(cls, data: dict) -> SandboxState:
        def server(d: dict | None) -> ServerState | None:
            return ServerState(**d) if d else None

        return cls(
            mode=data["mode"],
            work_dir=data["work_dir"],
            cluster_id=data["cluster_id"],
            brokers=[ServerState(**b) for b in data["brokers"]],
            kafka=data.get("kafka", "3.9"),
            quorum=data.get("quorum", "static"),
            release=data.get("release", "3.9"),
            security=SecurityState(**data["security"]) if data.get("security") else None,
            zookeeper=server(data.get("zookeeper")),
            controller=server(data.get("controller")),
            version=data.get("version", STATE_VERSION),
            action_signing_key=data.get("action_signing_key") or _new_key(),
        )


def state_path(work_dir: Path) -> Path:
    return work_dir / "sandbox.json"


def load(work_dir: Path | None = None) -> SandboxState:
    """The running sandbox's state; ``SandboxNotRunning`` when there is none."""
    path = state_path(work_dir or default_work_dir())
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise SandboxNotRunning(
            f"no sandbox state at {path}; start one with `selfheal sandbox up`"
        ) from None
    return SandboxState.from_dict(data)
