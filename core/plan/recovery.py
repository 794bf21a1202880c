"""How long a re-replication takes, and the least the busiest receiver could copy.

Kafka throttles a reassignment per broker (`follower.replication.throttled.rate`), so the
cluster is whole again when the broker that copies the most has copied it: recovery time
is its bytes over the throttle. The estimate leaves out the catch-up of what producers
write meanwhile and any leader-side limit; docs/planning.md says why that is good enough.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from core.plan.formats import human_bytes

MiB = 1 << 20
DEFAULT_RATE = 50 * MiB  # the executor's default inter_broker_throttle_bytes_per_s


@dataclass(frozen=True, slots=True, order=True)
class Received:
    """What one broker copies: bytes and new replicas."""

    broker: int
    bytes: int
    replicas: int

    def to_json(self) -> dict[str, int]:
        return {"broker": self.broker, "bytes": self.bytes, "replicas": self.replicas}


class Receipt(Protocol):
    """A Received, or the action summary's record of one (schemas.records.Receiving)."""

    @property
    def broker(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def replicas(self) -> int: ...


def tally(new: Iterable[tuple[int, int]]) -> tuple[Received, ...]:
    """(broker, bytes) per new replica -> what each broker receives, by broker id."""
    got: dict[int, list[int]] = {}
    for broker, size in new:
        entry = got.setdefault(broker, [0, 0])
        entry[0] += size
        entry[1] += 1
    return tuple(Received(b, v[0], v[1]) for b, v in sorted(got.items()))


def busiest(received: Iterable[Receipt]) -> Receipt | None:
    """The broker that copies the most bytes (then replicas; the lowest id among equals)."""
    return min(received, key=lambda r: (-r.bytes, -r.replicas, r.broker), default=None)


def duration(seconds: float) -> str:
    """'about 40 s', 'about 6 min', 'about 2 h 5 min'."""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60} min"


def rate_text(rate: int) -> str:
    """52428800 -> '50 MiB/s'."""
    return f"{rate // MiB} MiB/s" if rate % MiB == 0 else f"{human_bytes(rate)}/s"


def estimate(received: Iterable[Receipt], rate: int) -> str:
    """'about 6 min at 50 MiB/s; broker 3 copies the most (18.0 GiB, 22 replicas)'."""
    top = busiest(received)
    if top is None or top.bytes == 0:
        return "nothing to copy"
    most = (f"broker {top.broker} copies the most ({human_bytes(top.bytes)}, "
            f"{top.replicas} replica{'s' if top.replicas != 1 else ''})")
    if rate <= 0:
        return f"no estimate: the replication throttle is off; {most}"
    return f"{duration(top.bytes / rate)} at {rate_text(rate)}; {most}"


def per_broker(received: Iterable[Receipt], limit: int = 0) -> str:
    """'3: 18.0 GiB (22), 7: 10.3 GiB (19)', the busiest first; `limit` brokers at most
    (0: all), then how many more."""
    ranked = sorted(received, key=lambda r: (-r.bytes, -r.replicas, r.broker))
    shown = ranked[:limit] if limit else ranked
    text = ", ".join(f"{r.broker}: {human_bytes(r.bytes)} ({r.replicas})" for r in shown)
    return text + (f" and {len(ranked) - len(shown)} more" if len(shown) < len(ranked) else "")

