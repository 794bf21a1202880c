"""Runs the real `selfheal serve` for the integration tests, and feeds it real actions.

Each test gets its own bus topics (a topic prefix of its own), store and secrets, so
tests never see each other's actions. Every serve started here is stopped by its PID.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core import clock
from core.config import Config
from core.config import load as load_config
from core.live import open_admin, read_snapshot
from core.model import ClusterModel
from core.signing import signer
from remediation.executor.lifecycle import is_terminal
from sandbox.state import SandboxState
from schemas import wire
from schemas.actions import build_action
from schemas.records import Action, Trigger
from schemas.registry import TOPICS
from schemas.snapshot import snapshot_from_dict
from tests.polling import wait_until

_LISTENING = re.compile(r"listening on (http://\S+)")


class ServeProcess:
    """One `selfheal serve --port 0` child process with its stderr collected."""

    def __init__(self, env: dict[str, str], token: str) -> None:
        self.env = env
        self.token = token
        self.lines: list[str] = []
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None

    def start(self, leader: bool = True, timeout: float = 60.0) -> ServeProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "selfheal.cli", "serve", "--port", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env=self.env, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        self.wait_line(_LISTENING, timeout)
        found = next(m for line in self.lines if (m := _LISTENING.search(line)))
        self.url = found.group(1)
        if leader:
            self.wait_role("leader", timeout)
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        """Signal the process by its PID and wait for it; SIGKILL if it lingers."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        os.kill(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            return self.proc.wait(10)

    def wait_line(self, pattern: re.Pattern[str] | str, timeout: float = 60.0) -> str:
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if regex.search(line):
                    return line
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"serve exited ({self.proc.returncode}):\n"
                                     + "\n".join(self.lines))
            time.sleep(0.1)
        raise AssertionError(f"no line matching {regex.pattern!r} in {timeout:.0f} s:\n"
                             + "\n".join(self.lines))

    # --- HTTP -----------------------------------------------------------------------------

    def http(self, method: str, path: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
        req = urllib.request.Request(self.url + path, data=body, method=method,
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, resp.read().decode(), dict(resp.headers)
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode(), dict(err.headers)

    def api(self, method: str, path: str, body: dict[str, Any] | None = None,
            token: str | None = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {token or self.token}",
                   "Content-Type": "application/json"}
        status, text, _ = self.http(method, "/api" + path, data, headers)
        return status, json.loads(text)

    def action(self, action_id: str) -> dict[str, Any]:
        status, body = self.api("GET", f"/actions/{action_id}")
        assert status == 200, body
        return body

    def wait_role(self, role: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, text, _ = self.http("GET", "/healthz")
            if status == 200 and json.loads(text)["role"] == role:
                return
            time.sleep(0.2)
        raise AssertionError(f"serve at {self.url} is not {role} after {timeout:.0f} s:\n"
                             + "\n".join(self.lines))

    def wait_state(self, action_id: str, states: Iterable[str],
                   timeout: float = 120.0) -> dict[str, Any]:
        """Poll the API until the action is in one of `states`; fail after `timeout`."""
        wanted = set(states)
        deadline = time.monotonic() + timeout
        last: dict[str, Any] = {}
        while time.monotonic() < deadline:
            status, body = self.api("GET", f"/actions/{action_id}")
            if status == 200:
                last = body
                if body["state"] in wanted:
                    return body
                if is_terminal(body["state"]):
                    break  # it ended elsewhere: say how
            time.sleep(0.2)
        raise AssertionError(f"action {action_id[:12]} is {last.get('state')}, not in "
                             f"{sorted(wanted)}; audit:\n" + audit_text(last) + "\nserve:\n"
                             + "\n".join(self.lines[-20:]))


def audit_text(shown: dict[str, Any]) -> str:
    return "\n".join(f"  {a['from']} -> {a['to']} by {a['actor']}: {a['reason']}"
                     for a in shown.get("audit", []))


class Bench:
    """A test's own bus topics, store, secrets and policy, and the serves it starts."""

    def __init__(self, state: SandboxState, work: Path, policy: str = "",
                 extra_env: dict[str, str] | None = None) -> None:
        self.state = state
        self.work = work
        self.prefix = f"t{uuid.uuid4().hex[:8]}."
        self.token = secrets.token_urlsafe(16)
        self.secret = secrets.token_hex(32)
        policy_file = work / "policy.toml"
        policy_file.write_text(policy)
        self.env = {
            **os.environ,
            "SELFHEAL_SANDBOX_DIR": state.work_dir,
            "SELFHEAL_BUS_TOPIC_PREFIX": self.prefix,
            "SELFHEAL_SERVE_SQLITE_PATH": str(work / "actions.sqlite"),
            "SELFHEAL_SERVE_API_TOKEN": self.token,
            "SELFHEAL_SERVE_LINK_SECRET": self.secret,
            "SELFHEAL_SERVE_TICK_SECONDS": "0.5",
            "SELFHEAL_POLICY": str(policy_file),
            **(extra_env or {}),
        }
        self.env.pop("SELFHEAL_CONFIG", None)
        self.serves: list[ServeProcess] = []

    @property
    def config(self) -> Config:
        return load_config(env=self.env)

    def serve(self, leader: bool = True) -> ServeProcess:
        proc = ServeProcess(self.env, self.token)
        self.serves.append(proc)
        return proc.start(leader=leader)

    def close(self) -> None:
        for proc in self.serves:
            proc.stop(signal.SIGKILL if not proc.alive() else signal.SIGTERM)

    # --- the actions topic ----------------------------------------------------------------

    def produce(self, *values: bytes, key: bytes | None = None) -> None:
        from core import bus

        config = self.config
        bus.ensure_topics(config)
        producer = bus.producer(config)
        for value in values:
            producer.produce(config.topic("actions"), value, key=key)
        assert producer.flush(30) == 0, "actions not acknowledged"

    def propose(self, action: Action) -> str:
        """Put ``action`` on the bus signed, as the job does."""
        signed = signer(self.config).sign_action(action)
        self.produce(signed.to_json(), key=action.key())
        return action.action_id

    def read_topic(self, name: str, want: Callable[[list[dict[str, Any]]], bool],
                   timeout: float = 60.0) -> list[dict[str, Any]]:
        """Every record of one of this bench's topics, read until `want(records)` holds."""
        from core import bus

        config = self.config
        consumer = bus.consumer(config, f"test-{uuid.uuid4().hex[:8]}",
                                **{"auto.offset.reset": "earliest"})
        consumer.subscribe([config.topic(name)])
        found: list[dict[str, Any]] = []

        def more() -> bool:
            found.extend(wire.record(TOPICS[name], m.value())
                         for m in consumer.consume(100, timeout=0.5)
                         if m.error() is None)
            return want(found)

        try:
            wait_until(more, f"the records wanted on {config.topic(name)}", timeout, every=0)
        finally:
            consumer.close()
        return found

    def snapshot(self) -> dict[str, Any]:
        with open_admin(self.state.bootstrap_servers) as admin:
            return read_snapshot(admin, self.state.cluster_id)

    def model(self) -> ClusterModel:
        return ClusterModel(snapshot_from_dict(self.snapshot()))

    def action(self, type_: str, plan: Any, reason: str, bytes_moved: int = 0,
               trigger: Trigger | None = None, received: Any = None) -> Action:
        """An action as the job writes it: built, then signed with the sandbox's key."""
        return signer(self.config).sign_action(self.unsigned(type_, plan, reason, bytes_moved,
                                                             trigger, received))

    def unsigned(self, type_: str, plan: Any, reason: str, bytes_moved: int = 0,
                 trigger: Trigger | None = None, received: Any = None) -> Action:
        """The same action with no signature: what anyone who can write the bus can make."""
        return build_action(self.state.cluster_id, type_, plan, reason=reason,
                            trigger=trigger or Trigger("manual"), event_time=clock.text(),
                            bytes_moved=bytes_moved, created_at=clock.text(),
                            received=received)


@contextmanager
def bench(state: SandboxState, work: Path, policy: str = "",
          extra_env: dict[str, str] | None = None) -> Iterator[Bench]:
    b = Bench(state, work, policy, extra_env)
    try:
        yield b
    finally:
        b.close()


def placed_topic(state: SandboxState, prefix: str,
                 replicas: dict[int, list[int]]) -> str:
    """A new topic with exactly these replica lists, each partition led by its first."""
    from kafka.admin import NewTopic

    from sandbox import traffic
    from sandbox.status import kafka_admin

    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with kafka_admin(state) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=-1, replication_factor=-1,
                                      replica_assignments=replicas)])
    wait_until(lambda: {p["partition_index"]: p["leader_id"]
                        for p in traffic.partitions(state, topic)}
               == {p: r[0] for p, r in replicas.items()}, f"{topic} led as placed")
    return topic


def leader_tilted_topic(state: SandboxState, prefix: str, replicas: list[int],
                        new_leader: int) -> str:
    """A topic whose partition 0 has `replicas` (led by the first), and, beside it, as many
    partitions led by that broker as it takes for moving partition 0's leader to
    `new_leader` to even leaders out cluster-wide, with room to spare (the executor
    supersedes a leader plan that does not). Counted again after each topic: leaders
    elsewhere may still move."""
    from remediation.executor.view import leader_counts

    heavy = replicas[0]
    others = [b for b in replicas if b != new_leader] + [new_leader]
    topic = placed_topic(state, prefix, {0: replicas})
    for _ in range(5):
        with open_admin(state.bootstrap_servers) as admin:
            doc = read_snapshot(admin, state.cluster_id)
        counts = leader_counts(p["leader"] for p in doc["partitions"])
        # Two more would do; three leave room for a topic created meanwhile (the bus's,
        # __consumer_offsets on a fresh cluster) whose leaders land one way or the other.
        missing = counts.get(new_leader, 0) + 3 - counts.get(heavy, 0)
        if missing <= 0:
            return topic
        placed_topic(state, f"{prefix}-weight", {p: others for p in range(missing)})
    raise AssertionError(f"broker {heavy} never led 3 more partitions than {new_leader}")


def reorder_plan(topic: str, replicas: list[int]) -> dict[str, Any]:
    """A leader plan for partition 0 of `topic`: this replica order, then an election."""
    return {"reassignment": {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas}]},
        "election": {"partitions": [{"topic": topic, "partition": 0}]}}


def lead_by_hand(state: SandboxState, topic: str, partition: int, replicas: list[int]) -> None:
    """What an operator does to move a leader: the partition's replicas reordered, then a
    preferred election, so ``replicas[0]`` leads."""
    from kafka import TopicPartition

    from sandbox import traffic

    def of_partition() -> dict[str, Any]:
        return next(p for p in traffic.partitions(state, topic)
                    if p["partition_index"] == partition)

    with open_admin(state.bootstrap_servers) as admin:
        admin.alter_partition_reassignments({TopicPartition(topic, partition): replicas})
        wait_until(lambda: of_partition()["replica_nodes"] == replicas,
                   f"{topic}-{partition} reordered to {replicas}")
        admin.elect_leaders(0, {topic: [partition]}, raise_errors=False)  # 0: preferred
    wait_until(lambda: of_partition()["leader_id"] == replicas[0],
               f"broker {replicas[0]} leading {topic}-{partition}")
