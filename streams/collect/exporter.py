"""A JMX exporter's text -> `BrokerMetric` records (pure: no I/O).

The exporter serves the Prometheus text format; prometheus-client's own parser reads it.
Only the metrics in `schemas/broker-metric.schema.json` are kept (the sandbox's exporter
rules, sandbox/jmx-exporter.yml, name them); the JVM and exporter self-metrics are not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from schemas.records import METRICS, BrokerMetric

_KEPT = frozenset(METRICS)


class ExporterFormatError(ValueError):
    """The endpoint answered, but not with the Prometheus text format."""


@dataclass
class Scrape:
    """What one exporter's text gave: records to produce, samples that could not be kept."""

    records: list[BrokerMetric] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # "<sample>: <why>", for the log


def parse_exporter_text(text: str, cluster_id: str, broker: int, rack: str | None,
                        event_time: str) -> Scrape:
    """One record per kept sample of ``text``, all stamped with the scrape's time.

    A kept metric whose value is not a finite number >= 0 (the schema's range) is
    rejected with its reason rather than dropped unseen.
    """
    from prometheus_client.parser import text_string_to_metric_families

    out = Scrape()
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError) as exc:
        raise ExporterFormatError(f"not the Prometheus text format ({exc})") from None
    for family in families:
        for sample in family.samples:
            if sample.name not in _KEPT:
                continue
            value = float(sample.value)
            if not math.isfinite(value) or value < 0:
                out.rejected.append(
                    f"{sample.name}{dict(sample.labels)}={sample.value}: the schema takes a "
                    "finite value >= 0")
                continue
            out.records.append(BrokerMetric(
                cluster_id=cluster_id, event_time=event_time, broker=broker,
                metric=sample.name, value=value, rack=rack,
                labels={str(k): str(v) for k, v in sample.labels.items()},
            ))
    return out
