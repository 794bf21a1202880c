"""Client side of KIP-881 targets: `RackAwareConsumer` lets a Python confluent-kafka
consumer group read the rack-aware assignment `serve` publishes (docs/consumer-groups.md)."""

from remediation.consumers.consumer import ConfigError, RackAwareConsumer

__all__ = ["ConfigError", "RackAwareConsumer"]
