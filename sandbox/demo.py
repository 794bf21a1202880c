"""`selfheal demo`: the whole self-healing loop on the sandbox, told as a story.

A sandbox cluster with traffic; the collectors, the Spark job and `selfheal serve` running
as real processes (`sandbox.loop`), with Prometheus (the project's alert rules),
Alertmanager and a local pager standing in for PagerDuty and Slack; a disk breaks under a
partition leader; the fault is detected, a fix proposed, the alert fires and pages with the
fix's one-click approval link, the link is "clicked", the replicas moved; and the promise
checked at the end: no partition offline, every acknowledged message read exactly once.
Each step prints when it happened, counted from the fault; the end says where to look.
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
from sandbox import versions

REPO = Path(__file__).resolve().parents[1]

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


def _fix_page(receiver: Any, fix_id: str) -> Any:
    """The PagerDuty trigger that carries the fix's approval link, once it came."""
    for r in receiver.accepted("pagerduty"):
        details = r.body.get("payload", {}).get("custom_details", {})
        if r.body.get("event_action") == "trigger" and r.body.get("links") \
                and details.get("action_id") == fix_id:
            return r
    return None


def _where_to_look(report_dir: Path, alerts: list[dict[str, Any]], page: Any,
                   receiver: Any, t0_wall: float) -> None:
    """The alert that fired, the page the pager got, the dashboards: printed and kept."""
    (report_dir / "alerts.json").write_text(json.dumps(alerts, indent=2))
    (report_dir / "pages.json").write_text(json.dumps(
        [{"channel": r.channel, "received_at": r.at, "body": r.body}
         for r in receiver.accepted()], indent=2))
    _say("\n== where to look")
    for a in alerts:
        labels = ", ".join(f'{k}="{v}"' for k, v in sorted(a["labels"].items())
                           if k in ("broker", "log_dir", "cluster", "severity"))
        _say(f"   the alert that fired in Prometheus: {a['labels']['alertname']}{{{labels}}}"
             f"\n     {a.get('annotations', {}).get('summary', '')}"
             f"\n     runbook: {a.get('annotations', {}).get('runbook_url', '-')}")
    body = page.body
    _say(f"   the page the pager received (+{page.at - t0_wall:.1f} s after the fault), "
         f"PagerDuty Events API v2:\n     \"{body['payload']['summary']}\" "
         f"(severity {body['payload']['severity']}, dedup_key {body['dedup_key'][:16]}...)"
         f"\n     its link: {body['links'][0]['href']}")
    slack = len(receiver.accepted("slack"))
    _say(f"   and {slack} Slack message(s) with the same link as a button; every page "
         f"received: {report_dir / 'pages.json'}, the alerts: {report_dir / 'alerts.json'}")
    boards = sorted((REPO / "dashboards" / "json").glob("*.json"))
    _say(f"   the dashboards ({len(boards)}), for Grafana (provisioning files in "
         f"dashboards/provisioning/): "
         + ", ".join(str(b.relative_to(REPO)) for b in boards))


def run(args: argparse.Namespace) -> int:
    from remediation.executor.lifecycle import is_terminal
    from sandbox import alertmanager, cluster, loop, prometheus, traffic
    from sandbox.cli import quiet_kafka_python
    from sandbox.pager_receiver import ROUTING_KEY, PagerReceiver

    quiet_kafka_python()

    def progress(message: str) -> None:
        print(f"  [sandbox] {message}", file=sys.stderr, flush=True)

    mode = args.mode or versions.default_mode(args.kafka)
    secured = f", secured: {args.security}" if args.security else ""
    _say(f"== 1. bring up the sandbox (Kafka {args.kafka}, {mode} mode{secured}): 3 brokers "
         "x 2 log dirs over 3 racks")
    try:
        state = cluster.up(args.work_dir, mode=mode, kafka=args.kafka, progress=progress,
                           security=args.security)
    except cluster.SandboxError as exc:
        raise CliError(str(exc), code=1) from None
    the_loop = producer = consumer = am = prom = None
    loop_dir = Path(tempfile.mkdtemp(prefix="selfheal-demo-loop-"))
    report_dir = Path(tempfile.mkdtemp(prefix="selfheal-demo-report-"))
    receiver = PagerReceiver().start()
    healthy = False
    try:
        _say(f"\n== 2. topic {TOPIC} (6 partitions, RF 2), an acks=all idempotent producer "
             "and a consumer running")
        traffic.create_topic(state, TOPIC, partitions=6, replication_factor=2)
        consumer = traffic.BackgroundConsumer(state, TOPIC)
        producer = traffic.BackgroundProducer(state, TOPIC, rate_per_s=100)
        consumer.start()
        producer.start()

        names = loop.pieces_for(state)
        collectors = ", ".join(n.removeprefix("collect-") for n in names
                               if n.startswith("collect-"))
        _say(f"\n== 3. start kafka-selfheal: collectors ({collectors}), the Spark job, serve")
        (loop_dir / "policy.toml").write_text(POLICY)
        started = time.monotonic()
        pager = {"pagerduty_url": receiver.pagerduty_url, "pagerduty_routing_key": ROUTING_KEY,
                 "slack_webhook_url": receiver.slack_url}
        the_loop = loop.start(state, loop_dir, names=names,
                              overrides={"detect": {"leader_window_seconds": 86400.0},
                                         "pager": pager},
                              policy=str(loop_dir / "policy.toml"))
        api = _Api(the_loop.serve_url, the_loop.api_token)
        _wait(lambda: "[stream] batch" in the_loop.pieces["stream"].log_tail(200),
              "first micro-batch of the Spark job", 300, the_loop)
        _wait(api.ready, "serve holding the executor lock", 60, the_loop)
        _say(f"   running after {time.monotonic() - started:.0f} s; serve at "
             f"{the_loop.serve_url} (logs in {loop_dir / 'logs'})")
        try:
            am = alertmanager.start(loop_dir / "alertmanager", the_loop.serve_url.replace(
                "http://", f"http://selfheal:{the_loop.api_token}@") + "/alertmanager")
            prom = prometheus.start(state, alertmanager_url=am.url,
                                    targets=the_loop.metrics_targets())
        except (alertmanager.AlertmanagerError, prometheus.PrometheusError) as exc:
            raise CliError(f"{exc} (`make deps` installs Debian's prometheus and "
                           "prometheus-alertmanager)", code=1) from None
        _say(f"   Prometheus at {prom.url} (the project's alert rules), Alertmanager at "
             f"{am.url} (paging serve), a local pager (PagerDuty and Slack formats) at "
             f"http://127.0.0.1:{receiver.port}")
        events = traffic.TopicTail(state, the_loop.topic("logdir-events"))
        time.sleep(3)

        _say("\n== 4. the cluster before the fault")
        _say(_partition_table(state, TOPIC))
        victim = traffic.leader_of(state, TOPIC, 0)
        dir_path = traffic.log_dir_of(state, TOPIC, 0, victim)
        _say(f"\n== 5. break the disk under partition 0's leader: broker {victim}, {dir_path}")
        cluster.fail_disk(state, victim, dir_path, progress=progress)
        t0, t0_wall = time.monotonic(), time.time()

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
        fired = _wait(lambda: [a for a in prom.alerts()
                               if a["labels"]["alertname"] == "KafkaLogDirOffline"
                               and a["labels"].get("broker") == str(victim)
                               and a["state"] == "firing"],
                      "KafkaLogDirOffline firing in Prometheus", 120, the_loop)
        _say(f"{at()} alert: KafkaLogDirOffline firing in Prometheus (from broker "
             f"{victim}'s exporter), on to Alertmanager and serve's webhook")
        page = _wait(lambda: _fix_page(receiver, action["id"]),
                     "page carrying the fix's link", 120, the_loop)
        link = page.body["links"][0]["href"]
        _say(f"{at()} paged (PagerDuty and Slack): \"{page.body['payload']['summary']}\"; "
             f"the link in the page is\n           {link}")
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
        _where_to_look(report_dir, fired, page, receiver, t0_wall)
        if state_seen != "succeeded" or problems:
            raise CliError(f"the fix ended {state_seen}; see {loop_dir / 'logs'}", code=1)
        healthy = True
    finally:
        if prom is not None:
            prom.stop()
        if am is not None:
            am.stop()
        receiver.stop()
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
    p.add_argument("--kafka", choices=tuple(versions.LINES), default=versions.DEFAULT_LINE,
                   help="the Kafka line the sandbox runs (default %(default)s)")
    p.add_argument("--mode", choices=("zk", "kraft"), default=None,
                   help="KRaft (default) or ZooKeeper (Kafka 3.9 only)")
    p.add_argument("--security", choices=("sasl_ssl", "mtls"), default=None,
                   help="a secured sandbox: TLS, SCRAM users or client certificates, and "
                        "each process with only its ACLs (docs/security.md); ZooKeeper mode: "
                        "sasl_ssl, with ZooKeeper SASL too")
    p.add_argument("--approve-by-hand", action="store_true",
                   help="print the approval link and wait for you to click it, instead of "
                        "clicking it for you")
    p.add_argument("--keep", action="store_true", help="leave the sandbox running at the end")
    p.set_defaults(func=run)
