"""What the secured sandbox gives each product process: exactly the ACLs core/acls.py lists
for it (one table feeds these grants, `selfheal doctor` and docs/security.md), and a
config file per principal that authenticates as it ([cluster.security]; the bus is the
cluster, so [bus.security] is the same).

    SELFHEAL_CONFIG=<sandbox>/config/selfheal-serve.toml selfheal serve
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from core.acls import TABLE, Acl
from sandbox.state import SandboxState, SecurityState

# Which principal each process of the table runs as (sandbox/secure.py makes them).
PRINCIPAL = {"collect-metrics": "selfheal-collect", "collect-zk": "selfheal-collect",
             "collect-snapshots": "selfheal-collect", "stream": "selfheal-stream",
             "serve": "selfheal-serve", "airflow": "selfheal-airflow",
             "consumer": "selfheal-consumers"}
# The application group the consumer helper's rows stand for in the sandbox (`<group>`).
CONSUMER_GROUP = "selfheal-demo"


def acls_of(principal: str) -> list[Acl]:
    """The table's rows for ``principal``, placeholders filled for the sandbox."""
    rows = [a for a in TABLE if PRINCIPAL[a.process] == principal]
    unique: dict[tuple[str, ...], Acl] = {}
    for a in rows:  # one grant where two processes of a principal need the same
        name = a.name.replace("<group>", CONSUMER_GROUP)
        unique.setdefault((a.resource, name, a.pattern, a.operation),
                          Acl(a.process, a.resource, name, a.pattern, a.operation, a.on))
    return list(unique.values())


def binding(principal: str, acl: Acl) -> Any:
    """confluent-kafka's AclBinding allowing ``acl`` to ``principal`` from any host."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    kind = {"Cluster": ResourceType.BROKER, "Topic": ResourceType.TOPIC,
            "Group": ResourceType.GROUP}[acl.resource]
    operation = AclOperation[{"AlterConfigs": "ALTER_CONFIGS",
                              "DescribeConfigs": "DESCRIBE_CONFIGS"}.get(
        acl.operation, acl.operation.upper())]
    return AclBinding(kind, acl.name, ResourcePatternType[acl.pattern], f"User:{principal}",
                      "*", operation, AclPermissionType.ALLOW)


def _admin(state: SandboxState) -> Any:
    from confluent_kafka.admin import AdminClient

    from sandbox.cluster import client_config

    return AdminClient(client_config(state))


def grant(state: SandboxState, bindings: Iterable[Any]) -> None:
    """Create ``bindings`` as the `admin` super user; raises on the first refused."""
    from sandbox.jvm import SandboxError

    admin = _admin(state)  # must outlive its futures
    for acl, future in admin.create_acls(list(bindings)).items():
        try:
            future.result(timeout=30)
        except Exception as exc:
            raise SandboxError(f"could not grant {acl}: {exc}") from None


def revoke(state: SandboxState, bindings: Iterable[Any]) -> None:
    """Delete exactly ``bindings`` (each is its own filter)."""
    from confluent_kafka.admin import AclBindingFilter

    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal,
                                b.host, b.operation, b.permission_type) for b in bindings]
    admin = _admin(state)  # must outlive its futures
    for future in admin.delete_acls(filters).values():
        future.result(timeout=30)


def granted(state: SandboxState, principal: str) -> set[Any]:
    """The ACL bindings the cluster holds for ``principal``."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    match = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY,
                             f"User:{principal}", None, AclOperation.ANY,
                             AclPermissionType.ANY)
    admin = _admin(state)  # must outlive its future
    return set(admin.describe_acls(match).result(timeout=30))


def config_file(security: SecurityState, principal: str) -> Path:
    return Path(security.folder).parent / "config" / f"{principal}.toml"


def security_section(security: SecurityState, principal: str) -> dict[str, str]:
    """[cluster.security] that authenticates as ``principal``."""
    folder = Path(security.folder)
    found = {"protocol": security.protocol, "ssl_ca_file": str(security.ca())}
    if security.mode == "sasl_ssl":
        found.update({"sasl_mechanism": "SCRAM-SHA-512", "username": principal,
                      "password_file": str(security.password_file(principal))})
    else:
        found.update({"ssl_cert_file": str(folder / f"{principal}.pem"),
                      "ssl_key_file": str(folder / f"{principal}.key")})
    return found


def sections(state: SandboxState, principal: str) -> dict[str, dict[str, str]]:
    """The security sections of ``principal``'s config: [cluster.security]; for the
    collector (its metrics collector scrapes the exporters) [cluster.exporter_security];
    and in ZooKeeper mode [cluster.zookeeper_security] (the collector's watches and
    serve's lock; every process's, so the doctor's ZooKeeper check passes for each)."""
    from sandbox import secure_zk
    from sandbox.secure import exporter_section

    security = state.security
    assert security is not None
    found = {"cluster.security": security_section(security, principal)}
    if principal == PRINCIPAL["collect-metrics"]:
        found["cluster.exporter_security"] = exporter_section(security)
    if state.mode == "zk":
        found["cluster.zookeeper_security"] = secure_zk.zookeeper_security(security)
    return found


def _config_text(state: SandboxState, principal: str) -> str:
    from sandbox.loop import render_toml

    assert state.security is not None
    return (f"# {principal}: written by `selfheal sandbox up --security "
            f"{state.security.mode}`.\n"
            "# The rest of [cluster] comes from the running sandbox; the bus is the\n"
            "# cluster, so [bus.security] is this one.\n"
            + render_toml({}, sections(state, principal)))


def set_up(state: SandboxState, progress: Callable[[str], None]) -> None:
    """Grant every product principal its rows of the table and write its config file."""
    security = state.security
    assert security is not None
    principals = sorted(set(PRINCIPAL.values()))
    grant(state, [binding(p, acl) for p in principals for acl in acls_of(p)])
    for principal in principals:
        path = config_file(security, principal)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_config_text(state, principal))
    progress(f"ACLs granted per core/acls.py; configs in {config_file(security, 'x').parent}"
             " (SELFHEAL_CONFIG=<one of them>)")
