"""The tests' one poller: wait for a real cluster, process or log to show something."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(check: Callable[[], Any], what: str, timeout: float = 60.0,
               every: float = 0.3, *, explain: Callable[[], str] | None = None,
               alive: Callable[[], None] | None = None) -> Any:
    """Poll ``check`` until it returns something truthy and return that. An exception
    from ``check`` counts as "not yet" (a broker restarting, a server still starting);
    ``alive()``, called before each round, fails at once by raising (a process the test
    runs has died). After ``timeout`` seconds, fail naming ``what``, the last value or
    exception, and what ``explain()`` adds (a log's tail, a scrape)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        if alive is not None:
            alive()
        try:
            last = check()
        except Exception as exc:  # quoted in the failure below
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            break
        time.sleep(every)
    message = f"{what} not reached after {timeout:.0f} s (last: {last!r})"
    if explain is not None:
        try:  # a ZooKeeper or log read may fail too: the timeout stays the failure
            message += "\n" + explain()
        except Exception as exc:
            message += f"\n(and explaining it failed: {exc!r})"
    raise AssertionError(message)


def seconds_until(check: Callable[[], Any], what: str, timeout: float = 60.0,
                  every: float = 0.3, *, explain: Callable[[], str] | None = None) -> float:
    """How long ``check`` took to hold, polled as ``wait_until`` does."""
    start = time.monotonic()
    wait_until(check, what, timeout, every, explain=explain)
    return time.monotonic() - start
