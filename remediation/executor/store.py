"""The durable action store: every action, every state change, every rejected record.

One SQLite file (WAL mode) shared by the executor and the service. Each change is one
`BEGIN IMMEDIATE` transaction, so the state check, the update and the audit line land
together or not at all, also across processes; a lock makes one store object safe to
share between threads.

Besides actions and their audit, it keeps each action's execution journal (what the
executor started, the configs it must restore), an operator's pending cancel, outbox
cursors (how far the audit has been published to Kafka) and generated settings (the
link secret when none is configured), so a restarted or standby `serve` picks up
exactly where the last one stopped.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Self

from core import clock
from remediation.executor import lifecycle
from remediation.executor.actions import Action, ActionError, parse_action_json
from remediation.executor.lifecycle import State

SCHEMA_VERSION = 2
_SCHEMA = """
CREATE TABLE IF NOT EXISTS actions (
    id TEXT PRIMARY KEY,
    cluster TEXT NOT NULL,
    type TEXT NOT NULL,
    state TEXT NOT NULL,
    record TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    journal TEXT NOT NULL DEFAULT '{}',
    cancel_request TEXT
);
CREATE INDEX IF NOT EXISTS actions_state ON actions(state);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    action_id TEXT,
    at TEXT NOT NULL,
    from_state TEXT,
    to_state TEXT NOT NULL,
    actor TEXT NOT NULL,
    reason TEXT NOT NULL,
    raw TEXT,
    source TEXT
);
CREATE INDEX IF NOT EXISTS audit_action ON audit(action_id);
CREATE TABLE IF NOT EXISTS cursors (
    name TEXT PRIMARY KEY,
    audit_id INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS used_links (
    nonce TEXT PRIMARY KEY,
    action_id TEXT NOT NULL,
    used_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS alerts (
    fingerprint TEXT NOT NULL,
    group_key TEXT NOT NULL,
    status TEXT NOT NULL,
    labels TEXT NOT NULL,
    received_at TEXT NOT NULL,
    action_id TEXT,
    annotations TEXT NOT NULL DEFAULT '{}',
    starts_at TEXT,
    PRIMARY KEY (group_key, fingerprint, status)
);
"""
# Columns added after schema 1, added to an older file when it is opened.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: ("ALTER TABLE actions ADD COLUMN journal TEXT NOT NULL DEFAULT '{}'",
        "ALTER TABLE actions ADD COLUMN cancel_request TEXT",
        "ALTER TABLE audit ADD COLUMN source TEXT",
        "ALTER TABLE alerts ADD COLUMN annotations TEXT NOT NULL DEFAULT '{}'",
        "ALTER TABLE alerts ADD COLUMN starts_at TEXT"),
}
REJECTED = "rejected"  # audit to_state of a record that never became an action
DUPLICATE = "duplicate proposal ignored"


class StoreError(RuntimeError):
    """The store cannot do what was asked; the message says why."""


class UnknownAction(StoreError, KeyError):
    def __init__(self, action_id: str) -> None:
        super().__init__(f"no action {action_id!r} in the store; list actions to find its id")
        self.action_id = action_id

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0])


class LinkAlreadyUsed(StoreError):
    """A single-use approval link was presented a second time."""


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


@dataclass(frozen=True, slots=True)
class AlertRow:
    fingerprint: str
    group_key: str
    status: str
    labels: Mapping[str, str]
    received_at: str
    action_id: str | None
    annotations: Mapping[str, str] = field(default_factory=dict)
    starts_at: str | None = None




class ActionStore:
    """Actions, audit, used approval links and received alerts in one SQLite file."""

    def __init__(self, path: str | Path, clock: Callable[[], datetime] = clock.now) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.RLock()
        # autocommit mode: transactions are opened explicitly with BEGIN IMMEDIATE.
        self._db = sqlite3.connect(str(self.path), isolation_level=None,
                                   check_same_thread=False, timeout=10.0)
        self._db.row_factory = sqlite3.Row
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            found = self._db.execute("PRAGMA user_version").fetchone()[0]
            if found > SCHEMA_VERSION:
                self._db.close()
                raise StoreError(
                    f"{self.path} has store schema {found}, this code knows {SCHEMA_VERSION}; "
                    "upgrade kafka-selfheal before opening it"
                )
            with self._tx():
                if found:  # an older file: add what later schemas added to its tables
                    for version in range(found + 1, SCHEMA_VERSION + 1):
                        for stmt in _MIGRATIONS.get(version, ()):
                            self._db.execute(stmt)
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        self._db.execute(stmt)
                self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    # --- plumbing ---------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _now_text(self) -> str:
        return clock.text(self._clock())

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
                differs = row["record"] != action.to_json()
                self._audit(db, action.action_id, row["state"], row["state"], actor,
                            DUPLICATE + (" (record differs from the stored one)" if differs
                                         else ""), source=source)
                return Proposed(_action_row(row), duplicate=True)
            now = self._now_text()
            db.execute(
                "INSERT INTO actions (id, cluster, type, state, record, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (action.action_id, action.cluster_id, action.type, State.PROPOSED.value,
                 action.to_json(), clock.text(action.created_at), now),
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
                (State.PROPOSED.value, action.to_json(), self._now_text(), action.action_id))
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

    def consume_link(self, nonce: str, action_id: str) -> None:
        """Mark an approval link's nonce used; raise LinkAlreadyUsed the second time."""
        with self._tx() as db:
            try:
                db.execute("INSERT INTO used_links (nonce, action_id, used_at) VALUES (?, ?, ?)",
                           (nonce, action_id, self._now_text()))
            except sqlite3.IntegrityError:
                raise LinkAlreadyUsed(
                    f"approval link {nonce[:8]}... for action {action_id[:12]} was already used;"
                    " open the action page for its current state"
                ) from None

    def record_alert(self, group_key: str, fingerprint: str, status: str,
                     labels: Mapping[str, str], annotations: Mapping[str, str] | None = None,
                     starts_at: str | None = None) -> bool:
        """Remember an alert notification; False if (group, fingerprint, status) was seen."""
        with self._tx() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO alerts (fingerprint, group_key, status, labels,"
                " received_at, annotations, starts_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (fingerprint, group_key, status, json.dumps(dict(labels), sort_keys=True),
                 self._now_text(), json.dumps(dict(annotations or {}), sort_keys=True),
                 starts_at),
            )
            return cur.rowcount == 1

    def set_alert_action(self, group_key: str, fingerprint: str, status: str,
                         action_id: str) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE alerts SET action_id = ? WHERE group_key = ? AND fingerprint = ?"
                " AND status = ?", (action_id, group_key, fingerprint, status))

    def cursor(self, name: str) -> int:
        """How far the outbox `name` has published the audit (0: nothing yet)."""
        with self._lock:
            row = self._db.execute("SELECT audit_id FROM cursors WHERE name = ?",
                                   (name,)).fetchone()
        return 0 if row is None else int(row[0])

    def advance_cursor(self, name: str, audit_id: int) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO cursors (name, audit_id) VALUES (?, ?) ON CONFLICT(name)"
                       " DO UPDATE SET audit_id = max(audit_id, excluded.audit_id)",
                       (name, audit_id))

    def setting(self, key: str, make: Callable[[], str]) -> str:
        """A stored setting; the first caller's `make()` value wins, also across processes."""
        with self._tx() as db:
            row = db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
            if row is not None:
                return str(row[0])
            value = make()
            db.execute("INSERT INTO settings (key, value) VALUES (?, ?)", (key, value))
            return value

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

    def rejected(self) -> tuple[AuditEntry, ...]:
        """Every rejected input, with its raw text."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM audit WHERE to_state = ? ORDER BY id",
                                    (REJECTED,)).fetchall()
        return tuple(_audit_entry(r) for r in rows)

    def link_used(self, nonce: str) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM used_links WHERE nonce = ?",
                                    (nonce,)).fetchone() is not None

    def alert(self, group_key: str, fingerprint: str, status: str) -> AlertRow | None:
        with self._lock:
            r = self._db.execute(
                "SELECT * FROM alerts WHERE group_key = ? AND fingerprint = ? AND status = ?",
                (group_key, fingerprint, status)).fetchone()
        return None if r is None else _alert_row(r)

    def alerts(self, action_id: str | None = None) -> tuple[AlertRow, ...]:
        sql, args = "SELECT * FROM alerts", []
        if action_id is not None:
            sql, args = sql + " WHERE action_id = ?", [action_id]
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY received_at", args).fetchall()
        return tuple(_alert_row(r) for r in rows)


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


def _alert_row(r: sqlite3.Row) -> AlertRow:
    return AlertRow(r["fingerprint"], r["group_key"], r["status"], json.loads(r["labels"]),
                    r["received_at"], r["action_id"], json.loads(r["annotations"]),
                    r["starts_at"])
