"""serve's HTTP under abuse, on a real socket: slow clients, too many connections, bad
framing. Each gets a 4xx/503 and its connection closed; nothing in the store changes."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from http.client import HTTPConnection
from pathlib import Path

import pytest

from remediation.executor.lifecycle import State
from remediation.executor.store import ActionStore
from remediation.service import http
from remediation.service.approvals import Approvals
from remediation.service.links import LinkSigner
from remediation.service.metrics import Counters
from remediation.service.server import Limits
from tests.unit.action_records import fix_offline, of_type
from tests.unit.test_service_http import SECRET, TOKEN, Client


@pytest.fixture
def small(tmp_path: Path) -> Iterator[Client]:
    """A service with 2 open connections at most, 2 s deadlines, idle after 1 s."""
    store = ActionStore(tmp_path / "a.db")
    approvals = Approvals(store, LinkSigner(SECRET, used=store), "http://x", 3600)
    service = http.Service(store, approvals, TOKEN, Counters(), lambda: {},
                           lambda: ("leader", "me"))
    limits = Limits(max_open=2, head_seconds=2.0, body_seconds=2.0, idle_seconds=1)
    server, _ = http.start("127.0.0.1", 0, service, limits)
    approvals.base_url = server.url
    try:
        yield Client(server, store, approvals)
    finally:
        server.shutdown()
        server.server_close()
        store.close()


def _connect(client: Client) -> socket.socket:
    host, port = client.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    return sock


def _response(sock: socket.socket) -> tuple[int, bytes, bool]:
    """(status, whole response, closed by the server) reading until the server closes."""
    data = b""
    closed = False
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        data += chunk
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, data, closed


def _exchange(client: Client, raw: bytes) -> tuple[int, bytes, bool]:
    with _connect(client) as sock:
        sock.sendall(raw)
        return _response(sock)


def _waiting(client: Client) -> str:
    return client.waiting(fix_offline())


def test_a_body_that_never_arrives_is_answered_408_and_the_connection_closed(
        small: Client) -> None:
    aid = _waiting(small)
    with _connect(small) as sock:
        sock.sendall(f"POST /api/actions/{aid}/approve HTTP/1.1\r\nHost: x\r\n"
                     f"Authorization: Bearer {TOKEN}\r\nContent-Length: 100\r\n\r\n"
                     '{"actor": '.encode())
        status, data, closed = _response(sock)
    assert status == 408 and closed, data
    assert b"did not arrive in time" in data
    assert small.store.get(aid).state is State.AWAITING_APPROVAL  # type: ignore[union-attr]


def test_a_client_trickling_its_headers_loses_the_connection_at_the_deadline(
        small: Client) -> None:
    with _connect(small) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        sent = 0
        started = time.monotonic()
        try:
            while time.monotonic() - started < 20:  # far past the 2 s deadline
                sock.sendall(b"X")  # one byte at a time, never a whole header
                sent += 1
                time.sleep(0.3)
        except OSError:
            pass
        status, _, closed = _response(sock)
    print(f"closed after {sent} trickled bytes, {time.monotonic() - started:.1f} s")
    assert closed and status == 408
    assert time.monotonic() - started < 20  # cut off by the server, not by the loop's end


def test_connections_over_the_limit_get_503_and_others_are_served_once_slots_free(
        small: Client) -> None:
    idle = [_connect(small), _connect(small)]  # hold both slots, say nothing
    time.sleep(0.2)
    status, data, closed = _exchange(small, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 503 and closed and b"Retry-After: 1" in data
    for sock in idle:
        sock.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status, data, _ = _exchange(small, b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
                                           b"Connection: close\r\n\r\n")
        if status == 200:
            break
        time.sleep(0.1)
    assert status == 200, data


def test_idle_connections_are_dropped_after_the_read_timeout(small: Client) -> None:
    idle = [_connect(small), _connect(small)]
    results = [_response(sock) for sock in idle]  # the server hangs up on both
    for sock in idle:
        sock.close()
    assert all(closed for _, _, closed in results)
    status, _, _ = _exchange(small, b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
                                    b"Connection: close\r\n\r\n")
    assert status == 200


@pytest.mark.parametrize(("raw", "status"), [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /healthz HTTP/9.9\r\n\r\n", 505),
    (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),
    (b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431),
    (b"GET /healthz HTTP/1.1\r\n" + b"".join(b"X-H%d: %s\r\n" % (i, b"a" * 1000)
                                             for i in range(90)) + b"\r\n", 431),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-H: a\r\n" * 101 + b"\r\n", 431),
    (b"POST /alertmanager HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n"
     b"hello", 400),
    (b"POST /alertmanager HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
     b"Content-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400),
    (b"POST /alertmanager HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    (b"POST /alertmanager HTTP/1.1\r\nContent-Length: lots\r\n\r\n", 400),
    (b"DELETE /api/actions HTTP/1.1\r\nHost: x\r\n\r\n", 501),
    (b"GET /healthz HTTP/1.1\r\n\r\n", 400),  # HTTP/1.1 without Host (RFC 9112 3.2)
])
def test_malformed_framing_gets_a_4xx_or_5xx_and_the_connection_closed(
        small: Client, raw: bytes, status: int) -> None:
    got, data, closed = _exchange(small, raw)
    assert (got, closed) == (status, True), data[:300]


def test_a_content_length_longer_than_the_body_sent_is_refused(small: Client) -> None:
    aid = _waiting(small)
    with _connect(small) as sock:
        sock.sendall(f"POST /api/actions/{aid}/approve HTTP/1.1\r\nHost: x\r\n"
                     f"Authorization: Bearer {TOKEN}\r\nContent-Length: 50\r\n\r\n"
                     '{"actor": "mallory"}'.encode())
        sock.shutdown(socket.SHUT_WR)  # the body ends here, 30 bytes short
        status, data, closed = _response(sock)
    assert (status, closed) == (400, True), data
    assert small.store.get(aid).state is State.AWAITING_APPROVAL  # type: ignore[union-attr]


def test_a_normal_request_still_keeps_its_connection_alive(small: Client) -> None:
    conn = HTTPConnection(small.url.removeprefix("http://"), timeout=30)
    try:
        conn.request("GET", "/healthz")
        first = conn.getresponse()
        first.read()
        sock = conn.sock
        conn.request("GET", "/healthz")
        second = conn.getresponse()
        second.read()
        assert (first.status, second.status) == (200, 200)
        assert first.getheader("Connection") is None and conn.sock is sock  # one connection
    finally:
        conn.close()


def test_a_chunked_body_is_read_with_the_size_limit_while_it_streams(small: Client) -> None:
    aid = _waiting(small)
    body = b'{"actor": "carol"}'
    status, data, _ = _exchange(small, (
        f"POST /api/actions/{aid}/reject HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        f"{TOKEN}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()
        + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    assert status == 200, data
    assert small.store.get(aid).state is State.CANCELLED  # type: ignore[union-attr]
    other = _waiting_other(small)
    with _connect(small) as sock:
        sock.sendall(f"POST /api/actions/{other}/reject HTTP/1.1\r\nHost: x\r\n"
                     f"Authorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n"
                     .encode())
        chunk = b"a" * (64 << 10)
        try:
            for _ in range(17):  # 1 MiB and a chunk, with no end in sight
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            pass  # refused and closed while we were still sending
        status, data, closed = _response(sock)
    assert (status, closed) == (413, True), data[:300]
    assert small.store.get(other).state is State.AWAITING_APPROVAL  # type: ignore[union-attr]


def _waiting_other(client: Client) -> str:
    return client.waiting(of_type("rebalance_leaders"))
