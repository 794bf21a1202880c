"""The checks `selfheal doctor` runs: each endpoint the config names is reached and
authenticated with the settings the processes will use, and each ACL they need is probed
with a harmless call (one that changes nothing whether it is allowed or not)."""

from __future__ import annotations

import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from core.config import Config, ConfigError
from core.security import KafkaSecurity, SecurityError

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""  # what to do, when not ok

    def as_dict(self) -> dict[str, str]:
        return {"check": self.name, "status": self.status, "detail": self.detail,
                "fix": self.fix}


def _why_kafka(errors: list[str], section: str) -> str:
    """What to do about the errors librdkafka reported while connecting."""
    text = " ".join(errors).lower()
    if "authentication" in text or "sasl" in text:
        return f"check {section} username and password (or the SCRAM user on the brokers)"
    if "expired" in text:
        return "the broker's certificate has expired: renew it"
    if "certificate verify failed" in text or "ssl handshake" in text or "ssl" in text:
        return (f"check {section} ssl_ca_file (the CA that signed the brokers) and that the "
                "brokers' certificates name the host you dial (ssl_check_hostname)")
    return "check bootstrap_servers, that the brokers run, and the listener's protocol"


def kafka_reach(name: str, servers: str, sec: KafkaSecurity, section: str,
                timeout: float) -> tuple[Check, Any]:
    """Connect and authenticate with confluent-kafka; the check and the metadata."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from core.bus import _quiet_logger
    from core.security import confluent_settings

    errors: list[str] = []
    try:
        settings = {"bootstrap.servers": servers, "logger": _quiet_logger(),
                    "error_cb": lambda err: errors.append(err.str()),
                    **confluent_settings(sec, section)}
    except SecurityError as exc:
        return Check(name, FAIL, str(exc), f"fix {section}"), None
    admin = AdminClient(settings)
    try:
        meta = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        admin.poll(1)  # serves the error callback: the handshake's or the login's reason
        said = [e for e in errors if "ssl" in e.lower() or "sasl" in e.lower()
                or "authenticat" in e.lower()]
        errors.append(str(exc.args[0].str()) if exc.args else str(exc))
        reason = said[0] if said else errors[-1]
        tls = _tls_reason(servers, sec, section, timeout) if sec.tls else None
        if tls is not None:
            return Check(name, FAIL, f"cannot reach {servers} as {sec.protocol}: {tls[0]}",
                         tls[1]), None
        return Check(name, FAIL, f"cannot reach {servers} as {sec.protocol}: {reason}",
                     _why_kafka(errors, section)), None
    return Check(name, OK, f"{servers} as {sec.protocol}"
                 + (f" ({sec.sasl_mechanism} user {sec.username})" if sec.sasl else "")
                 + f": {len(meta.brokers)} brokers, cluster id {meta.cluster_id}"), meta


def _tls_reason(servers: str, sec: KafkaSecurity, section: str,
                timeout: float) -> tuple[str, str] | None:
    """Why the first broker's certificate is refused, and what to do, from a TLS
    handshake of our own (librdkafka says only "certificate verify failed")."""
    import socket
    import ssl

    host, _, port = servers.split(",")[0].strip().rpartition(":")
    host = host.split("://")[-1]
    context = ssl.create_default_context(cafile=sec.ssl_ca_file)
    context.check_hostname = sec.ssl_check_hostname
    try:
        if sec.ssl_cert_file and sec.ssl_key_file:
            context.load_cert_chain(sec.ssl_cert_file, sec.ssl_key_file)
        with socket.create_connection((host, int(port)), timeout=timeout) as raw, \
                context.wrap_socket(raw, server_hostname=host):
            return None
    except ssl.SSLCertVerificationError as exc:
        said = exc.verify_message or str(exc)
    except (OSError, ValueError):
        return None  # not a certificate problem: librdkafka's own reason stands
    if "expired" in said:
        return (f"the broker's certificate has expired ({said})",
                "renew the brokers' certificates")
    if "hostname" in said.lower() or "ip address mismatch" in said.lower():
        return (f"the broker's certificate does not name {host} ({said})",
                f"dial a name the certificate holds, or reissue it with {host} in its "
                "subject alternative names")
    return (f"{section} ssl_ca_file does not sign the broker's certificate ({said})",
            f"set {section} ssl_ca_file to the CA that issued the brokers' certificates")


def _denied(exc: BaseException) -> bool:
    return "authoriz" in type(exc).__name__.lower() or "authoriz" in str(exc).lower()


def acl_probes(admin: Any, brokers: list[int], process: str | None = None) -> Iterator[Check]:
    """Each cluster ACL serve, the snapshots and Airflow need (only ``process``'s, when
    given), by a call that changes nothing: a denial is the answer Kafka's own check
    gives."""
    from kafka.admin import ConfigResource, ConfigResourceType

    from core.live import DENIED_DIRS_FIX, LogDirsDenied, broker_dirs

    def probe(acl: str, who: tuple[str, ...], call: Callable[[], Any]) -> Check | None:
        if process is not None and process not in who:
            return None
        name = f"acl {acl}"
        grant = (f"grant {acl} to the principal of {', '.join(who)}: kafka-acls.sh --add "
                 f"--allow-principal User:<name> --operation {acl.split()[0]} --cluster "
                 "(docs/security.md)")
        try:
            call()
        except LogDirsDenied as exc:
            return Check(name, FAIL, str(exc).split(";")[0], DENIED_DIRS_FIX)
        except Exception as exc:  # noqa: BLE001 - a denial, or the broker's own reason
            if _denied(exc):
                return Check(name, FAIL, f"denied: {type(exc).__name__}", grant)
            return Check(name, FAIL, f"{type(exc).__name__}: {exc}", "see the broker's log")
        return Check(name, OK, f"allowed ({', '.join(who)})")

    broker = brokers[0]
    resource = ConfigResource(ConfigResourceType.BROKER, str(broker))
    checks = (
        probe("Describe on Cluster (DescribeLogDirs)", ("collect-snapshots", "serve", "airflow"),
              lambda: broker_dirs(admin.describe_log_dirs(topic_partitions={},
                                                          brokers=[broker])[0])),
        probe("Describe on Cluster (ListPartitionReassignments)", ("serve",),
              lambda: admin.list_partition_reassignments()),
        # An empty AlterPartitionReassignments is authorized before it is read: nothing
        # moves.
        probe("Alter on Cluster (reassignments, log-dir moves, elections)", ("serve",),
              lambda: admin.alter_partition_reassignments({})),
        probe("DescribeConfigs on Cluster (throttles)", ("serve",),
              lambda: _describe_configs_checked(admin, resource, broker)),
    )
    yield from (c for c in checks if c is not None)


def broker_versions(admin: Any, brokers: list[int]) -> Check:
    """Whether the brokers answer the same versioned calls (not during a rolling upgrade),
    and if not, which calls the product cannot make to all of them."""
    from core.api_support import gap_line, gaps, read_versions

    versions = read_versions(admin, brokers)
    silent = sorted(set(brokers) - set(versions))
    if not versions:
        return Check("broker versions", WARN, "no broker answered ApiVersions",
                     "check that the brokers run")
    line = gap_line(gaps(versions))
    tail = f" (broker(s) {', '.join(map(str, silent))} did not answer)" if silent else ""
    if line is None:
        return Check("broker versions", OK,
                     f"{len(versions)} brokers answer the same calls{tail}")
    return Check("broker versions", WARN, line + tail,
                 "nothing to do during a rolling upgrade; otherwise upgrade the brokers "
                 "named so that all run one Kafka version")


def _describe_configs_checked(admin: Any, resource: Any, broker: int) -> None:
    """DescribeConfigs, raising the per-resource error kafka-python's describe_configs
    drops (a denial there reads as "no configs set")."""
    from kafka.errors import for_code

    async def ask() -> Any:
        request = admin._describe_configs_request([resource], False)
        return await admin._manager.send(request, node_id=broker)

    for result in admin._manager.run(ask).results:
        if result.error_code:
            raise for_code(result.error_code)(result.error_message or "")


def topics(config: Config, meta: Any) -> Iterator[Check]:
    """Every selfheal.* topic exists on the bus with the partitions its spec asks."""
    from core.bus import TOPIC_SPECS

    missing = [config.topic(n) for n in TOPIC_SPECS if config.topic(n) not in meta.topics]
    if missing:
        yield Check("bus topics", WARN, f"missing: {', '.join(missing)}",
                    "the first collector or serve creates them (Create on Cluster on the "
                    "bus), or create them beforehand with the configs in core/bus.py")
        return
    few = [f"{config.topic(n)} ({len(meta.topics[config.topic(n)].partitions)} < "
           f"{spec.partitions})" for n, spec in TOPIC_SPECS.items()
           if len(meta.topics[config.topic(n)].partitions) < spec.partitions]
    if few:
        yield Check("bus topics", WARN, "fewer partitions than planned: " + ", ".join(few),
                    "fine for a small cluster; add partitions for more throughput")
    else:
        yield Check("bus topics", OK, f"all {len(TOPIC_SPECS)} selfheal.* topics present")


def password_files(config: Config) -> Iterator[Check]:
    sections = {"[cluster.security]": config.cluster_security,
                "[bus.security]": config.bus_security,
                "[cluster.zookeeper_security]": config.cluster_zookeeper_security,
                "[cluster.exporter_security]": config.cluster_exporter_security}
    for section, sec in sections.items():
        for key in ("password_file", "ssl_key_password_file"):
            path = getattr(sec, key)
            if path is None:
                continue
            try:
                mode = path.stat().st_mode
            except OSError as exc:
                yield Check(f"{section} {key}", FAIL, f"{path}: {exc.strerror}",
                            "create it or fix the path")
                continue
            if mode & stat.S_IROTH:
                yield Check(f"{section} {key}", WARN, f"{path} is readable by every user",
                            f"chmod 600 {path}")


def signing_key(config: Config) -> Check:
    from core.signing import signer

    try:
        signer(config)
    except ConfigError as exc:
        return Check("signing key", FAIL, "no [cluster] action_signing_key",
                     str(exc).split(": ", 1)[-1])
    return Check("signing key", OK, "present (stream, serve and execute sign and verify)")


def zookeeper(config: Config, timeout: float) -> Check | None:
    hosts = config.serve.lock_zookeeper or (
        config.cluster.zookeeper_connect if config.cluster.mode == "zk" else None)
    if not hosts:
        return None
    from kazoo.exceptions import SessionClosedRequireSaslError

    from core.zk_session import ZooKeeperLoginRefused, start, zk_client

    try:
        client = zk_client(hosts, config.cluster_zookeeper_security)
    except SecurityError as exc:
        return Check("zookeeper", FAIL, str(exc), "fix [cluster.zookeeper_security]")
    started = time.monotonic()
    try:
        start(client, hosts, timeout)
        # bounded: a session ZooKeeper closed at its SASL login leaves a call waiting
        ids = client.get_children_async("/brokers/ids").get(timeout=timeout)
    except ZooKeeperLoginRefused as exc:
        problem, todo = str(exc).split(": ", 1)
        return Check("zookeeper", FAIL, problem, todo)
    except SessionClosedRequireSaslError:
        return Check("zookeeper", FAIL, f"{hosts} takes SASL-authenticated sessions only",
                     "set [cluster.zookeeper_security] sasl_mechanism, username and "
                     "password_file")
    except Exception as exc:  # noqa: BLE001 - every reason is reported
        return Check("zookeeper", FAIL, f"{hosts}: {type(exc).__name__}",
                     "check zookeeper_connect and [cluster.zookeeper_security] (SASL user "
                     "and password, use_ssl and the CA)")
    finally:
        client.stop()
        client.close()
    return Check("zookeeper", OK, f"{hosts}: {len(ids)} brokers registered "
                 f"({time.monotonic() - started:.1f} s)")


def exporters(config: Config, timeout: float) -> Iterator[Check]:
    from core.security import exporter_settings
    from streams.collect.broker_metrics import fetch

    urls = [u.split("=", 1)[-1] for u in config.cluster.exporter_urls]
    if not urls:
        return
    try:
        auth = exporter_settings(config.cluster_exporter_security)
    except SecurityError as exc:
        yield Check("exporters", FAIL, str(exc), "fix [cluster.exporter_security]")
        return
    for url in urls:
        try:
            text = fetch(url, timeout, auth)
        except Exception as exc:  # noqa: BLE001 - every reason is reported
            code = getattr(exc, "code", None)
            fix = ("check [cluster.exporter_security] username and password"
                   if code in (401, 403) else
                   "check the URL, the exporter agent, and [cluster.exporter_security] "
                   "ssl_ca_file for https")
            said = f"HTTP {code} {exc.reason}" if code is not None else \
                f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            yield Check(f"exporter {url}", FAIL, said, fix)
            continue
        yield Check(f"exporter {url}", OK, f"{len(text.splitlines())} lines")
