"""Racks: replicas and leaders per rack, brokers per rack, and the partitions whose
replicas share a rack (KIP-36 placement violated)."""

from __future__ import annotations

from grafanalib.core import Dashboard

from dashboards.panels import CLUSTER, Panel, dashboard, q

UID = "selfheal-racks"
C = CLUSTER


def panels() -> list[Panel]:
    """Every panel, in layout order."""
    return [
        Panel("Partitions whose replicas share a rack",
              (q(f"max(selfheal_partitions_sharing_rack{{{C}}})"),), kind="stat", width=6,
              height=4, description="Two replicas in one rack although the cluster has a "
              "rack for each replica"),
        Panel("Alive brokers per rack",
              (q(f"max by (rack) (selfheal_rack_brokers{{{C}}})", "{{rack}}"),),
              kind="stat", width=6, height=4),
        Panel("Partitions", (q(f"max(selfheal_partitions{{{C}}})"),), kind="stat", width=6,
              height=4),
        Panel("Partitions without a leader",
              (q(f"max(selfheal_partitions_without_leader{{{C}}})"),), kind="stat", width=6,
              height=4),
        Panel("Replicas per rack",
              (q(f"max by (rack) (selfheal_rack_replicas{{{C}}})", "{{rack}}"),)),
        Panel("Leaders per rack",
              (q(f"max by (rack) (selfheal_rack_leaders{{{C}}})", "{{rack}}"),),
              description="A failed dir moves its leaders to other brokers, often other "
              "racks"),
        Panel("Leader share per rack vs. its broker share",
              (q(f"max by (rack) (selfheal_rack_leaders{{{C}}}) / scalar(sum(max by (rack) "
                 f"(selfheal_rack_leaders{{{C}}})))", "leaders {{rack}}"),
               q(f"max by (rack) (selfheal_rack_brokers{{{C}}}) / scalar(sum(max by (rack) "
                 f"(selfheal_rack_brokers{{{C}}})))", "brokers {{rack}}")),
              unit="percentunit"),
        Panel("Leaders per broker",
              (q(f"max by (broker, rack) (selfheal_broker_leaders{{{C}}})",
                 "{{broker}} ({{rack}})"),)),
        Panel("Partitions whose replicas share a rack (history)",
              (q(f"max(selfheal_partitions_sharing_rack{{{C}}})", "partitions"),), width=24),
    ]


def build() -> Dashboard:
    return dashboard("Kafka racks", UID,
                     "Replica and leader placement across racks; kafka-selfheal", panels())
