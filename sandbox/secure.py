"""The secured sandbox: what `selfheal sandbox up --security sasl_ssl|mtls` adds to a KRaft
cluster: TLS on the brokers' client listener (a local CA, sandbox/pki.py), SCRAM-SHA-512
users (written into the metadata at `format`, `--add-scram`) or client certificates, and
Kafka's StandardAuthorizer with no allow-everyone fallback, so a principal can do exactly
what its ACLs grant.

The brokers talk to each other as `broker` and the sandbox's own tools as `admin`, the
two super users; every other principal (one per product process) starts with nothing.
The KRaft controller listener stays PLAINTEXT on 127.0.0.1: only the brokers use it.
Passwords are random, one file each (mode 0600) under the sandbox's `secrets/` folder.
The JMX exporters serve HTTPS (the broker's certificate, in a PKCS12 keystore: the
agent reads no PEM) with basic auth for `selfheal-scrape`, the user Prometheus and the
metrics collector scrape as; the agent's file holds only a salted SHA-256 of its
password.
The two super users' go to `kafka-storage format --add-scram` (the only way to have a
user before the cluster runs: on that command line for the second it runs); every other
user is made through the Admin API once the cluster serves. Kafka logs its JAAS config as
[hidden].
"""

from __future__ import annotations

import secrets as random_secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox.jvm import SandboxError
from sandbox.state import SandboxState, SecurityState

MODES = ("sasl_ssl", "mtls")
BROKER, ADMIN = "broker", "admin"
SUPER_USERS = (BROKER, ADMIN)
MECHANISM = "SCRAM-SHA-512"
# The exporters' basic-auth user (not a Kafka principal).
EXPORTER_USER = "selfheal-scrape"
# The principals of the product's processes (docs/security.md says what each may do).
PRODUCT_PRINCIPALS = ("selfheal-collect", "selfheal-stream", "selfheal-serve",
                      "selfheal-airflow", "selfheal-consumers")


def prepare(work_dir: Path, mode: str,
            principals: tuple[str, ...] = PRODUCT_PRINCIPALS) -> SecurityState:
    """Make the CA, the broker's certificate, and per principal a password (SASL) or a
    client certificate (mutual TLS)."""
    from sandbox.pki import Authority

    if mode not in MODES:
        raise SandboxError(f"--security must be one of {', '.join(MODES)}, not {mode!r}")
    folder = work_dir / "secrets"
    ca = Authority(folder)
    broker = ca.issue(BROKER, server=True)
    everyone = (*SUPER_USERS, *principals)
    for name in everyone:
        if mode == "sasl_ssl":
            _new_password(folder / f"{name}.password")
        elif name != BROKER:
            ca.issue(name, server=False)
    state = SecurityState(mode=mode, folder=str(folder), principals=list(everyone))
    _exporter_tls(state, broker.key, broker.cert)
    return state


def _new_password(path: Path) -> str:
    from sandbox.pki import _write_private

    password = random_secrets.token_urlsafe(24)
    _write_private(path, (password + "\n").encode())
    return password


def exporter_password_file(security: SecurityState) -> Path:
    return Path(security.folder) / f"{EXPORTER_USER}.password"


def _exporter_tls(security: SecurityState, key: Path, cert: Path) -> None:
    """The agent's configuration: the rules, HTTPS with the broker's certificate, basic
    auth for `EXPORTER_USER` (jmx_exporter 1.0.1: `passwordHash` is the hex SHA-256 of
    ``<salt>:<password>``, see `exporter_hash`)."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        load_pem_private_key,
        pkcs12,
    )

    from sandbox.jvm import EXPORTER_RULES
    from sandbox.pki import _write_private

    folder = Path(security.folder)
    password = _new_password(exporter_password_file(security))
    store_password = _new_password(folder / "exporter-keystore.password")
    store = _write_private(folder / "exporter.p12", pkcs12.serialize_key_and_certificates(
        b"exporter", load_pem_private_key(key.read_bytes(), None),
        x509.load_pem_x509_certificate(cert.read_bytes()), None,
        BestAvailableEncryption(store_password.encode())))
    salt = random_secrets.token_hex(8)
    digest = exporter_hash(salt, password)
    server = (
        "httpServer:\n"
        "  authentication:\n"
        "    basic:\n"
        f"      username: {EXPORTER_USER}\n"
        f"      passwordHash: {digest}\n"
        "      algorithm: SHA-256\n"
        f"      salt: {salt}\n"
        "  ssl:\n"
        "    keyStore:\n"
        f"      filename: {store}\n"
        f"      password: {store_password}\n"
        "    certificate:\n"
        "      alias: exporter\n")
    _write_private(security.exporter_config(),
                   (server + EXPORTER_RULES.read_text()).encode())


def exporter_hash(salt: str, password: str) -> str:
    """The hex SHA-256 of ``<salt>:<password>`` as jmx_exporter 1.0.1 writes it to compare:
    through BigInteger, so without leading zeros. A digest starting with a 0 nibble (one
    salt in 16) written in full never matches, and every scrape gets 401 Unauthorized."""
    import hashlib

    return hashlib.sha256(f"{salt}:{password}".encode()).hexdigest().lstrip("0") or "0"


def exporter_section(security: SecurityState) -> dict[str, str]:
    """[cluster.exporter_security] that scrapes the secured sandbox's exporters."""
    return {"username": EXPORTER_USER,
            "password_file": str(exporter_password_file(security)),
            "ssl_ca_file": str(security.ca())}


def broker_props(security: SecurityState, port: int) -> dict[str, object]:
    """What a secured broker sets on top of its plain properties."""
    protocol = security.protocol
    props: dict[str, object] = {
        "listeners": f"{protocol}://127.0.0.1:{port}",
        "advertised.listeners": f"{protocol}://127.0.0.1:{port}",
        "inter.broker.listener.name": protocol,
        "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{protocol}:{protocol}",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": security.keystore(BROKER),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": security.ca(),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": ";".join(f"User:{u}" for u in SUPER_USERS),
    }
    if security.mode == "sasl_ssl":
        prefix = f"listener.name.{protocol.lower()}.{MECHANISM.lower()}"
        props.update({
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            # in the broker's properties file (mode 0600, like the password files)
            f"{prefix}.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{BROKER}" password="{security.password(BROKER)}";'),
        })
    else:
        props.update({
            "ssl.client.auth": "required",
            # the principal is the certificate's CN, not its whole distinguished name
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        })
    return props


def format_args(security: SecurityState) -> list[str]:
    """`kafka-storage format` arguments that put the super users into the metadata."""
    if security.mode != "sasl_ssl":
        return []
    return [arg for user in SUPER_USERS for arg in (
        "--add-scram", f"{MECHANISM}=[name={user},password={security.password(user)}]")]


def client_settings(security: SecurityState, principal: str) -> dict[str, object]:
    """librdkafka settings that authenticate as ``principal`` (the sandbox's own clients
    use `admin`; hostname verification stays on: the broker's certificate names
    127.0.0.1)."""
    found: dict[str, object] = {"security.protocol": security.protocol,
                                "ssl.ca.location": str(security.ca())}
    if security.mode == "sasl_ssl":
        found.update({"sasl.mechanism": MECHANISM, "sasl.username": principal,
                      "sasl.password": security.password(principal)})
    else:
        folder = Path(security.folder)
        found.update({"ssl.certificate.location": str(folder / f"{principal}.pem"),
                      "ssl.key.location": str(folder / f"{principal}.key")})
    return found


def kafka_security(security: SecurityState | None, principal: str = ADMIN) -> Any:
    """The product's [cluster.security] for ``principal`` (None: the plain sandbox), for
    the kafka-python admin client the sandbox and the tests use."""
    from core.security import KafkaSecurity

    if security is None:
        return KafkaSecurity()
    folder = Path(security.folder)
    if security.mode == "sasl_ssl":
        return KafkaSecurity(protocol=security.protocol, sasl_mechanism=MECHANISM,
                             username=principal,
                             password_file=security.password_file(principal),
                             ssl_ca_file=security.ca())
    return KafkaSecurity(protocol=security.protocol, ssl_ca_file=security.ca(),
                         ssl_cert_file=folder / f"{principal}.pem",
                         ssl_key_file=folder / f"{principal}.key")


def add_users(state: SandboxState, progress: Callable[[str], None]) -> None:
    """SCRAM credentials for every principal but the super users (already in the
    metadata), through the Admin API as `admin`."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    from sandbox.cluster import client_config

    security = state.security
    assert security is not None
    if security.mode != "sasl_ssl":
        return
    admin = AdminClient(client_config(state))
    wanted = [p for p in security.principals if p not in SUPER_USERS]
    upserts = [UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
        security.password(user).encode()) for user in wanted]
    for user, future in admin.alter_user_scram_credentials(upserts).items():
        try:
            future.result(timeout=30)
        except Exception as exc:
            raise SandboxError(f"could not create the SCRAM user {user}: {exc}") from None
    progress(f"SCRAM users {', '.join(wanted)} created; passwords in {security.folder}")


def controller_props(security: SecurityState) -> dict[str, object]:
    """The controller authorizes the brokers' requests too (it runs the same authorizer);
    they reach it on PLAINTEXT, as ANONYMOUS."""
    return {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": ";".join(f"User:{u}" for u in (*SUPER_USERS, "ANONYMOUS")),
    }


def exporter_auth(security: SecurityState | None) -> Any:
    """How the sandbox's own scrapes reach its exporters (None: plain HTTP)."""
    from core.security import ExporterSecurity, exporter_settings

    if security is None:
        return None
    return exporter_settings(ExporterSecurity(
        username=EXPORTER_USER, password_file=exporter_password_file(security),
        ssl_ca_file=security.ca()))
