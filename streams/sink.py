"""The job's foreachBatch body, on the driver: each decision becomes signed actions
(planned by streams/propose.py), which go to the bus with the batch's dead letters; a
failed delivery fails the batch, which Spark then runs again."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from core import bus, clock
from core.bus_partitions import AwayFromFailedDirs, held_by_failed
from core.config import Config
from schemas.records import Action
from streams.batch_state import BatchState, Saved
from streams.detect_types import Decision, DetectSettings, SnapshotRef
from streams.fast_first import parts
from streams.keeper import SnapshotKeeper
from streams.metrics import BatchOutput, StreamMetrics
from streams.propose import Proposer, describe
from streams.query import INPUT_TOPICS, Say
from streams.query import pieces as query_pieces
from streams.replay import SentLedger, bus_lookup
from streams.signals import DELTA, to_signals
from streams.stateful import DEAD_LETTER, DECISION, KEEP, NOTE, Outcome
from streams.stopping import StopGate


class BatchSink:
    """The foreachBatch body: decisions become actions; actions and dead letters go to
    the bus; a failed delivery fails the batch, which Spark then runs again."""

    def __init__(self, config: Config, metrics: StreamMetrics, say: Say,
                 checkpoint: Path) -> None:
        from core.bus import client_config, producer
        from core.signing import signer
        from streams.facts import FactLimits
        from streams.snapshot_reader import BusChunks, SnapshotReader
        from streams.validate import suites

        self.config = config
        self.metrics = metrics
        self.say = say
        self.reader = SnapshotReader(config)
        self.ahead = SnapshotReader(config)  # the keeper's, on its own thread
        # The deltas of the batch being written, by coordinates: a fix is planned from
        # the one its batch carried, not read back from the bus (one from an earlier
        # batch still is).
        self.deltas: dict[tuple[str, int, int], bytes] = {}
        self.proposer = Proposer(self.reader, config.detect.disk_skew_threshold,
                                 read_delta=self._delta,
                                 keeper=SnapshotKeeper(self.reader, self.ahead))
        self.producer = producer(config)
        self.away = AwayFromFailedDirs(self.producer)
        self.signer = signer(config)
        self.actions_topic = config.topic("actions")
        self.dead_letter_topic = config.topic("dead-letter")
        self.gate = StopGate()  # the job stops its query at the end of a body
        self.state = BatchState(checkpoint, DetectSettings.from_config(config.detect),
                                int(config.stream.watermark_delay_seconds * 1000))
        # what a batch's earlier run sent is not sent again (streams/replay.py)
        self.sent = SentLedger(self.state.root,
                               bus_lookup(client_config(config), self.actions_topic))
        self.topics = {config.topic(name): schema for name, schema in INPUT_TOPICS.items()}
        self.snapshot_topic = config.topic("cluster-snapshots")
        self.metrics_topic = config.topic("broker-metrics")
        self.limits = FactLimits.from_config(config.detect)
        # a manifest whose chunks are not in its batch
        self.chunks = BusChunks(client_config(config))
        suites()  # GX imported and the suites built before the first batch

    def __call__(self, frame: Any, batch_id: int) -> None:
        self.gate.enter()
        try:
            self._write(frame, batch_id)
        finally:
            self.gate.leave()

    def _write(self, frame: Any, batch_id: int) -> None:
        began = time.monotonic()
        output = BatchOutput(phases={"rows": 0.0, "plan": 0.0, "send": 0.0})
        self.deltas.clear()
        self._begin(batch_id)
        # A failure's evidence first (streams/fast_first.py): the small topics' rows are
        # collected, and their first part delivered, before the metrics are read
        # (streams.query.pieces); a snapshot's rest waits for the last piece.
        output.read = 0

        def collected(piece: Any) -> list[Any]:
            raw = self._collect(piece)
            output.read = (output.read or 0) + len(raw)
            output.phases["rows"] += time.monotonic() - began
            return raw

        after: Saved | None = None
        pieces = query_pieces(frame, self.metrics_topic)
        for part in parts(map(collected, pieces), self.snapshot_topic):
            after = self._part(batch_id, part, after, output)
            began = time.monotonic()
        if after is None:  # an empty batch still takes its step (the watermark, state)
            after = self._part(batch_id, [], None, output)
        self.state.commit(batch_id, after)
        self.sent.forget_before(batch_id)
        self.metrics.batch_written(batch_id, output)

    def _part(self, batch_id: int, part: list[Any], after: Saved | None,
              output: BatchOutput) -> Saved:
        """One part of the batch through the detector, its actions delivered; the state
        it leaves, for the next part or the commit."""
        began = time.monotonic()
        snapshots: dict[tuple[str, int, int], bytes] = {}
        signals = self._signals(part, snapshots)  # empties the part
        self.deltas.update(((r.topic, r.partition, r.offset), r.body.encode("utf-8"))
                           for r in signals if r.kind == DELTA)
        outcomes, after = self.state.step(batch_id, signals, after)
        output.phases["rows"] += time.monotonic() - began
        self._deliver(batch_id, outcomes, output, snapshots)
        return after

    def _begin(self, batch_id: int) -> None:
        """A run of the batch starts: what an earlier run of it sent (streams/replay.py)."""
        earlier = self.sent.begin(batch_id)
        if earlier:
            self.say(f"batch {batch_id} runs again: {len(earlier)} action(s) its earlier "
                     "run sent are on the bus and are not sent twice")

    def _deliver(self, batch_id: int, outcomes: list[Outcome], output: BatchOutput,
                 snapshots: dict[tuple[str, int, int], bytes]) -> None:
        """Plan, sign and send one part's outcomes; raise (failing the batch) unless the
        bus acknowledged every record. ``snapshots``: the part's snapshot values by
        coordinates, for the keeper."""
        planned = time.monotonic()
        errors: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(f"{msg.topic()}: {err}")

        letters: list[tuple[bytes, bytes]] = []
        for cluster, kind, body in outcomes:
            if kind == DEAD_LETTER:
                letters.append((body.encode("utf-8"),
                                json.loads(body)["source_topic"].encode("utf-8")))
            elif kind == NOTE:
                self.say(f"note ({cluster}): {body}")
                self.metrics.notes.inc()
                output.notes += 1
            elif kind == KEEP:
                ref = SnapshotRef(**json.loads(body))
                self.proposer.keeper.keep(ref, cluster, snapshots.pop(
                    (ref.topic, ref.partition, ref.offset), None))
        snapshots.clear()  # the ones not kept: older ones of the same cluster
        signed: list[Action] = []
        for _, kind, body in outcomes:
            if kind != DECISION:
                continue
            decision = Decision.from_json(body)
            actions = self.proposer.actions(decision)
            if not actions:
                self.say(f"{decision.type} ({decision.cluster_id}): {decision.reason}; the "
                         "planner found nothing to do")
            signed += map(self.signer.sign_action, actions)
        # a fix and its page name the partitions its failed dir held; where those are the
        # bus's own, writes to them wait out the lag time (core/bus_partitions.py)
        self.away.avoid(tp for a in signed for tp in held_by_failed(a))
        for value, source in letters:
            self._send(self.dead_letter_topic, value, source, delivered)
            self.metrics.dead_letters.labels(source.decode("utf-8")).inc()
            output.dead_letters += 1
        for action in self.sent.unsent(batch_id, signed):
            self._send(self.actions_topic, action.to_json(), action.key(), delivered)
            latency = (clock.epoch_seconds(action.created_at)
                       - clock.epoch_seconds(action.event_time))
            self.metrics.actions.labels(action.type).inc()
            self.metrics.latency.labels(action.type).observe(max(latency, 0.0))
            output.actions[action.type] += 1
            self.say(f"action {describe(action)}")
        sending = time.monotonic()
        output.phases["plan"] += sending - planned
        left = self.producer.flush(30.0)
        output.phases["send"] += time.monotonic() - sending
        failures = list(errors)  # what the bus said, not the purge's own reports below
        if left:
            # Not sent yet: dropped here, so that the batch's second run (Spark's, or
            # the job's restart of the query) is the only one to deliver them; kept,
            # they would go out later beside it, the same action id twice on the bus.
            self.producer.purge(in_queue=True, in_flight=False)
            self.producer.poll(0)
        if failures or left:
            why = "; ".join(failures[:3]) or "not acknowledged within 30 s"
            raise RuntimeError(f"batch {batch_id}: {len(failures) + left} record(s) not "
                               f"delivered to the bus ({why})")

    def _send(self, topic: str, value: bytes, key: bytes | None, delivered: Any) -> None:
        partition = self.away.partition_for(topic, key)
        extra = {} if partition is None else {"partition": partition}
        bus.produce(self.producer, topic, value, key, on_delivery=delivered, **extra)

    def _delta(self, ref: SnapshotRef, cluster_id: str) -> bytes:
        found = self.deltas.get((ref.topic, ref.partition, ref.offset))
        return found if found is not None else self.reader.delta(ref, cluster_id)

    def _collect(self, frame: Any) -> list[Any]:
        """The batch's Kafka rows (streams.query.SINK_COLUMNS, projected in the query), on
        the driver: one collect, no Python worker."""
        return frame.collect()

    def _signals(self, raw: list[Any], snapshots: dict[tuple[str, int, int], bytes]
                 ) -> list[Any]:
        """Collected Kafka rows decoded and validated here, on the driver
        (streams/signals.py); each valid snapshot's value into ``snapshots``. Empties
        ``raw``: each row goes once its value is copied, not holding a second copy of a
        fleet snapshot's chunks."""
        import pandas as pd

        if not raw:
            return []
        columns: dict[str, Any] = {
            "topic": [r.topic for r in raw], "partition": [r.partition for r in raw],
            "offset": [r.offset for r in raw],
            "timestamp": pd.to_datetime([r.ms for r in raw], unit="ms"), "value": []}
        for i, row in enumerate(raw):
            columns["value"].append(None if row.value is None else bytes(row.value))
            raw[i] = row = None
        raw.clear()
        kafka = pd.DataFrame(columns)
        del columns
        return [row for out in to_signals(iter([kafka]), self.topics, self.limits,
                                          self.chunks, snapshots)
                for row in out.itertuples(index=False)]

    def close(self) -> None:
        self.producer.flush(10.0)
        self.proposer.keeper.close()
        self.reader.close()
        self.ahead.close()
        self.chunks.close()
