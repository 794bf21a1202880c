"""The Great Expectations suites (streams/validate.py) agree with the JSON Schemas and say
which field broke which expectation."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from schemas.registry import is_valid, schema
from streams.validate import (
    LOADER,
    OFFLINE_GAUGE,
    NotJson,
    checked_columns,
    field_rules,
    suites,
)

METRIC = {"version": 1, "cluster_id": "c1", "event_time": "2026-11-22T03:50:54.123Z",
          "broker": 1, "rack": "r1", "metric": OFFLINE_GAUGE, "labels": {"log_dir": "/d2"},
          "value": 1}
EVENT = {"version": 1, "cluster_id": "c1", "event_time": "2026-11-22T03:50:54.123Z",
         "source": "zookeeper", "kind": "log_dir_failure", "broker": None, "log_dir": None,
         "znode": "/log_dir_event_notification/log_dir_event_0000000003", "details": None}
SNAPSHOT = {"version": 1, "cluster_id": "c1", "taken_at": "2026-11-22T03:50:54Z",
            "brokers": [{"id": 0, "rack": "r1", "alive": True,
                         "log_dirs": [{"path": "/d1", "online": True}]}],
            "partitions": [{"topic": "t", "partition": 0, "leader": 0, "isr": [0],
                            "replicas": [{"broker": 0, "log_dir": "/d1", "size_bytes": 5}]}]}
BASES = {"broker-metric": METRIC, "logdir-event": EVENT, "cluster-snapshot": SNAPSHOT}

# Values of every JSON type, and the edge values of the schemas' constraints.
PROBES: list[Any] = [None, True, 0, -1, 3.0, 2.5, "", "x", "2026-02-30T00:00:00Z",
                     "2026-11-22T03:50:54", "2026-11-22T03:50:54+02:00", [], [1], {},
                     {"log_dir": 1}, {"log_dir": "/d2"}]


def mutations(base: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(the field changed, the record) for every field x probe, each field deleted, and
    an unknown field added."""
    out = [("", copy.deepcopy(base))]
    for field in base:
        gone = copy.deepcopy(base)
        del gone[field]
        out.append((field, gone))
        for probe in PROBES:
            changed = copy.deepcopy(base)
            changed[field] = probe
            out.append((field, changed))
    out.append(("surprise", {**copy.deepcopy(base), "surprise": 1}))
    return out


def reasons(name: str, docs: list[Any]) -> list[str | None]:
    extra = {}
    if name == "cluster-snapshot":
        from schemas.snapshot import SnapshotError, snapshot_from_dict

        errors: list[str | None] = []
        for d in docs:
            try:
                snapshot_from_dict(d)
                errors.append(None)
            except SnapshotError as exc:
                errors.append(str(exc))
        extra[LOADER] = errors
    return suites().reasons(name, checked_columns(name, docs, extra))


def beyond_schema(name: str, doc: dict[str, Any]) -> bool:
    """Rules the suites add: the per-dir gauge names its dir; a snapshot's references
    hold together (the loader's consistency checks)."""
    if name == "cluster-snapshot":
        from schemas.snapshot import SnapshotError, snapshot_from_dict

        try:
            snapshot_from_dict(doc)
        except SnapshotError as exc:
            return exc.kind == "consistency"
        return False
    labels = doc.get("labels")
    return (name == "broker-metric" and doc.get("metric") == OFFLINE_GAUGE
            and not (isinstance(labels, dict) and isinstance(labels.get("log_dir"), str)
                     and labels["log_dir"]))


@pytest.mark.parametrize("name", sorted(BASES))
def test_the_suite_accepts_exactly_what_the_schema_accepts(name):
    cases = mutations(BASES[name])
    found = reasons(name, [doc for _, doc in cases])
    for (field, doc), reason in zip(cases, found, strict=True):
        expected_ok = is_valid(name, doc) and not beyond_schema(name, doc)
        assert (reason is None) == expected_ok, (field, doc, reason)
        if reason is not None and field and field != "brokers" and field != "partitions":
            # The reason names the field that was changed (deep snapshot problems name
            # their JSON path, which starts with it).
            assert reason.split(":", 1)[0].split("[")[0].split(".")[0] in (field, "labels"), \
                (field, reason)


def test_a_reason_names_the_expectation_and_every_bad_field():
    doc = {**METRIC, "broker": "2", "value": -1}
    (reason,) = reasons("broker-metric", [doc])
    assert reason == ("broker: expected integer, got string [expect_column_values_to_be_in_set]"
                      "; value: -1 is less than the minimum of 0 "
                      "[expect_column_values_to_be_between]")


def test_garbage_is_reported_once_not_as_missing_fields():
    found = reasons("logdir-event", [NotJson("not JSON: JSON is malformed"), [1, 2], "x"])
    assert found == [
        "$: not JSON: JSON is malformed [expect_column_values_to_be_null]",
        "$: expected a JSON object, got array [expect_column_values_to_be_null]",
        "$: expected a JSON object, got string [expect_column_values_to_be_null]",
    ]


def test_the_offline_gauge_without_its_dir_label_is_rejected_other_metrics_need_none():
    no_label = {**METRIC, "labels": {}}
    size = {**METRIC, "metric": "kafka_log_size", "labels": {"topic": "t", "partition": "0"}}
    assert reasons("broker-metric", [no_label, size]) == [
        f"labels.log_dir: required for {OFFLINE_GAUGE} (which dir is offline?) "
        "[expect_column_values_to_not_be_null]", None]


def test_a_snapshot_reports_its_deep_problem_by_path():
    doc = copy.deepcopy(SNAPSHOT)
    doc["partitions"][0]["replicas"][0]["broker"] = 7
    (reason,) = reasons("cluster-snapshot", [doc])
    assert reason.startswith("partitions[0].replicas[0].broker: broker 7 is not in brokers")


def test_rules_follow_the_schema_files():
    names = {r.name for r in field_rules("broker-metric")}
    assert names == set(schema("broker-metric")["properties"])
    broker = next(r for r in field_rules("logdir-event") if r.name == "broker")
    assert broker.types == {"integer", "null", "missing"} and broker.minimum == 0
