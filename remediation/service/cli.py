"""`selfheal serve`: the action intake, the executor, the HTTP API and pages, /metrics."""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

DESCRIPTION = """\
Run the service: take in proposed actions from selfheal.actions, decide by policy (run by
itself, or wait for a one-click approval), execute them safely on the cluster, and serve
the approval pages, the JSON API, the Alertmanager webhook and /metrics.

Several serves may run against one store: one holds the executor lock and acts, the others
wait as standbys (they still serve HTTP) and take over when it dies.
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("serve", help="run the executor and the approval service",
                              description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", help="selfheal TOML config (default $SELFHEAL_CONFIG)")
    p.add_argument("--policy", help="executor policy TOML (default: the config's policy, "
                                    "else the built-in defaults)")
    p.add_argument("--host", help="address to bind (default [serve] http_host, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default [serve] http_port; 0 picks a free "
                                            "one and prints the URL)")
    p.add_argument("--sqlite", help="action store file (default [serve] sqlite_path)")
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    import dataclasses
    from pathlib import Path

    from core.config import ConfigError, load
    from core.errors import CliError
    from core.signing import signer
    from remediation.executor.lock import LockError
    from remediation.executor.policy import PolicyError, policy_for
    from remediation.service.serve import Serve, say

    try:
        config = load(args.config)
        policy = policy_for(config.policy, args.policy)
    except (ConfigError, PolicyError) as exc:
        raise CliError(str(exc)) from None
    if args.sqlite:
        config = dataclasses.replace(config, serve=dataclasses.replace(
            config.serve, sqlite_path=Path(args.sqlite).expanduser()))
    if args.port is not None and not 0 <= args.port <= 65535:
        raise CliError(f"--port must be 0-65535 (0 picks a free one), got {args.port}")
    from core.owner import cluster_name, keyed_store
    try:
        config.require_bootstrap_servers()
        signer(config)
        cluster = cluster_name(config)  # the store is this cluster's (core/owner.py)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    config = dataclasses.replace(config, serve=dataclasses.replace(
        config.serve, sqlite_path=keyed_store(config, cluster)))
    host = args.host or config.serve.http_host
    port = config.serve.http_port if args.port is None else args.port
    try:
        serve = Serve(config, policy, host, port, cluster=cluster)
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}; pick another "
                       "--port (0 picks a free one)") from None
    except ConfigError as exc:  # the store belongs to another cluster
        raise CliError(str(exc)) from None
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    say(f"listening on {serve.url} (store {config.serve.sqlite_path})")
    try:
        serve.run(stop)
    except LockError as exc:
        raise CliError(str(exc)) from None
    finally:
        serve.close()
    say("stopped")
    return 0
