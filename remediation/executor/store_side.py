"""What `serve` keeps beside actions, in the same file: used approval links, received
alerts, outbox cursors (how far the audit has been published) and generated settings
(a link secret or API token when none is configured), and pages with their outbox
(`store_pager.py`), so a restarted or standby `serve` picks up where the last one stopped."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from remediation.executor.store_db import StoreError
from remediation.executor.store_pager import PagerTables


class LinkAlreadyUsed(StoreError):
    """A single-use approval link was presented a second time."""


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


class ServiceTables(PagerTables):
    """Links, alerts, cursors and settings (and pages, `store_pager.py`)."""

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


def _alert_row(r: sqlite3.Row) -> AlertRow:
    return AlertRow(r["fingerprint"], r["group_key"], r["status"], json.loads(r["labels"]),
                    r["received_at"], r["action_id"], json.loads(r["annotations"]),
                    r["starts_at"])
