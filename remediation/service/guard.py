"""An HTTP server that abusive clients cannot starve: requests are read whole before any
thread sees them.

`http.server.ThreadingHTTPServer` gives every connection a thread that waits for its
client as long as the client likes: slow clients and idle connections hold threads, and a
flood of them holds all. Here one reader thread (a selector) reads every connection's
request line, headers and body (up to its Content-Length) without blocking; only a request
that has fully arrived goes to the handler pool (WORKERS threads), which therefore never
waits on a client. Each request must arrive within HEAD_DEADLINE (line and headers) and
BODY_DEADLINE (its body), or the reader answers 408 and closes; a head over MAX_HEAD_BYTES
is answered 431. At most MAX_OPEN connections are open at once and at most MAX_QUEUED
requests wait for a handler; beyond either the reader answers 503 and closes, and one
client's connections can never keep another's complete request from a handler for long.
After a reply on a kept-alive connection the socket goes back to the reader.
"""

from __future__ import annotations

import io
import re
import selectors
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

MAX_OPEN = 512  # connections open at once; one more is answered 503
WORKERS = 8  # handler threads
MAX_QUEUED = 64  # complete requests waiting for a handler; more are answered 503
HEAD_DEADLINE = 5.0  # seconds for a request's line and headers (a real client: ms)
BODY_DEADLINE = 15.0  # seconds for its body (at most MAX_BODY)
IDLE_TIMEOUT = 5.0  # a kept-alive connection with no new request is closed after this
WRITE_TIMEOUT = 10.0  # a handler's reply must be taken within this
MAX_HEAD_BYTES = 256 << 10  # request line + headers; http.server's own limits come first
MAX_BODY = 1 << 20

Count = Callable[[str, str], None]  # (route, status code)

_LENGTH = re.compile(rb"^content-length:[ \t]*(\d{1,12})[ \t]*\r?$",
                     re.IGNORECASE | re.MULTILINE)


def canned(status: int, reason: str, message: str) -> bytes:
    """A whole reply the reader can send itself, closing the connection."""
    body = ('{"error": "' + message.replace('"', "'") + '"}').encode()
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n")
    if status == 503:
        head += "Retry-After: 1\r\n"
    return head.encode() + b"\r\n" + body


BUSY = canned(503, "Service Unavailable", "too busy: too many connections or requests at "
              "once; try again in a second")
SLOW = canned(408, "Request Timeout", "the request did not arrive in time")
SHORT = canned(400, "Bad Request", "the request ended before its Content-Length")
HUGE = canned(431, "Request Header Fields Too Large",
              f"request line and headers over {MAX_HEAD_BYTES} bytes")


@dataclass
class Ready:
    """A request read whole, for a handler; ``rest``: bytes after it (pipelined)."""

    sock: socket.socket
    data: bytes
    rest: bytes = b""


@dataclass
class _Pending:
    data: bytearray = field(default_factory=bytearray)
    deadline: float = 0.0
    stage: str = "idle"  # idle (kept alive, nothing yet) -> head -> body


def complete(data: bytes | bytearray) -> int | None:
    """The length of the first whole request in ``data`` (head and announced body), or
    None while more must come. A head without a usable Content-Length counts as whole:
    the handler refuses it without reading a body."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(data[:end])
    lengths = set(_LENGTH.findall(head))
    if len(lengths) != 1:
        return end + 4
    length = int(next(iter(lengths)))
    if length > MAX_BODY:
        return end + 4
    return end + 4 + length if len(data) >= end + 4 + length else None


class GuardedServer(socketserver.TCPServer):
    """A TCPServer whose accepted sockets go to the reader, whole requests to the pool."""

    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: Any, count: Count,
                 max_open: int = MAX_OPEN, workers: int = WORKERS) -> None:
        super().__init__(address, handler)
        self.count = count
        self.max_open = max_open
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="http")
        self._queued = threading.BoundedSemaphore(workers + MAX_QUEUED)
        self._selector = selectors.DefaultSelector()
        self._pending: dict[socket.socket, _Pending] = {}
        self._incoming: list[tuple[socket.socket, bytes]] = []
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._closed = threading.Event()
        self._reader = threading.Thread(target=self._read_loop, name="http-reader",
                                        daemon=True)
        self._reader.start()

    # --- from the accept loop and the handlers --------------------------------------

    def process_request(self, request: Any, client_address: Any) -> None:
        self._hand_back(request, b"")

    def _hand_back(self, sock: socket.socket, leftover: bytes) -> None:
        with self._lock:
            self._incoming.append((sock, leftover))
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    # --- the reader ------------------------------------------------------------------

    def _read_loop(self) -> None:
        while not self._closed.is_set():
            for key, _ in self._selector.select(timeout=0.25):
                if key.fileobj is self._wake_r:
                    try:
                        self._wake_r.recv(4096)
                    except OSError:
                        pass
                else:
                    self._readable(key.fileobj)  # type: ignore[arg-type]
            self._take_incoming()
            self._expire()

    def _take_incoming(self) -> None:
        with self._lock:
            incoming, self._incoming = self._incoming, []
        for sock, leftover in incoming:
            if len(self._pending) >= self.max_open:
                self._refuse(sock, BUSY, "busy", "503")
                continue
            sock.setblocking(False)
            pending = _Pending(bytearray(), time.monotonic() + IDLE_TIMEOUT)
            self._pending[sock] = pending
            self._selector.register(sock, selectors.EVENT_READ)
            if leftover:
                self._arrived(sock, pending, leftover)

    def _readable(self, sock: socket.socket) -> None:
        pending = self._pending[sock]
        try:
            chunk = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:  # the client closed its side
            self._drop(sock)
            if pending.stage == "idle":
                sock.close()
            else:  # mid-request: it may still read why nothing was done
                self._refuse(sock, SHORT, "short", "400")
            return
        self._arrived(sock, pending, chunk)

    def _arrived(self, sock: socket.socket, pending: _Pending, chunk: bytes) -> None:
        if pending.stage == "idle":
            pending.stage, pending.deadline = "head", time.monotonic() + HEAD_DEADLINE
        pending.data += chunk
        size = complete(pending.data)
        if size is None:
            if pending.stage == "head" and pending.data.find(b"\r\n\r\n") >= 0:
                # The head is in: the body gets its own deadline, counted from now.
                pending.stage, pending.deadline = "body", time.monotonic() + BODY_DEADLINE
            elif pending.stage == "head" and len(pending.data) > MAX_HEAD_BYTES:
                self._drop(sock)
                self._refuse(sock, HUGE, "huge", "431")
            return
        self._drop(sock)
        if not self._queued.acquire(blocking=False):
            self._refuse(sock, BUSY, "busy", "503")
            return
        data = bytes(pending.data)
        self._pool.submit(self._handle, Ready(sock, data[:size], data[size:]))

    def _expire(self) -> None:
        now = time.monotonic()
        for sock, pending in list(self._pending.items()):
            if pending.deadline < now:
                self._drop(sock)
                if pending.stage == "idle":  # a kept-alive connection unused: close it
                    sock.close()
                else:
                    self._refuse(sock, SLOW, "slow", "408")

    def _drop(self, sock: socket.socket) -> None:
        self._pending.pop(sock, None)
        try:
            self._selector.unregister(sock)
        except (KeyError, ValueError):
            pass

    def _refuse(self, sock: socket.socket, reply: bytes, route: str, code: str) -> None:
        self.count(route, code)
        try:
            sock.setblocking(False)
            sock.send(reply)  # small: fits the socket buffer, never waits
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        sock.close()

    # --- the handlers ----------------------------------------------------------------

    def _handle(self, ready: Ready) -> None:
        keep = False
        leftover = b""
        try:
            ready.sock.setblocking(True)
            ready.sock.settimeout(WRITE_TIMEOUT)
            make: Any = self.RequestHandlerClass
            handler = make(ready, ready.sock.getpeername(), self)
            keep = not handler.close_connection
            leftover = ready.rest
        except Exception:  # a client gone mid-reply, or a bug: never the pool's problem
            keep = False
        finally:
            self._queued.release()
        if keep and not self._closed.is_set():
            self._hand_back(ready.sock, leftover)
        else:
            try:
                ready.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            ready.sock.close()

    def server_close(self) -> None:
        self._closed.set()
        self._reader.join(5)
        for sock in list(self._pending):
            sock.close()
        self._pending.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()
        super().server_close()


class WholeRequestMixin:
    """For a BaseHTTPRequestHandler under GuardedServer: read from the request already
    read whole, handle that one request, leave the connection to the server."""

    request: Ready
    connection: socket.socket
    rfile: Any
    wfile: Any

    def setup(self) -> None:
        self.connection = self.request.sock
        self.rfile = io.BytesIO(self.request.data)
        self.wfile = socketserver._SocketWriter(self.connection)  # type: ignore[attr-defined]

    def handle(self) -> None:
        self.handle_one_request()  # type: ignore[attr-defined]
