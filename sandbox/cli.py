"""`selfheal sandbox ...`: a real local Kafka cluster with disk-fault injection."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from core.errors import CliError
from sandbox import versions


def quiet_kafka_python() -> None:
    # kafka-python logs every refused connection to a stopped broker; the status table
    # already says which brokers are down.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)


def _progress(message: str) -> None:
    print(f"[sandbox] {message}", file=sys.stderr, flush=True)


def _load(args: argparse.Namespace):
    from sandbox.state import SandboxNotRunning, load

    try:
        return load(args.work_dir)
    except SandboxNotRunning as exc:
        raise CliError(str(exc), code=1) from None


def _guard(func):
    """Turn the sandbox's own errors into a clear message and exit status 1."""

    def run(args: argparse.Namespace) -> int:
        from sandbox.cluster import SandboxError
        from sandbox.jars import JarsMissing

        quiet_kafka_python()
        try:
            return func(args) or 0
        except (SandboxError, JarsMissing) as exc:
            raise CliError(str(exc), code=1) from None

    return run


@_guard
def _up(args: argparse.Namespace) -> int:
    from sandbox import cluster

    state = cluster.up(args.work_dir, brokers=args.brokers, log_dirs=args.log_dirs,
                       racks=args.racks, mode=args.mode, kafka=args.kafka,
                       security=args.security, progress=_progress)
    print(state.bootstrap_servers)
    return 0


@_guard
def _down(args: argparse.Namespace) -> int:
    from sandbox import cluster

    cluster.down(_load(args), keep_data=args.keep_data, progress=_progress)
    return 0


@_guard
def _status(args: argparse.Namespace) -> int:
    from sandbox import status

    info = status.status(_load(args))
    print(json.dumps(info, indent=2) if args.json else status.render(info))
    return 0


def _broker_and_dir(args: argparse.Namespace):
    from sandbox import cluster

    state = _load(args)
    cluster.resolve_dir(state, args.broker, args.dir)  # fails early, naming what exists
    return state


@_guard
def _fail_disk(args: argparse.Namespace) -> int:
    from sandbox import cluster

    print(cluster.fail_disk(_broker_and_dir(args), args.broker, args.dir, progress=_progress))
    return 0


@_guard
def _heal_disk(args: argparse.Namespace) -> int:
    from sandbox import cluster

    print(cluster.heal_disk(_broker_and_dir(args), args.broker, args.dir, progress=_progress))
    return 0


@_guard
def _fill_disk(args: argparse.Namespace) -> int:
    from sandbox import fill

    print(fill.fill_disk(_broker_and_dir(args), args.broker, args.dir, args.bytes,
                         partitions=args.partitions, progress=_progress))
    return 0


def _known_broker(args: argparse.Namespace):
    state = _load(args)
    try:
        state.broker(args.broker_id)
    except KeyError as exc:
        raise CliError(str(exc.args[0]), code=1) from None
    return state


@_guard
def _kill_broker(args: argparse.Namespace) -> int:
    from sandbox import cluster

    cluster.kill_broker(_known_broker(args), args.broker_id, graceful=args.graceful,
                        progress=_progress)
    return 0


@_guard
def _start_broker(args: argparse.Namespace) -> int:
    from sandbox import cluster

    cluster.start_broker(_known_broker(args), args.broker_id, progress=_progress)
    return 0


@_guard
def _upgrade(args: argparse.Namespace) -> int:
    from sandbox import upgrade

    upgrade.rolling_upgrade(_load(args), args.kafka, progress=_progress)
    return 0


@_guard
def _prometheus(args: argparse.Namespace) -> int:
    from sandbox import prometheus

    state = _load(args)
    if args.what == "stop":
        stopped = prometheus.stop(state.work_dir)
        _progress("prometheus stopped" if stopped else "prometheus was not running")
        return 0
    targets = {}
    for item in args.target or ():
        name, sep, address = item.partition("=")
        if not sep or not name or ":" not in address:
            raise CliError(f"--target {item!r}: write NAME=HOST:PORT, e.g. serve=127.0.0.1:8787",
                           code=2)
        targets[name] = address
    try:
        prom = prometheus.start(state, args.alertmanager, targets or None)
    except prometheus.PrometheusError as exc:
        raise CliError(str(exc), code=1) from None
    print(prom.url)
    return 0


def _bytes(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower().removesuffix("b").removesuffix("i")
    try:
        if text and text[-1] in units:
            return int(float(text[:-1]) * units[text[-1]])
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size; use bytes or a suffix: 500000, 64M, 1G"
        ) from None


def register(subparsers: argparse._SubParsersAction) -> None:
    sandbox = subparsers.add_parser(
        "sandbox",
        help="a real local Kafka cluster (JBOD, racks) with disk-fault injection",
        description="A real local Kafka cluster: ZooKeeper (or a KRaft controller) and "
        "brokers with several log dirs each, racks, and a JMX exporter per broker, all on "
        "127.0.0.1. Its state file lets every other selfheal command find it.",
    )
    sandbox.add_argument(
        "--work-dir", type=Path, default=None,
        help="where the sandbox keeps data, logs and its state file "
        "(default $SELFHEAL_SANDBOX_DIR or ~/.local/state/kafka-selfheal/sandbox)",
    )
    sub = sandbox.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = sub.add_parser("up", help="start ZooKeeper/controller and brokers, wait until ready")
    p.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    p.add_argument("--log-dirs", type=int, default=2, help="log dirs per broker (default 2)")
    p.add_argument("--racks", type=int, default=3,
                   help="racks, assigned round robin; 0 for no broker.rack (default 3)")
    p.add_argument("--kafka", choices=tuple(versions.LINES), default=versions.DEFAULT_LINE,
                   help="the Kafka line to run (default %(default)s; "
                   f"{versions.OLDEST_LINE} is the last with ZooKeeper mode)")
    p.add_argument("--mode", choices=("zk", "kraft"), default=None,
                   help="KRaft (default; KIP-858 JBOD) or ZooKeeper (Kafka 3.9 only)")
    p.add_argument("--security", choices=("sasl_ssl", "mtls"), default=None,
                   help="TLS with SCRAM-SHA-512 users (sasl_ssl) or client certificates "
                   "(mtls), and an authorizer that allows only what ACLs grant; in ZooKeeper "
                   "mode sasl_ssl only, with ZooKeeper taking SASL sessions only; secrets "
                   "go to files under the work dir's secrets/ (default: plaintext)")
    p.set_defaults(func=_up)

    p = sub.add_parser("down", help="stop every sandbox process by PID")
    p.add_argument("--keep-data", action="store_true", help="keep log dirs and logs")
    p.set_defaults(func=_down)

    p = sub.add_parser("status", help="brokers, racks, ports, log dirs, exporters, controller")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_status)

    dir_help = "the log dir: its 0-based index on that broker, or its path"
    p = sub.add_parser("fail-disk", help="break a log dir the way Kafka detects reliably")
    p.add_argument("--broker", type=int, required=True)
    p.add_argument("--dir", required=True, help=dir_help)
    p.set_defaults(func=_fail_disk)

    p = sub.add_parser("heal-disk", help="replace a failed log dir and restart its broker")
    p.add_argument("--broker", type=int, required=True)
    p.add_argument("--dir", required=True, help=dir_help)
    p.set_defaults(func=_heal_disk)

    p = sub.add_parser("fill-disk", help="write real data onto one log dir (disk skew)")
    p.add_argument("--broker", type=int, required=True)
    p.add_argument("--dir", required=True, help=dir_help)
    p.add_argument("--bytes", type=_bytes, required=True, help="how much: 500000, 64M, 1G")
    p.add_argument("--partitions", type=int, default=4,
                   help="partitions the data is spread over (default 4)")
    p.set_defaults(func=_fill_disk)

    p = sub.add_parser("kill-broker", help="kill a broker (SIGKILL, a crash)")
    p.add_argument("broker_id", type=int)
    p.add_argument("--graceful", action="store_true", help="SIGTERM: controlled shutdown")
    p.set_defaults(func=_kill_broker)

    p = sub.add_parser("start-broker", help="start a stopped broker and wait until ready")
    p.add_argument("broker_id", type=int)
    p.set_defaults(func=_start_broker)

    p = sub.add_parser(
        "upgrade", help="rolling upgrade to another Kafka line, one server at a time",
        description="Restart the controller, then each broker, on the given Kafka line's "
        "jars, waiting for every replica to be in sync before the next; the metadata "
        "version stays, so the cluster can still be rolled back.")
    p.add_argument("--kafka", required=True, choices=tuple(versions.LINES),
                   help="the Kafka line to move to")
    p.set_defaults(func=_upgrade)

    p = sub.add_parser(
        "prometheus", help="a real Prometheus scraping the sandbox, with the alert rules",
        description="start: a Prometheus on a free 127.0.0.1 port scraping every broker's "
        "exporter, with dashboards/rules/*.yml loaded; prints its URL (`sandbox down` stops "
        "it too). stop: stop it by PID.")
    p.add_argument("what", choices=("start", "stop"))
    p.add_argument("--alertmanager", metavar="URL", help="send alerts to this Alertmanager")
    p.add_argument("--target", action="append", metavar="NAME=HOST:PORT",
                   help="a selfheal process's /metrics to scrape too (repeatable)")
    p.set_defaults(func=_prometheus)
