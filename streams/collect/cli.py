"""`selfheal collect metrics|zk|snapshots`: the long-running collectors.

Each runs until SIGTERM or Ctrl-C (then flushes its producer and exits 0), or does one
round with ``--once`` (exit 1 if anything in it failed). Progress and every failure go to
stderr; each serves its own Prometheus metrics on ``[collect] http_host``.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from typing import Any

from core.errors import CliError

Handler = Callable[[argparse.Namespace], int]


def register(subparsers: Any) -> None:
    """Add `collect` and its three sub-commands to the `selfheal` parser."""
    collect = subparsers.add_parser(
        "collect",
        help="run a collector (exporter metrics, ZooKeeper events, cluster snapshots)",
        description="Long-running collectors that feed the selfheal.* topics. Without "
        "configuration they watch the running sandbox.",
    )
    sub = collect.add_subparsers(dest="collect_command", metavar="COLLECTOR", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--metrics-port", type=int, metavar="PORT",
        help="port of this collector's own /metrics (0: a free one, printed on stderr); "
        "default [collect] <collector>_http_port")
    common.add_argument("--once", action="store_true",
                        help="do one round and exit (1 if anything in it failed)")

    p = sub.add_parser(
        "metrics", parents=[common],
        help="scrape every broker's JMX exporter into selfheal.broker-metrics",
        description="Scrape each broker's JMX exporter ([cluster] exporter_urls, entries "
        "'<broker id>=<url>' or plain URLs matched to brokers by host; or every discovered "
        "broker at [collect] exporter_port) and produce one record per sample.")
    p.add_argument("--interval", type=float, metavar="SECONDS",
                   help="seconds between scrapes; default [collect] scrape_interval_seconds")
    p.set_defaults(func=_guard(_metrics))

    p = sub.add_parser(
        "zk", parents=[common],
        help="watch ZooKeeper log-dir notifications and broker registrations",
        description="Watch /log_dir_event_notification and /brokers/ids and produce "
        "log_dir_failure and broker_registered/deregistered events to "
        "selfheal.logdir-events. ZooKeeper mode only (in KRaft, `collect snapshots` emits "
        "the events). With --once: the current brokers and pending notifications.")
    p.add_argument("--interval", type=float, metavar="SECONDS",
                   help="seconds between safety re-reads of both paths (watches do the "
                   "real work); default [collect] zk_resync_interval_seconds")
    p.set_defaults(func=_guard(_zk))

    p = sub.add_parser(
        "snapshots", parents=[common],
        help="publish full cluster snapshots to selfheal.cluster-snapshots",
        description="Every --interval seconds, and at once on a log-dir event (from "
        "selfheal.logdir-events or its own DescribeLogDirs probe), read the cluster "
        "(DescribeCluster, Metadata, DescribeLogDirs) into a snapshot and produce it. In "
        "KRaft mode it also emits the log-dir failure and broker membership events.")
    p.add_argument("--interval", type=float, metavar="SECONDS",
                   help="seconds between snapshots; default [collect] "
                   "snapshot_interval_seconds")
    p.add_argument("--probe-interval", type=float, metavar="SECONDS",
                   help="seconds between DescribeLogDirs dir-error probes; default "
                   "[collect] log_dir_probe_interval_seconds")
    p.add_argument("--out", metavar="FILE",
                   help="read the cluster once and write the snapshot to FILE ('-': "
                   "stdout) instead of producing it, for `selfheal plan ... --snapshot "
                   "FILE`; needs no bus")
    p.add_argument("--from-bus", action="store_true",
                   help="with --out: write this cluster's latest snapshot on the bus "
                   "instead (chunks assembled into one document: what the job plans from)")
    p.set_defaults(func=_guard(_snapshots))


def _positive(value: float | None, flag: str) -> float | None:
    if value is not None and value <= 0:
        raise CliError(f"{flag} must be > 0 seconds, got {value:g}")
    return value


def _guard(func: Callable[[argparse.Namespace, Any], int]) -> Handler:
    """Load the config and turn the collectors' own errors into CliError."""

    def handler(args: argparse.Namespace) -> int:
        from core.bus import BusError
        from core.config import ConfigError, load
        from streams.collect.runner import CollectError
        from streams.collect.targets import TargetError

        # kafka-python logs every refused connection; the collectors say what failed.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
        if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
            raise CliError(f"--metrics-port must be 0-65535, got {args.metrics_port}")
        _positive(args.interval, "--interval")
        try:
            return func(args, load())
        except (ConfigError, TargetError) as exc:
            raise CliError(str(exc), code=2) from None
        except (CollectError, BusError) as exc:
            raise CliError(str(exc), code=1) from None

    return handler


def _port(args: argparse.Namespace, configured: int) -> int:
    return configured if args.metrics_port is None else args.metrics_port


def _metrics(args: argparse.Namespace, config: Any) -> int:
    from streams.collect.broker_metrics import run_metrics
    from streams.collect.runner import CollectorRun
    from streams.collect.targets import parse_exporter_urls

    urls = parse_exporter_urls(config.cluster.exporter_urls)
    interval = args.interval or config.collect.scrape_interval_seconds
    with CollectorRun("metrics", config, _port(args, config.collect.metrics_http_port),
                      args.once) as run:
        return run_metrics(run, urls, interval)


def _zk(args: argparse.Namespace, config: Any) -> int:
    from streams.collect.runner import CollectorRun
    from streams.collect.zk_events import run_zk

    if config.cluster.mode == "kraft":
        raise CliError("the cluster runs in KRaft mode ([cluster] mode = \"kraft\"): there is "
                       "no ZooKeeper to watch; `selfheal collect snapshots` emits the log-dir "
                       "events in KRaft mode", code=2)
    if not config.cluster.zookeeper_connect:
        raise CliError("no ZooKeeper configured: set [cluster] zookeeper_connect (or "
                       "SELFHEAL_CLUSTER_ZOOKEEPER_CONNECT), or start the sandbox", code=2)
    interval = args.interval or config.collect.zk_resync_interval_seconds
    with CollectorRun("zk", config, _port(args, config.collect.zk_http_port),
                      args.once) as run:
        return run_zk(run, interval)


def _snapshots(args: argparse.Namespace, config: Any) -> int:
    from streams.collect.runner import CollectorRun
    from streams.collect.snapshots import run_snapshots

    _positive(args.probe_interval, "--probe-interval")
    if args.from_bus and args.out is None:
        raise CliError("--from-bus goes with --out FILE (the file to write the snapshot "
                       "to; '-' for stdout)", code=2)
    if args.out is not None:
        return _snapshot_file(args.out, config, args.from_bus)
    config.require_bootstrap_servers()
    interval = args.interval or config.collect.snapshot_interval_seconds
    probe = args.probe_interval or config.collect.log_dir_probe_interval_seconds
    with CollectorRun("snapshots", config, _port(args, config.collect.snapshots_http_port),
                      args.once) as run:
        return run_snapshots(run, interval, probe)


def _snapshot_file(out: str, config: Any, from_bus: bool = False) -> int:
    import sys

    from core.live import LiveReadError
    from schemas.snapshot import SnapshotError
    from streams.collect.snapshot_files import write_from_bus, write_snapshot
    from streams.snapshot_reader import SnapshotMissing

    if out != "-":
        from pathlib import Path

        parent = Path(out).resolve().parent
        if not parent.is_dir():
            raise CliError(f"--out {out}: no directory {parent}; create it or write "
                           "elsewhere", code=2)
    try:
        (write_from_bus if from_bus else write_snapshot)(
            config, out, lambda m: print(m, file=sys.stderr))
    except (LiveReadError, SnapshotMissing) as exc:
        raise CliError(str(exc), code=1) from None
    except SnapshotError as exc:
        raise CliError(f"the cluster's snapshot breaks the schema, nothing written: {exc}",
                       code=1) from None
    return 0
