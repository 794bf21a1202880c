"""The log-dir notification watcher against the sandbox's real ZooKeeper.

A scratch path stands in for /log_dir_event_notification so the Kafka controller does
not act on the test's notifications; ZooKeeper's semantics are the same.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from streams.collect.logdir_watch import LogDirNotificationWatcher

pytestmark = pytest.mark.integration


@pytest.fixture
def zk(sandbox):
    from kazoo.client import KazooClient

    client = KazooClient(hosts=sandbox.zookeeper_connect)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _notify(zk, path: str, broker: int) -> str:
    data = json.dumps({"version": 1, "broker": broker, "event": 1}).encode()
    return zk.create(f"{path}/log_dir_event_", data, sequence=True).rsplit("/", 1)[1]


def test_a_new_notification_is_reported_with_its_name_and_broker(zk):
    path = f"/selfheal-test-{uuid.uuid4().hex[:8]}"
    seen = []
    watcher = LogDirNotificationWatcher(zk, seen.append, path=path)
    watcher.start()
    name = _notify(zk, path, broker=2)
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [(n.name, n.broker, n.seen_by_name) for n in seen] == [(name, 2, True)]
    assert seen[0].sequence == int(name.removeprefix("log_dir_event_"))


def test_children_present_at_start_are_not_reported_again(zk):
    path = f"/selfheal-test-{uuid.uuid4().hex[:8]}"
    zk.ensure_path(path)
    _notify(zk, path, broker=0)
    seen = []
    LogDirNotificationWatcher(zk, seen.append, path=path).start()
    time.sleep(1)
    assert seen == []


def test_a_notification_created_and_deleted_while_away_is_still_reported(zk):
    path = f"/selfheal-test-{uuid.uuid4().hex[:8]}"
    seen = []
    watcher = LogDirNotificationWatcher(zk, seen.append, path=path)
    watcher.start()
    watcher.stop()  # as during a ZooKeeper disconnect: events are not handled
    for broker in (1, 2):
        name = _notify(zk, path, broker)
        zk.delete(f"{path}/{name}")  # the controller's quick delete
    time.sleep(0.5)
    assert seen == []
    watcher.resync()
    assert len(seen) == 2
    assert all(not n.seen_by_name and n.name is None for n in seen)
