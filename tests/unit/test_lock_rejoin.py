"""The KRaft executor lease joins its group again when it stays out of it.

A librdkafka group consumer that never rejoins after every broker restarted cannot be
made on demand, so the consumer and the admin client are stand-ins here; the lease's
failover on a real bus is held by the integration tests."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from remediation.executor import lock

ME = "host pid 1 http://127.0.0.1:1"


class _Consumer:
    made: list[_Consumer] = []

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings, self.closed, self.callbacks = settings, False, {}
        _Consumer.made.append(self)

    def subscribe(self, topics: list[str], **callbacks: Any) -> None:
        self.callbacks = callbacks

    def poll(self, timeout: float) -> None:
        time.sleep(0.01)

    def close(self) -> None:
        self.closed = True


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _group(holder: str | None) -> Any:
    """What the admin client says: the lease topic led, one member holding partition 0
    (``holder``) or none."""
    members = [SimpleNamespace(client_id=holder, assignment=SimpleNamespace(
        topic_partitions=[SimpleNamespace(partition=0)]))] if holder else []
    done = SimpleNamespace(result=lambda: SimpleNamespace(members=members))
    return SimpleNamespace(
        list_topics=lambda **_: SimpleNamespace(topics={"lease": SimpleNamespace(
            error=None, partitions={0: SimpleNamespace(leader=1)})}),
        describe_consumer_groups=lambda groups, **_: {groups[0]: done})


@pytest.fixture
def lease(monkeypatch: pytest.MonkeyPatch) -> Any:
    import confluent_kafka

    _Consumer.made.clear()
    monkeypatch.setattr(confluent_kafka, "Consumer", _Consumer)
    monkeypatch.setattr(lock, "_ensure_lock_topic", lambda config, topic: None)
    said: list[str] = []
    clock = _Clock()
    leadership = lock.GroupLeadership({"bootstrap.servers": "x"}, "lease", "c1", ME,
                                      said.append, session_timeout=10.0, clock=clock)
    yield leadership, clock, said
    leadership.close()


def _replaced(count: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(_Consumer.made) < count:
        time.sleep(0.01)
    return len(_Consumer.made) >= count


@pytest.mark.parametrize("shown", [None, ME], ids=["nobody", "this serve, untold"])
def test_a_lease_nobody_holds_for_three_sessions_is_joined_again(lease: Any, shown: Any
                                                                 ) -> None:
    leadership, clock, said = lease
    leadership._admin = _group(shown)
    assert leadership.holder() == shown
    clock.now = 29.0
    leadership.holder()
    assert len(_Consumer.made) == 1  # not yet: a rebalance may take a session
    clock.now = 30.0
    leadership.holder()
    assert _replaced(2)
    assert _Consumer.made[0].closed and not _Consumer.made[1].closed
    assert _Consumer.made[1].settings["group.id"] == "selfheal-executor-lock-c1"
    assert any("no holder for 30 s" in line for line in said)
    # the new member is told of its assignment through its own callbacks
    _Consumer.made[1].callbacks["on_assign"](None, [SimpleNamespace(partition=0)])
    assert leadership.wait(threading.Event(), timeout=1)


def test_another_serve_holding_the_lease_is_never_disturbed(lease: Any) -> None:
    leadership, clock, said = lease
    leadership._admin = _group("other pid 2")
    for clock.now in (0.0, 30.0, 60.0, 600.0):
        assert leadership.holder() == "other pid 2"
    time.sleep(0.1)
    assert len(_Consumer.made) == 1 and not said


def test_a_holder_seen_in_between_starts_the_count_again(lease: Any) -> None:
    leadership, clock, _ = lease
    leadership._admin = _group(None)
    leadership.holder()
    clock.now = 20.0
    leadership._admin = _group("other pid 2")
    leadership.holder()
    leadership._admin = _group(None)
    clock.now = 25.0
    leadership.holder()
    clock.now = 50.0
    leadership.holder()
    time.sleep(0.1)
    assert len(_Consumer.made) == 1  # 25 s unheld since the other serve was seen
    clock.now = 55.0
    leadership.holder()
    assert _replaced(2)


def test_an_unreachable_bus_is_not_a_stuck_member(lease: Any) -> None:
    leadership, clock, _ = lease

    def away(**_: Any) -> Any:
        raise RuntimeError("all brokers down")

    leadership._admin = SimpleNamespace(list_topics=away)
    for clock.now in (0.0, 30.0, 60.0, 120.0):
        assert leadership.holder() is None
    time.sleep(0.1)
    assert len(_Consumer.made) == 1  # a new consumer would not reach the bus either
