"""The durable action store: every action, every state change, every rejected record.

Actions and their audit, each action's execution journal (what the executor started,
the configs it must restore) and an operator's pending cancel. The SQLite file and its
transactions are `store_db.Database`; what `serve` keeps beside actions in the same file
(used links, alerts, outbox cursors, settings) is `store_side.ServiceTables`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from core import clock
from remediation.executor import lifecycle
from remediation.executor.actions import ActionError, parse_action_json
from remediation.executor.lifecycle import State
from remediation.executor.store_db import StoreError
from remediation.executor.store_side import ServiceTables
from schemas.records import Action

REJECTED = "rejected"  # audit to_state of a record that never became an action
DUPLICATE = "duplicate proposal ignored"


class UnknownAction(StoreError, KeyError):
    def __init__(self, action_id: str) -> None:
        super().__init__(f"no action {action_id!r} in the store; list actions to find its id")
        self.action_id = action_id

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0])


@dataclass(frozen=True, slots=True)
class ActionRow:
    id: str
    cluster: str
    type: str
    state: State
    record: Mapping[str, Any]
    created_at: str
    updated_at: str
    attempts: int
    error: str | None
    journal: Mapping[str, Any] = field(default_factory=dict)
    cancel_request: Mapping[str, str] | None = None

    @property
    def open(self) -> bool:
        return self.state not in lifecycle.TERMINAL


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: int
    action_id: str | None
    at: str
    from_state: str | None
    to_state: str
    actor: str
    reason: str
    raw: str | None
    source: str | None = None
    cluster: str | None = None  # the action's cluster, where the audit line has an action

    @property
    def is_change(self) -> bool:
        """A state change (not a note, a duplicate or a rejected input)."""
        return self.to_state != REJECTED and self.from_state != self.to_state


@dataclass(frozen=True, slots=True)
class Proposed:
    row: ActionRow
    duplicate: bool


class ActionStore(ServiceTables):
    """Actions, audit, used approval links and received alerts in one SQLite file."""

    def _audit(self, db: sqlite3.Connection, action_id: str | None, from_state: str | None,
               to_state: str, actor: str, reason: str, raw: str | None = None,
               source: str | None = None) -> None:
        db.execute(
            "INSERT INTO audit (action_id, at, from_state, to_state, actor, reason, raw, source)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (action_id, self._now_text(), from_state, to_state, actor, reason, raw, source),
        )

    @staticmethod
    def _row(db: sqlite3.Connection, action_id: str) -> sqlite3.Row:
        row = db.execute("SELECT * FROM actions WHERE id = ?", (action_id,)).fetchone()
        if row is None:
            raise UnknownAction(action_id)
        return row

    # --- writes -----------------------------------------------------------------------

    def propose(self, action: Action, actor: str = "executor",
                source: str | None = None) -> Proposed:
        """Store a new action in `proposed`; a known id returns the stored row unchanged.

        A known id in a terminal state is for the caller to `reopen` once the live
        cluster shows the action applies again; the store alone cannot tell.
        """
        with self._tx() as db:
            row = db.execute("SELECT * FROM actions WHERE id = ?",
                             (action.action_id,)).fetchone()
            if row is not None:
                # Same id, other content: a planner bug or a hash collision; keep the first
                # (it may already be running) but say so in the audit.
                differs = row["record"] != _record_text(action)
                self._audit(db, action.action_id, row["state"], row["state"], actor,
                            DUPLICATE + (" (record differs from the stored one)" if differs
                                         else ""), source=source)
                return Proposed(_action_row(row), duplicate=True)
            now = self._now_text()
            db.execute(
                "INSERT INTO actions (id, cluster, type, state, record, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (action.action_id, action.cluster_id, action.type, State.PROPOSED.value,
                 _record_text(action), clock.text(clock.parse(action.created_at)), now),
            )
            self._audit(db, action.action_id, None, State.PROPOSED.value, actor,
                        action.reason or "proposed", source=source)
            new = db.execute("SELECT * FROM actions WHERE id = ?", (action.action_id,)).fetchone()
            return Proposed(_action_row(new), duplicate=False)

    def ingest(self, raw: str | bytes, actor: str = "executor",
               source: str | None = None) -> Proposed | None:
        """Parse one record from the actions topic and propose it; reject it if malformed."""
        try:
            action = parse_action_json(raw)
        except ActionError as exc:
            self.reject(raw, f"malformed action record: {exc}", actor, source=source)
            return None
        return self.propose(action, actor, source=source)

    def reject(self, raw: str | bytes, reason: str, actor: str = "executor",
               action_id: str | None = None, source: str | None = None) -> AuditEntry:
        """Record a refused input with its raw text, so nothing is lost silently."""
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        with self._tx() as db:
            self._audit(db, action_id, None, REJECTED, actor, reason, raw=text, source=source)
            last = db.execute("SELECT * FROM audit WHERE id = last_insert_rowid()").fetchone()
            return _audit_entry(last)

    def transition(self, action_id: str, target: str | State, actor: str, reason: str,
                   expect: frozenset[State] | None = None) -> ActionRow:
        """Move an action to `target` if the lifecycle allows it, with one audit line.

        With `expect`, the action must also be in one of those states now: an operator's
        approval applies only to an action that waits for one.
        """
        with self._tx() as db:
            row = self._row(db, action_id)
            if expect is not None and row["state"] not in expect:
                wanted = " or ".join(sorted(s.value for s in expect))
                raise lifecycle.IllegalTransition(
                    row["state"], str(target), row["type"],
                    f"action {action_id[:12]} is {row['state']}, not {wanted}; nothing changed")
            new = lifecycle.transition(row["state"], target, row["type"])
            attempts = row["attempts"] + (1 if new is State.EXECUTING else 0)
            error = reason if new is State.FAILED else row["error"]
            db.execute(
                "UPDATE actions SET state = ?, updated_at = ?, attempts = ?, error = ?"
                " WHERE id = ?",
                (new.value, self._now_text(), attempts, error, action_id),
            )
            self._audit(db, action_id, row["state"], new.value, actor, reason)
            return _action_row(self._row(db, action_id))

    def reopen(self, action: Action, actor: str, reason: str,
               source: str | None = None) -> ActionRow:
        """A finished action detected again: back to `proposed` as a new attempt.

        The new record replaces the stored one (its reason and trigger are the current
        detection's), the journal and error of the last attempt are cleared; the audit
        keeps them. Refused for open and cancelled actions (`lifecycle.reopen_refusal`).
        """
        with self._tx() as db:
            row = self._row(db, action.action_id)
            refusal = lifecycle.reopen_refusal(row["state"])
            if refusal is not None:
                raise lifecycle.IllegalTransition(
                    row["state"], State.PROPOSED.value, row["type"],
                    f"action {action.action_id[:12]} is not re-opened: {refusal}")
            db.execute(
                "UPDATE actions SET state = ?, record = ?, updated_at = ?, error = NULL,"
                " journal = '{}', cancel_request = NULL WHERE id = ?",
                (State.PROPOSED.value, _record_text(action), self._now_text(), action.action_id))
            self._audit(db, action.action_id, row["state"], State.PROPOSED.value, actor,
                        reason, source=source)
            return _action_row(self._row(db, action.action_id))

    def note(self, action_id: str, actor: str, reason: str) -> None:
        """An audit line that changes no state: what the executor did to the cluster."""
        with self._tx() as db:
            row = self._row(db, action_id)
            self._audit(db, action_id, row["state"], row["state"], actor, reason)

    def update_journal(self, action_id: str, **changes: Any) -> dict[str, Any]:
        """Merge `changes` into the action's execution journal; returns the new journal.

        Written before each step against the cluster, so a restarted executor knows what
        was started and which configs to restore.
        """
        with self._tx() as db:
            row = self._row(db, action_id)
            journal = {**json.loads(row["journal"]), **changes}
            db.execute("UPDATE actions SET journal = ? WHERE id = ?",
                       (json.dumps(journal, sort_keys=True), action_id))
            return journal

    def request_cancel(self, action_id: str, actor: str, reason: str) -> ActionRow:
        """Cancel: at once if nothing runs yet; while executing, ask the executor to revert.

        A verifying or finished action cannot be cancelled: its data has moved.
        """
        with self._tx() as db:
            row = self._row(db, action_id)
            state = State(row["state"])
            if state is State.EXECUTING:
                if row["cancel_request"] is None:
                    db.execute("UPDATE actions SET cancel_request = ? WHERE id = ?",
                               (json.dumps({"actor": actor, "reason": reason}), action_id))
                    self._audit(db, action_id, state.value, state.value, actor,
                                f"cancel requested: {reason}; the executor reverts the "
                                "reassignment in flight")
                return _action_row(self._row(db, action_id))
            if state is State.VERIFYING:
                raise lifecycle.IllegalTransition(
                    state.value, State.CANCELLED.value, row["type"],
                    f"action {action_id[:12]} is verifying: the data has moved already, "
                    "there is nothing left to cancel; wait for the verification")
        return self.transition(action_id, State.CANCELLED, actor, reason)

    def expire_overdue(self, ttl_seconds: float, actor: str = "executor") -> tuple[str, ...]:
        """Expire actions that have waited for approval longer than `ttl_seconds`."""
        cutoff = clock.text(self._clock() - timedelta(seconds=ttl_seconds))
        with self._lock:
            ids = [r["id"] for r in self._db.execute(
                "SELECT id FROM actions WHERE state = ? AND updated_at < ?",
                (State.AWAITING_APPROVAL.value, cutoff))]
        expired: list[str] = []
        for action_id in ids:
            try:
                self.transition(action_id, State.EXPIRED, actor,
                                f"no approval within {ttl_seconds:g} s")
            except lifecycle.IllegalTransition:
                continue  # approved or cancelled meanwhile, or a page (pages never expire)
            expired.append(action_id)
        return tuple(expired)

    # --- reads ------------------------------------------------------------------------

    def audit_since(self, audit_id: int, limit: int = 500) -> tuple[AuditEntry, ...]:
        """Audit lines after `audit_id`, oldest first, with their action's cluster."""
        with self._lock:
            rows = self._db.execute(
                "SELECT audit.*, actions.cluster AS cluster FROM audit LEFT JOIN actions"
                " ON actions.id = audit.action_id WHERE audit.id > ? ORDER BY audit.id LIMIT ?",
                (audit_id, limit)).fetchall()
        return tuple(_audit_entry(r) for r in rows)

    def moved_bytes_since(self, since: datetime) -> int:
        """Bytes of the actions that started executing since `since` (the hourly limit)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT actions.record FROM audit JOIN actions ON actions.id = audit.action_id"
                " WHERE audit.to_state = ? AND audit.from_state != ? AND audit.at >= ?",
                (State.EXECUTING.value, State.EXECUTING.value, clock.text(since))).fetchall()
        return sum(int(json.loads(r[0])["summary"]["bytes"]) for r in rows)

    def counts(self) -> dict[str, int]:
        """Actions per state (every state listed, zero included)."""
        with self._lock:
            found = dict(self._db.execute(
                "SELECT state, count(*) FROM actions GROUP BY state").fetchall())
        return {s.value: int(found.get(s.value, 0)) for s in State}

    def rejected_count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM audit WHERE to_state = ?",
                                        (REJECTED,)).fetchone()[0])

    def get(self, action_id: str) -> ActionRow | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM actions WHERE id = ?", (action_id,)).fetchone()
        return None if row is None else _action_row(row)

    def list(self, state: str | State | None = None,
             cluster: str | None = None) -> tuple[ActionRow, ...]:
        """Actions, oldest first, optionally only those in `state` and/or of `cluster`."""
        sql, args = "SELECT * FROM actions WHERE 1=1", []
        if state is not None:
            sql += " AND state = ?"
            args.append(State(state).value)
        if cluster is not None:
            sql += " AND cluster = ?"
            args.append(cluster)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY created_at, id", args).fetchall()
        return tuple(_action_row(r) for r in rows)

    def in_flight(self) -> tuple[ActionRow, ...]:
        """Approved, executing or verifying: what the executor must resume after a restart."""
        marks = ",".join("?" * len(lifecycle.IN_FLIGHT))
        with self._lock:
            rows = self._db.execute(
                f"SELECT * FROM actions WHERE state IN ({marks}) ORDER BY created_at, id",
                [s.value for s in lifecycle.IN_FLIGHT]).fetchall()
        return tuple(_action_row(r) for r in rows)

    def with_throttles_left(self) -> tuple[ActionRow, ...]:
        """Actions whose throttle on a broker that was down at their end is still to be put
        back (the journal's `throttles_left`)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM actions WHERE json_extract(journal, '$.throttles_left') = 1 "
                "ORDER BY created_at, id").fetchall()
        return tuple(_action_row(r) for r in rows)

    def open_actions(self) -> tuple[ActionRow, ...]:
        """Every action not yet in a terminal state."""
        marks = ",".join("?" * len(lifecycle.TERMINAL))
        with self._lock:
            rows = self._db.execute(
                f"SELECT * FROM actions WHERE state NOT IN ({marks}) ORDER BY created_at, id",
                [s.value for s in lifecycle.TERMINAL]).fetchall()
        return tuple(_action_row(r) for r in rows)

    def audit(self, action_id: str) -> tuple[AuditEntry, ...]:
        """Every audit line of one action, in order."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM audit WHERE action_id = ? ORDER BY id",
                                    (action_id,)).fetchall()
        return tuple(_audit_entry(r) for r in rows)

    def refusals(self, action_id: str) -> tuple[AuditEntry, ...]:
        """The refused records that carried this action id, oldest first: what
        GET /api/actions/<id> shows when no action was ever stored under it."""
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM audit WHERE action_id = ? AND to_state = ? ORDER BY id",
                (action_id, REJECTED)).fetchall()
        return tuple(_audit_entry(r) for r in rows)

    def rejected(self) -> tuple[AuditEntry, ...]:
        """Every rejected input, with its raw text."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM audit WHERE to_state = ? ORDER BY id",
                                    (REJECTED,)).fetchall()
        return tuple(_audit_entry(r) for r in rows)

def _record_text(action: Action) -> str:
    """How the store keeps an action's record: its wire JSON, keys sorted."""
    return json.dumps(action.to_dict(), sort_keys=True, separators=(",", ":"))


def _action_row(r: sqlite3.Row) -> ActionRow:
    cancel = r["cancel_request"]
    return ActionRow(r["id"], r["cluster"], r["type"], State(r["state"]), json.loads(r["record"]),
                     r["created_at"], r["updated_at"], r["attempts"], r["error"],
                     json.loads(r["journal"]), None if cancel is None else json.loads(cancel))


def _audit_entry(r: sqlite3.Row) -> AuditEntry:
    keys = r.keys()
    return AuditEntry(r["id"], r["action_id"], r["at"], r["from_state"], r["to_state"],
                      r["actor"], r["reason"], r["raw"], r["source"],
                      r["cluster"] if "cluster" in keys else None)

