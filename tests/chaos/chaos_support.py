"""What every chaos scenario shares: the whole loop on the sandbox with fixes on auto,
traffic on a test topic the whole time, and the checks each scenario ends with.

A scenario breaks something (a process, ZooKeeper, the bus, a disk, the clock), lets the
loop do its work, and ends with the history check of Kafka's system tests and Jepsen:
every acknowledged message consumed, none twice, and the cluster healthy wherever
software could make it so. Each scenario has a topic, traffic and readers of its own,
begins on a whole cluster (every replica of the loop's topics and its own in sync) and
heals whatever it broke. The scenarios of a module run on one loop (`shared_loop`), as
production runs one loop through many faults; a loop's topics carry a prefix of their own.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core import clock
from remediation.executor.cordon import KEY as CORDONED
from remediation.executor.lifecycle import is_terminal
from sandbox import cluster, loop, traffic
from sandbox.state import SandboxState
from sandbox.status import kafka_admin, placement
from schemas import snapshot_chunks as chunking
from tests.chaos.sync_check import in_sync, why_not_in_sync
from tests.e2e.loop_support import (
    dir_holding,
    drop_topics,
    parsed,
    stream_batches,
    wait_for_batches,
)
from tests.integration.collect_support import TopicReader
from tests.polling import wait_until

# Fixes run by themselves; nothing else moves (leaders and disks are not what this tests).
POLICY = '[actions]\nfix_offline_replicas = "auto"\n'
THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                  "replica.alter.log.dirs.io.max.bytes.per.second")


# (scenario, timings) of the scenarios the running test ended; tests/chaos/conftest.py
# hands them to pytest, which prints them at the end of the run.
REPORTED: list[tuple[str, dict[str, Any]]] = []
# the sandboxes the scenarios of the current test ran on (README's Kafka table)
RAN_ON: list[SandboxState] = []


@dataclass
class Scenario:
    """One scenario's loop, topic, traffic and readers; `timings` are reported at the end."""

    state: SandboxState
    loop: loop.Loop
    topic: str
    producer: traffic.BackgroundProducer
    consumer: traffic.BackgroundConsumer
    readers: dict[str, TopicReader]
    shared: SharedLoop | None = None
    timings: dict[str, float] = field(default_factory=dict)

    # --- the serve API --------------------------------------------------------------------

    def api(self, method: str, path: str) -> Any:
        request = urllib.request.Request(
            f"{self.loop.serve_url}/api{path}", method=method,
            headers={"Authorization": f"Bearer {self.loop.api_token}"})
        with urllib.request.urlopen(request, timeout=30) as resp:
            return json.load(resp)

    def wait(self, check: Callable[[], Any], what: str, timeout: float = 180.0,
             alive: bool = True, detail: Callable[[], str] | None = None) -> Any:
        """Poll ``check`` until truthy, failing with serve's and the job's log tails
        (and what ``detail`` adds)."""

        def explain() -> str:
            # every piece's tail: a fix that never came may be the collectors' doing
            tails = "\n\n".join(f"--- {name}:\n{piece.log_tail(12)}"
                                  for name, piece in self.loop.pieces.items())
            # and the test's own readers: a record the loop wrote that a reader missed
            # is the harness's fault, not the loop's
            read = "\n".join(reader.describe() for reader in self.readers.values())
            # and what the job proposed, with its reasons: the wrong action is a clue
            proposed = "\n".join(
                f"{a.get('type')} {a.get('trigger')}: {a.get('reason')}{_moves(a)}"
                for a in parsed(self.readers["actions"].messages))
            told = f"{tails}\n\n--- the test's readers:\n{read}\n\n" \
                   f"--- proposed:\n{proposed or '(nothing)'}"
            return f"{detail()}\n\n{told}" if detail is not None else told

        return wait_until(check, what, timeout, explain=explain,
                          alive=self.loop.check_alive if alive else None)

    # --- faults and what the loop makes of them --------------------------------------------

    def fixes_for(self, broker: int, path: str) -> list[dict[str, Any]]:
        return [a for a in parsed(self.readers["actions"].messages)
                if a.get("type") == "fix_offline_replicas"
                and a.get("trigger", {}).get("broker") == broker
                and a.get("trigger", {}).get("log_dir") == path]

    def wait_fix(self, broker: int, path: str, timeout: float = 120.0) -> dict[str, Any]:
        """The one fix the job proposes for ``path`` (waits for it)."""
        return self.wait(lambda: self.fixes_for(broker, path)[:1], f"fix for {path}",
                         timeout)[0]

    def wait_done(self, action_id: str, timeout: float = 240.0) -> dict[str, Any]:
        shown = self.wait(lambda: (a := self.api("GET", f"/actions/{action_id}"))
                          and is_terminal(a["state"]) and a, f"action {action_id[:12]} to end",
                          timeout)
        assert shown["state"] == "succeeded", [e["reason"] for e in shown["audit"][-4:]]
        return shown

    def fail(self, broker: int, path: str) -> float:
        """Fail ``path`` under traffic; the monotonic time it happened."""
        at = time.monotonic()
        cluster.fail_disk(self.state, broker, path)
        traffic.produce_in_background(self.state, self.topic, 12)  # the broker notices at once
        return at

    def healed_once(self, broker: int, path: str, start: float, what: str = "fault",
                    timeout: float = 180.0) -> dict[str, Any]:
        """After a fault on ``path`` at ``start`` (monotonic): one fix proposed, run once
        to success, and no second one; the times go into `timings`."""
        fix = self.wait_fix(broker, path, timeout)
        self.timings[f"{what} -> fix proposed s"] = time.monotonic() - start
        self.wait_done(fix["action_id"])
        self.timings[f"{what} -> healed s"] = time.monotonic() - start
        assert self.executions(fix["action_id"]) == 1
        assert len(self.fixes_for(broker, path)) == 1
        return fix

    def heal(self, broker: int, path: str) -> None:
        """Give the broker its disk back (a replaced disk: empty, broker restarted)."""
        if cluster.needs_healing(path):
            cluster.heal_disk(self.state, broker, path)
            self.state.reload()

    # --- the checks every scenario ends with ------------------------------------------------

    def assert_kept(self) -> None:
        """All of them, in order: nothing proposed twice, no throttle left, the topic
        whole, every acknowledged message read once."""
        self.assert_proposed_once()
        self.assert_no_throttle_left()
        self.assert_healthy()
        self.assert_history()

    def assert_history(self) -> None:
        """Every acknowledged message consumed, none twice."""
        problems = traffic.delivery_problems(self.producer, self.consumer, timeout=120)
        assert problems == [], problems
        self.timings["acknowledged messages"] = len(self.producer.acked)
        if self.consumer.stalls:  # the reader's own trouble (sandbox/traffic.py), shown
            self.timings["reader re-created after a stall"] = len(self.consumer.stalls)

    def assert_healthy(self) -> None:
        """No offline replica and every partition led, on the scenario's topic."""
        def healthy() -> bool:
            parts = traffic.partitions(self.state, self.topic)
            bad = [p for p in parts if p["offline_replicas"] or p["leader_id"] < 0]
            if bad:  # quoted as the last reading when the wait fails: which, how, where
                raise LookupError("not healthy: " + "; ".join(
                    f"partition {p['partition_index']} replicas {p['replica_nodes']} "
                    f"isr {p['isr_nodes']} offline {p['offline_replicas']} "
                    f"leader {p['leader_id']}" for p in bad) + "; " + self.where(bad))
            return True
        self.wait(healthy, f"{self.topic} healthy", 120, alive=False)

    def where(self, bad: list[dict[str, Any]]) -> str:
        """Where the brokers of ``bad`` partitions keep them (DescribeLogDirs), for a
        failure message: a replica Metadata calls offline while its broker lists it on an
        online dir (Kafka's own directory assignment) reads differently from one left on
        a failed dir that the fix did not name."""
        wanted = {p["partition_index"] for p in bad}
        said = []
        try:
            with kafka_admin(self.state) as admin:
                for broker in sorted({b for p in bad for b in p["replica_nodes"]}):
                    (reply,) = admin.describe_log_dirs(topic_partitions=[self.topic],
                                                       brokers=[broker])
                    held = {n: path for path, parts in placement(reply, self.topic).items()
                            for n in parts if n in wanted}
                    failed = sorted(d["log_dir"] for d in reply["log_dirs"]
                                    if d["error_code"] != 0)
                    said.append(f"broker {broker} lists {dict(sorted(held.items()))}, "
                                f"failed dirs {failed}")
        except Exception as exc:  # the reading above stays the message
            said.append(f"DescribeLogDirs failed: {exc!r}")
        return "; ".join(said)

    def assert_no_throttle_left(self) -> None:
        """No replication or dir-move throttle on any broker or topic."""
        from kafka.admin import ConfigResource, ConfigResourceType

        alive = cluster.live_broker_ids(self.state)  # a dead broker cannot be asked
        with kafka_admin(self.state) as admin:
            reply = admin.describe_configs(
                [ConfigResource(ConfigResourceType.BROKER, str(b)) for b in sorted(alive)]
                + [ConfigResource(ConfigResourceType.TOPIC, self.topic)])
        left = {f"{kind} {name}: {key}={entry['value']}"
                for kind, found in reply.items() for name, configs in found.items()
                for key, entry in configs.items()
                if (key in THROTTLE_RATES or key.endswith("throttled.replicas"))
                and entry.get("value") not in (None, "")}
        assert left == set(), left

    def assert_proposed_once(self) -> None:
        """No action id on the bus twice (a replay proposes nothing again): in this
        scenario, and over a shared loop's whole life."""
        for reader in (self.readers["actions"], self.shared and self.shared.actions):
            if reader:
                actions = [a for a in parsed(reader.messages) if "action_id" in a]
                ids = Counter(a["action_id"] for a in actions)
                twice = [f"{a['action_id'][:12]} {a['type']} trigger {a.get('trigger')} "
                         f"created {a.get('created_at')}" for a in actions
                         if ids[a["action_id"]] > 1]
                assert twice == [], twice

    def wait_read_snapshots_since(self, since: float, count: int = 1,
                                  timeout: float = 120.0) -> None:
        """Until ``count`` full snapshots taken at or after ``since`` (epoch seconds) are
        on the bus and the job has finished a batch begun after they were: what the job
        makes of the cluster from then on, it has made."""
        def taken() -> list[float]:
            out = []
            for m in self.readers["cluster-snapshots"].messages:
                kind = chunking.kind_of(m.value)
                if kind == chunking.MANIFEST:
                    out.append(clock.epoch_seconds(chunking.check_manifest(m.value).taken_at))
                elif kind == chunking.SNAPSHOT:
                    out.append(clock.epoch_seconds(json.loads(m.value)["taken_at"]))
            return [t for t in out if t >= since]

        after = clock.text(datetime.fromtimestamp(since, UTC))
        self.wait(lambda: len(taken()) >= count, f"{count} snapshot(s) taken after {after}",
                  timeout)
        # the batch running now may have begun before they came: the one after it did not
        wait_for_batches(self.loop, stream_batches(self.loop.pieces["stream"]) + 1, timeout)

    def executions(self, action_id: str) -> int:
        """How many times serve submitted this action's reassignment (its audit says)."""
        audit = self.api("GET", f"/actions/{action_id}")["audit"]
        return sum(1 for e in audit if e["reason"].startswith("reassignment submitted"))


@contextmanager
def running_loop(state: SandboxState, work: Path, policy: str = POLICY,
                 overrides: dict[str, dict[str, Any]] | None = None) -> Iterator[loop.Loop]:
    """The whole loop (three collectors, the job, serve) on topics of its own prefix, up
    to its first micro-batch; stopped and its topics dropped after."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "policy.toml").write_text(policy)
    prefix = f"chaos{uuid.uuid4().hex[:6]}."
    sections: dict[str, dict[str, Any]] = {
        "bus": {"topic_prefix": prefix},
        "detect": {"leader_window_seconds": 86400.0, "disk_skew_min_bytes": 1 << 40},
    }
    for section, values in (overrides or {}).items():
        sections.setdefault(section, {}).update(values)
    the_loop = loop.start(state, work, overrides=sections, policy=str(work / "policy.toml"))
    try:
        wait_for_batches(the_loop, 0)
        yield the_loop
    finally:
        the_loop.stop_all()
        drop_topics(state, prefix)
        # Its cordons outlive it on the cluster; to the next module's loop they would be
        # an operator's, leaving its planners fewer open dirs than its scenarios expect.
        clear_cordons(state)


@dataclass
class SharedLoop:
    """A module's loop, run through all its scenarios, and a reader of its actions from
    its first batch on: no action proposed twice over the loop's life, across scenarios."""

    loop: loop.Loop
    actions: TopicReader
    start_s: float  # from its start to its first micro-batch
    scenarios: int = 0


@contextmanager
def shared_loop(state: SandboxState, work: Path, policy: str = POLICY,
                overrides: dict[str, dict[str, Any]] | None = None) -> Iterator[SharedLoop]:
    """`running_loop` for a module's scenarios (a module-scoped fixture holds it)."""
    started = time.monotonic()
    with running_loop(state, work, policy, overrides) as the_loop:
        actions = TopicReader(state, the_loop.topic("actions"))
        actions.start()
        try:
            yield SharedLoop(the_loop, actions, time.monotonic() - started)
        finally:
            actions.stop()


@contextmanager
def scenario(state: SandboxState, work: Path, name: str, policy: str = POLICY,
             overrides: dict[str, dict[str, Any]] | None = None,
             partitions: int = 6, shared: SharedLoop | None = None) -> Iterator[Scenario]:
    """A test topic (RF 2) with a producer and a consumer running and readers of the
    loop's topics from now on, on the ``shared`` loop (its ``policy`` and ``overrides``
    are the loop's own) or on a loop of the scenario's own; everything the scenario
    started is stopped and dropped after. Its phases' times go into its timings."""
    if shared is not None and (policy is not POLICY or overrides is not None):
        raise ValueError("a shared loop has its policy and overrides already")
    # The topic comes first: a loop of the scenario's own then starts knowing where its
    # replicas are, as a loop that has run for a while would.
    topic = f"chaos-{name}-{uuid.uuid4().hex[:6]}"
    traffic.create_topic(state, topic, partitions=partitions, replication_factor=2)
    timings: dict[str, Any] = {}
    s: Scenario | None = None
    try:
        with ExitStack() as stack:
            started = time.monotonic()
            if shared is None:
                the_loop = stack.enter_context(running_loop(state, work, policy, overrides))
                timings["loop start s"] = time.monotonic() - started
            else:
                the_loop = shared.loop
                shared.scenarios += 1
                timings["shared loop: scenario"] = shared.scenarios
                if shared.scenarios == 1:  # the first pays for its start
                    timings["loop start s"] = shared.start_s
            s = stack.enter_context(_traffic(state, the_loop, name, topic, shared, timings))
            yield s
            ended = time.monotonic()
        timings["teardown s"] = time.monotonic() - ended
    finally:
        traffic.delete_topic(state, topic)
        # After the checks (which fail on a throttle left): a scenario that failed
        # mid-reassignment must not fail the next one on its broker throttles.
        clear_broker_throttles(state)
        REPORTED.append((name, {**timings, **(s.timings if s else {})}))
        RAN_ON.append(state)


def clear_broker_throttles(state: SandboxState) -> None:
    """Delete every replication throttle rate set on the live brokers."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

    ops = {key: (AlterConfigOp.DELETE, None) for key in THROTTLE_RATES}
    with kafka_admin(state) as admin:
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(b), ops)
                             for b in sorted(cluster.live_broker_ids(state))],
                            raise_on_unknown=False, incremental=True)


def clear_cordons(state: SandboxState) -> None:
    """Delete the live brokers' own `cordoned.log.dirs` where it lists a dir (KIP-1066;
    a broker without the config lists nothing)."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

    alive = sorted(cluster.live_broker_ids(state))
    with kafka_admin(state) as admin:
        reply = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, str(b)) for b in alive])
        cordoned = [name for name, configs in reply.get("broker", {}).items()
                    if (configs.get(CORDONED) or {}).get("value")]
        if cordoned:
            admin.alter_configs(
                [ConfigResource(ConfigResourceType.BROKER, name,
                                {CORDONED: (AlterConfigOp.DELETE, None)})
                 for name in cordoned], raise_on_unknown=False, incremental=True)


@contextmanager
def _traffic(state: SandboxState, the_loop: loop.Loop, name: str, topic: str,
             shared: SharedLoop | None, timings: dict[str, Any]) -> Iterator[Scenario]:
    prefix = the_loop.config["bus"]["topic_prefix"]
    producer = traffic.BackgroundProducer(state, topic, rate_per_s=50)
    consumer = traffic.BackgroundConsumer(state, topic)
    readers: dict[str, TopicReader] = {}
    s = Scenario(state, the_loop, topic, producer, consumer, readers, shared=shared)
    try:
        started = time.monotonic()
        s.wait(lambda: s.api("GET", "/actions") is not None, "serve's API", 60)
        # One fault at a time: a scenario begins on a whole cluster. A loop that ran
        # through earlier faults has its topics on disks healed empty, still catching
        # up; a dir failed meanwhile may hold a partition's only in-sync copy (two
        # overlapping faults, which no software can repair; the planner pages for it).
        s.wait(lambda: in_sync(state, prefix, topic), "the loop's topics and the test "
               "topic in sync", 180, detail=lambda: why_not_in_sync(state, prefix, topic))
        for reader in ("actions", "dead-letter", "logdir-events", "cluster-snapshots"):
            readers[reader] = TopicReader(state, prefix + reader)
            readers[reader].start()
        consumer.start()
        producer.start()
        # Traffic flows end to end before any fault: a consumer still looking up its
        # partitions' offsets when two brokers die would wait out its own timeout and stop.
        s.wait(lambda: consumer.values, "the consumer reading the producer's messages", 60)
        timings["whole, traffic flowing s"] = time.monotonic() - started
        yield s
    finally:
        if producer.is_alive():
            producer.stop()
        consumer.stop()
        for reader in readers.values():
            reader.stop()


def _moves(action: dict[str, Any]) -> str:
    """The partitions a proposed reassignment names, with their target replicas."""
    moves = (action.get("plan") or {}).get("reassignment", {}).get("partitions", [])
    return "".join(f"\n    {m.get('topic')}-{m.get('partition')} -> {m.get('replicas')}"
                   for m in moves)


def some_dir(state: SandboxState, broker: int, topic: str) -> str:
    """A log dir of ``broker`` holding a replica of ``topic``."""
    return dir_holding(state, broker, topic)


def load(state: SandboxState, topic: str, mib: int) -> None:
    """Put about ``mib`` MiB into ``topic`` (10 KiB records), so moves take a while."""
    from confluent_kafka import Producer

    from sandbox.cluster import client_config

    producer = Producer({**client_config(state), "acks": "all", "linger.ms": 20})
    body = "x" * 10_000
    for i in range(mib * 100):
        while True:
            try:
                producer.produce(topic, f"bulk-{i}-{body}".encode())
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0, "bulk records not acknowledged"
