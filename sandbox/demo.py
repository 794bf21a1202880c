"""`selfheal demo`: the whole self-healing loop on the sandbox, told as a story.

A sandbox cluster with traffic; the collectors, the Spark job and `selfheal serve` running
as real processes (`sandbox.loop`); a disk breaks under a partition leader; the fault is
detected, a fix proposed, its one-click approval link "clicked", the replicas moved; and
the promise checked at the end: no partition offline, every acknowledged message read
exactly once. Each step prints when it happened, counted from the fault.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from core.errors import CliError

TOPIC = "demo-orders"
POLICY = """\
[actions]
fix_offline_replicas = "approve"   # a human clicks the link; the demo plays that human
"""


def _say(message: str) -> None:
    print(message, flush=True)


def _partition_table(state: Any, topic: str) -> str:
    """Leader, replicas, ISR and offline replicas per partition, from Metadata."""
    from sandbox.status import kafka_admin

    with kafka_admin(state) as admin:
        parts = admin.describe_topics([topic])[0]["partitions"]
    racks = {b.node_id: b.rack for b in state.brokers}
    rows = [f"    {'partition':<10}{'leader':<8}{'replicas':<12}{'racks':<20}{'isr':<10}offline"]
    for p in sorted(parts, key=lambda p: p["partition_index"]):
        rows.append(
            f"    {p['partition_index']:<10}{p['leader_id']:<8}"
            f"{','.join(map(str, p['replica_nodes'])):<12}"
            f"{','.join(str(racks.get(r)) for r in p['replica_nodes']):<20}"
            f"{','.join(map(str, p['isr_nodes'])):<10}"
            f"{','.join(map(str, p['offline_replicas'])) or '-'}"
        )
    return "\n".join(rows)


class _Api:
    """The bits of serve's JSON API the story needs."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token

    def get(self, path: str) -> Any:
        request = urllib.request.Request(f"{self.url}/api{path}",
                                         headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as resp:
            return json.load(resp)

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/healthz", timeout=5) as resp:
                return bool(json.load(resp)["role"] == "leader")
        except OSError:
            return False


def click(link: str) -> str:
    """What a person does with the pager link: open the page, press its one button.
    Returns the heading of the page that comes back."""
    with urllib.request.urlopen(link, timeout=30) as resp:
        page = resp.read().decode()
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page))
    form = re.search(r'<form method="post" action="([^"]+)"', page)
    if form is None or not fields:
        raise CliError(f"the approval page at {link} has no confirm form", code=1)
    target = urllib.parse.urljoin(link, form.group(1))
    body = urllib.parse.urlencode(fields).encode()
    with urllib.request.urlopen(urllib.request.Request(target, data=body, method="POST"),
                                timeout=30) as resp:
        answer = resp.read().decode()
    heading = re.search(r"<h1>([^<]*)</h1>", answer)
    return heading.group(1) if heading else "?"


def _wait(check: Any, what: str, timeout: float, the_loop: Any) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        the_loop.check_alive()
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise CliError(f"no {what} within {timeout:.0f} s; the logs are in "
                           f"{the_loop.work_dir / 'logs'}", code=1)
        time.sleep(0.3)


def run(args: argparse.Namespace) -> int:
    from remediation.executor.lifecycle import is_terminal
    from sandbox import cluster, loop, traffic
    from sandbox.cli import quiet_kafka_python

    quiet_kafka_python()

    def progress(message: str) -> None:
        print(f"  [sandbox] {message}", file=sys.stderr, flush=True)

    _say(f"== 1. bring up the sandbox ({args.mode} mode): 3 brokers x 2 log dirs over 3 racks")
    try:
        state = cluster.up(args.work_dir, mode=args.mode, progress=progress)
    except cluster.SandboxError as exc:
        raise CliError(str(exc), code=1) from None
    the_loop = producer = consumer = None
    loop_dir = Path(tempfile.mkdtemp(prefix="selfheal-demo-loop-"))
    healthy = False
    try:
        _say(f"\n== 2. topic {TOPIC} (6 partitions, RF 2), an acks=all idempotent producer "
             "and a consumer running")
        traffic.create_topic(state, TOPIC, partitions=6, replication_factor=2)
        consumer = traffic.BackgroundConsumer(state, TOPIC)
        producer = traffic.BackgroundProducer(state, TOPIC, rate_per_s=100)
        consumer.start()
        producer.start()

        _say("\n== 3. start kafka-selfheal: collectors (metrics, zk, snapshots), the Spark "
             "job, serve")
        (loop_dir / "policy.toml").write_text(POLICY)
        names = [n for n in loop.PIECES if not (n == "collect-zk" and args.mode == "kraft")]
        started = time.monotonic()
        the_loop = loop.start(state, loop_dir, names=names,
                              overrides={"detect": {"leader_window_seconds": 86400.0}},
                              policy=str(loop_dir / "policy.toml"))
        api = _Api(the_loop.serve_url, the_loop.api_token)
        _wait(lambda: "[stream] batch" in the_loop.pieces["stream"].log_tail(200),
              "first micro-batch of the Spark job", 300, the_loop)
        _wait(api.ready, "serve holding the executor lock", 60, the_loop)
        _say(f"   running after {time.monotonic() - started:.0f} s; serve at "
             f"{the_loop.serve_url} (logs in {loop_dir / 'logs'})")
        events = traffic.TopicTail(state, the_loop.topic("logdir-events"))
        time.sleep(3)

        _say("\n== 4. the cluster before the fault")
        _say(_partition_table(state, TOPIC))
        victim = traffic.leader_of(state, TOPIC, 0)
        dir_path = traffic.log_dir_of(state, TOPIC, 0, victim)
        _say(f"\n== 5. break the disk under partition 0's leader: broker {victim}, {dir_path}")
        cluster.fail_disk(state, victim, dir_path, progress=progress)
        t0 = time.monotonic()

        def at() -> str:
            return f"[+{time.monotonic() - t0:5.1f} s]"

        seen = events.wait_for(lambda e: e.get("kind") == "log_dir_failure", timeout=60)
        events.close()
        if seen is not None:
            event = seen[0]
            who = f"broker {event['broker']}" if event.get("broker") is not None else "a broker"
            _say(f"{at()} detected: {who} reports a failed log dir ({event['source']})")

        def proposed() -> Any:
            return next((a for a in api.get("/actions")["actions"]
                         if a["type"] == "fix_offline_replicas"), None)

        action = _wait(proposed, "fix_offline_replicas action", 90, the_loop)
        proposed_after = time.monotonic() - t0
        shown = api.get(f"/actions/{action['id']}")
        _say(f"{at()} proposed: {action['type']} {action['id'][:12]}: {shown.get('reason', '')}")
        for other in api.get("/actions")["actions"]:
            if other["type"] == "page_operator":
                _say(f"{at()} paged: {api.get('/actions/' + other['id']).get('reason', '')}")
        shown = _wait(lambda: (a := api.get(f"/actions/{action['id']}")).get("approval_url")
                      and a["state"] == "awaiting_approval" and a,
                      "approval link", 30, the_loop)
        link = shown["approval_url"]
        _say(f"{at()} waiting for approval; the pager link is\n           {link}")
        if args.approve_by_hand:
            _say("           open it in a browser and press the button (waiting up to 10 min)")
            _wait(lambda: api.get(f"/actions/{action['id']}")["state"] != "awaiting_approval",
                  "approval", 600, the_loop)
            _say(f"{at()} approved")
        else:
            clicked = time.monotonic()
            _say(f"{at()} clicked: the page answers \"{click(link)}\"")
        state_seen = "approved"
        while True:
            now = api.get(f"/actions/{action['id']}")
            if now["state"] != state_seen:
                state_seen = now["state"]
                _say(f"{at()} {state_seen}"
                     + (f" ({now['progress']})" if now.get("progress") else ""))
            if is_terminal(state_seen):
                break
            the_loop.check_alive()
            time.sleep(0.3)
        healed = time.monotonic()

        _say("\n== 6. the cluster after")
        _say(_partition_table(state, TOPIC))
        time.sleep(2)
        problems = traffic.delivery_problems(producer, consumer)
        consumer.stop()
        _say(f"   producer: {len(producer.acked)} messages acknowledged; consumer: "
             + ("every one read exactly once" if not problems else "; ".join(problems)))

        _say("\n== summary")
        _say(f"   fault -> fix proposed: {proposed_after:.1f} s; "
             f"approval -> {state_seen}: "
             + (f"{healed - clicked:.1f} s" if not args.approve_by_hand else "see above"))
        _say(f"   offline replicas of {TOPIC} left: "
             f"{sum(len(p['offline_replicas']) for p in traffic.partitions(state, TOPIC))}")
        _say("   the failed disk itself still needs a person: replace it, then "
             "`selfheal sandbox heal-disk` restarts the broker with an empty dir")
        if state_seen != "succeeded" or problems:
            raise CliError(f"the fix ended {state_seen}; see {loop_dir / 'logs'}", code=1)
        healthy = True
    finally:
        if producer is not None:
            producer.stop()
        if consumer is not None:
            consumer.stop()
        if the_loop is not None:
            the_loop.stop_all()
        if healthy and not args.keep:
            shutil.rmtree(loop_dir, ignore_errors=True)  # on trouble its logs stay
        if args.keep:
            _say(f"\nsandbox left running; `selfheal sandbox --work-dir {state.work_dir} down`")
        else:
            _say("\n== tear down")
            cluster.down(state, progress=progress)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo", help="the whole loop on the sandbox: break a disk, watch it detected, "
                     "approved and healed",
        description=__doc__)
    p.add_argument("--work-dir", type=Path, default=None,
                   help="sandbox folder (default: the standard sandbox location)")
    p.add_argument("--mode", choices=("zk", "kraft"), default="zk")
    p.add_argument("--approve-by-hand", action="store_true",
                   help="print the approval link and wait for you to click it, instead of "
                        "clicking it for you")
    p.add_argument("--keep", action="store_true", help="leave the sandbox running at the end")
    p.set_defaults(func=run)
