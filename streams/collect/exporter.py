"""A JMX exporter's text -> `BrokerMetric` records (pure: no I/O).

The exporter serves the Prometheus text format; prometheus-client's own parser reads it.
Only the metrics in `schemas/broker-metric.schema.json` are kept (the sandbox's exporter
rules, sandbox/jmx-exporter.yml, name them); the JVM and exporter self-metrics are not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from schemas.records import METRICS, BrokerMetric
from schemas.registry import RecordError, dumps

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


def wire_dict(record: BrokerMetric) -> dict[str, Any]:
    """``record.to_dict()`` written out for this one type: the generic walk costs 50 us a
    record, most of a big scrape's encoding time (a unit test holds the two equal)."""
    return {
        "version": record.version, "cluster_id": record.cluster_id,
        "event_time": record.event_time, "broker": record.broker, "rack": record.rack,
        "metric": record.metric, "labels": record.labels, "value": record.value,
    }


def wire_values(records: list[BrokerMetric]
                ) -> tuple[list[bytes], list[tuple[BrokerMetric, RecordError]]]:
    """The Kafka values of ``records``, and the records that broke the schema.

    The first record of each metric is validated; the rest differ from it only in value
    and labels, which the parser has checked, so they skip the jsonschema pass (about
    90 us a record, which a broker with 10,000 partitions would pay every scrape).
    """
    checked: set[str] = set()
    values: list[bytes] = []
    bad: list[tuple[BrokerMetric, RecordError]] = []
    for record in records:
        if record.metric in checked:
            values.append(dumps(wire_dict(record)))
            continue
        try:
            values.append(record.to_json())
        except RecordError as exc:
            bad.append((record, exc))
            continue
        checked.add(record.metric)
    return values, bad
