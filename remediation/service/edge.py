"""The HTTP plumbing under `selfheal serve`'s routes: how a request is refused before a
route sees it (framing), how a body is read (size limit and deadline while it streams in),
how the API token is checked, and how a route ends a request (`Reply`). The routes are in
`remediation/service/http.py`; the server's own limits in `remediation/service/server.py`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
from collections.abc import Callable, MutableMapping
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.requests import ClientDisconnect

from remediation.service.server import Limits
from schemas import wire
from schemas.registry import RecordError

MAX_HEADERS = 100
_SAFE_HEADERS = [
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),  # no clickjacking of the confirm button
    (b"referrer-policy", b"no-referrer"),
]


class Reply(Exception):
    """Ends a request with this status and body; `close` ends the connection too (the
    body was not read, or not wholly)."""

    def __init__(self, status: int, body: str | bytes | dict[str, Any],
                 content_type: str = "application/json", close: bool = False) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.content_type = content_type
        self.close = close

    def response(self) -> Response:
        if isinstance(self.body, dict):
            data = json.dumps(self.body, indent=1, sort_keys=True).encode()
        else:
            data = self.body.encode() if isinstance(self.body, str) else self.body
        headers = {"Connection": "close"} if self.close else None
        return Response(data, self.status, headers=headers, media_type=self.content_type)


def error(status: int, message: str, close: bool = False) -> Reply:
    return Reply(status, {"error": message}, close=close)


async def read_body(request: Request, limits: Limits) -> bytes:
    """The whole body, refused (413) as soon as it passes the limit and (408) when it does
    not arrive within the deadline; either way the connection closes after the reply."""
    announced = request.headers.get("content-length")
    if announced is not None and announced.isdigit() and int(announced) > limits.max_body_bytes:
        raise error(413, f"request body over {limits.max_body_bytes} bytes", close=True)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(limits.body_seconds):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limits.max_body_bytes:
                    raise error(413, f"request body over {limits.max_body_bytes} bytes",
                                close=True)
                chunks.append(chunk)
    except TimeoutError:
        raise error(408, "the request did not arrive in time", close=True) from None
    except ClientDisconnect:
        raise error(400, f"the client left after {size} bytes of its body",
                    close=True) from None
    return b"".join(chunks)


def json_body(raw: bytes, limits: Limits) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        body = wire.decode("http-body", raw, limits.max_body_bytes)
    except RecordError as exc:
        raise error(400, f"body: {exc.problem}") from None
    if not isinstance(body, dict):
        raise error(400, "body must be a JSON object, e.g. {\"actor\": \"alice\"}")
    return body


def authorize(api_token: str, request: Request) -> None:
    given = request.headers.get("authorization", "")
    if given.startswith("Bearer "):
        token = given.removeprefix("Bearer ").strip().encode()
    elif given.startswith("Basic "):
        try:
            token = base64.b64decode(given.removeprefix("Basic ").strip(),
                                     validate=True).partition(b":")[2]
        except (ValueError, binascii.Error):
            raise error(400, "malformed basic auth header") from None
    else:
        raise error(401, "missing API token: send 'Authorization: Bearer <api token>' "
                         "([serve] api_token)")
    if not hmac.compare_digest(token, api_token.encode()):
        raise error(403, "wrong API token")


def _framing(scope: dict[str, Any]) -> Reply | None:
    """What h11 takes but this server does not: the connection ends after the reply."""
    if scope["http_version"] not in ("1.0", "1.1"):
        return error(505, f"HTTP/{scope['http_version']} is not spoken here; use HTTP/1.1",
                     close=True)
    if scope["method"] not in ("GET", "POST"):
        return error(501, f"{scope['method']} is not implemented; GET and POST are",
                     close=True)
    headers = scope["headers"]
    if len(headers) > MAX_HEADERS:
        return error(431, f"over {MAX_HEADERS} request headers", close=True)
    names = {name for name, _ in headers}
    if b"transfer-encoding" in names and b"content-length" in names:
        # Where the body ends is ambiguous (the request smuggling pattern).
        return error(400, "both Transfer-Encoding and Content-Length: send one",
                     close=True)
    return None


class Edge:
    """The outermost ASGI layer: framing refusals, the safety headers on every reply, and
    the request counter by route and status."""

    def __init__(self, app: Any, count: Callable[[str, str], None]) -> None:
        self.app = app
        self.count = count

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status: list[int] = []
        announced = dict(scope["headers"]).get(b"content-length", b"0")
        unread = [announced.strip() not in (b"", b"0")]

        async def reading() -> Any:
            message = await receive()
            if message["type"] == "http.disconnect" or not message.get("more_body"):
                unread[0] = False
            return message

        async def guarded(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
                headers = [*message.get("headers", ()), *_SAFE_HEADERS]
                if unread[0] and (b"connection", b"close") not in headers:
                    # A reply before the body was read: the rest of the body would have to
                    # be waited for and thrown away; ending the connection is cheaper.
                    headers.append((b"connection", b"close"))
                message = {**message, "headers": headers}
            await send(message)

        refused = _framing(scope)
        try:
            if refused is not None:
                await refused.response()(scope, reading, guarded)
            else:
                await self.app(scope, reading, guarded)
        except Exception:  # answered 500 by the app's handler already; never the server's
            status = status or [500]
        route = scope.get("state", {}).get("route", "other")
        self.count(route, str(status[0] if status else 500))
