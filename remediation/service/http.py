"""The HTTP side of `selfheal serve` (FastAPI on uvicorn): pages, one-click approval, JSON
API, webhook, metrics, and the OpenAPI description of all of it at /openapi.json.

Routes:

    GET  /                          the actions, open first (HTML)
    GET  /actions/<id>              one action: plan in plain words, alerts, audit (HTML)
    GET  /approve/<token>           the approval page of a one-click link (HTML)
    POST /approve                   its confirm button (form: token, csrf)
    GET  /metrics                   Prometheus text
    GET  /healthz                   {"role": "leader" | "standby", "holder": ...}
    GET  /openapi.json              this API described (OpenAPI 3.1)
    GET  /api/actions[?state=...]   list (bearer token)
    POST /api/actions               a signed action record, onto the actions topic
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

Bodies (Content-Length or chunked) are read as raw bytes with a size limit and a deadline
while they stream in, and decoded by `schemas/wire.py` only: FastAPI never parses a body
itself (`remediation/service/edge.py`, with the framing refusals and the token check).
The server's limits (connections, timeouts, head size) are in
`remediation/service/server.py`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from core.plan import recovery
from remediation.executor.actions import stored_action
from remediation.executor.lifecycle import State
from remediation.executor.store import ActionRow, ActionStore
from remediation.service import metrics, pages, refusals
from remediation.service import openapi as doc
from remediation.service.alerts import AlertPayloadError, parse_webhook, receive, stored_alert
from remediation.service.approvals import Approvals, NotAllowed
from remediation.service.edge import Edge, Reply, authorize, error, json_body, read_body
from remediation.service.links import LinkRefused
from remediation.service.server import Limits, ServiceServer

_ID = re.compile(r"[0-9a-f]{64}")
_ACTOR = re.compile(r"[\w .@+-]{1,100}")
HTML = "text/html; charset=utf-8"


@dataclass
class Service:
    """What the routes need; one per process."""

    store: ActionStore
    approvals: Approvals
    api_token: str
    counters: metrics.Counters
    gauges: Callable[[], dict[str, float]]
    role: Callable[[], tuple[str, str | None]]  # ("leader" | "standby", who leads)
    current: Callable[[], pages.Current | None] = lambda: None  # replicas now, if known
    # POST /api/actions: a signed action record -> (HTTP status, body)
    submit: Callable[[bytes], tuple[int, dict[str, Any]]] | None = None
    throttle: int = recovery.DEFAULT_RATE  # the policy's inter-broker rate, for estimates

    def origin(self) -> str:
        parts = urlsplit(self.approvals.base_url)
        return f"{parts.scheme}://{parts.netloc}"

    def count(self, route: str, code: str) -> None:
        self.counters.inc("selfheal_http_requests_total", route=route, code=code)



def app(service: Service, limits: Limits) -> Edge:
    """The ASGI app of one serve."""
    svc = service
    api = FastAPI(title="selfheal serve", version="1",
                  description="Approve, reject and follow remediation actions of "
                              "kafka-selfheal; the Alertmanager webhook.",
                  docs_url=None, redoc_url=None, openapi_url="/openapi.json")

    def route(request: Request, name: str) -> None:
        request.state.route = name

    async def sync(fn: Callable[..., Any], *args: Any) -> Any:
        return await run_in_threadpool(fn, *args)

    @api.exception_handler(Reply)
    async def _reply(request: Request, exc: Reply) -> Response:
        return exc.response()

    @api.exception_handler(HTTPException)
    async def _no_route(request: Request, exc: HTTPException) -> Response:
        path = request.url.path
        if path.startswith("/api/") or path == "/alertmanager":
            route(request, "api_other")
            try:
                authorize(svc.api_token, request)
            except Reply as refused:
                return refused.response()
            return error(404, "no such API route; see /api/actions").response()
        return error(404, f"no route for {request.method} {path}").response()

    @api.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> Response:
        return error(500, f"internal error: {type(exc).__name__}: {exc}").response()

    html = [(200, doc.HTML, None)]

    @api.get("/", responses=doc.replies(*html), response_class=Response)
    def index(request: Request) -> Response:
        """The actions, open first."""
        route(request, "index")
        role, holder = svc.role()
        return Reply(200, pages.render_index(svc.store.list(), role, holder), HTML).response()

    @api.get("/metrics", responses=doc.replies((200, "text/plain", None)),
             response_class=Response)
    def metrics_page(request: Request) -> Response:
        """Prometheus text format 0.0.4."""
        route(request, "metrics")
        text = metrics.render(svc.store, svc.counters, svc.gauges)
        return Reply(200, text, metrics.CONTENT_TYPE).response()

    @api.get("/healthz", responses=doc.replies((200, doc.JSON, doc.HEALTH)),
             response_class=Response)
    def healthz(request: Request) -> Response:
        """Whether this serve is the active executor, and who is."""
        route(request, "healthz")
        role, holder = svc.role()
        return Reply(200, {"role": role, "holder": holder}).response()

    def row_of(action_id: str) -> ActionRow:
        row = svc.store.get(action_id) if _ID.fullmatch(action_id) else None
        if row is None:
            raise error(404, f"no action {action_id!r}; GET /api/actions lists them")
        return row

    @api.get("/actions/{action_id}", responses=doc.replies(*html, *doc.refusals(404)),
             response_class=Response)
    def action_page(request: Request, action_id: str) -> Response:
        """One action: the plan in plain words, its alerts and audit."""
        route(request, "action_page")
        row = row_of(action_id)
        alerts = [stored_alert(a) for a in svc.store.alerts(row.id)]
        page = pages.render_action(row, svc.store.audit(row.id), alerts, svc.current(),
                                   svc.throttle)
        return Reply(200, page, HTML).response()

    def refusal(exc: LinkRefused) -> Reply:
        status = 410 if exc.reason.value in ("expired", "already used") else 403
        return Reply(status, pages.render_refusal(exc.reason.value, str(exc)), HTML)

    refused_pages = [(403, doc.HTML, None), (410, doc.HTML, None)]

    @api.get("/approve/{token}", responses=doc.replies(*html, *refused_pages),
             response_class=Response)
    def approval_page(request: Request, token: str) -> Response:
        """The page a one-click link opens; a GET never spends the link."""
        route(request, "approve_page")
        try:
            claims, row = svc.approvals.check_link(token)
        except LinkRefused as exc:
            return refusal(exc).response()
        alerts = [stored_alert(a) for a in svc.store.alerts(row.id) if a.status == "firing"]
        page = pages.render_approval(
            stored_action(row.record), form_action="/approve",
            csrf_token=svc.approvals.signer.csrf_token(claims.nonce), link_token=token,
            current=svc.current(), alert=alerts[-1] if alerts else None,
            reasons=row.journal.get("decision", {}).get("reasons", ()),
            expires_at=claims.expires_at, throttle=svc.throttle)
        return Reply(200, page, HTML).response()

    def confirm(raw: bytes) -> Reply:
        form = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", errors="replace"),
                                             keep_blank_values=True).items()}
        try:
            row = svc.approvals.approve_by_link(form.get("token", ""), form.get("csrf", ""))
        except LinkRefused as exc:
            return refusal(exc)
        except NotAllowed as exc:
            return Reply(409, pages.render_refusal("not possible", str(exc)), HTML)
        done = ("resolved" if row.state is State.SUCCEEDED else
                "approved; the executor starts it within seconds")
        return Reply(200, pages.render_done(row, done), HTML)

    @api.post("/approve", openapi_extra=doc.form_body(doc.CONFIRM_FORM),
              responses=doc.replies(*html, *refused_pages, (409, doc.HTML, None),
                                    *doc.refusals(400, 408, 413)),
              response_class=Response)
    async def approve_post(request: Request) -> Response:
        """The approval page's confirm button: spends the link, approves the action."""
        route(request, "approve_post")
        origin = request.headers.get("origin")
        if request.headers.get("sec-fetch-site") == "cross-site" or (
                origin and origin != "null" and origin != svc.origin()):
            return Reply(403, pages.render_refusal(
                "cross-site", "the confirm button must be pressed on the approval page "
                "itself"), HTML, close=True).response()
        raw = await read_body(request, limits)
        return (await sync(confirm, raw)).response()

    api_refusals = doc.refusals(400, 401, 403)

    async def webhook(request: Request) -> Response:
        """Alertmanager's webhook (payload version 4): alerts linked to their fixes."""
        route(request, "api_webhook")
        authorize(svc.api_token, request)
        raw = await read_body(request, limits)

        def take() -> Reply:
            try:
                hook = parse_webhook(raw)
            except AlertPayloadError as exc:
                return error(400, str(exc))
            got = receive(svc.store, hook)
            return Reply(200, {"alerts": [
                {"fingerprint": r.alert.fingerprint, "status": r.alert.status, "new": r.new,
                 "action_id": r.action_id} for r in got]})

        return (await sync(take)).response()

    for path in ("/alertmanager", "/api/alertmanager"):
        api.post(path, openapi_extra=doc.json_body(doc.WEBHOOK),
                 responses=doc.replies((200, doc.JSON, doc.WEBHOOK_REPLY),
                                       *doc.refusals(400, 401, 403, 408, 413)),
                 response_class=Response, name=f"webhook{path.replace('/', '_')}",
                 )(webhook)

    @api.get("/api/actions", responses=doc.replies((200, doc.JSON, doc.LIST), *api_refusals),
             response_class=Response)
    def list_actions(request: Request, state: str | None = None) -> Response:
        """The actions, open first; `state` keeps those in one state."""
        route(request, "api_list")
        authorize(svc.api_token, request)
        if state is not None and state not in {s.value for s in State}:
            raise error(400, f"unknown state {state!r}; known: "
                             + ", ".join(s.value for s in State))
        return Reply(200, {"actions": [_summary(r) for r in svc.store.list(state=state)]}
                     ).response()

    @api.post("/api/actions", openapi_extra=doc.json_body(doc.ACTION_RECORD),
              responses=doc.replies((202, doc.JSON, doc.SUBMITTED),
                                    *doc.refusals(400, 401, 403, 404, 408, 413, 503)),
              response_class=Response)
    async def submit(request: Request) -> Response:
        """A signed action record onto the actions topic; the intake takes it from there
        (policy, approval, limits and the breaker all apply)."""
        route(request, "api_submit")
        authorize(svc.api_token, request)
        if svc.submit is None:
            raise error(404, "this server takes no actions by HTTP")
        raw = await read_body(request, limits)
        status, reply = await sync(svc.submit, raw)
        return Reply(status, reply).response()

    @api.get("/api/actions/{action_id}",
             responses=doc.replies((200, doc.JSON, {"oneOf": [doc.DETAIL, refusals.SCHEMA]}),
                                   *api_refusals, *doc.refusals(404)),
             response_class=Response)
    def show(request: Request, action_id: str) -> Response:
        """One action with its audit, alerts and, while it waits, a fresh approval link;
        a record refused under this id (never an action): `refused` and why."""
        route(request, "api_show")
        authorize(svc.api_token, request)
        refused = (None if not _ID.fullmatch(action_id) or svc.store.get(action_id)
                   else refusals.shown(svc.store, action_id))
        if refused is not None:
            return Reply(200, refused).response()
        return Reply(200, _show(svc, row_of(action_id))).response()

    decisions: dict[str, Callable[[str, str, str | None], ActionRow]] = {
        "approve": svc.approvals.approve, "reject": svc.approvals.reject,
        "cancel": svc.approvals.cancel}

    def decision(verb: str) -> Callable[[Request, str], Awaitable[Response]]:
        async def decide(request: Request, action_id: str) -> Response:
            route(request, "api_" + verb)
            authorize(svc.api_token, request)
            row = await sync(row_of, action_id)
            body = json_body(await read_body(request, limits), limits)
            actor = body.get("actor") or request.headers.get("x-selfheal-actor") or "api"
            if not isinstance(actor, str) or not _ACTOR.fullmatch(actor):
                raise error(400, "actor must be 1-100 letters, digits, spaces or . @ + - _")
            reason = body.get("reason")
            if reason is not None and not isinstance(reason, str):
                raise error(400, "reason must be a string")
            try:
                done = await sync(decisions[verb], row.id, actor, reason)
            except NotAllowed as exc:
                raise error(exc.status, str(exc)) from None
            return Reply(200, _show(svc, done)).response()

        decide.__doc__ = {"approve": "Approve an action awaiting approval (a page: resolve it).",
                          "reject": "Reject an action awaiting approval.",
                          "cancel": "Cancel an action, or ask the executor to revert it "
                                    "while it runs."}[verb]
        return decide

    for verb in decisions:
        api.post(f"/api/actions/{{action_id}}/{verb}",
                 openapi_extra=doc.json_body(doc.DECISION, required=False),
                 responses=doc.replies((200, doc.JSON, doc.DETAIL), *api_refusals,
                                       *doc.refusals(404, 408, 409, 413)),
                 response_class=Response, name=f"{verb}_action")(decision(verb))

    plain_openapi = api.openapi

    def described() -> dict[str, Any]:
        if api.openapi_schema is None:
            api.openapi_schema = doc.secure(plain_openapi())
        return api.openapi_schema

    api.openapi = described  # type: ignore[method-assign]
    return Edge(api, svc.count)


def _summary(row: ActionRow) -> dict[str, Any]:
    return {"id": row.id, "cluster": row.cluster, "type": row.type, "state": row.state.value,
            "created_at": row.created_at, "updated_at": row.updated_at,
            "attempts": row.attempts, "reason": row.record.get("reason"),
            "progress": row.journal.get("progress")}


def _show(svc: Service, row: ActionRow) -> dict[str, Any]:
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


def start(host: str, port: int, service: Service, limits: Limits | None = None
          ) -> tuple[ServiceServer, None]:
    """Bind (port 0: a free one) and serve on a thread of this process; returns the
    server (`url`, `shutdown()`, `server_close()`)."""
    limits = limits or Limits()
    server = ServiceServer(app(service, limits), host, port, limits, service.count)
    return server, None
