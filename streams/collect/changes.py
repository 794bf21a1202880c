"""Which of a scrape's samples go on the bus: change-only with a keepalive (pure).

Every record that reaches the detection job costs it a micro-batch (~1.5-2 CPU s however
few rows, docs/streaming.md), so an idle cluster scraped every 10 s kept the job busy
with batches that said nothing new. While nothing is wrong, an exporter's samples go
whole once per keepalive and, in between, only a gauge whose value changed: a dir going
offline (0 -> 1) still goes at once. The partition sizes, which detection does not read
and which change with every write, go only with the whole scrape.

While anything is wrong (a dir or the offline count reads non-zero on any broker, or an
exporter does not answer) every scrape goes whole, as it always did: the detector's
clock is the event time of what arrives, and its waits (the broker return and death
graces, the fresh-snapshot wait) must keep moving while it has something to decide.

A large cluster's keepalive is spread over the interval: with every broker in the same
round, a fleet's whole scrapes (a million samples at 1,000 brokers) came as one batch of
several seconds, and a failure arriving behind it waited for all of it. Each broker's
keepalive falls in a window of its own phase; a round holds about `ROUND_BROKERS`
brokers (a small cluster keeps one round: a batch more a minute would cost an idle job
more than it saves). Each broker still goes whole at least once per keepalive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from schemas.records import BrokerMetric
from streams.signals import COUNT_GAUGE
from streams.validate import OFFLINE_GAUGE

SIZES = "kafka_log_size"
# The two gauges that say a dir is offline, as the job names them.
OFFLINE_GAUGES = frozenset({OFFLINE_GAUGE, COUNT_GAUGE})

SampleKey = tuple[str, tuple[tuple[str, str], ...]]

ROUND_BROKERS = 100  # brokers per keepalive round, about, once a cluster has more
_GOLDEN = (math.sqrt(5) - 1) / 2  # spreads any set of broker ids evenly over the phases


def keepalive_phase(broker: int, keepalive: float, brokers: int) -> float:
    """Where in the keepalive interval ``broker``'s whole scrape falls (seconds, 0 to
    ``keepalive``) in a cluster of ``brokers``: one of ceil(brokers / ROUND_BROKERS)
    evenly spaced phases, 0 for a cluster of one round."""
    rounds = max(1, math.ceil(brokers / ROUND_BROKERS))
    return keepalive * math.floor((broker * _GOLDEN) % 1.0 * rounds) / rounds


def keepalive_due(broker: int, last: float, now: float, keepalive: float,
                  brokers: int) -> bool:
    """Whether ``broker``, last whole at ``last``, goes whole at ``now``: its phase's
    window (``keepalive`` long) has turned since, so it goes whole once in every window
    (at the first scrape in it, as with every broker in one round)."""
    phase = keepalive_phase(broker, keepalive, brokers)
    return math.floor((now - phase) / keepalive) > math.floor((last - phase) / keepalive)


def sample_key(record: BrokerMetric) -> SampleKey:
    return record.metric, tuple(sorted(record.labels.items()))


@dataclass
class _Sent:
    whole_at: float  # time.monotonic() of the last whole send
    values: dict[SampleKey, float] = field(default_factory=dict)  # the gauges last sent


class ChangeOnly:
    """Remembers what each broker's exporter last sent; `select` says what to send now.

    ``keepalive`` 0 sends every scrape whole (the behaviour before)."""

    def __init__(self, keepalive: float) -> None:
        self.keepalive = keepalive
        self._sent: dict[int, _Sent] = {}
        self._brokers = 0  # how many are scraped: the keepalive rounds' number

    def forget(self, broker: int) -> None:
        """The exporter did not answer: its next answer goes whole."""
        self._sent.pop(broker, None)

    def keep_only(self, brokers: set[int]) -> None:
        """Forget the brokers no longer scraped; ``brokers`` are all that are."""
        self._brokers = len(brokers)
        for broker in set(self._sent) - brokers:
            del self._sent[broker]

    def offline_brokers(self) -> set[int]:
        """Brokers whose last sent gauges say a dir is offline."""
        return {b for b, sent in self._sent.items()
                if any(v > 0 for (metric, _), v in sent.values.items()
                       if metric in OFFLINE_GAUGES)}

    def select(self, broker: int, records: list[BrokerMetric], now: float,
               whole: bool = False) -> list[BrokerMetric]:
        """The records of ``broker``'s scrape to send at ``now`` (monotonic seconds), in
        their order; ``whole``: all of them (something is wrong somewhere)."""
        sent = self._sent.get(broker)
        whole = (whole or sent is None or self.keepalive <= 0
                 or keepalive_due(broker, sent.whole_at, now, self.keepalive,
                                  max(self._brokers, len(self._sent))))
        gauges = {sample_key(r): r.value for r in records if r.metric != SIZES}
        if whole:
            self._sent[broker] = _Sent(now, gauges)
            return list(records)
        assert sent is not None
        out = [r for r in records if r.metric != SIZES
               and sent.values.get(sample_key(r)) != r.value]
        sent.values = gauges  # a gauge the exporter no longer shows is forgotten
        return out


def anything_wrong(records: list[BrokerMetric]) -> bool:
    """A dir or the offline-dir count reads non-zero in ``records``."""
    return any(r.metric in OFFLINE_GAUGES and r.value > 0 for r in records)
