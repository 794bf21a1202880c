"""`selfheal doctor`: a preflight before starting anything. Reaches and authenticates
every endpoint the config names with the settings the processes will use, probes the
ACLs they need (docs/security.md), checks the signing key and the bus topics. One line
per check with what to do; exit 1 when any check fails; --json for automation."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from core.acls import PROCESSES

DESCRIPTION = __doc__.split("\n\n")[0] if __doc__ else ""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("doctor", help="check every connection, credential and ACL "
                              "before starting anything", description=DESCRIPTION)
    p.add_argument("--json", action="store_true", help="one JSON document instead of lines")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="per endpoint (default 10)")
    p.add_argument("--process", choices=PROCESSES, metavar="PROCESS",
                   help="probe only the ACLs this process needs (its principal's config), "
                        "and the exporters only for collect-metrics; "
                        f"one of {', '.join(PROCESSES)}; default: every process's")
    p.set_defaults(func=_doctor)


def run_checks(timeout: float, process: str | None = None) -> Iterator[Any]:
    """Every check, in the order an operator would fix them."""
    from core.config import ConfigError, load
    from core.live import open_admin
    from selfheal import doctor_checks as dc

    try:
        config = load()
    except ConfigError as exc:
        yield dc.Check("config", dc.FAIL, str(exc), "fix the config file or variable named")
        return
    yield dc.Check("config", dc.OK, ", ".join(config.sources) or "defaults")
    yield from dc.password_files(config)
    yield dc.signing_key(config)
    servers = config.cluster.bootstrap_servers
    if servers is None:
        yield dc.Check("cluster", dc.FAIL, "no [cluster] bootstrap_servers",
                       "set it, or start the sandbox")
        return
    reach, meta = dc.kafka_reach("cluster", servers, config.cluster_security,
                                 "[cluster.security]", timeout)
    yield reach
    if meta is not None:
        try:
            with open_admin(servers, client_id="selfheal-doctor",
                            request_timeout_ms=int(timeout * 1000),
                            security=config.cluster_security) as admin:
                yield from dc.acl_probes(admin, sorted(meta.brokers), process)
                yield dc.broker_versions(admin, sorted(meta.brokers))
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            yield dc.Check("admin client", dc.FAIL, f"{type(exc).__name__}: {exc}",
                           "check [cluster.security]; the admin client is kafka-python")
    bus_servers = config.bus.bootstrap_servers
    bus_meta = meta
    if bus_servers and bus_servers != servers:
        bus_reach, bus_meta = dc.kafka_reach("bus", bus_servers, config.bus_security,
                                             "[bus.security]", timeout)
        yield bus_reach
    if bus_meta is not None:
        yield from dc.topics(config, bus_meta)
    zk = dc.zookeeper(config, timeout)
    if zk is not None:
        yield zk
    if process in (None, "collect-metrics"):  # the one process that scrapes them
        yield from dc.exporters(config, timeout)


def _doctor(args: argparse.Namespace) -> int:
    from selfheal.doctor_checks import FAIL, OK

    checks = []
    for check in run_checks(args.timeout, args.process):
        checks.append(check)
        if not args.json:
            mark = {OK: "ok  ", FAIL: "FAIL"}.get(check.status, "warn")
            tail = f" -> {check.fix}" if check.fix and check.status != OK else ""
            print(f"{mark} {check.name}: {check.detail}{tail}", flush=True)
    failed = [c for c in checks if c.status == FAIL]
    if args.json:
        json.dump({"ok": not failed, "checks": [c.as_dict() for c in checks]}, sys.stdout,
                  indent=2)
        print()
    elif failed:
        print(f"{len(failed)} of {len(checks)} checks failed", file=sys.stderr)
    return 1 if failed else 0
