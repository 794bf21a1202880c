"""The one clock: every time kafka-selfheal writes, and every time it reads back.

Written times are RFC 3339 in UTC with a ``Z`` and milliseconds
(``2026-11-24T03:04:05.678Z``), on every topic, in the store, the audit and the journal.
Read times are what our records carry (RFC 3339 with any offset, ``t``/``z`` in either
case, any fraction) and what Kafka carries (epoch milliseconds). The records layer never
reads the wall clock: whoever builds a record passes its times, taken here.
"""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    """The current time, UTC, timezone-aware."""
    return datetime.now(UTC)


def text(when: datetime | None = None) -> str:
    """``when`` (default now) as RFC 3339 UTC with milliseconds and a ``Z``."""
    when = (when or now()).astimezone(UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse(value: str) -> datetime:
    """An RFC 3339 time (any offset; ``t``, ``z`` in either case) as an aware datetime.

    A time without an offset is taken as UTC (our own older store rows), never as local
    time. `ValueError` when it is not a time at all.
    """
    parsed = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def epoch_seconds(value: str) -> float:
    """Epoch seconds of an RFC 3339 time."""
    return parse(value).timestamp()


def epoch_ms(value: str) -> int:
    """Epoch milliseconds of an RFC 3339 time (Spark timestamps, Kafka's unit)."""
    return round(parse(value).timestamp() * 1000)


def from_epoch_ms(ms: int) -> datetime:
    """A Kafka timestamp (epoch milliseconds) as an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, UTC)
