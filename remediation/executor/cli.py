"""`selfheal execute`: run one action record in the foreground, without the service.

For an operator or a scheduled job (Airflow) with a plan in hand: the same checks, policy,
throttles, journal and audit as `selfheal serve`, in the same store, under the same lock
(so it never runs beside a serve), printing each step as it happens.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

DESCRIPTION = """\
Execute one action record (the JSON of selfheal.actions; '-' reads stdin) against the
configured cluster and wait until it ends. The record is checked like any other (schema,
id, brokers and dirs the cluster has), the live cluster is re-read before every step, and
the policy decides: an action that needs approval is refused unless --approve is given.

Exit status: 0 succeeded, or superseded (the cluster no longer needs it); 1 failed,
cancelled or expired; 2 refused (bad record or plan, or another executor holds the lock);
3 needs approval.
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("execute", help="run one action record in the foreground",
                              description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("record", help="action record JSON file, or - for stdin")
    p.add_argument("--approve", action="store_true",
                   help="approve it if the policy asks for approval (you are the human)")
    p.add_argument("--actor", default="cli", help="who approves, for the audit (default cli)")
    p.add_argument("--config", help="selfheal TOML config (default $SELFHEAL_CONFIG)")
    p.add_argument("--policy", help="executor policy TOML (default: the config's policy)")
    p.add_argument("--lock-wait", type=float, default=10.0, metavar="SECONDS",
                   help="how long to wait for the executor lock (default 10)")
    p.set_defaults(func=_execute)


def _execute(args: argparse.Namespace) -> int:
    import threading
    import time

    from core.config import ConfigError, load
    from core.errors import CliError
    from core.live import LiveReadError, open_admin
    from core.signing import signer
    from remediation.executor import lock
    from remediation.executor.cluster import ClusterError, KafkaCluster
    from remediation.executor.lifecycle import State
    from remediation.executor.policy import PolicyError, policy_for
    from remediation.executor.runner import Executor, Timeouts
    from remediation.executor.store import ActionStore
    from schemas import wire
    from schemas.registry import RecordError, dumps

    try:
        config = load(args.config)
        policy = policy_for(config.policy, args.policy)
        servers = config.require_bootstrap_servers()
        sign = signer(config)
    except (ConfigError, PolicyError) as exc:
        raise CliError(str(exc)) from None
    try:
        raw = sys.stdin.buffer.read() if args.record == "-" else open(args.record, "rb").read()
    except OSError as exc:
        raise CliError(f"cannot read {args.record}: {exc.strerror}") from None
    # The operator holds the config, so the operator's action is signed here; a record
    # that does not decode goes on as it is and is refused with its reason.
    try:
        raw = dumps(sign.sign(wire.record("action", raw)))
    except RecordError:
        pass  # refused below, with the decoder's reason

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    leadership = lock.leadership_for(config, lock.identity() + " (selfheal execute)", say)
    try:
        if not leadership.wait(threading.Event(), timeout=args.lock_wait):
            raise CliError(f"the executor lock is held by {leadership.holder() or 'another'}"
                           f" executor: a selfheal serve is running; produce the action to "
                           f"{config.topic('actions')} instead, or stop it", 2)
        from core.owner import claim_store, cluster_name, keyed_store

        try:
            cluster = cluster_name(config)
        except ConfigError as exc:
            raise CliError(str(exc)) from None
        sqlite = keyed_store(config, cluster)  # serve's store of this cluster
        sqlite.parent.mkdir(parents=True, exist_ok=True)
        with ActionStore(sqlite) as store, \
                open_admin(servers, client_id="selfheal-execute",
                           security=config.cluster_security) as admin:
            try:
                claim_store(store, sqlite, cluster)
            except ConfigError as exc:
                raise CliError(str(exc)) from None
            executor = Executor(store, KafkaCluster(admin, config.cluster.cluster_id), policy,
                                signer=sign,
                                skew_threshold=config.detect.disk_skew_threshold,
                                timeouts=Timeouts(config.serve.execution_timeout_seconds,
                                                  config.serve.verify_timeout_seconds,
                                                  config.serve.stall_seconds),
                                is_leader=leadership.is_leader, log=say)
            try:
                received = executor.receive(raw, f"file {args.record}")
            except ClusterError as exc:
                raise CliError(str(exc), 1) from None
            if received.outcome == "rejected" or received.action_id is None:
                raise CliError(received.reason, 2)
            aid = received.action_id
            shown = 0
            while True:
                row = store.get(aid)
                assert row is not None
                entries = store.audit(aid)
                for entry in entries[shown:]:
                    change = (entry.to_state if entry.from_state == entry.to_state
                              else f"{entry.from_state or 'new'} -> {entry.to_state}")
                    say(f"{aid[:12]} {change}: {entry.reason}")
                shown = len(entries)
                if row.state is State.AWAITING_APPROVAL:
                    if not args.approve:
                        raise CliError(f"action {aid[:12]} needs approval; run again with "
                                       "--approve, or approve it in selfheal serve", 3)
                    target = State.SUCCEEDED if row.type == "page_operator" else State.APPROVED
                    store.transition(aid, target, args.actor, "approved on the command line "
                                     "(--approve)", expect=frozenset({row.state}))
                    continue
                if not row.open:
                    print(f"{aid} {row.state}")
                    return 0 if row.state in (State.SUCCEEDED, State.SUPERSEDED) else 1
                try:
                    executor.tick()
                    time.sleep(config.serve.tick_seconds)
                except KeyboardInterrupt:  # revert what runs; a second ^C leaves it to serve
                    say("interrupted: cancelling (what is in flight is reverted)")
                    store.request_cancel(aid, args.actor, "interrupted on the command line")
    except LiveReadError as exc:
        raise CliError(str(exc), 1) from None
    finally:
        leadership.close()
