"""The SQLite file under the action store: schema, migrations, one transaction at a time.

One file in WAL mode, shared by the executor and the service, also across processes.
Each change is one `BEGIN IMMEDIATE` transaction, so a state check, its update and its
audit line land together or not at all; a lock makes one object safe between threads.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Self

from core import clock

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


class StoreError(RuntimeError):
    """The store cannot do what was asked; the message says why."""


class Database:
    """The connection, its schema and its transactions; the stores build on it."""

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
