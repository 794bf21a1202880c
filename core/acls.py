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
