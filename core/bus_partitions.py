"""Which partition of a bus topic a record goes to while a failed dir holds some of them.

When a log dir fails, every acks=all write to a partition with a replica on it waits
until the leader stops counting that replica as caught up: `replica.lag.time.max.ms`,
30 s by default (docs/facts.md, "A failed dir holds acks=all writes"). A consumer reads
only to the high watermark, so a fix sent to such a partition reaches serve that much
later, and the job's flush may give up on it. When the bus is the cluster being healed,
the fix and its page name those partitions: the replicas the failed dir held, whether
reassignment can repair them or not (`held_by_failed`). So records are sent, for a while,
to the topic's other partitions.

Which partition an action id or a dead letter lands on means nothing to any reader (every
reader reads every partition, and no order between keys is relied on), so the choice
costs nothing when it is wrong: on a bus that is another cluster the names simply match
nothing.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from schemas.records import Action

# How long a partition named by a fix is kept away from: past the default lag time with
# room for the reassignment that moves its replica off the failed dir.
HOLD_SECONDS = 300.0
# How long a topic's partition count is trusted (partitions can be added).
COUNT_SECONDS = 300.0


def held_by_failed(action: Action) -> list[tuple[str, int]]:
    """The (topic, partition)s an action says lost a replica: a re-replication's targets
    and the ones it cannot repair, and the partitions of the page for those."""
    if action.type == "fix_offline_replicas":
        lost = action.plan.get("unrecoverable") or ()
        return [*((t.topic, t.partition) for t in action.targets()),
                *((u["topic"], u["partition"]) for u in lost)]
    if action.type == "page_operator":
        return [(p["topic"], p["partition"]) for p in action.plan.get("partitions") or ()]
    return []


class AwayFromFailedDirs:
    """Partitions to keep records away from, and the partition a record goes to."""

    def __init__(self, producer: Any, hold_s: float = HOLD_SECONDS, ask_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.producer, self.hold_s, self.ask_s, self._clock = producer, hold_s, ask_s, clock
        self._until: dict[tuple[str, int], float] = {}  # (topic, partition) -> until
        self._counts: dict[str, tuple[int, float]] = {}  # topic -> (partitions, asked at)

    def avoid(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Keep away from these (topic, partition)s for `hold_s` from now."""
        until = self._clock() + self.hold_s
        for tp in partitions:
            self._until[tp] = until

    def avoided(self, topic: str) -> set[int]:
        now = self._clock()
        for tp in [tp for tp, until in self._until.items() if until <= now]:
            del self._until[tp]
        return {p for t, p in self._until if t == topic}

    def partition_for(self, topic: str, key: bytes | None) -> int | None:
        """The partition for a record of ``topic`` keyed ``key``: None (the producer's own
        choice) unless some of the topic's partitions are avoided and others are not;
        then one of the others, the same for the same key."""
        avoided = self.avoided(topic)
        if not avoided:
            return None
        count = self._count(topic)
        healthy = [p for p in range(count or 0) if p not in avoided]
        if not healthy:
            return None  # nowhere better: as before
        return healthy[zlib.crc32(key or b"") % len(healthy)]

    def _count(self, topic: str) -> int | None:
        known = self._counts.get(topic)
        now = self._clock()
        if known is not None and now - known[1] < COUNT_SECONDS:
            return known[0]
        try:
            meta = self.producer.list_topics(topic=topic, timeout=self.ask_s)
            count = len(meta.topics[topic].partitions)
        except Exception:  # the bus slow or away: the producer's own choice this time
            return None
        if count:
            self._counts[topic] = (count, now)
        return count or None
