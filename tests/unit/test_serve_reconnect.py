"""An executor whose cluster reads keep failing says so once, remembers since when, and
serve rebuilds its clients after `CLIENT_RESET_SECONDS` (a chaos run once saw one admin
refused for four minutes while every broker listened)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from remediation.executor.cluster import ClusterError
from remediation.executor.lifecycle import State
from remediation.executor.runner import Executor
from remediation.service import serve


class _Store:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def expire_overdue(self, *args: Any) -> tuple[str, ...]:
        return ()

    def open_actions(self) -> tuple[Any, ...]:
        return ()

    def in_flight(self) -> tuple[Any, ...]:
        return tuple(self.rows)


def _executor(failures: list[bool]) -> tuple[Executor, list[str]]:
    said: list[str] = []
    ex = Executor.__new__(Executor)
    ex.store = _Store([SimpleNamespace(state=State.EXECUTING, id="a" * 64)])  # type: ignore[assignment]
    ex.is_leader = lambda: True
    ex.policy = SimpleNamespace(limits=SimpleNamespace(approval_ttl_seconds=60))  # type: ignore[assignment]
    ex._next_page_check = float("inf")
    ex._log = said.append
    ex._last_error = None
    ex.errors = 0
    ex.failing_since = None
    ex._denials, ex._denied_until = 0, 0.0
    ex._replans = set()  # no failed fix to plan again
    ex.cluster = SimpleNamespace()  # type: ignore[assignment]  # no broker named silent
    ex.throttles = SimpleNamespace(restore_left=lambda: None)  # type: ignore[assignment]

    def step(row: Any) -> None:
        if failures.pop(0):
            raise ClusterError("cannot read the cluster: KafkaConnectionError: 111 ECONNREFUSED")

    ex.step = step  # type: ignore[method-assign]
    return ex, said


def test_a_run_of_failed_reads_is_said_once_and_dated_from_its_first() -> None:
    ex, said = _executor([True, True, True, False, True])
    ex.tick()
    first = ex.failing_since
    assert first is not None
    ex.tick()
    ex.tick()
    assert ex.failing_since == first and ex.errors == 3
    assert said == ["cannot read the cluster: KafkaConnectionError: 111 ECONNREFUSED; retrying"]
    ex.tick()  # the cluster answers: the run ends
    assert ex.failing_since is None
    ex.tick()
    assert ex.failing_since is not None and ex.failing_since > first
    assert len(said) == 2  # a new run is said again


class _Once:
    """Stands for the intake and the outbox: does nothing."""

    def poll(self, *args: Any) -> int:
        return 0

    def publish(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("failing_for,rebuilds", [(serve.CLIENT_RESET_SECONDS + 5, True),
                                                  (1.0, False)])
def test_serve_rebuilds_its_clients_only_after_a_long_run_of_failures(
        failing_for: float, rebuilds: bool) -> None:
    stop = threading.Event()
    ticks = {"n": 0}

    def tick() -> None:
        ticks["n"] += 1
        if ticks["n"] >= 3:
            stop.set()

    executor = SimpleNamespace(tick=tick, failing_since=time.monotonic() - failing_for)
    me = SimpleNamespace(config=SimpleNamespace(serve=SimpleNamespace(tick_seconds=0.0)),
                         runtime=SimpleNamespace(ticks=0, last_tick_seconds=0.0))
    if rebuilds:
        with pytest.raises(ClusterError, match=r"has not answered for \d+ s; reconnecting"):
            serve.Serve._loop(me, stop, lambda: True, _Once(), executor, _Once())  # type: ignore[arg-type]
        assert ticks["n"] == 1
    else:
        serve.Serve._loop(me, stop, lambda: True, _Once(), executor, _Once())  # type: ignore[arg-type]
        assert ticks["n"] == 3
