"""HTTP abuse against a real `selfheal serve` on the sandbox: slowloris clients, a flood of
connections and malformed framing at once, while a normal client keeps asking. serve
answers it throughout, and nothing executes: the action waiting for approval still waits,
and the action list is what it was."""

from __future__ import annotations

import json
import random
import socket
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox.state import SandboxState
from tests.integration.serve_harness import ServeProcess, bench, leader_tilted_topic, reorder_plan

pytestmark = pytest.mark.chaos

ABUSE_SECONDS = 25.0
SLOWLORIS = 40
SLOW_BODIES = 20
FLOOD_WAVE = 150  # connections opened at once, held idle, again and again
MALFORMED = [
    b"GARBAGE\r\n\r\n",
    b"GET /healthz HTTP/9.9\r\n\r\n",
    b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + b"X-H: a\r\n" * 150 + b"\r\n",
    b"POST /approve HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 9\r\n\r\nhello",
    b"POST /approve HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"POST /approve HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
    b"POST /approve HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n",
    b"\x00\x01\x02\xff\xfe\r\n\r\n",
]


def _address(serve: ServeProcess) -> tuple[str, int]:
    host, port = serve.url.removeprefix("http://").split(":")
    return host, int(port)


def _connect(serve: ServeProcess, timeout: float = 30.0) -> socket.socket:
    return socket.create_connection(_address(serve), timeout=timeout)


def _status(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.") else 0


class Abuse:
    """The abusers, each a thread, all stopped by `stop`; what they saw is counted."""

    def __init__(self, serve: ServeProcess, token: str, action_id: str) -> None:
        self.serve = serve
        self.token = token
        self.action_id = action_id
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.seen: dict[str, int] = {}
        self.threads: list[threading.Thread] = []

    def count(self, what: str) -> None:
        with self.lock:
            self.seen[what] = self.seen.get(what, 0) + 1

    def start(self) -> None:
        work: list[Callable[[], None]] = (
            [self._slowloris] * SLOWLORIS + [self._slow_body] * SLOW_BODIES
            + [self._flood, self._malformed, self._malformed])
        self.threads = [threading.Thread(target=self._forever, args=(w,), daemon=True)
                        for w in work]
        for t in self.threads:
            t.start()

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)
        assert not any(t.is_alive() for t in self.threads), "an abuser hung"

    def _forever(self, work: Callable[[], None]) -> None:
        while not self.stop.is_set():
            try:
                work()
            except OSError as exc:
                self.count(f"{work.__name__}: {type(exc).__name__}")

    def _trickle(self, sock: socket.socket, head: bytes, byte: bytes) -> None:
        """Send ``head``, then one byte every 0.5 s until serve hangs up or we stop."""
        sock.sendall(head)
        sock.settimeout(0.5)
        while not self.stop.is_set():
            sock.sendall(byte)
            try:
                got = sock.recv(65536)
            except TimeoutError:
                continue
            self.count(f"trickle cut off: {_status(got) or 'closed'}")
            return

    def _slowloris(self) -> None:
        with _connect(self.serve) as sock:
            self._trickle(sock, b"GET /api/actions HTTP/1.1\r\nHost: x\r\n", b"X")

    def _slow_body(self) -> None:
        head = (f"POST /api/actions/{self.action_id}/approve HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {self.token}\r\nContent-Length: 1000\r\n\r\n"
                '{"actor": "').encode()
        with _connect(self.serve) as sock:
            self._trickle(sock, head, b"a")

    def _flood(self) -> None:
        socks = []
        try:
            for _ in range(FLOOD_WAVE):
                if self.stop.is_set():
                    break
                try:
                    socks.append(_connect(self.serve, timeout=5))
                except OSError as exc:
                    self.count(f"flood connect: {type(exc).__name__}")
            self.count("flood wave")
            self.stop.wait(2.0)  # held idle, saying nothing
        finally:
            for sock in socks:
                sock.close()

    def _malformed(self) -> None:
        raw = random.choice(MALFORMED)
        with _connect(self.serve, timeout=20) as sock:
            try:
                sock.sendall(raw)
                got = sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                got = b""
        self.count(f"malformed answered {_status(got) or 'closed'}")


def _ask(serve: ServeProcess, path: str, token: str, give_up: float) -> tuple[int, float]:
    """One normal request, retried on 503 or a reset until answered 200; (tries, seconds)."""
    started = time.monotonic()
    tries = 0
    while time.monotonic() - started < give_up:
        tries += 1
        try:
            with _connect(serve, timeout=30) as sock:
                sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                             f"{token}\r\nConnection: close\r\n\r\n".encode())
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
            if _status(data) == 200:
                return tries, time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"GET {path}: no answer in {give_up:.0f} s ({tries} tries)")


def test_serve_keeps_answering_under_http_abuse_and_nothing_executes(
        chaos_sandbox: SandboxState, tmp_path: Path, record_property) -> None:
    with bench(chaos_sandbox, tmp_path, '[actions]\nrebalance_leaders = "approve"\n') as b:
        serve = b.serve()
        topic = leader_tilted_topic(chaos_sandbox, "abuse", [0, 1, 2], new_leader=1)
        action = b.action("rebalance_leaders", reorder_plan(topic, [1, 0, 2]),
                          "broker 1 should lead")
        b.propose(action)
        serve.wait_state(action.action_id, {"awaiting_approval"})
        before = serve.api("GET", "/actions")[1]["actions"]

        abuse = Abuse(serve, b.token, action.action_id)
        answers: list[tuple[int, float]] = []
        abuse.start()
        try:
            ends = time.monotonic() + ABUSE_SECONDS
            while time.monotonic() < ends:
                for path in ("/healthz", "/api/actions"):
                    answers.append(_ask(serve, path, b.token, give_up=120))
                time.sleep(0.2)
        finally:
            abuse.join()

        seconds = [s for _, s in answers]
        record_property("figures", {
            "what": "chaos http-abuse", "answered 200": len(answers),
            "median ms": statistics.median(seconds) * 1000, "max ms": max(seconds) * 1000})
        print(f"\nnormal client under abuse: {len(answers)} requests answered 200, "
              f"median {statistics.median(seconds) * 1000:.0f} ms, "
              f"p90 {sorted(seconds)[int(len(seconds) * 0.9)] * 1000:.0f} ms, "
              f"max {max(seconds) * 1000:.0f} ms, at most {max(t for t, _ in answers)} "
              "tries (503 or reset before)")
        print("abusers saw: " + json.dumps(dict(sorted(abuse.seen.items())), indent=1))

        assert serve.alive()
        assert len(answers) >= 10
        # The trickles were cut off by serve, not by the end of the test.
        assert any(k.startswith("trickle cut off") for k in abuse.seen), abuse.seen
        assert abuse.seen.get("flood wave", 0) >= 1
        assert any(k.startswith("malformed answered 4") for k in abuse.seen), abuse.seen
        after = serve.api("GET", "/actions")[1]["actions"]
        assert [(a["id"], a["state"]) for a in after] == \
            [(a["id"], a["state"]) for a in before]
        assert serve.action(action.action_id)["state"] == "awaiting_approval"
        status, text, _ = serve.http("GET", "/metrics")
        assert status == 200
        refused = [line for line in text.splitlines()
                   if line.startswith("selfheal_http_requests_total")
                   and ('code="503"' in line or 'code="408"' in line)]
        print("\n".join(refused))
