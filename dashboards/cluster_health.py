"""Cluster health: the brokers' own figures at a glance (what Strimzi's Kafka dashboard
shows), plus offline log dirs and the alerts that fire."""

from __future__ import annotations

from grafanalib.core import Dashboard

from dashboards.panels import CLUSTER, Panel, alert_annotation, dashboard, q

UID = "selfheal-cluster-health"
C = CLUSTER


def panels() -> list[Panel]:
    """Every panel, in layout order."""
    return [
        Panel("Offline log dirs", (q(f"sum(kafka_log_offline_log_directory_count{{{C}}})"),),
              kind="stat", width=4, height=4, fault=" > 0"),
        Panel("Offline partitions",
              (q(f"sum(kafka_controller_offline_partitions_count{{{C}}})"),),
              kind="stat", width=4, height=4),
        Panel("Under-replicated partitions",
              (q(f"sum(kafka_server_under_replicated_partitions{{{C}}})"),),
              kind="stat", width=4, height=4, fault=" > 0"),
        Panel("Under min ISR", (q(f"sum(kafka_server_under_min_isr_partitions{{{C}}})"),),
              kind="stat", width=4, height=4),
        Panel("Brokers up", (q(f'sum(up{{job="kafka",role!="controller",{C}}})'),),
              kind="stat", width=4, height=4),
        Panel("Active controllers",
              (q(f"sum(kafka_controller_active_controller_count{{{C}}})"),),
              kind="stat", width=4, height=4,
              description="Exactly 1 in a healthy cluster"),
        Panel("Offline log dirs per broker",
              (q(f"sum by (broker) (kafka_log_offline_log_directory_count{{{C}}})",
                 "broker {{broker}}"),), fault=" > 0"),
        Panel("Under-replicated partitions per broker (as leader)",
              (q(f"sum by (broker) (kafka_server_under_replicated_partitions{{{C}}})",
                 "broker {{broker}}"),), fault=" > 0"),
        Panel("Partitions and leaders per broker",
              (q(f'sum by (broker) (kafka_server_partitions{{{C}}})', "partitions {{broker}}"),
               q(f'sum by (broker) (kafka_server_leader_partitions{{{C}}})',
                 "leaders {{broker}}"))),
        Panel("Preferred-replica imbalance",
              (q(f"sum(kafka_controller_preferred_replica_imbalance_count{{{C}}})",
                 "partitions not led by their preferred replica"),)),
        Panel("ISR shrinks and expands",
              (q(f"sum by (broker) (rate(kafka_server_isr_shrinks_total{{{C}}}[$__rate_interval]))",
                 "shrinks {{broker}}"),
               q(f"sum by (broker) (rate(kafka_server_isr_expands_total{{{C}}}[$__rate_interval]))",
                 "expands {{broker}}")), unit="ops"),
        Panel("Bytes in and out per broker",
              (q(f"sum by (broker) (rate(kafka_server_bytes_in_total{{{C}}}[$__rate_interval]))",
                 "in {{broker}}"),
               q(f"sum by (broker) (rate(kafka_server_bytes_out_total{{{C}}}[$__rate_interval]))",
                 "out {{broker}}")), unit="Bps"),
        Panel("Firing alerts",
              (q(f'count by (alertname, severity) (ALERTS{{alertstate="firing",{C}}})',
                 "{{alertname}} ({{severity}})"),), width=24, fault=" > 0"),
    ]


def build() -> Dashboard:
    return dashboard(
        "Kafka cluster health", UID,
        "Brokers, controller, offline dirs and partitions, replication; kafka-selfheal",
        panels(),
        annotations=[alert_annotation(
            "Alerts", f'ALERTS{{alertstate="firing",{C}}}', "red")],
    )
