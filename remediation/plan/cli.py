"""`selfheal plan ...`: a snapshot (or a broker list) in, a plan as JSON on stdout.

A thin shell over the planners: parse arguments, read the snapshot, call one planner,
print. `--explain` adds a human summary on stderr. Bad input exits 2 naming the field.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from core.errors import CliError
from core.plan.errors import PlanError
from schemas.snapshot import SnapshotError

if TYPE_CHECKING:
    from core.model import ClusterModel

# The planners are imported inside the handlers: every `selfheal` run imports this
# module to build the parser, and should only pay for the planner it runs.
DEFAULT_THRESHOLD = 1.10  # core.plan.disks.DEFAULT_THRESHOLD
STRATEGIES = ("range", "cooperative-sticky")  # core.plan.consumers.STRATEGIES
DEFAULT_THROTTLE = 50 << 20  # core.plan.recovery.DEFAULT_RATE

Handler = Callable[[argparse.Namespace], int]

# How an operator runs each plan by hand (with the plan saved as plan.json).
_BY_HAND = {
    "replicas": "create the topic with it: kafka-topics.sh --create --topic T "
    "--replica-assignment <lists from plan.json>, or reassign: kafka-reassign-partitions.sh "
    "--execute --reassignment-json-file plan.json",
    "offline": "run by hand: kafka-reassign-partitions.sh --bootstrap-server B --execute "
    "--reassignment-json-file plan.json (add --throttle to cap the copy rate)",
    "disks": "run by hand: kafka-reassign-partitions.sh --bootstrap-server B --execute "
    "--reassignment-json-file plan.json (throttle with the broker config "
    "replica.alter.log.dirs.io.max.bytes.per.second)",
    "leaders": "run by hand: jq .reassignment plan.json > r.json; kafka-reassign-partitions.sh "
    "--bootstrap-server B --execute --reassignment-json-file r.json; then jq .election "
    "plan.json > e.json; kafka-leader-election.sh --bootstrap-server B --election-type "
    "PREFERRED --path-to-json-file e.json",
    "consumers": "the assignment takes effect through the group's assignor "
    "(client.rack set on each member, partition.assignment.strategy to match)",
}


def register(subparsers: Any) -> None:
    """Add `plan` and its five sub-commands to the `selfheal` parser."""
    plan = subparsers.add_parser(
        "plan",
        help="compute a remediation plan (pure: reads a snapshot, touches no cluster)",
        description="Compute a plan in the formats Kafka's own tools read. The plan is "
        "JSON on stdout; --explain adds a summary on stderr.",
    )
    sub = plan.add_subparsers(dest="plan_command", metavar="PLAN", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--explain", action="store_true", help="print a human summary of the plan on stderr"
    )
    with_snapshot = argparse.ArgumentParser(add_help=False, parents=[common])
    with_snapshot.add_argument(
        "--snapshot", required=True, metavar="FILE", help="cluster snapshot JSON ('-': stdin)"
    )

    p = sub.add_parser(
        "replicas",
        parents=[common],
        help="KIP-36 rack-aware replica assignment for a new topic",
        description="Replica lists as Kafka's AdminUtils.assignReplicasToBrokers makes them.",
    )
    p.add_argument(
        "--brokers",
        required=True,
        metavar="ID[:RACK],...",
        help="brokers and their racks, e.g. 0:rack1,1:rack3,2:rack3",
    )
    p.add_argument("--partitions", required=True, type=int, metavar="N")
    p.add_argument("--replication-factor", required=True, type=int, metavar="R")
    p.add_argument(
        "--start-index",
        type=int,
        metavar="I",
        help="fixed start index (first leader position and initial follower shift); "
        "random when absent, as in Kafka",
    )
    p.add_argument("--topic", default="topic", metavar="T")
    p.add_argument(
        "--ignore-racks", action="store_true", help="assign without racks (needed when mixed)"
    )
    p.set_defaults(func=_replicas)

    p = sub.add_parser(
        "offline",
        parents=[with_snapshot],
        help="reassign replicas on dead brokers and failed log dirs",
    )
    p.add_argument(
        "--throttle",
        type=int,
        default=DEFAULT_THROTTLE,
        metavar="BYTES_PER_S",
        help="replication throttle per broker for --explain's recovery time (default "
        "%(default)s, the executor's inter_broker_throttle_bytes_per_s)",
    )
    p.set_defaults(func=_offline)

    p = sub.add_parser(
        "disks", parents=[with_snapshot], help="intra-broker moves that even out log dirs"
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help="max fullest-dir ratio over the broker mean (default %(default)s)",
    )
    p.set_defaults(func=_disks)

    p = sub.add_parser(
        "leaders",
        parents=[with_snapshot],
        help="replica reorders and a preferred election that balance leaders",
    )
    p.set_defaults(func=_leaders)

    p = sub.add_parser(
        "consumers", parents=[with_snapshot], help="KIP-881 rack-aware consumer assignment"
    )
    p.add_argument("--group", required=True, metavar="G")
    p.add_argument("--strategy", choices=STRATEGIES, default="range")
    p.set_defaults(func=_consumers)


@contextmanager
def _bad_input_exits_2() -> Iterator[None]:
    try:
        yield
    except (SnapshotError, PlanError) as exc:
        raise CliError(str(exc), code=2) from exc


@contextmanager
def _snapshot(args: argparse.Namespace, columns: bool = False) -> Iterator[ClusterModel]:
    # A command is one short run over a million small acyclic objects: the cyclic
    # collector would only rescan them (0.1-0.2 s a pass at full size), so it stays off.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        source = args.snapshot
        with _bad_input_exits_2():
            from core.model import ClusterModel

            try:
                model = ClusterModel.load(
                    sys.stdin.buffer if source == "-" else source, columns=columns
                )
            except SnapshotError as exc:
                raise SnapshotError(f"{source}: {exc.path}", exc.problem, exc.kind) from exc
            yield model
    finally:
        if was_enabled:
            gc.enable()


def _emit(plan_json: dict[str, Any] | str, explanation: str | None, command: str) -> int:
    # dumps (not dump): one call into the C encoder instead of Python-level chunks. A
    # plan is a tree the planner just built, so the encoder's cycle check (a dict insert
    # and delete per object: 40% of the encoding at 2.8M replicas) cannot find anything.
    # A str is the plan's JSON already written (`leaders.plan_json`, `disks.plan_json`),
    # the same bytes.
    if not isinstance(plan_json, str):
        plan_json = json.dumps(plan_json, check_circular=False)
    sys.stdout.write(plan_json + "\n")
    sys.stdout.flush()
    if explanation is not None:
        print(explanation, file=sys.stderr)
        print(_BY_HAND[command], file=sys.stderr)
    return 0


def parse_brokers(spec: str) -> dict[int, str | None]:
    """'0:rack1,1:rack3,2' -> {0: 'rack1', 1: 'rack3', 2: None}."""
    out: dict[int, str | None] = {}
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        raw_id, sep, rack = item.partition(":")
        try:
            broker = int(raw_id)
        except ValueError:
            raise PlanError(
                f"--brokers: {raw_id!r} is not a broker id (want ID[:RACK],...)"
            ) from None
        if broker < 0:
            raise PlanError(f"--brokers: broker id {broker} is negative")
        if sep and not rack.strip():
            raise PlanError(f"--brokers: broker {broker} has ':' but no rack after it")
        if broker in out:
            raise PlanError(f"--brokers: broker {broker} is listed twice")
        out[broker] = rack.strip() if sep else None
    if not out:
        raise PlanError("--brokers: no brokers given")
    return out


def _replicas(args: argparse.Namespace) -> int:
    from core.plan import replicas

    with _bad_input_exits_2():
        brokers = parse_brokers(args.brokers)
        plan = replicas.assign_replicas(
            brokers,
            args.partitions,
            args.replication_factor,
            start_index=args.start_index,
            topic=args.topic,
            ignore_racks=args.ignore_racks,
        )
    text = replicas.explain(plan, brokers) if args.explain else None
    return _emit(plan.to_json(), text, "replicas")


def _offline(args: argparse.Namespace) -> int:
    from core.plan import offline

    with _snapshot(args, columns=True) as model:  # records only for the partitions it repairs
        plan = offline.plan_offline(model)
        text = offline.explain(model, plan, args.throttle) if args.explain else None
        return _emit(plan.to_json(), text, "offline")


def _disks(args: argparse.Namespace) -> int:
    from core.plan import disks

    with _snapshot(args, columns=True) as model:  # records only for the replicas it moves
        if not args.explain:  # the JSON text, written by the core where it is built
            return _emit(disks.plan_json(model, args.threshold), None, "disks")
        plan = disks.plan_disks(model, args.threshold)
        return _emit(plan.to_json(), disks.explain(model, plan, args.threshold), "disks")


def _leaders(args: argparse.Namespace) -> int:
    from core.plan import leaders

    with _snapshot(args, columns=True) as model:  # the plan reads columns where it can
        if not args.explain:  # the JSON text, written by the core where it is built
            return _emit(leaders.plan_json(model), None, "leaders")
        plan = leaders.plan_leaders(model)
        return _emit(plan.to_json(), leaders.explain(model, plan), "leaders")


def _consumers(args: argparse.Namespace) -> int:
    from core.plan import consumers

    with _snapshot(args) as model:
        plan = consumers.plan_consumers(model, args.group, args.strategy)
        text = consumers.explain(model, plan) if args.explain else None
        return _emit(plan.to_json(), text, "consumers")
