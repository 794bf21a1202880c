"""What `serve` keeps about pages, in the store's file: one row per paged alert, and the
outbox of messages to the pagers.

A message is written to the outbox in the same transaction as the page's change, before
anything is sent, and leaves it only when a pager acknowledged it (or refused it for
good): a serve that dies or restarts mid-retry sends the rest when it is back. Each
delivery attempt is an audit line in the same transaction as its outcome. Several serves
may share the file: a message is claimed for a short lease before it is sent, so two
serves never send it at once.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from core import clock
from remediation.executor.store_db import Database

PAGE_AUDIT = "page"  # audit to_state of a pager line about an alert with no action
_SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    fingerprint TEXT PRIMARY KEY,
    group_key TEXT NOT NULL,
    name TEXT NOT NULL,
    action_id TEXT,
    link TEXT NOT NULL,
    state TEXT NOT NULL,
    opened_at TEXT NOT NULL,
    resolved_at TEXT
);
CREATE TABLE IF NOT EXISTS page_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    fingerprint TEXT NOT NULL,
    channel TEXT NOT NULL,
    event TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at TEXT NOT NULL,
    next_at TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    claimed_until TEXT,
    done_at TEXT,
    outcome TEXT,
    last_error TEXT
);
CREATE INDEX IF NOT EXISTS page_outbox_due ON page_outbox(done_at, next_at);
"""


@dataclass(frozen=True, slots=True)
class PageRow:
    """A paged alert: what it links to (`link`: approve, follow or none) and whether the
    page is open or resolved."""

    fingerprint: str
    group_key: str
    name: str
    action_id: str | None
    link: str
    state: str
    opened_at: str
    resolved_at: str | None


@dataclass(frozen=True, slots=True)
class Message:
    """One message to one pager, as the outbox holds it."""

    id: int
    fingerprint: str
    channel: str
    event: str
    payload: Mapping[str, Any]
    created_at: str
    attempts: int
    done_at: str | None
    outcome: str | None
    last_error: str | None


class PagerTables(Database):
    """Pages and their outbox."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        with self._tx() as db:
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    db.execute(stmt)

    def _pager_audit(self, db: sqlite3.Connection, action_id: str | None, reason: str) -> None:
        """A note on the action's audit (no state change), or a page line of its own."""
        state = None
        if action_id is not None:
            row = db.execute("SELECT state FROM actions WHERE id = ?", (action_id,)).fetchone()
            state = None if row is None else row[0]
        if state is None:
            action_id, before, after = None, None, PAGE_AUDIT
        else:
            before = after = state
        db.execute("INSERT INTO audit (action_id, at, from_state, to_state, actor, reason)"
                   " VALUES (?, ?, ?, ?, 'pager', ?)",
                   (action_id, self._now_text(), before, after, reason))

    # --- pages ------------------------------------------------------------------------

    def open_page(self, fingerprint: str, group_key: str, name: str, action_id: str | None,
                  link: str, messages: Mapping[str, Mapping[str, Any]], reason: str) -> bool:
        """Open the page of an alert and queue its first messages ({channel: payload}),
        all in one transaction; False (nothing queued) if the alert has a page already."""
        with self._tx() as db:
            now = self._now_text()
            cur = db.execute(
                "INSERT OR IGNORE INTO pages (fingerprint, group_key, name, action_id, link,"
                " state, opened_at) VALUES (?, ?, ?, ?, ?, 'open', ?)",
                (fingerprint, group_key, name, action_id, link, now))
            if cur.rowcount != 1:
                return False
            self._queue(db, fingerprint, "trigger", messages, now)
            self._pager_audit(db, action_id, reason)
            return True

    def relink_page(self, fingerprint: str, action_id: str, link: str,
                    messages: Mapping[str, Mapping[str, Any]], reason: str) -> bool:
        """An open page now links to `action_id` (`link` kind): queue the update."""
        with self._tx() as db:
            cur = db.execute(
                "UPDATE pages SET action_id = ?, link = ? WHERE fingerprint = ? AND"
                " state = 'open' AND (action_id IS NOT ? OR link != ?)",
                (action_id, link, fingerprint, action_id, link))
            if cur.rowcount != 1:
                return False
            self._queue(db, fingerprint, "trigger", messages, self._now_text())
            self._pager_audit(db, action_id, reason)
            return True

    def resolve_page(self, fingerprint: str, messages: Mapping[str, Mapping[str, Any]],
                     reason: str) -> bool:
        """Close an open page and queue its resolve messages; False if it was not open."""
        with self._tx() as db:
            now = self._now_text()
            row = db.execute("SELECT action_id FROM pages WHERE fingerprint = ? AND"
                             " state = 'open'", (fingerprint,)).fetchone()
            if row is None:
                return False
            db.execute("UPDATE pages SET state = 'resolved', resolved_at = ? WHERE"
                       " fingerprint = ?", (now, fingerprint))
            self._queue(db, fingerprint, "resolve", messages, now)
            self._pager_audit(db, row[0], reason)
            return True

    def page(self, fingerprint: str) -> PageRow | None:
        with self._lock:
            r = self._db.execute("SELECT * FROM pages WHERE fingerprint = ?",
                                 (fingerprint,)).fetchone()
        return None if r is None else _page_row(r)

    def pages(self, state: str | None = None) -> tuple[PageRow, ...]:
        sql, args = "SELECT * FROM pages", []
        if state is not None:
            sql, args = sql + " WHERE state = ?", [state]
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY opened_at", args).fetchall()
        return tuple(_page_row(r) for r in rows)

    def unpaged_firing(self) -> tuple[sqlite3.Row, ...]:
        """Firing alert rows whose alert has no page yet and has not resolved already
        (oldest first)."""
        with self._lock:
            return tuple(self._db.execute(
                "SELECT * FROM alerts WHERE status = 'firing' AND fingerprint NOT IN"
                " (SELECT fingerprint FROM pages) AND fingerprint NOT IN (SELECT fingerprint"
                " FROM alerts WHERE status = 'resolved') ORDER BY received_at").fetchall())

    def alert_resolved(self, fingerprint: str) -> bool:
        with self._lock:
            return self._db.execute(
                "SELECT 1 FROM alerts WHERE fingerprint = ? AND status = 'resolved'",
                (fingerprint,)).fetchone() is not None

    # --- the outbox -------------------------------------------------------------------

    def _queue(self, db: sqlite3.Connection, fingerprint: str, event: str,
               messages: Mapping[str, Mapping[str, Any]], now: str) -> None:
        for channel, payload in messages.items():
            db.execute(
                "INSERT INTO page_outbox (fingerprint, channel, event, payload, created_at,"
                " next_at) VALUES (?, ?, ?, ?, ?, ?)",
                (fingerprint, channel, event, json.dumps(payload, sort_keys=True), now, now))

    def claim_due(self, lease_seconds: float, limit: int = 20) -> tuple[Message, ...]:
        """Due, unclaimed messages, claimed for `lease_seconds`: for each (page, channel)
        only its oldest undelivered message, so a resolve never overtakes its trigger."""
        now = self._clock()
        text = clock.text(now)
        with self._tx() as db:
            rows = db.execute(
                "SELECT * FROM page_outbox o WHERE done_at IS NULL AND next_at <= ? AND"
                " (claimed_until IS NULL OR claimed_until <= ?) AND id = (SELECT min(id)"
                " FROM page_outbox e WHERE e.fingerprint = o.fingerprint AND"
                " e.channel = o.channel AND e.done_at IS NULL) ORDER BY id LIMIT ?",
                (text, text, limit)).fetchall()
            until = clock.text(now + timedelta(seconds=lease_seconds))
            for r in rows:
                db.execute("UPDATE page_outbox SET claimed_until = ? WHERE id = ?",
                           (until, r["id"]))
        return tuple(_message(r) for r in rows)

    def delivery_attempted(self, message_id: int, *, delivered: bool, refused: bool,
                           error: str | None, retry_at: datetime | None, reason: str) -> None:
        """Record one attempt and its audit line together: delivered, refused for good,
        or to be tried again at `retry_at`."""
        with self._tx() as db:
            r = db.execute("SELECT p.action_id FROM page_outbox o LEFT JOIN pages p ON"
                           " p.fingerprint = o.fingerprint WHERE o.id = ?",
                           (message_id,)).fetchone()
            now = self._now_text()
            if delivered or refused:
                db.execute("UPDATE page_outbox SET attempts = attempts + 1, done_at = ?,"
                           " outcome = ?, last_error = ?, claimed_until = NULL WHERE id = ?",
                           (now, "delivered" if delivered else "refused", error, message_id))
            else:
                assert retry_at is not None
                db.execute("UPDATE page_outbox SET attempts = attempts + 1, next_at = ?,"
                           " last_error = ?, claimed_until = NULL WHERE id = ?",
                           (clock.text(retry_at), error, message_id))
            self._pager_audit(db, None if r is None else r[0], reason)

    def messages(self, fingerprint: str | None = None) -> tuple[Message, ...]:
        sql, args = "SELECT * FROM page_outbox", []
        if fingerprint is not None:
            sql, args = sql + " WHERE fingerprint = ?", [fingerprint]
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY id", args).fetchall()
        return tuple(_message(r) for r in rows)


def _page_row(r: sqlite3.Row) -> PageRow:
    return PageRow(r["fingerprint"], r["group_key"], r["name"], r["action_id"], r["link"],
                   r["state"], r["opened_at"], r["resolved_at"])


def _message(r: sqlite3.Row) -> Message:
    return Message(r["id"], r["fingerprint"], r["channel"], r["event"], json.loads(r["payload"]),
                   r["created_at"], r["attempts"], r["done_at"], r["outcome"], r["last_error"])
