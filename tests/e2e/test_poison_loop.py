"""No record stops the product: with the whole loop running on the ZooKeeper sandbox
(three collectors, the Spark job, `serve` with fixes on auto), deeply nested JSON,
tombstones, invalid UTF-8, a 5 MB string and wrong types go onto every selfheal topic.
Every record a product component reads is dead-lettered with a reason at its exact
coordinates, every process keeps running, and a dir failed afterwards is still healed.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from remediation.executor.lifecycle import is_terminal
from sandbox import cluster, loop, traffic
from sandbox.state import SandboxState
from schemas import wire
from schemas.registry import RecordError, validate
from tests.e2e.loop_support import (
    dir_holding,
    drop_topics,
    fail_and_wait_for_fix,
    wait_for_batches,
)
from tests.e2e.test_heal_loop import api, wait
from tests.integration.collect_support import TopicReader

pytestmark = pytest.mark.e2e

POLICY = '[actions]\nfix_offline_replicas = "auto"\n'
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


def test_poison_on_every_topic_stops_nothing_and_a_failed_dir_is_still_healed(
        sandbox: SandboxState, tmp_path_factory) -> None:
    state = sandbox
    work = tmp_path_factory.mktemp("poison-loop")
    (work / "policy.toml").write_text(POLICY)
    prefix = f"e2ep{uuid.uuid4().hex[:6]}."
    topic = f"e2e-poison-{uuid.uuid4().hex[:6]}"
    traffic.create_topic(state, topic, partitions=6, replication_factor=2)
    traffic.produce(state, topic, 60)
    the_loop = loop.start(
        state, work, overrides={"bus": {"topic_prefix": prefix},
                                "collect": {"snapshot_interval_seconds": 5.0},
                                "detect": {"leader_window_seconds": 86400.0,
                                           "disk_skew_min_bytes": 1 << 40}},
        policy=str(work / "policy.toml"))
    readers: dict[str, TopicReader] = {}
    broker = 1
    path = dir_holding(state, broker, topic)
    try:
        wait_for_batches(the_loop, 0)
        wait(lambda: api(the_loop, "GET", "/actions") is not None, "serve API", the_loop)
        for name in ("actions", "dead-letter", "logdir-events"):
            readers[name] = TopicReader(state, prefix + name)
            readers[name].start()

        written, refused = produce_poison(state, prefix, uuid.uuid4().hex[:8])
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

        letters = readers["dead-letter"].wait_for(letters_for_poison, timeout=180,
                                                  what="a dead letter for every poison read")
        the_loop.check_alive()  # every collector, the job and serve still run
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
        print(f"\n{len(letters)} dead letters, one per poison record read")

        # After all that, a real fault is still found and healed by itself.
        fix, latency = fail_and_wait_for_fix(state, the_loop, readers, broker, path, topic)
        done = wait(lambda: (a := api(the_loop, "GET", f"/actions/{fix['action_id']}"))
                    and is_terminal(a["state"]) and a, "the fix to finish", the_loop, 180)
        assert done["state"] == "succeeded", done["audit"][-3:]
        for p in traffic.partitions(state, topic):
            assert not p["offline_replicas"], p
            assert broker not in p["replica_nodes"] or path != traffic.log_dir_of(
                state, topic, p["partition_index"], broker)
        the_loop.check_alive()
        print(f"fault -> fix proposed {latency:.2f} s; fix {done['state']}")
    finally:
        for reader in readers.values():
            reader.stop()
        the_loop.stop_all()
        if cluster.disk_failed(path):
            cluster.heal_disk(state, broker, path)
            state.reload()
        drop_topics(state, prefix)
        traffic.delete_topic(state, topic)
