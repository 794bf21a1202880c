"""A refused record, shown under its action id where it was asked.

A record serve refuses (bad signature, a broker the cluster does not have, a premise
gone) never becomes an action; its reason sits in the audit with the record's id. So a
caller polling GET /api/actions/<id> (the Airflow DAGs, a script that POSTed it, an
operator following a job's proposal) sees `refused` and why, not 404 forever.
"""

from __future__ import annotations

from typing import Any

from remediation.executor.store import ActionStore

REFUSED = "refused"  # the state a refused record shows; never an action's state

_TIME = {"type": "string", "description": "UTC, ISO 8601"}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "state", "reason", "refused_at", "audit"],
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "state": {"type": "string", "enum": [REFUSED]},
        "reason": {"type": "string", "description": "why serve refused the latest record"},
        "refused_at": _TIME,
        "actor": {"type": "string"},
        "source": {"type": ["string", "null"],
                   "description": "where the record was read (topic/partition@offset)"},
        "audit": {"type": "array", "items": {
            "type": "object", "required": ["at", "from", "to", "actor", "reason"],
            "properties": {"at": _TIME, "from": {"type": ["string", "null"]},
                           "to": {"type": "string"}, "actor": {"type": "string"},
                           "reason": {"type": ["string", "null"]}}}},
    },
}


def shown(store: ActionStore, action_id: str) -> dict[str, Any] | None:
    """The refusal body for an id no action was stored under; None if none was refused."""
    entries = store.refusals(action_id)
    if not entries:
        return None
    last = entries[-1]
    return {"id": action_id, "state": REFUSED, "reason": last.reason, "refused_at": last.at,
            "actor": last.actor, "source": last.source,
            "audit": [{"at": a.at, "from": a.from_state, "to": a.to_state, "actor": a.actor,
                       "reason": a.reason} for a in entries]}
