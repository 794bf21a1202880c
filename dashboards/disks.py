"""Disks: every log dir's state over time, bytes and usage per dir, skew per broker, and
the moves in flight (inter-broker reassignments and intra-broker dir moves)."""

from __future__ import annotations

from grafanalib.core import Dashboard

from dashboards.panels import (
    CLUSTER,
    OFFLINE_ONLINE,
    ONLINE_OFFLINE,
    Panel,
    alert_annotation,
    dashboard,
    q,
)

UID = "selfheal-disks"
C = CLUSTER
DIR = "{{broker}} {{log_dir}}"


def panels() -> list[Panel]:
    """Every panel, in layout order."""
    return [
        Panel("Log dir state (Kafka)",
              (q(f"max by (broker, log_dir) (kafka_log_log_directory_offline{{{C}}})", DIR),),
              kind="state", width=24, mappings=ONLINE_OFFLINE, fault=" == 1",
              description="LogDirectoryOffline from each broker's JMX exporter"),
        Panel("Log dir state (kafka-selfheal snapshots)",
              (q(f"max by (broker, log_dir) (selfheal_log_dir_online{{{C}}})", DIR),),
              kind="state", width=24, mappings=OFFLINE_ONLINE, fault=" == 0",
              description="As the snapshot collector saw it (DescribeLogDirs)"),
        Panel("Replica bytes per log dir",
              (q(f"max by (broker, log_dir) (selfheal_log_dir_replica_bytes{{{C}}})", DIR),),
              unit="bytes"),
        Panel("Volume usage per log dir",
              (q(f"max by (broker, log_dir) (selfheal_log_dir_usage_ratio{{{C}}})", DIR),),
              unit="percentunit"),
        Panel("Replicas per log dir",
              (q(f"max by (broker, log_dir) (selfheal_log_dir_replicas{{{C}}})", DIR),)),
        Panel("Dir skew per broker (fullest dir / mean)",
              (q(f"max by (broker) (selfheal_broker_log_dir_skew_ratio{{{C}}})",
                 "broker {{broker}}"),),
              description="KafkaDiskSkew fires above 1.10 with more than 1 GiB spread "
              "for 30 minutes"),
        Panel("Offline replicas per broker",
              (q(f"max by (broker) (selfheal_broker_offline_replicas{{{C}}})",
                 "broker {{broker}}"),), fault=" > 0"),
        Panel("Reassigning partitions",
              (q(f"sum by (broker) (kafka_server_reassigning_partitions{{{C}}})",
                 "broker {{broker}}"),)),
        Panel("Reassignment traffic",
              (q(f"broker:kafka_reassignment_bytes_in:rate1m{{{C}}}", "in {{broker}}"),
               q(f"broker:kafka_reassignment_bytes_out:rate1m{{{C}}}", "out {{broker}}")),
              unit="Bps"),
        Panel("Intra-broker moves: future replica lag",
              (q(f"max by (broker) (kafka_server_replica_alter_log_dirs_max_lag_messages{{{C}}})",
                 "broker {{broker}}"),),
              description="ReplicaAlterLogDirsManager MaxLag: messages the moving replica "
              "is behind"),
    ]


def build() -> Dashboard:
    return dashboard(
        "Kafka disks (JBOD)", UID,
        "Log dir state, bytes and usage per dir, skew per broker, moves in flight; "
        "kafka-selfheal", panels(),
        annotations=[alert_annotation(
            "Log dir alerts",
            f'ALERTS{{alertstate="firing",alertname=~"KafkaLogDirOffline|KafkaDiskSkew",{C}}}',
            "red")],
    )
