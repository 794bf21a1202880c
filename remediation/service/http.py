"""The HTTP side of `selfheal serve`: web pages, one-click approval, JSON API, webhook, metrics.

Routes:

    GET  /                          the actions, open first (HTML)
    GET  /actions/<id>              one action: plan in plain words, alerts, audit (HTML)
    GET  /approve/<token>           the approval page of a one-click link (HTML)
    POST /approve                   its confirm button (form: token, csrf)
    GET  /metrics                   Prometheus text
    GET  /healthz                   {"role": "leader" | "standby", "holder": ...}
    GET  /api/actions[?state=...]   list (bearer token)
    GET  /api/actions/<id>          show, with audit, alerts and a fresh approval link
    POST /api/actions/<id>/approve | reject | cancel   {"actor": "...", "reason": "..."}
    POST /alertmanager              Alertmanager webhook, payload version 4 (also at
                                    /api/alertmanager)

Everything under /api and the webhook need the API token: as a bearer token, or as the
password of HTTP basic auth, which is what Alertmanager sends for a webhook URL with the
token in it (http://selfheal:<token>@host:port/alertmanager), or with
`http_config: {authorization: {credentials: <token>}}`.

The pages are read-only; nothing changes without the link's token (approval page) or the
API token. The confirm POST carries a CSRF token bound to the link, and a cross-site
POST (Origin or Sec-Fetch-Site saying so) is refused before anything is read.

Abuse: requests are read whole by one selector thread before a handler thread sees them
(remediation/service/guard.py: deadlines, 408, 431, 503 when too busy), so slow clients
and floods of connections hold no handler; malformed framing (a bad request line,
headers over MAX_HEADER_BYTES, a Content-Length that is not one number or that the body
never reaches, a chunked body) is answered 4xx and the connection closed.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from remediation.executor.actions import stored_action
from remediation.executor.lifecycle import State
from remediation.executor.store import ActionRow, ActionStore
from remediation.service import metrics, pages
from remediation.service.alerts import AlertPayloadError, parse_webhook, receive, stored_alert
from remediation.service.approvals import Approvals, NotAllowed
from remediation.service.guard import MAX_BODY, MAX_OPEN, GuardedServer, WholeRequestMixin
from remediation.service.links import LinkRefused
from schemas import wire
from schemas.registry import RecordError

MAX_HEADER_BYTES = 64 << 10
_ID = re.compile(r"[0-9a-f]{64}")
_ACTOR = re.compile(r"[\w .@+-]{1,100}")
HTML = "text/html; charset=utf-8"


@dataclass
class Service:
    """What the handler needs; one per process, shared by the handler threads."""

    store: ActionStore
    approvals: Approvals
    api_token: str
    counters: metrics.Counters
    gauges: Callable[[], dict[str, float]]
    role: Callable[[], tuple[str, str | None]]  # ("leader" | "standby", who leads)
    current: Callable[[], pages.Current | None] = lambda: None  # replicas now, if known
    # POST /api/actions: a signed action record -> (HTTP status, body)
    submit: Callable[[bytes], tuple[int, dict[str, Any]]] | None = None

    def origin(self) -> str:
        parts = urlsplit(self.approvals.base_url)
        return f"{parts.scheme}://{parts.netloc}"


class _Reply(Exception):
    """Ends a request with this status and body."""

    def __init__(self, status: int, body: str | bytes | dict[str, Any],
                 content_type: str = "application/json") -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.content_type = content_type


def _error(status: int, message: str) -> _Reply:
    return _Reply(status, {"error": message})


class Handler(WholeRequestMixin, BaseHTTPRequestHandler):
    server: ServiceServer
    protocol_version = "HTTP/1.1"
    server_version = "selfheal"
    # A request line without a version is not answered the HTTP/0.9 way (a bare body):
    # every refusal carries a status line a client can read.
    default_request_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # /metrics counts requests; access logs would repeat link tokens

    # --- plumbing -----------------------------------------------------------------------

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        # http.server's own refusals (bad request line, headers too long or too many,
        # a version it cannot speak): the framing is broken, so is the connection.
        self.close_connection = True
        super().send_error(code, message, explain)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        path = urlsplit(self.path).path
        route = "other"
        try:
            self._framing()
            route, reply = self._route(method, path)
            raise reply
        except _Reply as r:
            self._send(r)
            self.server.service.counters.inc("selfheal_http_requests_total", route=route,
                                             code=str(r.status))
        except Exception as exc:  # a bug must not kill the thread or leak a traceback
            self._send(_error(500, f"internal error: {type(exc).__name__}: {exc}"))
            self.server.service.counters.inc("selfheal_http_requests_total", route=route,
                                             code="500")

    def _framing(self) -> None:
        """Refuse what this server does not frame: the connection ends after the reply."""
        size = sum(len(k) + len(v) + 4 for k, v in self.headers.items())
        if size > MAX_HEADER_BYTES:
            self.close_connection = True
            raise _error(431, f"request headers over {MAX_HEADER_BYTES} bytes")
        lengths = set(self.headers.get_all("Content-Length") or ())
        if len(lengths) > 1:
            self.close_connection = True
            raise _error(400, "more than one Content-Length")
        if lengths and not next(iter(lengths)).strip().isdigit():
            self.close_connection = True  # where the body ends is unknown
            raise _error(400, "Content-Length is not a number of bytes")
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise _error(501 if not lengths else 400,
                         "Transfer-Encoding is not accepted: send the body with a "
                         "Content-Length")

    def _send(self, r: _Reply) -> None:
        if isinstance(r.body, dict):
            data = json.dumps(r.body, indent=1, sort_keys=True).encode()
        else:
            data = r.body.encode() if isinstance(r.body, str) else r.body
        self.send_response(r.status)
        self.send_header("Content-Type", r.content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")  # no clickjacking of the confirm button
        self.send_header("Referrer-Policy", "no-referrer")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True  # where the body ends is unknown
            raise _error(400, "Content-Length is not a number") from None
        if length < 0:
            self.close_connection = True
            raise _error(400, f"Content-Length is negative ({length})")
        if length > MAX_BODY:
            self.close_connection = True  # the body stays unread: this connection is done
            raise _error(413, f"request body over {MAX_BODY} bytes")
        if length == 0:
            return b""
        data = self.rfile.read(length)  # read whole before this thread got it
        if len(data) < length:  # the client closed its side early
            self.close_connection = True
            raise _error(400, f"the body ended after {len(data)} of the {length} bytes "
                              "its Content-Length announced")
        return bytes(data)

    def _json(self) -> dict[str, Any]:
        raw = self._body()
        if not raw:
            return {}
        try:
            body = wire.decode("http-body", raw, MAX_BODY)
        except RecordError as exc:
            raise _error(400, f"body: {exc.problem}") from None
        if not isinstance(body, dict):
            raise _error(400, "body must be a JSON object, e.g. {\"actor\": \"alice\"}")
        return body

    def _auth(self) -> None:
        given = self.headers.get("Authorization", "")
        if given.startswith("Bearer "):
            token = given.removeprefix("Bearer ").strip().encode()
        elif given.startswith("Basic "):
            try:
                token = base64.b64decode(given.removeprefix("Basic ").strip(),
                                         validate=True).partition(b":")[2]
            except (ValueError, binascii.Error):
                raise _error(400, "malformed basic auth header") from None
        else:
            raise _error(401, "missing API token: send 'Authorization: Bearer <api token>' "
                              "([serve] api_token)")
        if not hmac.compare_digest(token, self.server.service.api_token.encode()):
            raise _error(403, "wrong API token")

    # --- routes -------------------------------------------------------------------------

    def _route(self, method: str, path: str) -> tuple[str, _Reply]:
        svc = self.server.service
        parts = [p for p in path.split("/") if p]
        if method == "GET" and not parts:
            role, holder = svc.role()
            return "index", _Reply(200, pages.render_index(svc.store.list(), role, holder), HTML)
        if method == "GET" and parts == ["metrics"]:
            return "metrics", _Reply(200, metrics.render(svc.store, svc.counters, svc.gauges),
                                     metrics.CONTENT_TYPE)
        if method == "GET" and parts == ["healthz"]:
            role, holder = svc.role()
            return "healthz", _Reply(200, {"role": role, "holder": holder})
        if method == "GET" and len(parts) == 2 and parts[0] == "actions":
            return "action_page", self._action_page(parts[1])
        if parts and parts[0] == "approve":
            if method == "GET" and len(parts) == 2:
                return "approve_page", self._approval_page(parts[1])
            if method == "POST" and len(parts) == 1:
                return "approve_post", self._approve_post()
        if parts[:1] == ["api"] or parts == ["alertmanager"]:
            self._auth()
            return self._api(method, parts[1:] if parts[0] == "api" else parts)
        return "other", _error(404, f"no route for {method} {path}")

    def _row(self, action_id: str) -> ActionRow:
        row = self.server.service.store.get(action_id) if _ID.fullmatch(action_id) else None
        if row is None:
            raise _error(404, f"no action {action_id!r}; GET /api/actions lists them")
        return row

    def _action_page(self, action_id: str) -> _Reply:
        svc = self.server.service
        row = self._row(action_id)
        alerts = [stored_alert(a) for a in svc.store.alerts(row.id)]
        return _Reply(200, pages.render_action(row, svc.store.audit(row.id), alerts,
                                               svc.current()), HTML)

    def _refusal(self, exc: LinkRefused) -> _Reply:
        status = 410 if exc.reason.value in ("expired", "already used") else 403
        return _Reply(status, pages.render_refusal(exc.reason.value, str(exc)), HTML)

    def _approval_page(self, token: str) -> _Reply:
        svc = self.server.service
        try:
            claims, row = svc.approvals.check_link(token)
        except LinkRefused as exc:
            return self._refusal(exc)
        alerts = [stored_alert(a) for a in svc.store.alerts(row.id) if a.status == "firing"]
        page = pages.render_approval(
            stored_action(row.record), form_action="/approve",
            csrf_token=svc.approvals.signer.csrf_token(claims.nonce), link_token=token,
            current=svc.current(), alert=alerts[-1] if alerts else None,
            reasons=row.journal.get("decision", {}).get("reasons", ()),
            expires_at=claims.expires_at)
        return _Reply(200, page, HTML)

    def _approve_post(self) -> _Reply:
        svc = self.server.service
        origin = self.headers.get("Origin")
        if self.headers.get("Sec-Fetch-Site") == "cross-site" or (
                origin and origin != "null" and origin != svc.origin()):
            return _Reply(403, pages.render_refusal(
                "cross-site", "the confirm button must be pressed on the approval page "
                "itself"), HTML)
        raw = self._body().decode("utf-8", errors="replace")
        form = {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}
        try:
            row = svc.approvals.approve_by_link(form.get("token", ""), form.get("csrf", ""))
        except LinkRefused as exc:
            return self._refusal(exc)
        except NotAllowed as exc:
            return _Reply(409, pages.render_refusal("not possible", str(exc)), HTML)
        done = ("resolved" if row.state is State.SUCCEEDED else
                "approved; the executor starts it within seconds")
        return _Reply(200, pages.render_done(row, done), HTML)

    def _api(self, method: str, parts: list[str]) -> tuple[str, _Reply]:
        svc = self.server.service
        if method == "POST" and parts == ["alertmanager"]:
            try:
                hook = parse_webhook(self._body())
            except AlertPayloadError as exc:
                return "api_webhook", _error(400, str(exc))
            got = receive(svc.store, hook)
            return "api_webhook", _Reply(200, {"alerts": [
                {"fingerprint": r.alert.fingerprint, "status": r.alert.status, "new": r.new,
                 "action_id": r.action_id} for r in got]})
        if parts[:1] != ["actions"]:
            return "api_other", _error(404, "no such API route; see /api/actions")
        if method == "GET" and len(parts) == 1:
            query = parse_qs(urlsplit(self.path).query)
            state = query.get("state", [None])[0]
            if state is not None and state not in {s.value for s in State}:
                return "api_list", _error(400, f"unknown state {state!r}; known: "
                                               + ", ".join(s.value for s in State))
            return "api_list", _Reply(200, {"actions": [
                _summary(r) for r in svc.store.list(state=state)]})
        if method == "POST" and len(parts) == 1:
            if svc.submit is None:
                return "api_submit", _error(404, "this server takes no actions by HTTP")
            status, reply = svc.submit(self._body())
            return "api_submit", _Reply(status, reply)
        if method == "GET" and len(parts) == 2:
            return "api_show", _Reply(200, self._show(self._row(parts[1])))
        if method == "POST" and len(parts) == 3 and parts[2] in ("approve", "reject", "cancel"):
            row = self._row(parts[1])
            body = self._json()
            actor = body.get("actor") or self.headers.get("X-Selfheal-Actor") or "api"
            if not isinstance(actor, str) or not _ACTOR.fullmatch(actor):
                return "api_" + parts[2], _error(400, "actor must be 1-100 letters, digits, "
                                                      "spaces or . @ + - _")
            reason = body.get("reason")
            if reason is not None and not isinstance(reason, str):
                return "api_" + parts[2], _error(400, "reason must be a string")
            do = {"approve": svc.approvals.approve, "reject": svc.approvals.reject,
                  "cancel": svc.approvals.cancel}[parts[2]]
            try:
                done = do(row.id, actor, reason)
            except NotAllowed as exc:
                return "api_" + parts[2], _error(exc.status, str(exc))
            return "api_" + parts[2], _Reply(200, self._show(done))
        return "api_other", _error(404, "no such API route; see /api/actions")

    def _show(self, row: ActionRow) -> dict[str, Any]:
        svc = self.server.service
        out = _summary(row)
        out.update(
            record=row.record, journal=row.journal, error=row.error,
            cancel_request=row.cancel_request,
            audit=[{"at": a.at, "from": a.from_state, "to": a.to_state, "actor": a.actor,
                    "reason": a.reason} for a in svc.store.audit(row.id)],
            alerts=[{"fingerprint": a.fingerprint, "status": a.status, "labels": a.labels,
                     "received_at": a.received_at} for a in svc.store.alerts(row.id)],
        )
        if row.state is State.AWAITING_APPROVAL:
            out["approval_url"] = svc.approvals.link(row).url
        return out


def _summary(row: ActionRow) -> dict[str, Any]:
    return {"id": row.id, "cluster": row.cluster, "type": row.type, "state": row.state.value,
            "created_at": row.created_at, "updated_at": row.updated_at,
            "attempts": row.attempts, "reason": row.record.get("reason"),
            "progress": row.journal.get("progress")}


class ServiceServer(GuardedServer):
    def __init__(self, address: tuple[str, int], service: Service,
                 max_open: int = MAX_OPEN) -> None:
        self.service = service
        super().__init__(address, Handler, self._count, max_open)

    def _count(self, route: str, code: str) -> None:
        self.service.counters.inc("selfheal_http_requests_total", route=route, code=code)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else host
        return f"http://{name}:{port}"


def start(host: str, port: int, service: Service) -> tuple[ServiceServer, threading.Thread]:
    """Bind (port 0: a free one) and serve on a thread; returns the server and the thread."""
    server = ServiceServer((host, port), service)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                              name="http", daemon=True)
    thread.start()
    return server, thread

