"""The tests' one poller: what it returns, what it waits through, how it fails."""

from __future__ import annotations

import time

import pytest

from tests.polling import seconds_until, wait_until


def test_returns_the_first_truthy_value_and_waits_through_exceptions() -> None:
    answers = iter([None, ConnectionError("restarting"), 0, "ready"])

    def check():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert wait_until(check, "ready", timeout=5, every=0) == "ready"


def test_a_timeout_names_what_was_awaited_the_last_value_and_the_explanation() -> None:
    with pytest.raises(AssertionError) as failed:
        wait_until(lambda: [], "the broker gone", timeout=0.05, every=0.01,
                   explain=lambda: "registered: ['0', '1', '2']")
    text = str(failed.value)
    assert "the broker gone not reached after 0 s (last: [])" in text
    assert text.endswith("registered: ['0', '1', '2']")


def test_an_explanation_that_fails_leaves_the_timeout_as_the_failure() -> None:
    def explain() -> str:
        raise ConnectionError("ZooKeeper gone")

    with pytest.raises(AssertionError) as failed:
        wait_until(lambda: None, "the broker gone", timeout=0.05, every=0.01, explain=explain)
    assert "the broker gone not reached" in str(failed.value)
    assert "explaining it failed: ConnectionError('ZooKeeper gone')" in str(failed.value)


def test_the_last_exception_is_quoted() -> None:
    def check():
        raise TimeoutError("no answer from 127.0.0.1:9092")

    with pytest.raises(AssertionError, match="no answer from 127.0.0.1:9092"):
        wait_until(check, "an answer", timeout=0.05, every=0.01)


def test_a_dead_process_fails_at_once_not_at_the_timeout() -> None:
    def alive() -> None:
        raise RuntimeError("serve exited with 1")

    checked: list[int] = []
    with pytest.raises(RuntimeError, match="serve exited"):
        wait_until(lambda: checked.append(1), "a fix", timeout=30, alive=alive)
    assert checked == []  # raised before the first check, not after 30 s of them


def test_seconds_until_counts_the_wait() -> None:
    ready_at = time.monotonic() + 0.2
    took = seconds_until(lambda: time.monotonic() >= ready_at, "0.2 s", timeout=5, every=0.01)
    assert 0.2 <= took < 5
