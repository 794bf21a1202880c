"""What the end-to-end tests share: reading the loop's topics and log, picking a dir to
fail, failing it and waiting for the fix the loop proposes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from core import clock
from sandbox import cluster, loop, traffic
from sandbox.status import kafka_admin
from schemas import wire
from schemas.registry import RecordError, validate
from streams.validate import OFFLINE_GAUGE
from tests.integration.collect_support import TopicReader, snapshots
from tests.polling import wait_until


def parsed(msgs, schema: str = "action") -> list[dict[str, Any]]:
    """The JSON objects among ``msgs``, read through the product's one bounded decoder
    (the poison tests put tombstones, garbage and 60,000-deep arrays on topics)."""
    out = []
    for m in msgs:
        try:
            doc = wire.decode(schema, m.value)
        except RecordError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def values(reader: TopicReader) -> list[dict[str, Any]]:
    return parsed(list(reader.messages))


def on_dir_now(state, broker: int, path: str) -> set[tuple[str, int]]:
    """What DescribeLogDirs says sits on ``path`` of ``broker`` (current replicas only)."""
    with kafka_admin(state) as admin:
        (reply,) = admin.describe_log_dirs(brokers=[broker])
    return {(t["name"], p["partition_index"])
            for d in reply["log_dirs"] if d["log_dir"] == path
            for t in d["topics"] for p in t["partitions"] if not p["is_future_key"]}


def dir_holding(state, broker: int, topic: str) -> str:
    """A log dir of ``broker`` that holds a replica of ``topic`` (the partition with
    ``broker`` among its replicas, waited for as a fresh topic's logs are created)."""
    for p in traffic.partitions(state, topic):
        if broker in p["replica_nodes"]:
            return traffic.log_dir_of(state, topic, p["partition_index"], broker)
    raise AssertionError(f"broker {broker} has no replica of {topic}")


def named(action: dict[str, Any]) -> set[tuple[str, int]]:
    plan = action["plan"]
    return {(p["topic"], p["partition"])
            for p in plan["partitions"] + plan.get("unrecoverable", [])}


def stream_batches(piece: loop.Piece) -> int:
    """Micro-batches the job has reported in its log so far."""
    return sum(1 for line in piece.log_tail(100000).splitlines()
               if "[stream] batch " in line)


def wait(check: Callable[[], Any], what: str, the_loop: loop.Loop,
         timeout: float = 120.0) -> Any:
    """Poll ``check`` while the loop runs; fail with the tail of serve's log."""
    return wait_until(check, what, timeout, alive=the_loop.check_alive,
                      explain=lambda: "serve's log ends:\n"
                      + the_loop.pieces["serve"].log_tail(60))


def wait_for_batches(the_loop: loop.Loop, more_than: int, timeout: float = 240.0) -> int:
    return wait_until(lambda: (seen := stream_batches(the_loop.pieces["stream"])) > more_than
                      and seen, f"more than {more_than} micro-batches from the stream job",
                      timeout, every=0.5, alive=the_loop.check_alive,
                      explain=lambda: the_loop.pieces["stream"].log_tail())


def wait_reported_again(the_loop: loop.Loop, readers: dict[str, TopicReader],
                        fix: dict[str, Any], count: int = 2, timeout: float = 120.0) -> None:
    """Until the job has finished a batch begun after ``count`` full snapshots and a reading
    of the per-dir gauge, all taken after ``fix`` reached the bus and reporting its dir
    offline, came (``readers`` "actions", "cluster-snapshots" and "broker-metrics"): the
    reports that keep coming while a dir stays failed, each of which must propose nothing
    more (streams/detect.py). The same proof as counting batches, sooner."""
    broker, path = fix["trigger"]["broker"], fix["trigger"]["log_dir"]
    (since,) = [m.arrived_at for m in readers["actions"].messages
                if fix["action_id"].encode() in (m.value or b"")]

    def offline_in(doc: dict[str, Any]) -> bool:
        return any(d["path"] == path and not d["online"]
                   for b in doc["brokers"] if b["id"] == broker for d in b["log_dirs"])

    def reported() -> bool:
        docs = [json.loads(m.value) for m in snapshots(readers["cluster-snapshots"].messages)]
        taken = [d for d in docs if clock.epoch_seconds(d["taken_at"]) >= since
                 and offline_in(d)]
        gauge = [g for g in parsed(readers["broker-metrics"].messages, "broker-metric")
                 if g["metric"] == OFFLINE_GAUGE and g["broker"] == broker
                 and g["labels"].get("log_dir") == path and g["value"] >= 1
                 and clock.epoch_seconds(g["event_time"]) >= since]
        return len(taken) >= count and bool(gauge)

    wait_until(reported, f"{count} snapshots and a gauge reading that report {path} offline",
               timeout, every=0.5, alive=the_loop.check_alive,
               explain=lambda: the_loop.pieces["stream"].log_tail())
    # the batch running now may have begun before they came: the one after it did not
    wait_for_batches(the_loop, stream_batches(the_loop.pieces["stream"]) + 1, timeout)


def fail_and_wait_for_fix(state, the_loop, readers, broker: int, path: str,
                          topic: str, fix_timeout: float = 120.0) -> tuple[dict[str, Any], float]:
    """Fail ``path`` under traffic; the fix action and seconds from the event to it.

    ``fix_timeout`` bounds only whether the fix comes at all: how soon is a figure the
    caller records, never asserts (bench/stream_bench.py measures it). With two loops
    sharing the 2 cores in `make test` a fix took 30 s; alone, 5-10 s."""
    expected = on_dir_now(state, broker, path)
    assert (topic, 0) in expected or any(t == topic for t, _ in expected)
    earlier = len(readers["logdir-events"].messages)  # events of earlier faults do not count
    cluster.fail_disk(state, broker, path)
    nudge = traffic.produce_in_background(state, topic, 12)  # the broker notices at once
    try:
        event = readers["logdir-events"].wait_for(
            lambda msgs: next((e for e in parsed(msgs[earlier:])
                               if e.get("cluster_id") == state.cluster_id
                               and e.get("kind") == "log_dir_failure"
                               and e.get("broker") in (broker, None)), None),
            timeout=60, what="log_dir_failure event from the collectors")

        def fixes(msgs):
            return [a for a in parsed(msgs)
                    if a["type"] == "fix_offline_replicas"
                    and a["trigger"].get("broker") == broker
                    and a["trigger"].get("log_dir") == path]

        (fix,) = readers["actions"].wait_for(fixes, timeout=fix_timeout,
                                             what=f"fix_offline_replicas for {path}")
        # When the record reached the reader's thread, not when this thread looked.
        (arrival,) = [m for m in readers["actions"].messages
                      if fix["action_id"].encode() in (m.value or b"")]
        latency = arrival.arrived_at - clock.epoch_seconds(event["event_time"])
    finally:
        nudge.join(timeout=150)  # its acknowledgement may wait out a timeout
    the_loop.check_alive()
    validate("action", fix)
    assert named(fix) == expected, (
        f"the action names {sorted(named(fix))}, DescribeLogDirs had {sorted(expected)}")
    for target in fix["plan"]["partitions"]:
        assert broker not in target["replicas"] or target["log_dirs"][
            target["replicas"].index(broker)] == "any"
    return fix, latency


def drop_topics(state, prefix: str) -> None:
    """Delete a loop's bus topics: the sandbox is shared, and their bytes would skew the
    dirs that later tests fill on purpose."""
    with kafka_admin(state) as admin:
        mine = [t for t in admin.list_topics() if t.startswith(prefix)]
    traffic.delete_topics(state, mine)
