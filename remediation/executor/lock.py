"""One active executor at a time: a lock the others wait on as standbys.

ZooKeeper mode (and any cluster with `[serve] lock_zookeeper` set): a kazoo `Lock` under
`/selfheal/executor/<cluster id>`; its node is ephemeral, so when the holder dies its
ZooKeeper session expires (the session timeout, 10 s by default) and the next standby
in line gets the lock. While the session is suspended (ZooKeeper unreachable) the holder
does nothing; when it is lost, the holder stops and queues up again.

KRaft without a ZooKeeper: a lease through a Kafka consumer group. Every `serve` joins
one group on a one-partition topic (`<prefix>executor-lock`); the member that is assigned
the partition is the leader. A killed leader leaves the group after
`session.timeout.ms`, and the coordinator hands the partition to a standby. Unlike the
ZooKeeper lock this is a lease without a fencing token: a leader paused for longer than
the session timeout may act once more before it notices. Kafka rejects most doubled
calls itself (a second identical reassignment changes nothing), and the executor
re-reads the cluster before every step, which keeps that window small.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from core.config import Config
    from core.security import ZooKeeperSecurity

LOCK_ROOT = "/selfheal/executor"
LOCK_TOPIC = "executor-lock"
SESSION_TIMEOUT_S = 10.0


class LockError(RuntimeError):
    """The lock service cannot be reached or set up; the message says what to check."""


class Leadership(Protocol):
    def wait(self, stop: threading.Event, timeout: float | None = None) -> bool:
        """Block until this process leads (True), or `stop` is set or about ``timeout``
        seconds passed (False)."""
        ...

    def is_leader(self) -> bool: ...

    def holder(self) -> str | None:
        """Who leads now, as its identity string, if known."""
        ...

    def close(self) -> None: ...


def leadership_for(config: Config, me: str, log: Callable[[str], None] = lambda m: None
                   ) -> Leadership:
    """The lock `config` asks for: `[serve] lock_zookeeper`, else the cluster's own
    ZooKeeper in ZooKeeper mode, else (KRaft) the consumer-group lease on the bus."""
    cluster_id = config.cluster.cluster_id or "default"
    zk = config.serve.lock_zookeeper or (
        config.cluster.zookeeper_connect if config.cluster.mode == "zk" else None)
    if zk:
        return ZkLeadership(zk, cluster_id, me, log,
                            security=config.cluster_zookeeper_security)
    from core.bus import client_config

    return GroupLeadership(client_config(config), config.bus.topic_prefix + LOCK_TOPIC,
                           cluster_id, me, log)


def identity(url: str | None = None) -> str:
    """'host pid 1234 http://...': what standbys and the status page show of a leader."""
    return f"{socket.gethostname()} pid {os.getpid()}" + (f" {url}" if url else "")


class ZkLeadership:
    """The kazoo lock (ZooKeeper recipe: ephemeral sequential nodes, lowest one leads)."""

    def __init__(self, hosts: str, cluster_id: str, me: str,
                 log: Callable[[str], None] = lambda m: None,
                 session_timeout: float = SESSION_TIMEOUT_S, *,
                 security: ZooKeeperSecurity | None = None) -> None:
        from kazoo.protocol.states import KazooState

        from core.zk_session import ZooKeeperLoginRefused, start, zk_client

        self.path = f"{LOCK_ROOT}/{cluster_id}"
        self.me = me
        self._log = log
        self._states = KazooState
        self._leader = False
        self._stale = False  # the session that held `lock` expired
        self._connected = threading.Event()
        self.client = zk_client(hosts, security, timeout=session_timeout)
        self.client.add_listener(self._on_state)
        try:
            start(self.client, hosts, 15)
        except ZooKeeperLoginRefused as exc:
            raise LockError(f"the executor lock: {exc}") from None
        except Exception as exc:
            self.client.close()
            raise LockError(f"cannot reach ZooKeeper at {hosts} for the executor lock "
                            f"({exc}); check [cluster] zookeeper_connect or "
                            "[serve] lock_zookeeper") from exc
        self._connected.set()
        self.lock = self.client.Lock(self.path, me)

    def _on_state(self, state: Any) -> None:
        # kazoo calls this on its own thread; only flags change here.
        if state == self._states.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
            if state == self._states.LOST:
                # The lock's node died with the session, but the recipe object still
                # believes it holds it (and keeps its inner lock): `wait` makes a new one.
                self._stale = True
                if self._leader:
                    self._leader = False
                    self._log("ZooKeeper session lost: no longer the active executor")

    def wait(self, stop: threading.Event, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            if not self._connected.wait(timeout=1.0):
                continue
            if self._stale:
                self._stale = False
                self.lock = self.client.Lock(self.path, self.me)
            elif self.lock.is_acquired:
                # The connection dropped and came back within the session: the lock node
                # lived on with it, so this process still holds the lock (the recipe would
                # refuse a second acquire for ever).
                self._leader = True
                return True
            try:
                if self.lock.acquire(blocking=True, timeout=1.0):
                    self._leader = True
                    return True
            except Exception as exc:  # LockTimeout, or the session dropped meanwhile
                if type(exc).__name__ != "LockTimeout":
                    self._log(f"lock attempt failed ({exc}); retrying")
                    self.lock = self.client.Lock(self.path, self.me)
                    time.sleep(1.0)
        return False

    def is_leader(self) -> bool:
        return (self._leader and not self._stale and self._connected.is_set()
                and self.lock.is_acquired)

    def holder(self) -> str | None:
        try:
            contenders = self.lock.contenders()
        except Exception:
            return None
        return contenders[0] if contenders else None

    def close(self) -> None:
        try:
            if self.lock.is_acquired:
                self.lock.release()
        except Exception:
            pass  # the session ends below anyway, which frees the node
        self._leader = False
        self.client.stop()
        self.client.close()


class GroupLeadership:
    """Leadership through a Kafka consumer group on a one-partition topic (KRaft fallback).

    A member that stays out of its group is joined again. librdkafka's group consumer can
    stay out after every broker restarted (its issues #3082, #2944 report the same): in a
    chaos run's bus outage, serve's lease consumer never rejoined, and the cluster's own
    view said nobody held the lease (or that this serve did, though its consumer was never
    told) for minutes with the bus answering. So when the group, asked by `holder`, has
    shown no other holder for `rejoin_after` seconds, the consumer is replaced by a new
    one that joins afresh; another serve holding the lease is never disturbed.
    """

    def __init__(self, client_config: dict[str, Any], topic: str, cluster_id: str, me: str,
                 log: Callable[[str], None] = lambda m: None,
                 session_timeout: float = SESSION_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.topic = topic
        self.me = me
        self._log = log
        self._leader = threading.Event()
        self._stop = threading.Event()
        self._rejoin = threading.Event()  # the poll thread replaces the consumer
        _ensure_lock_topic(client_config, topic)
        self._client_config = client_config
        self._admin: Any = None
        self._group = f"selfheal-executor-lock-{cluster_id}"
        self._session_timeout = session_timeout
        # a rebalance after a holder died takes up to a session; three are a stuck member
        self.rejoin_after = 3 * session_timeout
        self._clock = clock
        self._unheld_since: float | None = None  # since when the group shows no holder
        self.consumer = self._join()
        # The group needs polls to stay a member; a thread of its own keeps them coming
        # whatever the executor is busy with.
        self._thread = threading.Thread(target=self._poll, name="executor-lock", daemon=True)
        self._thread.start()

    def _join(self) -> Any:
        from confluent_kafka import Consumer

        consumer = Consumer({
            **self._client_config,
            "group.id": self._group,
            "client.id": self.me[:200],
            "enable.auto.commit": False,
            "session.timeout.ms": int(self._session_timeout * 1000),
            "heartbeat.interval.ms": 1000,
            "partition.assignment.strategy": "range",
        })
        consumer.subscribe([self.topic], on_assign=self._on_assign,
                           on_revoke=self._on_revoke, on_lost=self._on_revoke)
        return consumer

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        if any(p.partition == 0 for p in partitions):
            self._leader.set()

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        if self._leader.is_set():
            self._log("the executor lease moved to another serve: no longer active")
        self._leader.clear()

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                if self._rejoin.is_set():
                    self._rejoin.clear()
                    old, self.consumer = self.consumer, None
                    try:
                        if old is not None:
                            old.close()
                    except Exception:
                        pass  # it was stuck; the new member is what counts
                    self.consumer = self._join()
                self.consumer.poll(0.5)
            except Exception as exc:  # a closed consumer, or the bus going away
                if self._stop.is_set():
                    return
                self._log(f"executor lease poll failed ({exc}); retrying")
                time.sleep(1.0)
                if self.consumer is None:
                    self._rejoin.set()

    def wait(self, stop: threading.Event, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            if self._leader.wait(timeout=1.0):
                return True
        return False

    def is_leader(self) -> bool:
        return self._leader.is_set()

    def holder(self) -> str | None:
        if self._leader.is_set():
            self._unheld_since = None
            return self.me
        from confluent_kafka.admin import AdminClient

        try:
            self._admin = self._admin or AdminClient(self._client_config)
            # The group's coordinator is asked only when the lease topic has a leader: a
            # DescribeConsumerGroups timing out against an unreachable bus every 5 s is
            # where serve aborted inside librdkafka once (rd_kafka_enq_once_del_source_
            # return: refcnt assertion) in the chaos suite's bus outage.
            meta = self._admin.list_topics(topic=self.topic, timeout=2)
            lease = meta.topics.get(self.topic)
            if lease is None or lease.error is not None or not any(
                    p.leader >= 0 for p in lease.partitions.values()):
                return None
            group = self._admin.describe_consumer_groups([self._group], request_timeout=5)
            (desc,) = [f.result() for f in group.values()]
        except Exception:
            return None  # the bus is slow or away: unknown, as the page says
        holder = next((str(member.client_id) for member in desc.members
                       if any(tp.partition == 0
                              for tp in member.assignment.topic_partitions)), None)
        self._watch(holder)
        return holder

    def _watch(self, holder: str | None) -> None:
        """Join again when the group, answering, has shown no holder but (untold) this
        serve for `rejoin_after` seconds."""
        if holder is not None and holder != self.me[:200]:
            self._unheld_since = None  # another serve leads: a standby waits
            return
        now = self._clock()
        if self._unheld_since is None:
            self._unheld_since = now
        elif now - self._unheld_since >= self.rejoin_after:
            self._log(f"the executor lease has had no holder for "
                      f"{now - self._unheld_since:.0f} s while the bus answers: joining its "
                      f"group again")
            self._unheld_since = now
            self._rejoin.set()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._leader.clear()
        try:
            self.consumer.close()  # leaves the group now: a standby takes over at once
        except Exception:
            pass


def _ensure_lock_topic(client_config: dict[str, Any], topic: str) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client_config)
    try:
        meta = admin.list_topics(timeout=15)
    except KafkaException as exc:
        raise LockError(f"cannot reach the event bus for the executor lease: {exc}") from exc
    if topic in meta.topics:
        return
    rf = min(3, len(meta.brokers))
    future = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=rf)],
                                 request_timeout=15)[topic]
    try:
        future.result()
    except KafkaException as exc:
        if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
            raise LockError(f"cannot create the executor lease topic {topic}: {exc}") from exc
