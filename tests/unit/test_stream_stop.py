"""How the job picks the moment to stop its query: between two batch bodies, so the
interrupt lands in Spark's commit or planning and never in this process's Python."""

from __future__ import annotations

import threading
import types

from streams.job import _between_batches


class Query:
    """A query whose trigger is always active (batches that outlast the trigger run back
    to back); counts how often its status is read."""

    def __init__(self, active: bool = True) -> None:
        self.active = active
        self.reads = 0

    @property
    def status(self) -> dict[str, bool]:
        self.reads += 1
        return {"isTriggerActive": self.active}


def sink(idle: bool) -> types.SimpleNamespace:
    event = threading.Event()
    if idle:
        event.set()
    return types.SimpleNamespace(idle=event)


def test_an_idle_sink_means_stop_now_even_while_the_trigger_is_active():
    query = Query(active=True)
    _between_batches(query, sink(idle=True), timeout=600)
    assert query.reads == 0


def test_a_running_body_is_waited_for_until_it_returns():
    query, body = Query(active=True), sink(idle=False)
    returned = threading.Event()
    waiter = threading.Thread(target=lambda: (_between_batches(query, body, timeout=600),
                                              returned.set()))
    waiter.start()
    try:
        assert not returned.wait(0.5)  # the body still runs: no stop yet
        assert query.reads > 0
    finally:
        body.idle.set()  # the body returns
        waiter.join(60)
    assert returned.is_set()


def test_an_idle_trigger_means_stop_now():
    query = Query(active=False)
    _between_batches(query, sink(idle=False), timeout=600)
    assert query.reads == 1


def test_a_body_that_never_returns_is_interrupted_after_the_bound():
    query = Query(active=True)
    _between_batches(query, sink(idle=False), timeout=0.3)
    assert query.reads >= 1
