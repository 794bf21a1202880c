"""uvicorn running serve's ASGI app on a thread of serve's own process.

The abuse limits are uvicorn's and h11's own settings: `limit_concurrency` (requests in
flight; one past it is answered 503 and its connection closed), `timeout_keep_alive` (an idle
connection is closed), h11's `max_incomplete_event_size` (a request line and headers
over it are refused). The body is read by the app with a size limit and a deadline
(`edge.read_body`). uvicorn has no deadline for a request's head and no idle deadline
before a connection's first request, so the protocol below adds those two timers, which
is all that keeps a slowloris client from holding a connection for ever. It also refuses
a connection past `max_open` at once (503, Retry-After; uvicorn would wait for its
request), measures a head that arrives in one read (h11 measures only incomplete ones),
answers h11's refusals with the status h11 hints (501 for a transfer coding it does not
know) and counts every refusal on /metrics.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

Count = Callable[[str, str], None]  # (route, status code)


@dataclass(frozen=True)
class Limits:
    max_open: int = 512  # connections open at once; a request past it is answered 503
    head_seconds: float = 5.0  # a request's line and headers, from its first byte
    body_seconds: float = 15.0  # its body, once the head is in
    idle_seconds: int = 5  # a connection with no request (yet, or since the last) closes
    max_head_bytes: int = 64 << 10  # request line and headers
    max_body_bytes: int = 1 << 20


def _canned(status: int, reason: str, message: str) -> bytes:
    body = ('{"error": "' + message.replace('"', "'") + '"}').encode()
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


SLOW = _canned(408, "Request Timeout", "the request did not arrive in time")
BUSY = _canned(503, "Service Unavailable", "too busy: too many connections at once; try "
               "again in a second").replace(b"Connection: close\r\n",
                                            b"Connection: close\r\nRetry-After: 1\r\n")
_REASONS = {400: "Bad Request", 414: "URI Too Long", 431: "Request Header Fields Too Large",
            501: "Not Implemented", 505: "HTTP Version Not Supported"}


class _Connection(h11.Connection):
    """h11's connection remembering why it refused the peer (for the status it hints)."""

    refused: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as exc:
            self.refused = exc
            raise


def protocol(limits: Limits, count: Count) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a head deadline, an idle deadline before the first
    request, and refusals that keep h11's status hint."""

    class Guarded(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.conn = _Connection(h11.SERVER, limits.max_head_bytes)

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limits.max_open:
                self._refuse(BUSY, "busy", "503")
                return
            # uvicorn arms its keep-alive timer only after a response: a connection that
            # never says anything would stay open.
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler)

        def data_received(self, data: bytes) -> None:
            if self.conn.their_state is h11.IDLE:
                # h11 measures a head only while it is incomplete: one that arrives whole
                # in a single read is measured here.
                pending = self.conn.trailing_data[0] + data
                end = pending.find(b"\r\n\r\n")
                head = pending if end < 0 else pending[:end]
                if len(head) > limits.max_head_bytes:
                    line = head.find(b"\n")
                    if 0 <= line <= limits.max_head_bytes:
                        self._refuse(_canned(431, _REASONS[431], "request headers over "
                                             f"{limits.max_head_bytes} bytes"), "huge", "431")
                    else:
                        self._refuse(_canned(414, _REASONS[414], "request line over "
                                             f"{limits.max_head_bytes} bytes"), "huge", "414")
                    return
            super().data_received(data)
            if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
                if self._head_timer is None and not self.transport.is_closing():
                    self._head_timer = self.loop.call_later(limits.head_seconds, self._slow)
            else:
                self._stop_head_timer()

        def eof_received(self) -> bool | None:  # type: ignore[override]
            # The client closed its side mid-request: h11 refuses what is missing (400)
            # on a transport still open for the reply. Otherwise close as uvicorn does.
            mid = self.conn.their_state is h11.SEND_BODY or (
                self.conn.their_state is h11.IDLE and bool(self.conn.trailing_data[0]))
            if not mid or self.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
                return None
            self.conn.receive_data(b"")
            self.handle_events()
            return True

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_head_timer()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            refused = getattr(self.conn, "refused", None)
            status = refused.error_status_hint if refused is not None else 400
            why = str(refused) if refused is not None else msg
            self._refuse(_canned(status, _REASONS.get(status, "Bad Request"),
                                 f"malformed request: {why}"), "malformed", str(status))

        def _slow(self) -> None:
            self._head_timer = None
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return
            self._refuse(SLOW, "slow", "408")

        def _refuse(self, reply: bytes, route: str, code: str) -> None:
            """Answer without the app and close: what arrived cannot be framed."""
            count(route, code)
            self._stop_head_timer()
            if not self.transport.is_closing():
                self.transport.write(reply)
                self.transport.close()

        def _stop_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

    return Guarded


class ServiceServer:
    """uvicorn serving one ASGI app on a thread, bound before the constructor returns."""

    def __init__(self, app: Any, host: str, port: int, limits: Limits, count: Count) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._sock.bind((host, port))
            self._sock.listen(128)
        except OSError:
            self._sock.close()
            raise
        self.server_address = self._sock.getsockname()[:2]
        config = uvicorn.Config(
            app, http=protocol(limits, count), loop="asyncio", lifespan="off",
            limit_concurrency=limits.max_open + 1,  # uvicorn counts the asking connection
            timeout_keep_alive=limits.idle_seconds,
            h11_max_incomplete_event_size=limits.max_head_bytes,
            timeout_graceful_shutdown=3, access_log=False, log_config=None,
            log_level="error", server_header=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run,
                                        kwargs={"sockets": [self._sock]}, name="http",
                                        daemon=True)
        self._thread.start()
        # The socket already listens (clients queue); wait for the loop so a server that
        # cannot start is an error here, not a silent thread.
        deadline = time.monotonic() + 30
        while not self._server.started and time.monotonic() < deadline:
            if not self._thread.is_alive():
                self._sock.close()
                raise RuntimeError("serve's HTTP server stopped while starting; its error "
                                   "is logged above")
            time.sleep(0.01)

    @property
    def url(self) -> str:
        host, port = self.server_address
        return f"http://{host}:{port}"

    def shutdown(self) -> None:
        """Stop taking requests, let those in flight finish (a few seconds at most)."""
        self._server.should_exit = True
        self._thread.join(30)

    def server_close(self) -> None:
        self._sock.close()
