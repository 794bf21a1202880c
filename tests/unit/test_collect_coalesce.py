"""The snapshot collector's coalescing: a burst of log-dir events makes one snapshot."""

from __future__ import annotations

from streams.collect.coalesce import Coalescer


def test_a_burst_within_the_window_is_due_once_a_window_after_the_first_event():
    c = Coalescer(0.2)
    assert not c.due(100.0)
    c.note(100.0, "a")
    c.note(100.1, "b")
    c.note(100.15, "c")
    assert not c.due(100.19)
    assert c.due(100.2)
    assert c.take() == "a and 2 more"
    assert not c.due(100.3) and c.due_at is None


def test_a_later_event_does_not_push_the_snapshot_back():
    c = Coalescer(0.2)
    c.note(10.0, "a")
    c.note(10.19, "b")
    assert c.due_at == 10.2


def test_a_change_the_probe_saw_is_due_at_once():
    c = Coalescer(0.2)
    c.note(10.0, "event")
    c.note(10.05, "probe", wait=False)
    assert c.due(10.05)
    assert c.take() == "event, probe"


def test_after_a_take_the_next_burst_starts_a_new_window():
    c = Coalescer(0.2)
    c.note(1.0, "a")
    c.take()
    c.note(5.0, "b")
    assert c.due_at == 5.2
