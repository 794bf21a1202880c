"""The snapshot collector's look at what each broker's Kafka answers (core.api_support):
brokers of different versions (a rolling upgrade) are named once in its log, with the
calls the product cannot make to all of them, and again only when that changes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


class ApiWatch:
    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self.said: str | None = None  # the last gap line logged

    def check(self, admin: Any, brokers: Iterable[int]) -> bool:
        """Read every broker's ApiVersions and say what changed; True when ``admin``
        speaks older versions than every broker now answers (it was opened before an
        upgrade finished): its holder reopens it."""
        from core.api_support import behind, gap_line, gaps, read_versions, used_versions

        versions = read_versions(admin, brokers)
        if not versions:
            return False
        line = gap_line(gaps(versions))
        if line != self.said:
            self.log(f"WARNING {line}" if line else
                     "every broker answers the same calls again (no Kafka versions mixed)")
            self.said = line
        stale = behind(used_versions(admin), versions)
        if stale:
            self.log("every broker now answers " + ", ".join(stale) + ", which this "
                     "admin client (opened before) does not use: reopening it")
        return bool(stale)
