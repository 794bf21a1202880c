"""No record stops the product: with the whole loop running on the sandbox
(three collectors, the Spark job, `serve` with fixes on auto) and traffic on a test topic,
a dir fails while deeply nested JSON, tombstones, invalid UTF-8, a 5 MB string, wrong
types, a bad snapshot chunk and a manifest of chunks never written go onto every
selfheal topic. Every record a product component reads is
dead-lettered with a reason at its exact coordinates, every process keeps running, the
fault is healed once, and the history check holds.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from sandbox.state import SandboxState
from schemas import wire
from schemas.registry import RecordError, validate
from tests.chaos.chaos_support import scenario, some_dir

pytestmark = pytest.mark.chaos

# The topics a product component reads, and which one dead-letters what it refuses.
READ = {"broker-metrics": "stream", "logdir-events": "stream", "cluster-snapshots": "stream",
        "actions": "serve"}
TOPICS = (*READ, "action-status", "consumer-assignments", "dead-letter")
FIVE_MB = b'"' + b"x" * (5 << 20) + b'"'


def poison(tag: str) -> dict[str, bytes | None]:
    return {
        "deeply nested": b"[" * 60_000,  # under every size limit, 60,000 levels deep
        "tombstone": None,
        "invalid UTF-8": b'{"cluster_id": "\xff\xfe' + tag.encode() + b'"}',
        "wrong types": json.dumps({"version": "one", "cluster_id": 7, "broker": "x",
                                   "type": ["fix_offline_replicas"], "tag": tag}).encode(),
        "5 MB string": FIVE_MB,
        # A snapshot chunk whose partition is wrong, and a manifest naming a chunk never
        # written (schemas/snapshot_chunks.py): on the snapshot topic, the chunk and the
        # manifest paths; elsewhere, two more wrong records.
        "bad chunk": json.dumps({"version": 1, "cluster_id": tag, "snapshot_id": tag,
                                 "taken_at": "2026-11-22T00:00:00Z", "seq": 0,
                                 "partitions": [{"topic": 7}]}).encode(),
        "forged manifest": json.dumps({"version": 1, "cluster_id": tag, "snapshot_id": tag,
                                       "taken_at": "2026-11-22T00:00:00Z",
                                       "chunks": [{"sha256": "0" * 64, "bytes": 10}]}
                                      ).encode(),
    }


def produce_poison(state: SandboxState, prefix: str, tag: str
                   ) -> tuple[dict[tuple[str, int, int], str], dict[str, str]]:
    """Every poison onto every topic: (topic, partition, offset) -> what was written, for
    the ones the bus took; topic -> the bus's refusal, for the ones it did not."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": state.bootstrap_servers,
                         "message.max.bytes": 8 << 20, "compression.type": "zstd"})
    written: dict[tuple[str, int, int], str] = {}
    refused: dict[str, str] = {}

    def delivered(kind: str):
        def report(err: Any, msg: Any) -> None:
            if err is None:
                written[(msg.topic(), msg.partition(), msg.offset())] = kind
            else:
                refused[f"{msg.topic()} {kind}"] = err.name()
        return report

    for topic in TOPICS:
        for kind, value in poison(tag).items():
            # Compacted topics take keyed records only; a tombstone needs a key anyway.
            producer.produce(prefix + topic, value, key=f"{tag}-{kind}".encode(),
                             on_delivery=delivered(kind))
    assert producer.flush(60) == 0
    return written, refused


def test_poison_on_every_topic_during_a_real_fault_stops_nothing(chaos_sandbox, tmp_path):
    with scenario(chaos_sandbox, tmp_path / "loop", "poison") as s:
        prefix = s.loop.config["bus"]["topic_prefix"]
        broker = 1
        path = some_dir(chaos_sandbox, broker, s.topic)
        try:
            start = s.fail(broker, path)
            written, refused = produce_poison(chaos_sandbox, prefix, uuid.uuid4().hex[:8])
            # Compressed, 5 MB of one letter fits every topic's 1 MB limit: it all gets in.
            assert refused == {}
            consumed = {k: v for k, v in written.items()
                        if k[0].removeprefix(prefix) in READ}
            assert len(consumed) == len(poison("")) * len(READ)

            def letters_for_poison(msgs) -> dict[tuple[str, int, int], dict[str, Any]] | None:
                found = {}
                for m in msgs:
                    try:
                        letter = wire.record("dead-letter", m.value)
                    except RecordError:
                        continue
                    where = (letter["source_topic"], letter["source_partition"],
                             letter["source_offset"])
                    if where in consumed:
                        found[where] = letter
                return found if len(found) == len(consumed) else None

            letters = s.readers["dead-letter"].wait_for(
                letters_for_poison, timeout=180, what="a dead letter for every poison read")
            s.loop.check_alive()  # every collector, the job and serve still run
            for where, letter in letters.items():
                validate("dead-letter", letter)
                kind = consumed[where]
                reason = letter["reason"]
                assert reason, (where, kind)
                if kind == "deeply nested":
                    assert "nested deeper than 32 levels" in reason, reason
                elif kind == "tombstone":
                    assert "no value (a tombstone)" in reason, reason
                elif kind == "invalid UTF-8":
                    assert "not UTF-8 text" in reason, reason
                elif kind == "5 MB string":
                    assert "raw holds the first 262144 of" in reason, reason
                    assert len(letter["raw"].encode()) <= 262144
                elif where[0] == prefix + "cluster-snapshots" and kind == "bad chunk":
                    assert "partitions[0].topic: Expected `str`" in reason, reason
                elif where[0] == prefix + "cluster-snapshots" and kind == "forged manifest":
                    assert "is incomplete: chunk 0 of 1 not found" in reason, reason
            s.timings["dead letters"] = len(letters)

            s.healed_once(broker, path, start)
            s.loop.check_alive()
            s.assert_proposed_once()
            s.assert_healthy()
            s.assert_history()
        finally:
            s.heal(broker, path)
