"""`selfheal serve` as one process: HTTP for everyone, intake + executor for the leader.

Every `serve` answers HTTP from the shared store (so a standby shows the same actions
and takes approvals, which the active executor then runs). Only the holder of the
executor lock consumes `selfheal.actions`, runs the executor loop and publishes the
audit to Kafka; the others wait as standbys and take over when it dies. Losing the
lock stops all three at once; they start again if the lock comes back.
"""

from __future__ import annotations

import secrets
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core import bus, clock
from core.config import Config
from core.owner import OwnerError, claim_store
from core.signing import SignatureError
from core.signing import signer as action_signer
from remediation.executor.actions import ActionError, parse_action_json
from remediation.executor.cluster import ClusterError
from remediation.executor.policy import Policy, Ruling
from remediation.executor.runner import Executor, Received, Timeouts
from remediation.executor.store import ActionRow, ActionStore
from remediation.service import http, metrics
from remediation.service.approvals import Approvals
from remediation.service.links import LinkSigner
from remediation.service.pager import Pager
from remediation.service.pages import LiveView, current_replicas
from schemas.records import Action, ConsumerAssignment

OUTBOX_SECONDS = 1.0
HOLDER_REFRESH_SECONDS = 5.0
RETRY_SECONDS = 5.0
# The executor's reads failing this long: its clients are rebuilt (`_lead` starts again).
CLIENT_RESET_SECONDS = 30.0


def say(message: str) -> None:
    # timed as the job's and the collectors' lines are: an outage's log reads in order
    print(f"{time.strftime('%H:%M:%S')} selfheal serve: {message}", file=sys.stderr,
          flush=True)


@dataclass
class Runtime:
    """What this process knows about itself, for /metrics and /healthz."""

    leader: bool = False
    holder: str | None = None
    ticks: int = 0
    last_tick_seconds: float = 0.0
    executor: Executor | None = None
    counters: metrics.Counters = field(default_factory=metrics.Counters)

    def gauges(self) -> dict[str, float]:
        return {
            "selfheal_executor_leader": 1.0 if self.leader else 0.0,
            "selfheal_executor_ticks_total": float(self.ticks),
            "selfheal_executor_errors_total": float(self.executor.errors if self.executor
                                                    else 0),
            "selfheal_executor_tick_seconds": self.last_tick_seconds,
        }


class Serve:
    def __init__(self, config: Config, policy: Policy, host: str, port: int,
                 log: Callable[[str], None] = say, cluster: str | None = None) -> None:
        self.config = config
        self.policy = policy
        self.log = log
        self.signer = action_signer(config)  # before anything starts: ConfigError if unset
        self._producer: Any = None  # for POST /api/actions, made on first use
        self._submit_lock = threading.Lock()
        self.runtime = Runtime()
        sqlite = config.serve.sqlite_path
        sqlite.parent.mkdir(parents=True, exist_ok=True)
        self.store = ActionStore(sqlite)
        cluster = cluster or config.cluster.cluster_id
        if cluster is not None:  # a store of another cluster is refused (core/owner.py)
            try:
                claim_store(self.store, sqlite, cluster)
            except OwnerError:
                self.store.close()
                raise
        # Unconfigured secrets are made once and kept in the store: links stay valid across
        # restarts and work on a standby sharing the store.
        secret = config.serve.link_secret or self.store.setting(
            "link_secret", lambda: secrets.token_hex(32))
        token = config.serve.api_token
        if token is None:
            token = self.store.setting("api_token", lambda: secrets.token_urlsafe(32))
            log(f"API token (set [serve] api_token to choose one): {token}")
        signer = LinkSigner(secret.encode(), used=self.store)
        self.approvals = Approvals(self.store, signer, "http://unbound",
                                   policy.limits.approval_ttl_seconds)
        service = http.Service(self.store, self.approvals, token, self.runtime.counters,
                               self.runtime.gauges, self._role, self._current, self.submit,
                               policy.limits.inter_broker_throttle_bytes_per_s)
        self.server, self._http = http.start(host, port, service)
        self.approvals.base_url = (config.serve.link_base_url or self.server.url).rstrip("/")
        self.url = self.server.url
        # Pages go out from every serve (the store's outbox claims keep two from sending
        # one message), so a standby still pages while no executor leads.
        self.pager = Pager(self.store, self.approvals, config.pager, self.runtime.counters,
                           log, throttle=policy.limits.inter_broker_throttle_bytes_per_s)
        self._shown: Any = None  # the executor's latest read with partitions, for pages

    def _current(self) -> LiveView | None:
        """Replica lists from the executor's latest read that had partitions (its passes
        over pages read brokers and dirs only), with the read for the plan's picture (a
        standby has none: 'now ?')."""
        view = self._shown if self.runtime.leader else None
        return None if view is None else LiveView(current_replicas(view.model), view.model)

    def _cluster(self, admin: Any) -> Any:
        """The executor's cluster, remembering its latest read with partitions for the
        approval pages."""
        from remediation.executor.cluster import KafkaCluster

        serve = self

        class ShownCluster(KafkaCluster):
            def read(self, *args: Any, **kwargs: Any) -> Any:
                view = super().read(*args, **kwargs)
                if view.model.partitions:
                    serve._shown = view
                return view

        return ShownCluster(admin, self.config.cluster.cluster_id)

    def _role(self) -> tuple[str, str | None]:
        return ("leader" if self.runtime.leader else "standby"), self.runtime.holder

    # --- leadership ---------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Until `stop`: wait for the lock, lead while it is held, wait again."""
        from remediation.executor import lock

        leadership = lock.leadership_for(self.config, lock.identity(self.url), self.log)
        said: str | None = None  # the holder last announced ("" for nobody)
        paging = threading.Thread(target=self.pager.run, args=(stop,), name="pager",
                                  daemon=True)
        paging.start()
        try:
            while not stop.is_set():
                # Who leads is asked again every few seconds while waiting: a group still
                # forming, or a leader that changed, shows up on /healthz and in the log.
                holder = self.runtime.holder = leadership.holder()
                if (holder or "") != said:
                    self.log(f"standby: waiting for the executor lock (held by "
                             f"{holder or 'nobody yet'})")
                    said = holder or ""
                if not leadership.wait(stop, timeout=HOLDER_REFRESH_SECONDS):
                    continue
                self.runtime.leader = True
                self.runtime.holder = leadership.holder()
                self.log("active executor: taking in actions and running them")
                try:
                    self._lead(stop, leadership.is_leader)
                finally:
                    self.runtime.leader = False
                if not stop.is_set():
                    self.log("no longer the active executor")
                said = None
        finally:
            leadership.close()
            self.pager.poke()
            paging.join(timeout=30)

    def _lead(self, stop: threading.Event, is_leader: Callable[[], bool]) -> None:
        while not stop.is_set() and is_leader():
            try:
                self._lead_once(stop, is_leader)
                return
            except Exception as exc:  # Kafka away: say so, wait, try again while leading
                self.log(f"executor stopped: {type(exc).__name__}: {exc}; retrying in "
                         f"{RETRY_SECONDS:g} s")
                stop.wait(RETRY_SECONDS)

    def _lead_once(self, stop: threading.Event, is_leader: Callable[[], bool]) -> None:
        from core.live import open_admin
        from remediation.service.intake import Intake
        from remediation.service.outbox import Outbox

        config = self.config
        bus.ensure_topics(config)
        producer = bus.producer(config)
        with open_admin(config.require_bootstrap_servers(), client_id="selfheal-executor",
                        security=config.cluster_security) as admin:
            cluster = self._cluster(admin)
            executor = Executor(
                self.store, cluster, self.policy, signer=self.signer,
                skew_threshold=config.detect.disk_skew_threshold,
                timeouts=Timeouts(config.serve.execution_timeout_seconds,
                                  config.serve.verify_timeout_seconds,
                                  config.serve.stall_seconds),
                notify=self._notify, publish=lambda a: self._publish(producer, a),
                is_leader=is_leader, log=self.log)
            self.runtime.executor = executor
            def intake_consumer() -> Any:
                return bus.consumer(config, config.serve.intake_group,
                                    **{"enable.auto.commit": False,
                                       "auto.offset.reset": "earliest"})

            intake = Intake(intake_consumer(), config.topic("actions"), executor,
                            self._count_intake, self.log, renew=intake_consumer)
            outbox = Outbox(self.store, producer,
                            {"action-status": config.topic("action-status"),
                             "dead-letter": config.topic("dead-letter")},
                            config.cluster.cluster_id or "default",
                            lambda t: self.runtime.counters.inc(
                                "selfheal_status_published_total", topic=t))
            try:
                self._loop(stop, is_leader, intake, executor, outbox)
            finally:
                intake.close()
                outbox.drain(5.0)
                producer.flush(5.0)

    def _loop(self, stop: threading.Event, is_leader: Callable[[], bool], intake: Any,
              executor: Executor, outbox: Any) -> None:
        tick = self.config.serve.tick_seconds
        next_tick = next_publish = 0.0
        while not stop.is_set() and is_leader():
            intake.poll(min(0.5, tick), stop)
            now = time.monotonic()
            if now >= next_tick:
                executor.tick()
                self.runtime.ticks += 1
                self.runtime.last_tick_seconds = time.monotonic() - now
                next_tick = now + tick
                failing = executor.failing_since
                if failing is not None and now - failing > CLIENT_RESET_SECONDS:
                    # Kafka answered other clients but not this admin for a while after
                    # a ZooKeeper outage and restarts (a chaos run: ECONNREFUSED for 4 min
                    # while every broker listened): start again with new clients.
                    raise ClusterError(f"the cluster has not answered for "
                                       f"{now - failing:.0f} s; reconnecting with new clients")
            if now >= next_publish:
                outbox.publish()
                next_publish = now + OUTBOX_SECONDS

    # --- callbacks ----------------------------------------------------------------------

    def _notify(self, row: ActionRow, decision: Ruling) -> None:
        link = self.approvals.link(row)
        what = "PAGE: " if decision.page else ""
        self.log(f"{what}action {row.id[:12]} ({row.type}) awaits approval: {link.url}")
        self.pager.poke()  # an alert may be waiting for this fix's link

    def _count_intake(self, received: Received) -> None:
        self.runtime.counters.inc("selfheal_intake_records_total", outcome=received.outcome)

    def _publish(self, producer: Any, action: Action) -> None:
        plan = action.plan
        record = ConsumerAssignment.from_dict({
            "version": 1, "cluster_id": action.cluster_id, "event_time": clock.text(),
            "group": plan["group"], "strategy": plan.get("strategy", "unspecified"),
            "assignment": plan["assignment"], "cross_rack": plan["cross_rack"],
            # the planners key every member, those given nothing too: the membership the
            # target was planned for, which the client helper compares with the group's
            "members": sorted(plan["assignment"])})
        bus.produce(producer, self.config.topic("consumer-assignments"), record.to_json(),
                    record.key(), timeout=15.0)
        if producer.flush(15.0):
            raise ClusterError("the consumer assignment was not acknowledged by the bus in "
                               "15 s")

    def submit(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        """POST /api/actions: a signed action record goes onto the actions topic, where the
        intake takes it like any other (policy, approval, limits, the breaker all apply).
        Refused here with the reason when it does not decode or verify."""

        try:
            action = parse_action_json(raw)
            self.signer.verify(action)
        except (ActionError, SignatureError) as exc:
            forged = isinstance(exc, SignatureError)
            reason = f"refused, nothing submitted: {exc}"
            self.store.reject(raw, reason, "http")
            return (403 if forged else 400), {"error": reason}
        with self._submit_lock:
            if self._producer is None:
                self._producer = bus.producer(self.config)
            try:
                bus.produce(self._producer, self.config.topic("actions"), raw,
                            action.action_id.encode(), timeout=15.0)
            except bus.Refused:
                left = 1
            else:
                left = self._producer.flush(15.0)
        if left:
            return 503, {"error": "the bus did not acknowledge the action within 15 s; "
                                  "nothing was submitted: try again"}
        return 202, {"action_id": action.action_id, "type": action.type,
                     "url": f"/api/actions/{action.action_id}",
                     "note": "submitted to the actions topic; poll the url for its state"}

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(5.0)
        self.server.shutdown()
        self.server.server_close()
        self.store.close()
