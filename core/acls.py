"""The least-privilege ACLs each process needs, from Kafka's own checks (KafkaApis,
ControllerApis). One table: docs/security.md prints it, `selfheal doctor` probes it.

Names are shown with the default topic prefix ``selfheal.``; a PREFIXED row grants every
name starting with it. ``*`` is Kafka's wildcard (every topic or group of the monitored
cluster: the snapshot and the planners read all of them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Acl:
    process: str  # collect-metrics, collect-zk, collect-snapshots, stream, serve, airflow, consumer
    resource: str  # Cluster, Topic, Group
    name: str
    pattern: str  # LITERAL or PREFIXED
    operation: str
    on: str  # "cluster" (the monitored one) or "bus"


# process | on (the monitored cluster, or the bus) | resource | name | pattern | operation.
# Why each is needed: docs/security.md.
_ROWS = """
collect-metrics   | bus     | Topic   | selfheal.broker-metrics       | LITERAL  | Write
collect-metrics   | cluster | Topic   | *                             | LITERAL  | Describe
collect-zk        | bus     | Topic   | selfheal.logdir-events        | LITERAL  | Write
collect-snapshots | cluster | Cluster | kafka-cluster                 | LITERAL  | Describe
collect-snapshots | cluster | Topic   | *                             | LITERAL  | Describe
collect-snapshots | cluster | Group   | *                             | LITERAL  | Describe
collect-snapshots | bus     | Topic   | selfheal.cluster-snapshots    | LITERAL  | Write
collect-snapshots | bus     | Topic   | selfheal.logdir-events        | LITERAL  | Write
stream            | bus     | Topic   | selfheal.                     | PREFIXED | Read
stream            | bus     | Group   | spark-kafka-source            | PREFIXED | Read
stream            | bus     | Group   | selfheal-stream-chunks        | LITERAL  | Read
stream            | bus     | Topic   | selfheal.actions              | LITERAL  | Write
stream            | bus     | Topic   | selfheal.dead-letter          | LITERAL  | Write
serve             | cluster | Cluster | kafka-cluster                 | LITERAL  | Alter
serve             | cluster | Cluster | kafka-cluster                 | LITERAL  | Describe
serve             | cluster | Cluster | kafka-cluster                 | LITERAL  | AlterConfigs
serve             | cluster | Cluster | kafka-cluster                 | LITERAL  | DescribeConfigs
serve             | cluster | Topic   | *                             | LITERAL  | AlterConfigs
serve             | cluster | Topic   | *                             | LITERAL  | DescribeConfigs
serve             | cluster | Topic   | *                             | LITERAL  | Describe
serve             | bus     | Topic   | selfheal.actions              | LITERAL  | Read
serve             | bus     | Group   | selfheal-executor             | LITERAL  | Read
serve             | bus     | Topic   | selfheal.action-status        | LITERAL  | Write
serve             | bus     | Topic   | selfheal.consumer-assignments | LITERAL  | Write
serve             | bus     | Topic   | selfheal.executor-lock        | LITERAL  | Read
serve             | bus     | Group   | selfheal-executor-lock-       | PREFIXED | Read
serve             | bus     | Cluster | kafka-cluster                 | LITERAL  | Create
airflow           | cluster | Cluster | kafka-cluster                 | LITERAL  | Describe
airflow           | cluster | Topic   | *                             | LITERAL  | Describe
airflow           | cluster | Group   | *                             | LITERAL  | Describe
consumer          | bus     | Topic   | selfheal.consumer-assignments | LITERAL  | Read
consumer          | bus     | Group   | <group>.selfheal-targets      | LITERAL  | Read
consumer          | cluster | Group   | <group>                       | LITERAL  | Describe
"""
TABLE: tuple[Acl, ...] = tuple(
    Acl(process, resource, name, pattern, operation, on)
    for process, on, resource, name, pattern, operation in (
        [cell.strip() for cell in line.split("|")] for line in _ROWS.strip().splitlines()))

PROCESSES = tuple(dict.fromkeys(a.process for a in TABLE))


def for_process(process: str) -> list[Acl]:
    return [a for a in TABLE if a.process == process]


# The ACL each Admin call the product makes is checked against (KafkaApis,
# ControllerApis): call -> (operation, resource). Configs of a broker are Cluster ones;
# a topic's are on the Topic.
CALL_ACLS = {
    "DescribeLogDirs": ("Describe", "Cluster"),
    "ListPartitionReassignments": ("Describe", "Cluster"),
    "AlterPartitionReassignments": ("Alter", "Cluster"),
    "AlterReplicaLogDirs": ("Alter", "Cluster"),
    "ElectLeaders": ("Alter", "Cluster"),
    "DescribeConfigs": ("DescribeConfigs", "Cluster"),
    "IncrementalAlterConfigs": ("AlterConfigs", "Cluster"),
    "CreateTopics": ("Create", "Cluster"),  # on the bus: the selfheal.* topics
}


def is_denied(exc: BaseException) -> bool:
    """An authorization failure, from either client library, anywhere in the chain
    (kafka-python's *AuthorizationFailedError, librdkafka's *_AUTHORIZATION_FAILED, the
    empty DescribeLogDirs answer read as `core.live.LogDirsDenied`)."""
    seen: BaseException | None = exc
    while seen is not None:
        text = f"{type(seen).__name__} {seen}".lower()
        if "authoriz" in text or type(seen).__name__ == "LogDirsDenied":
            return True
        seen = seen.__cause__
    return False


def principal_of(security: object) -> str:
    """The principal the brokers see for a `core.security.KafkaSecurity`."""
    username = getattr(security, "username", None)
    if getattr(security, "sasl", False) and username:
        return f"User:{username}"
    cert = getattr(security, "ssl_cert_file", None)
    if cert is not None:
        return f"User:<the subject of {cert}>"
    return "User:ANONYMOUS"


def denial(exc: BaseException, security: object, call: str | None = None) -> str | None:
    """One line for an authorization failure: the call, the ACL it needs, the principal
    and the command that adds it; None when ``exc`` is not one. ``call`` is the Admin
    call that was made (a `CALL_ACLS` key); LogDirsDenied says it itself."""
    if not is_denied(exc):
        return None
    seen: BaseException | None = exc
    while seen is not None and call is None:
        if type(seen).__name__ == "LogDirsDenied":
            call = "DescribeLogDirs"
        seen = seen.__cause__
    principal = principal_of(security)
    operation, resource = CALL_ACLS.get(call or "", (None, None))
    if operation is None:
        return (f"{call or 'a call'} was denied to {principal} ({type(exc).__name__}); "
                "grant it the ACLs docs/security.md lists for this process")
    return (f"{call} denied: {principal} needs {operation} on {resource}; add it: "
            f"kafka-acls.sh --bootstrap-server <brokers> --add --allow-principal "
            f"{principal} --operation {operation} --cluster (docs/security.md)")
