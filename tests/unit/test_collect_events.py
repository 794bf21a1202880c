"""Event diffing: broker registrations, cluster views, and the records they become."""

from __future__ import annotations

from schemas.records import LogDirEvent
from streams.collect.events import (
    DEREGISTERED,
    DIR_FAILURE,
    REGISTERED,
    Change,
    ClusterView,
    change_event,
    notification_event,
    registration_changes,
    view_changes,
)
from streams.collect.logdir_watch import LogDirNotification
from streams.collect.sink import record_key


def test_joins_and_leaves_between_two_listings():
    assert registration_changes({1: 10, 2: 20}, {2: 20, 3: 30}) == [
        Change(DEREGISTERED, 1), Change(REGISTERED, 3)]


def test_a_broker_that_restarted_between_looks_left_and_joined():
    assert registration_changes({1: 10}, {1: 55}) == [
        Change(DEREGISTERED, 1), Change(REGISTERED, 1)]


def test_the_same_listing_is_no_change():
    assert registration_changes({1: 10, 2: 20}, {2: 20, 1: 10}) == []


def view(alive, offline):
    return ClusterView(frozenset(alive), frozenset(offline))


def test_the_first_look_reports_offline_dirs_but_no_membership():
    first = ClusterView.observe(None, {1, 2}, {1: ["/d1"], 2: []})
    assert view_changes(None, first) == [Change(DIR_FAILURE, 1, "/d1")]


def test_a_dir_going_offline_and_brokers_joining_and_leaving_are_reported():
    before = view({1, 2}, set())
    after = view({2, 3}, {(2, "/d0"), (3, "/d1")})
    assert view_changes(before, after) == [
        Change(DEREGISTERED, 1), Change(REGISTERED, 3),
        Change(DIR_FAILURE, 2, "/d0"), Change(DIR_FAILURE, 3, "/d1")]


def test_a_dir_still_offline_is_not_reported_again_and_a_recovered_one_is_no_event():
    before = view({1}, {(1, "/d0"), (1, "/d1")})
    assert view_changes(before, view({1}, {(1, "/d0")})) == []
    assert view_changes(before, before) == []


def test_a_broker_that_did_not_answer_keeps_its_offline_dirs():
    before = view({1, 2}, {(1, "/d0"), (2, "/d1")})
    after = ClusterView.observe(before, {1, 2}, {2: []})  # 1 silent, 2 says all online
    assert after.offline == {(1, "/d0")}
    assert view_changes(before, after) == []


def test_a_describe_log_dirs_failure_event_names_broker_dir_and_error():
    event = change_event("c1", Change(DIR_FAILURE, 2, "/data/d1"), "describe_log_dirs",
                         "2026-11-22T05:00:00.000Z")
    assert event == LogDirEvent(
        cluster_id="c1", event_time="2026-11-22T05:00:00.000Z", source="describe_log_dirs",
        kind=DIR_FAILURE, broker=2, log_dir="/data/d1", details="KAFKA_STORAGE_ERROR")
    assert LogDirEvent.from_json(event.to_json()) == event


def test_membership_events_from_zookeeper_name_the_registration_znode():
    zk = change_event("c1", Change(REGISTERED, 4), "zookeeper")
    assert (zk.source, zk.kind, zk.broker, zk.znode) == (
        "zookeeper", REGISTERED, 4, "/brokers/ids/4")
    metadata = change_event("c1", Change(DEREGISTERED, 4), "metadata")
    assert (metadata.znode, metadata.details) == (None, None)
    for event in (zk, metadata):
        LogDirEvent.from_json(event.to_json())


def test_a_notification_read_in_time_names_its_broker_and_znode():
    event = notification_event("c1", LogDirNotification(
        "log_dir_event_0000000007", 7, 3, seen_by_name=True))
    assert (event.kind, event.broker, event.znode, event.details) == (
        DIR_FAILURE, 3, "/log_dir_event_notification/log_dir_event_0000000007", None)
    LogDirEvent.from_json(event.to_json())


def test_a_notification_already_deleted_keeps_its_znode_and_says_why_no_broker():
    event = notification_event("c1", LogDirNotification(
        "log_dir_event_0000000008", 8, None, seen_by_name=True))
    assert event.broker is None
    assert event.znode == "/log_dir_event_notification/log_dir_event_0000000008"
    assert "deleted the znode before it could be read" in event.details
    LogDirEvent.from_json(event.to_json())


def test_a_notification_never_seen_by_name_is_still_a_failure_event():
    event = notification_event("c1", LogDirNotification(None, None, None, seen_by_name=False))
    assert (event.kind, event.broker, event.znode) == (DIR_FAILURE, None, None)
    assert "cversion" in event.details and "DescribeLogDirs" in event.details
    LogDirEvent.from_json(event.to_json())


def test_records_are_keyed_by_cluster_and_broker():
    assert record_key("c1", 2) == b"c1/2"
    assert record_key("c1", None) == b"c1"
