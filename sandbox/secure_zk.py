"""The secured sandbox in ZooKeeper mode (Kafka 3.9): what `selfheal sandbox up --mode zk
--security sasl_ssl` adds to the KRaft one of sandbox/secure.py.

- ZooKeeper takes SASL DIGEST-MD5 only (`authProvider.1`, `sessionRequireClientSASLAuth`:
  a session that has not authenticated is closed at its first request) from two users of
  its JAAS `Server` section: `broker` (the brokers and the sandbox's own Kafka tools) and
  `selfheal` (the product's ZooKeeper collector and serve's executor lock).
- The brokers log in as `broker` (JAAS `Client` section) and, with `zookeeper.set.acl`,
  create Kafka's znodes readable by all but writable by `sasl:broker` only (the SCRAM
  credentials, `/config/users`, readable by it alone).
- The brokers' SCRAM users must exist before the brokers start (they talk to each other
  with them): ZooKeeper-mode Kafka has no `kafka-storage format --add-scram`, but 3.9's
  `kafka-configs --zookeeper` still writes SCRAM credentials (KIP-554 kept it for this
  one bootstrap), logged in as `broker`. Every other user goes through the Admin API, as
  in KRaft.
- `kafka.security.authorizer.AclAuthorizer` (ACLs in ZooKeeper), no allow-everyone.

Every password is one file of mode 0600 under `secrets/`; the JAAS files (mode 0600)
hold them for the JVMs, whose command lines name only the files.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox import jvm, secure, versions
from sandbox.jvm import SandboxError
from sandbox.pki import _write_private
from sandbox.state import SandboxState, SecurityState

# ZooKeeper's SASL users (not Kafka principals): their passwords are secrets/zookeeper-*.
BROKER_USER, PRODUCT_USER = "broker", "selfheal"
ZK_USERS = (BROKER_USER, PRODUCT_USER)
DIGEST = "org.apache.zookeeper.server.auth.DigestLoginModule"
# Where every JVM the sandbox starts looks for its JAAS file (sandbox/jvm.py).
JAAS_FILE = "jaas.conf"


def secret_name(user: str) -> str:
    """The name of ZooKeeper user ``user``'s password file (SecurityState.password_file)."""
    return f"zookeeper-{user}"


def passwords(security: SecurityState) -> dict[str, str]:
    """Each ZooKeeper user's password (the tests look for them in every output)."""
    return {f"ZooKeeper password of {u}": security.password(secret_name(u)) for u in ZK_USERS}


def check_mode(security: str) -> None:
    """Refuse, before anything is written, what ZooKeeper mode does not secure."""
    if security != "sasl_ssl":
        raise SandboxError("--mode zk secures with --security sasl_ssl only (mutual TLS "
                           "runs in KRaft mode): use --security sasl_ssl")


def prepare(security: SecurityState) -> None:
    """A random password per ZooKeeper user, beside the Kafka ones."""
    import secrets as random_secrets

    for user in ZK_USERS:
        _write_private(security.password_file(secret_name(user)),
                       (random_secrets.token_urlsafe(24) + "\n").encode())


def _jaas(section: str, options: dict[str, str]) -> bytes:
    lines = "\n".join(f'  {k}="{v}"' for k, v in options.items())
    return f"{section} {{\n  {DIGEST} required\n{lines};\n}};\n".encode()


def write_server_jaas(security: SecurityState, conf_dir: Path) -> Path:
    """ZooKeeper's `Server` section: the users it accepts, with their passwords."""
    return _write_private(conf_dir / JAAS_FILE, _jaas("Server", {
        f"user_{u}": security.password(secret_name(u)) for u in ZK_USERS}))


def write_client_jaas(security: SecurityState, conf_dir: Path) -> Path:
    """A broker's (or a Kafka tool's) `Client` section: it logs in as `broker`."""
    return _write_private(conf_dir / JAAS_FILE, _jaas("Client", {
        "username": BROKER_USER, "password": security.password(secret_name(BROKER_USER))}))


def zookeeper_props() -> dict[str, object]:
    """zoo.cfg keys ZooKeeper does not know become `zookeeper.<key>` system properties:
    these two are read so (ZooKeeper 3.8, bundled with Kafka 3.9)."""
    return {
        "authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
        "sessionRequireClientSASLAuth": "true",
    }


def broker_props() -> dict[str, object]:
    """On top of sandbox/secure.py's: Kafka's znodes with ACLs, and the ZooKeeper-mode
    authorizer (StandardAuthorizer is KRaft's)."""
    return {
        "zookeeper.set.acl": "true",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    }


def add_super_users(state: SandboxState, progress: Callable[[str], None]) -> None:
    """SCRAM credentials of `broker` and `admin`, written into the running ZooKeeper
    before any broker starts (`kafka-configs --zookeeper`, as the brokers' ZK user)."""
    security = state.security
    assert security is not None and state.zookeeper_connect is not None
    line = versions.line(state.kafka)
    conf_dir = Path(state.brokers[0].config).parent
    for user in secure.SUPER_USERS:
        cmd = [
            *jvm.tool_cmd(line, "128m", "kafka.admin.ConfigCommand", line.log_flag(conf_dir),
                          f"-Djava.security.auth.login.config={conf_dir / JAAS_FILE}"),
            "--zookeeper", state.zookeeper_connect, "--alter", "--entity-type", "users",
            "--entity-name", user, "--add-config",
            f"{secure.MECHANISM}=[iterations=8192,password={security.password(user)}]",
        ]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            said = hide(security, result.stdout + result.stderr)
            raise SandboxError(f"could not create the SCRAM user {user} in ZooKeeper:\n{said}")
    progress(f"SCRAM users {', '.join(secure.SUPER_USERS)} written to ZooKeeper")


def hide(security: SecurityState, text: str) -> str:
    """``text`` with every sandbox password replaced by [hidden]."""
    for secret in [security.password(p) for p in secure.SUPER_USERS] + list(
            passwords(security).values()):
        text = text.replace(secret, "[hidden]")
    return text


def zookeeper_security(security: SecurityState) -> dict[str, str]:
    """The product's [cluster.zookeeper_security]: SASL DIGEST-MD5 as `selfheal`."""
    return {"sasl_mechanism": "DIGEST-MD5", "username": PRODUCT_USER,
            "password_file": str(security.password_file(secret_name(PRODUCT_USER)))}


def kazoo_options(state: SandboxState) -> dict[str, Any]:
    """KazooClient keywords for the sandbox's own ZooKeeper reads (none when plain)."""
    if state.security is None or state.mode != "zk":
        return {}
    from core.security import ZooKeeperSecurity, kazoo_settings

    section = zookeeper_security(state.security)
    return kazoo_settings(ZooKeeperSecurity(
        sasl_mechanism=section["sasl_mechanism"], username=section["username"],
        password_file=Path(section["password_file"])))
