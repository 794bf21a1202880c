"""Where the job's stop lands: at the end of a batch body, never inside one (a body
interrupted by a stop failed with a long Py4J error that overflowed Spark's stack)."""

from __future__ import annotations

import threading
import time

import pytest

from streams.stopping import StopDeferred, StopGate


class Query:
    """A query whose stop, like Spark's, marks it inactive at once and returns when its
    thread is done; counts stops and who called."""

    def __init__(self) -> None:
        self.isActive = True
        self.stops: list[str] = []
        self.done = threading.Event()  # set by the stand-in query thread when it ends

    def stop(self) -> None:
        self.isActive = False
        self.stops.append(threading.current_thread().name)
        self.done.wait(30)


def body(gate: StopGate, work: threading.Event, finished: list[str], query: Query) -> None:
    """A batch body as the query thread runs it; the query thread ends after it."""
    gate.enter()
    try:
        work.wait(30)
        finished.append("batch")
    finally:
        gate.leave()
        finished.append("left" if not query.isActive else "left, query still active")
        query.done.set()


def test_a_running_body_finishes_its_batch_and_then_stops_the_query():
    gate, query, work, finished = StopGate(), Query(), threading.Event(), []
    gate.query = query
    thread = threading.Thread(target=body, args=(gate, work, finished, query))
    thread.start()
    time.sleep(0.1)
    stopper = threading.Thread(target=lambda: finished.append(gate.stop(query)))
    stopper.start()
    time.sleep(0.3)
    assert query.stops == [] and query.isActive  # not while the body works
    work.set()
    stopper.join(30)
    thread.join(30)
    assert finished == ["batch", "left", "body"]  # marked stopped before the body returned
    assert query.stops == ["selfheal-stop-query"]


def test_without_a_running_body_the_next_one_stops_the_query_after_its_batch():
    gate, query, work, finished = StopGate(), Query(), threading.Event(), []
    gate.query = query
    stopper = threading.Thread(target=lambda: finished.append(gate.stop(query, idle_wait=30)))
    stopper.start()
    assert gate.wanted.wait(30)
    work.set()
    body(gate, work, finished, query)  # data came: a batch runs whole, then the stop
    stopper.join(30)
    assert finished == ["batch", "left", "body"]
    assert query.stops == ["selfheal-stop-query"]


def test_idle_topics_are_stopped_by_the_caller_and_a_late_body_does_no_work():
    gate, query = StopGate(), Query()
    gate.query = query
    query.done.set()  # no body is running: the query thread ends at once
    assert gate.stop(query, idle_wait=0.2) == "caller"
    assert query.stops == [threading.current_thread().name]
    with pytest.raises(StopDeferred, match="runs again on restart"):
        gate.enter()


def test_a_body_that_fails_still_lets_the_stop_through():
    gate, query = StopGate(), Query()
    gate.query = query
    stopper = threading.Thread(target=gate.stop, args=(query,), kwargs={"idle_wait": 30})
    stopper.start()
    assert gate.wanted.wait(30)
    gate.enter()
    try:
        with pytest.raises(RuntimeError):
            try:
                raise RuntimeError("a delivery failed")
            finally:
                gate.leave()
    finally:
        query.done.set()
    stopper.join(30)
    assert not stopper.is_alive() and query.stops == ["selfheal-stop-query"]
