"""The OpenAPI description of serve's HTTP side: the shapes of bodies and replies.

FastAPI writes the document from the routes; the routes read raw bytes (the one bounded
decoder, `schemas/wire.py`, parses them), so the bodies and replies are described here
rather than by models FastAPI would parse with.
"""

from __future__ import annotations

from typing import Any

from remediation.executor.lifecycle import State

JSON = "application/json"
HTML = "text/html"

ERROR: dict[str, Any] = {
    "type": "object", "required": ["error"],
    "properties": {"error": {"type": "string", "description": "what is wrong and what to do"}},
}
_TIME = {"type": "string", "description": "UTC, ISO 8601"}
SUMMARY: dict[str, Any] = {
    "type": "object",
    "required": ["id", "cluster", "type", "state", "created_at", "updated_at", "attempts"],
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "cluster": {"type": "string"},
        "type": {"type": "string"},
        "state": {"type": "string", "enum": [s.value for s in State]},
        "created_at": _TIME, "updated_at": _TIME,
        "attempts": {"type": "integer", "minimum": 0},
        "reason": {"type": ["string", "null"]},
        "progress": {},
    },
}
DETAIL: dict[str, Any] = {
    "allOf": [SUMMARY, {
        "type": "object",
        "required": ["record", "journal", "audit", "alerts"],
        "properties": {
            "record": {"type": "object", "description": "the action record as signed"},
            "journal": {"type": "object"},
            "error": {"type": ["string", "null"]},
            "cancel_request": {"type": ["object", "null"]},
            "audit": {"type": "array", "items": {
                "type": "object", "required": ["at", "from", "to", "actor", "reason"],
                "properties": {"at": _TIME, "from": {"type": ["string", "null"]},
                               "to": {"type": "string"}, "actor": {"type": "string"},
                               "reason": {"type": ["string", "null"]}}}},
            "alerts": {"type": "array", "items": {
                "type": "object",
                "required": ["fingerprint", "status", "labels", "received_at"],
                "properties": {"fingerprint": {"type": "string"},
                               "status": {"type": "string", "enum": ["firing", "resolved"]},
                               "labels": {"type": "object",
                                          "additionalProperties": {"type": "string"}},
                               "received_at": _TIME}}},
            "approval_url": {"type": "string",
                             "description": "a fresh one-click link, while it awaits approval"},
        },
    }],
}
LIST: dict[str, Any] = {"type": "object", "required": ["actions"],
                        "properties": {"actions": {"type": "array", "items": SUMMARY}}}
HEALTH: dict[str, Any] = {
    "type": "object", "required": ["role", "holder"],
    "properties": {"role": {"type": "string", "enum": ["leader", "standby"]},
                   "holder": {"type": ["string", "null"]}},
}
WEBHOOK_REPLY: dict[str, Any] = {
    "type": "object", "required": ["alerts"],
    "properties": {"alerts": {"type": "array", "items": {
        "type": "object", "required": ["fingerprint", "status", "new", "action_id"],
        "properties": {"fingerprint": {"type": "string"}, "status": {"type": "string"},
                       "new": {"type": "boolean"},
                       "action_id": {"type": ["string", "null"]}}}}},
}
SUBMITTED: dict[str, Any] = {
    "type": "object", "required": ["action_id", "type", "url", "note"],
    "properties": {"action_id": {"type": "string"}, "type": {"type": "string"},
                   "url": {"type": "string"}, "note": {"type": "string"}},
}
DECISION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "actor": {"type": "string", "pattern": r"^[\w .@+-]{1,100}$",
                  "description": "who decides (default: X-Selfheal-Actor, else 'api')"},
        "reason": {"type": "string"},
    },
}
CONFIRM_FORM: dict[str, Any] = {
    "type": "object", "required": ["token", "csrf"],
    "properties": {"token": {"type": "string", "description": "the link's token"},
                   "csrf": {"type": "string", "description": "the approval page's field"}},
}
WEBHOOK: dict[str, Any] = {
    "type": "object", "required": ["version", "groupKey", "status", "alerts"],
    "description": "Alertmanager's webhook payload, version 4",
    "properties": {"version": {"type": "string", "enum": ["4"]},
                   "groupKey": {"type": "string"},
                   "receiver": {"type": "string"},
                   "status": {"type": "string", "enum": ["firing", "resolved"]},
                   "alerts": {"type": "array", "items": {
                       "type": "object",
                       "required": ["status", "labels", "annotations", "startsAt",
                                    "fingerprint"],
                       "properties": {
                           "status": {"type": "string", "enum": ["firing", "resolved"]},
                           "labels": {"type": "object",
                                      "additionalProperties": {"type": "string"}},
                           "annotations": {"type": "object",
                                           "additionalProperties": {"type": "string"}},
                           "startsAt": {"type": "string", "format": "date-time"},
                           "endsAt": {"type": "string", "format": "date-time"},
                           "fingerprint": {"type": "string", "minLength": 1}}}}},
}
ACTION_RECORD: dict[str, Any] = {
    "type": "object", "description": "a signed record of schemas/action.schema.json"}


def json_body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"requestBody": {"required": required, "content": {JSON: {"schema": schema}}}}


def form_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {
        "application/x-www-form-urlencoded": {"schema": schema}}}}


def replies(*pairs: tuple[int, str, dict[str, Any] | None]) -> dict[int | str, Any]:
    """FastAPI `responses=` from (status, media type, schema) triples."""
    out: dict[int | str, Any] = {}
    for status, media, schema in pairs:
        content = {media: {"schema": schema if schema is not None else {"type": "string"}}}
        out[status] = {"description": _DESCRIPTIONS.get(status, "see the body"),
                       "content": content}
    return out


def refusals(*statuses: int) -> list[tuple[int, str, dict[str, Any] | None]]:
    return [(s, JSON, ERROR) for s in statuses]


_DESCRIPTIONS = {
    200: "done", 202: "accepted", 400: "malformed: the body says what is wrong",
    401: "no API token", 403: "refused: wrong token, forged or foreign link, cross-site",
    404: "no such action or route", 408: "the body did not arrive in time",
    409: "not possible in the action's state", 410: "the link expired or was used",
    413: "the body is over the size limit", 503: "the bus did not take it; try again",
}

SECURITY = {
    "token": {"type": "http", "scheme": "bearer",
              "description": "[serve] api_token (printed by serve when it made one)"},
    "basic": {"type": "http", "scheme": "basic",
              "description": "any user, the API token as password (Alertmanager's way)"},
}


def secure(document: dict[str, Any]) -> dict[str, Any]:
    """Mark /api/* and the webhook as needing the API token."""
    document.setdefault("components", {})["securitySchemes"] = SECURITY
    for path, operations in document.get("paths", {}).items():
        if path.startswith("/api/") or path == "/alertmanager":
            for operation in operations.values():
                operation["security"] = [{"token": []}, {"basic": []}]
    return document
