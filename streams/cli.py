"""`selfheal stream`: run the detection job (streams/job.py) until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

DESCRIPTION = """\
Read selfheal.broker-metrics, selfheal.logdir-events and selfheal.cluster-snapshots with
Spark Structured Streaming, validate every record (Great Expectations; bad records go to
selfheal.dead-letter with the reason), detect offline log dirs, skewed disks and
unbalanced leaders, and propose actions on selfheal.actions. One line per micro-batch
(rows, actions, dead letters, duration); Prometheus metrics on http_host:metrics_http_port
of [stream]. The checkpoint keeps Kafka offsets and the detector's state, so a restart
proposes nothing twice. A query that fails while running (a bus outage in mid-batch)
starts again from the checkpoint once the bus answers, up to [stream] query_restarts
times in a row. Exit 0 on SIGTERM or Ctrl-C; 1 when the query cannot start or keeps
failing (the last line says why). Settings: [stream] and [detect] in the config file.
"""

# What Spark takes as a master; anything else it refuses with a Java trace.
MASTER = re.compile(r"local(\[(\d+|\*)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]"
                    r"|spark://[^\s/:]+:\d+(,[^\s/:]+:\d+)*|yarn|k8s://\S+")


def _checkpoint_dir(text: str) -> Path:
    if "://" in text:
        raise argparse.ArgumentTypeError(
            f"{text!r} is a URI; the checkpoint must be a directory path (the job records "
            "its owner there with plain file calls). On a cluster, mount shared storage "
            "(NFS, EFS, ...) at the same path on the driver and every executor and give "
            "that path")
    return Path(text)


def register(subparsers: Any) -> None:
    """Add `stream` to the `selfheal` parser."""
    p = subparsers.add_parser(
        "stream", help="run the Spark detection job (metrics, log-dir events, snapshots in; "
        "actions out)", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", type=_checkpoint_dir, metavar="DIR",
                   help="checkpoint dir of the query (default: [stream] checkpoint_dir/detect);"
                   " on a cluster, a path the executors see too (a shared mount)")
    p.add_argument("--trigger", type=float, metavar="SECONDS",
                   help="micro-batch interval (default: [stream] trigger_interval_seconds)")
    p.add_argument("--available-now", action="store_true",
                   help="process what the topics hold now, then stop (tests, catching up)")
    p.add_argument("--starting-offsets", choices=("latest", "earliest"),
                   help="where a new checkpoint starts reading (default: [stream] "
                   "starting_offsets); an existing checkpoint resumes where it stopped")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="port of /metrics, 0 for a free one (default: [stream] "
                   "metrics_http_port)")
    p.add_argument("--master", metavar="URL",
                   help="Spark master: local[N], spark://HOST:PORT (a standalone cluster), "
                   "yarn or k8s://URL (default: $SELFHEAL_SPARK_MASTER or local[2]; under "
                   "spark-submit, its own). On a cluster the executors read the bus with Spark's "
                   "Kafka connector (no Python runs on them; the checkpoint is the "
                   "driver's), get 1 core and $SELFHEAL_SPARK_EXECUTOR_MEMORY (768m) each, "
                   "at most $SELFHEAL_SPARK_CORES_MAX (2) cores, and must reach the driver "
                   "($SELFHEAL_SPARK_DRIVER_HOST, default 127.0.0.1) and the bus")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from core.config import ConfigError, load
    from core.errors import CliError
    try:
        config = load()
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    if args.trigger is not None and not args.trigger > 0:
        raise CliError(f"--trigger must be more than 0 seconds, got {args.trigger}")
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        raise CliError(f"--metrics-port must be 0-65535 (0: a free port), got "
                       f"{args.metrics_port}")

    if args.master is not None and not MASTER.fullmatch(args.master):
        raise CliError(f"--master must be local, local[N], spark://HOST:PORT, yarn or "
                       f"k8s://URL, got {args.master!r}")

    from core.bus import BusError
    from streams.job import JobError, JobOptions, run

    options = JobOptions.from_config(
        config, checkpoint=args.checkpoint, trigger_seconds=args.trigger,
        available_now=args.available_now or None, starting_offsets=args.starting_offsets,
        master=args.master, metrics_port=args.metrics_port)
    try:
        return run(config, options)
    except (BusError, JobError) as exc:
        raise CliError(str(exc), code=1) from None


def main(argv: list[str]) -> int:
    """``selfheal stream`` on its own, for ``spark-submit streams/job.py [options]``."""
    import sys

    from core.errors import CliError

    parser = argparse.ArgumentParser(prog="streams/job.py")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["stream", *argv])
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"selfheal stream: {exc}", file=sys.stderr)
        return exc.code
