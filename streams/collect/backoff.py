"""Exponential backoff between a collector's failed attempts."""

from __future__ import annotations


class Backoff:
    """Delays that double from ``initial`` to ``maximum`` while failures last.

    No jitter: one collector per cluster talks to each endpoint, so there is no herd of
    clients to spread out, and fixed delays make the log easy to read.
    """

    def __init__(self, initial: float, maximum: float) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError(
                f"backoff needs 0 < initial <= maximum, got initial={initial}, "
                f"maximum={maximum}; fix [collect] backoff_initial_seconds / "
                "backoff_max_seconds")
        self.initial = initial
        self.maximum = maximum
        self.failures = 0

    def failure(self) -> float:
        """Count one more failure; the delay before the next attempt."""
        delay = min(self.maximum, self.initial * 2.0 ** min(self.failures, 64))
        self.failures += 1
        return delay

    def success(self) -> None:
        """The next failure starts again from ``initial``."""
        self.failures = 0
