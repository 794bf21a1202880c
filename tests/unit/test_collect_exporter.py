"""JMX exporter text -> broker-metric records: what is kept, what is refused, and why."""

from __future__ import annotations

import pytest

from schemas.records import BrokerMetric
from schemas.registry import validate
from streams.collect.exporter import (
    ExporterFormatError,
    parse_exporter_text,
    wire_dict,
    wire_values,
)

# Trimmed from a real sandbox broker's /metrics (jmx_prometheus_javaagent 1.0.1 with the
# rules of sandbox/jmx-exporter.yml): JVM and exporter self-metrics around the Kafka ones.
SCRAPE = """\
# HELP jmx_scrape_duration_seconds Time this JMX scrape took, in seconds.
# TYPE jmx_scrape_duration_seconds gauge
jmx_scrape_duration_seconds 0.020415244
# HELP jvm_memory_committed_bytes Committed (bytes) of a given JVM memory area.
# TYPE jvm_memory_committed_bytes gauge
jvm_memory_committed_bytes{area="heap"} 3.61402368E8
# HELP kafka_controller_active_controller_count Attribute exposed for management
# TYPE kafka_controller_active_controller_count gauge
kafka_controller_active_controller_count 1.0
# HELP kafka_log_log_directory_offline Attribute exposed for management
# TYPE kafka_log_log_directory_offline gauge
kafka_log_log_directory_offline{log_dir="/data/b2/d0"} 0.0
kafka_log_log_directory_offline{log_dir="/data/b2/d1"} 1.0
# HELP kafka_log_offline_log_directory_count Attribute exposed for management
# TYPE kafka_log_offline_log_directory_count gauge
kafka_log_offline_log_directory_count 1.0
# HELP kafka_log_size Attribute exposed for management
# TYPE kafka_log_size gauge
kafka_log_size{partition="0",topic="orders"} 3227.0
kafka_log_size{partition="1",topic="orders"} 1.5E9
# HELP kafka_server_under_replicated_partitions Attribute exposed for management
# TYPE kafka_server_under_replicated_partitions gauge
kafka_server_under_replicated_partitions 4.0
"""

NOW = "2026-11-22T05:00:00.000Z"


def parse(text: str = SCRAPE, rack: str | None = "rack3"):
    return parse_exporter_text(text, "c1", 2, rack, NOW)


def test_only_the_schema_metrics_are_kept_one_record_per_sample():
    scrape = parse()
    assert scrape.rejected == []
    assert [(r.metric, r.labels, r.value) for r in scrape.records] == [
        ("kafka_controller_active_controller_count", {}, 1.0),
        ("kafka_log_log_directory_offline", {"log_dir": "/data/b2/d0"}, 0.0),
        ("kafka_log_log_directory_offline", {"log_dir": "/data/b2/d1"}, 1.0),
        ("kafka_log_offline_log_directory_count", {}, 1.0),
        ("kafka_log_size", {"partition": "0", "topic": "orders"}, 3227.0),
        ("kafka_log_size", {"partition": "1", "topic": "orders"}, 1.5e9),
        ("kafka_server_under_replicated_partitions", {}, 4.0),
    ]


def test_every_record_carries_the_scrape_identity_and_validates():
    for record in parse().records:
        assert (record.cluster_id, record.broker, record.rack, record.event_time) == (
            "c1", 2, "rack3", NOW)
        validate("broker-metric", record.to_dict())
        assert BrokerMetric.from_json(record.to_json()) == record


def test_a_broker_without_a_rack_gets_null():
    assert {r.rack for r in parse(rack=None).records} == {None}


@pytest.mark.parametrize("value", ["NaN", "-1.0", "+Inf"])
def test_a_value_outside_the_schema_is_rejected_with_the_reason(value):
    text = (f"kafka_log_offline_log_directory_count {value}\n"
            'kafka_log_size{topic="t",partition="0"} 5\n')
    scrape = parse(text)
    assert [r.metric for r in scrape.records] == ["kafka_log_size"]
    (line,) = scrape.rejected
    assert line.startswith("kafka_log_offline_log_directory_count")
    assert "finite value >= 0" in line


def test_text_that_is_not_the_prometheus_format_is_an_error():
    with pytest.raises(ExporterFormatError, match="not the Prometheus text format"):
        parse("<html><body>404 not found</body></html>")


def test_an_exporter_without_kafka_metrics_gives_nothing_and_rejects_nothing():
    scrape = parse("# TYPE jvm_threads_current gauge\njvm_threads_current 42.0\n")
    assert (scrape.records, scrape.rejected) == ([], [])


def test_wire_values_are_the_records_json_and_schema_breakers_are_set_aside():
    records = parse().records
    values, bad = wire_values(records)
    assert bad == []
    assert [BrokerMetric.from_json(v) for v in values] == records
    broken = parse_exporter_text(SCRAPE, "", 2, "rack3", NOW).records  # empty cluster id
    values, bad = wire_values(broken)
    assert values == []
    assert [r for r, _ in bad] == broken
    assert all(e.path == "cluster_id" for _, e in bad)


def test_the_fast_wire_dict_is_exactly_the_generic_one():
    for record in parse().records + parse(rack=None).records:
        assert list(wire_dict(record).items()) == list(record.to_dict().items())
