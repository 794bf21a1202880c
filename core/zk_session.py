"""The one way the product opens a ZooKeeper session (the ZooKeeper collector, serve's
executor lock, `selfheal doctor`): a KazooClient with [cluster.zookeeper_security]'s
settings, started and its SASL login proven.

Why not kazoo alone: kazoo reports the session CONNECTED before its SASL login, and when
ZooKeeper refuses the login (a wrong password: ZooKeeper answers
SESSIONCLOSEDREQUIRESASLAUTH and closes the connection) kazoo's connection thread logs it
as an "Unhandled exception in connection loop" traceback and dies of it; the caller only
sees ConnectionLoss or a request that never returns. Here the client logs to a logger of
its own that notes the refusal (other records go on to the `kazoo` logger as before), the
thread's death is not printed, and `start` says it in one line.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from core.security import ZooKeeperSecurity, kazoo_settings

LOGIN_HINT = "check [cluster.zookeeper_security] username and password_file"


class ZooKeeperLoginRefused(Exception):
    """ZooKeeper refused the SASL login of [cluster.zookeeper_security]'s user."""


class _LoginWatch(logging.Handler):
    """kazoo's log for one client: notes a refused login, passes the rest on."""

    def __init__(self, sasl: bool, user: str | None) -> None:
        super().__init__(logging.DEBUG)
        self.sasl = sasl  # without a login, nothing can refuse it
        self.user = user
        self.refused = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        from kazoo.exceptions import (  # type: ignore[import-untyped]
            AuthFailedError,
            SessionClosedRequireSaslError,
        )

        exc = record.exc_info[1] if record.exc_info else None
        if self.sasl and (isinstance(exc, SessionClosedRequireSaslError | AuthFailedError)
                          or str(record.msg).startswith("AUTH_FAILED")):
            self.refused.set()
            return
        shared = logging.getLogger("kazoo")
        if shared.isEnabledFor(record.levelno):
            shared.handle(record)


def _quiet_refused_threads() -> None:
    """Leave kazoo's connection thread to die of a refused login without a traceback
    (the refusal is said by `start`); any other thread's exception prints as before."""
    from kazoo.exceptions import SessionClosedRequireSaslError

    previous = threading.excepthook
    if getattr(previous, "_selfheal_zk", False):
        return

    def hook(args: Any) -> None:
        if not (isinstance(args.exc_value, SessionClosedRequireSaslError)
                and args.thread is not None and args.thread.name.endswith("(zk_loop)")):
            previous(args)

    hook._selfheal_zk = True  # type: ignore[attr-defined]
    threading.excepthook = hook


def zk_client(hosts: str, security: ZooKeeperSecurity | None = None, **options: Any) -> Any:
    """A KazooClient for ``hosts`` with ``security``'s settings (SecurityError when they
    are wrong), logging through its own `_LoginWatch`; ``options`` go to KazooClient."""
    from kazoo.client import KazooClient  # type: ignore[import-untyped]

    security = security or ZooKeeperSecurity()
    settings = kazoo_settings(security)
    # unregistered: one per client, gone with it; as verbose as `kazoo` is, and at
    # least WARNING (the refusal)
    logger = logging.Logger("kazoo", min(logging.WARNING,
                                         logging.getLogger("kazoo").getEffectiveLevel()))
    logger.addHandler(_LoginWatch(security.sasl_mechanism is not None, security.username))
    _quiet_refused_threads()
    return KazooClient(hosts=hosts, logger=logger, **settings, **options)


def _watch(client: Any) -> _LoginWatch | None:
    return next((h for h in getattr(client.logger, "handlers", ())
                 if isinstance(h, _LoginWatch)), None)


def login_refused(client: Any) -> bool:
    """Whether ZooKeeper refused ``client``'s SASL login."""
    watch = _watch(client)
    return watch is not None and watch.refused.is_set()


def _close(client: Any) -> None:
    try:
        client.stop()
        client.close()
    except Exception:  # noqa: BLE001 - already stopped by kazoo, or half started
        pass


def start(client: Any, hosts: str, timeout: float) -> None:
    """Start ``client``'s session and prove it with a first read: ZooKeeperLoginRefused
    (the client closed) when the SASL login is refused; kazoo's own errors otherwise."""
    try:
        client.start(timeout=timeout)  # CONNECTED comes before the login
        probe = client.exists_async("/")
        deadline = time.monotonic() + timeout
        # a read queued as the login fails is dropped by kazoo: watch for the refusal
        while not probe.wait(0.1) and not login_refused(client) \
                and time.monotonic() < deadline:
            pass
        if not login_refused(client):
            probe.get(timeout=0)
            return
    except Exception:
        if not login_refused(client):
            _close(client)  # a session up but unproven must not go on reconnecting
            raise
    _close(client)
    watch = _watch(client)
    user = f" of {watch.user!r}" if watch is not None and watch.user else ""
    raise ZooKeeperLoginRefused(f"ZooKeeper at {hosts} refused the SASL login{user}: "
                                f"{LOGIN_HINT}")
