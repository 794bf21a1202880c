"""A batch's actions sent once, even when the batch runs again after they were sent.

The detector's state is committed after the bus acknowledged a batch's records, and Spark
writes the batch's commit after that (streams/batch_state.py). A job that dies (or a batch
that fails in its second part, streams/fast_first.py) between the acknowledgement and
Spark's commit runs the batch again from the same state, and the batch plans the same
actions under the same ids. Serve runs an id once, but the bus would carry it twice: two
proposals in the audit and two pages for one fault.

So before a part's actions are produced, their ids go into a small ledger beside the
state, ``<checkpoint>/detector/<batch id>.sent`` (fsynced). When a batch begins and finds
its own ledger, an earlier run of it got as far as producing:
- if that run also committed the state (``<batch id>.json``), every id in the ledger was
  acknowledged;
- if not, the bus is asked: the actions topic is read from the ledger's time (less a
  margin) to its end, and an id found there was sent.
Those ids are not sent again; an action the new run plans that the earlier one did not
(its evidence changed on the bus) is sent as usual. A ledger is dropped once a later batch
commits. The bus is read only on that rare path; a batch that finds no ledger (every
batch but a replay) costs one ``stat``.

Dead letters stay at-least-once: a replay may refuse the same record twice, and the
dead-letter topic's reader sees the same source coordinates in both.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from schemas import wire
from schemas.records import Action
from schemas.registry import RecordError
from streams.batch_state import write_durably

# The producer stamps a record when it is produced, after the ledger is written, with the
# same host's clock; the margin covers a clock stepped back between the two.
LOOK_BACK_MS = 60_000

# ids, since epoch ms -> the ids among them found on the actions topic
Lookup = Callable[[set[str], int], set[str]]


class SentLedger:
    """The ids a batch has produced, kept across its runs (see the module's note)."""

    def __init__(self, root: Path, lookup: Lookup) -> None:
        self.root = Path(root)
        self.lookup = lookup
        self._batch: int | None = None
        self._since_ms = 0
        self._ids: list[str] = []
        self._sent: set[str] = set()  # by an earlier run of this batch

    def begin(self, batch_id: int) -> set[str]:
        """A run of ``batch_id`` starts: the ids an earlier run of it already sent."""
        self._batch = batch_id
        found = self._read(batch_id)
        if found is None:
            self._since_ms, self._ids, self._sent = 0, [], set()
            return set()
        self._since_ms, self._ids = found
        if (self.root / f"{batch_id}.json").exists():
            self._sent = set(self._ids)  # committed after the bus acknowledged them all
        else:
            self._sent = self.lookup(set(self._ids), self._since_ms - LOOK_BACK_MS)
        return set(self._sent)

    def unsent(self, batch_id: int, actions: Sequence[Action]) -> list[Action]:
        """Record ``actions`` as about to be produced by ``batch_id`` (durably, first);
        the ones an earlier run of the batch did not send."""
        if self._batch != batch_id:
            self.begin(batch_id)
        new = [a.action_id for a in actions if a.action_id not in self._ids]
        if new:
            self._since_ms = self._since_ms or int(time.time() * 1000)
            self._ids += list(dict.fromkeys(new))
            self._write(batch_id)
        return [a for a in actions if a.action_id not in self._sent]

    def forget_before(self, batch_id: int) -> None:
        """``batch_id`` committed: no earlier batch runs again."""
        if not self.root.is_dir():
            return
        for path in self.root.glob("*.sent"):
            if path.stem.isdigit() and int(path.stem) < batch_id:
                path.unlink(missing_ok=True)

    def _read(self, batch_id: int) -> tuple[int, list[str]] | None:
        try:
            doc = json.loads((self.root / f"{batch_id}.sent").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return int(doc["since_ms"]), [str(i) for i in doc["ids"]]

    def _write(self, batch_id: int) -> None:
        write_durably(self.root / f"{batch_id}.sent",
                      {"since_ms": self._since_ms, "ids": self._ids})


def bus_lookup(client: dict[str, Any], topic: str, timeout: float = 30.0) -> Lookup:
    """`Lookup` on the actions topic ``topic`` with the bus's client settings: each
    partition read from the first record at or after ``since_ms`` to its high watermark.
    Raises `core.bus.BusError` when the bus does not answer within ``timeout`` (the batch
    fails, and runs again)."""

    def lookup(ids: set[str], since_ms: int) -> set[str]:
        from core.bus import consumer_on

        reader = consumer_on(client, "selfheal-stream-replay",
                             **{"enable.auto.commit": False})
        try:
            return set(_ids_on(reader, topic, since_ms, timeout)) & ids
        finally:
            reader.close()

    return lookup


def _ids_on(reader: Any, topic: str, since_ms: int, timeout: float) -> Iterable[str]:
    from confluent_kafka import TopicPartition

    from core.bus import BusError, end_offsets, kafka_reason

    deadline = time.monotonic() + timeout
    ends = {tp.partition: tp.offset for tp in end_offsets(reader, topic, timeout)}
    try:
        starts = reader.offsets_for_times(
            [TopicPartition(topic, p, since_ms) for p in ends],
            timeout=max(0.1, deadline - time.monotonic()))
    except Exception as exc:
        raise BusError(f"topic {topic}: the offsets at {since_ms} ms not found "
                       f"({kafka_reason(exc)})") from exc
    left = {tp.partition: ends[tp.partition] for tp in starts
            if 0 <= tp.offset < ends[tp.partition]}
    if not left:
        return
    reader.assign([tp for tp in starts if tp.partition in left])
    while left:
        if time.monotonic() >= deadline:
            raise BusError(f"topic {topic} not read to its end within {timeout:g} s "
                           "while looking for a replayed batch's actions")
        msg = reader.poll(0.5)
        if msg is None or msg.error() is not None:
            continue
        try:
            yield wire.record("action", msg.value())["action_id"]
        except RecordError:
            pass  # not an action (serve dead-letters it): nothing this batch sent
        if msg.offset() + 1 >= left.get(msg.partition(), 0):
            left.pop(msg.partition(), None)
