"""`RackAwareConsumer`: a confluent-kafka consumer that reads its group's rack-aware
(KIP-881) target from `selfheal.consumer-assignments` whenever the target fits the group.

It is a normal member of a classic group (subscribe: liveness, membership and the
group's own eager assignment, which decides who owns what in each generation). On top,
the members lend and give back partitions by the rules of `handoff`: the owner of a
partition the target gives to another member stops reading it, commits its position with
a token naming the borrower, and the borrower reads on from that offset; when the target
stops fitting (withdrawn, replaced, or planned for other members) the borrower stops,
commits, and hands it back. Every switch re-assigns the consumer with explicit offsets
and commits what was read before it, so nothing is lost or read twice.

Only classic groups with an eager assignor (`range` or `roundrobin`): the cooperative
protocol keeps partitions across generations and KIP-848 groups assign on the broker, so
neither gives the barrier the hand-over rules stand on.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from remediation.consumers.handoff import (
    TP,
    Step,
    TargetView,
    Token,
    generation_of,
    parse_token,
    step,
    target_view,
)
from remediation.consumers.targets import TargetReader

log = logging.getLogger("selfheal.consumers")

# Appended to client.id: the group's description shows which members run the helper, and
# a target is applied only when every member does.
MARK = ".selfheal-handoff1"
EAGER = {"range", "roundrobin"}
# Settings a consumer and an admin client share (where the cluster is, how to log in).
_CONNECTION = ("bootstrap.servers", "security.", "sasl.", "ssl.", "socket.", "client.dns",
               "broker.address.family", "logger")


# No description of the group yet (or only one from an earlier generation).
_UNKNOWN: tuple[float, int, frozenset[str] | None, frozenset[str], bool] = \
    (0.0, -1, None, frozenset(), False)


class ConfigError(ValueError):
    """A consumer setting the helper cannot work with; the message names the fix."""


def _connection(settings: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if k.startswith(_CONNECTION)}


_KIP848 = ("the helper works in classic groups only: in a KIP-848 group "
           "(group.protocol=consumer) the broker assigns the partitions and client-side "
           "assignors and assignments do not apply (KAFKA-18327), so no selfheal target can; "
           "for rack locality there, set client.rack on the consumers and the brokers' "
           "group.consumer.assignors (selfheal's page for the group names them)")


def _check_group(admin: Any, group: str, timeout: float) -> None:
    """Refuse a group the cluster runs as a KIP-848 group: a classic member may join one
    on 4.x, but the broker's assignment then holds, not the helper's targets."""
    try:
        found = admin.describe_consumer_groups([group], request_timeout=timeout)[group]
        kind = getattr(getattr(found.result(timeout + 5), "type", None), "name", "")
    except Exception:  # noqa: BLE001 - no such group yet, or no answer: it starts classic
        return
    if kind == "CONSUMER":
        raise ConfigError(f"consumer group {group} runs as a KIP-848 group on the cluster: "
                          f"{_KIP848}")


def _check(settings: Mapping[str, Any]) -> None:
    if not settings.get("group.id"):
        raise ConfigError("set group.id: the helper works for a consumer group")
    if str(settings.get("group.protocol", "classic")).lower() != "classic":
        raise ConfigError(f"group.protocol={settings['group.protocol']}: {_KIP848}; remove "
                          "the setting to run the helper in a classic group")
    strategies = {s.strip() for s in str(
        settings.get("partition.assignment.strategy", "range,roundrobin")).split(",")}
    if not strategies <= EAGER:
        raise ConfigError(
            f"partition.assignment.strategy={settings['partition.assignment.strategy']}: "
            "the helper needs an eager assignor (range or roundrobin); the cooperative one "
            "keeps partitions across rebalances, which the hand-over rules cannot allow")
    if str(settings.get("enable.auto.commit", "false")).lower() == "true":
        raise ConfigError("enable.auto.commit=true: drop it; the helper commits itself "
                          "(before every switch, on every rebalance, every commit_seconds)")
    if not settings.get("client.rack"):
        log.warning("client.rack is not set: KIP-881 plans cannot place this member; set "
                    "client.rack to the rack (broker.rack) it runs in")


class RackAwareConsumer:
    """A classic-group consumer that applies its group's published rack-aware target.

    ``settings`` are confluent-kafka consumer settings (``group.id`` required);
    ``topics`` what to subscribe to. ``bus`` holds the connection settings of the Kafka
    with the selfheal.* topics (default: the consumer's own cluster) and
    ``targets_topic`` the target topic's name (with your prefix, if any). Use it like a
    confluent-kafka consumer: `poll` in one thread, `close` at the end.
    """

    def __init__(self, settings: Mapping[str, Any], topics: Sequence[str], *,
                 targets_topic: str = "selfheal.consumer-assignments",
                 bus: Mapping[str, Any] | None = None, cluster_id: str | None = None,
                 check_seconds: float = 1.0, membership_seconds: float = 2.0,
                 commit_seconds: float = 5.0, hold_back_seconds: float = 10.0,
                 timeout: float = 30.0) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient

        _check(settings)
        self.group = str(settings["group.id"])
        self._reset = str(settings.get("auto.offset.reset", "latest")).lower()
        self._timeout = timeout
        self._check_seconds, self._membership_seconds = check_seconds, membership_seconds
        self._commit_seconds, self._hold_back_seconds = commit_seconds, hold_back_seconds
        client_id = str(settings.get("client.id", "rdkafka"))
        self._admin = AdminClient(_connection(settings))
        _check_group(self._admin, self.group, timeout)
        self._targets = TargetReader(_connection(bus if bus is not None else settings),
                                     targets_topic, self.group, cluster_id, timeout)
        self._targets.catch_up(timeout)
        self._consumer = Consumer({**settings, "enable.auto.commit": False,
                                   "client.id": client_id + MARK})
        self._topics = list(topics)
        self._generation: int | None = None
        self._owned: frozenset[TP] = frozenset()
        self._pos: dict[TP, int] = {}  # what is read now -> the next offset to deliver
        self._meta: dict[TP, str] = {}  # what is read now -> its commit metadata
        self._pending: dict[TP, tuple[int, str]] = {}  # commits still owed
        self._lent: dict[TP, str] = {}
        self._hold_back: dict[tuple[TP, str], float] = {}
        self._partitions: list[TP] = []
        self._members: tuple[float, int, frozenset[str] | None, frozenset[str], bool] = \
            _UNKNOWN
        self._next_check = self._next_commit = 0.0
        self.view = TargetView({}, False, "not in the group yet")
        self.reading: frozenset[TP] = frozenset()  # for callers on other threads
        self.switches = 0
        self._consumer.subscribe(self._topics, on_assign=self._on_assign,
                                 on_revoke=self._on_revoke, on_lost=self._on_lost)

    # --- the consumer's surface -----------------------------------------------------------

    @property
    def member_id(self) -> str | None:
        return self._consumer.memberid()

    @property
    def owned(self) -> frozenset[TP]:
        """The partitions the group's own assignment gives this member."""
        return self._owned

    def poll(self, timeout: float = 1.0) -> Any:
        from confluent_kafka import KafkaException

        """The next message (or None, or an error event), as `Consumer.poll`; switches
        between the group's and the target's partitions happen here, between messages."""
        now = time.monotonic()
        if self._generation is not None and now >= self._next_check:
            self._next_check = now + self._check_seconds
            try:
                self._reconcile()
            except KafkaException as exc:
                # Nothing moved (assign() is the first change and commits that fail stay
                # owed): the group's coordinator is slow or moving; look again next time.
                log.warning("group %s: could not check the target (%s); reading %d "
                            "partitions as before", self.group, exc, len(self._pos))
        if self._generation is not None and now >= self._next_commit and self._pos:
            self._next_commit = now + self._commit_seconds
            self._commit(self._positions())
        msg = self._consumer.poll(timeout)
        if msg is None or msg.error() is not None:
            return msg
        tp, offset = (str(msg.topic()), int(msg.partition() or 0)), int(msg.offset() or 0)
        at = self._pos.get(tp)
        if at is None or offset < at:
            return None  # fetched before a switch, or already delivered: never twice
        self._pos[tp] = offset + 1
        return msg

    def commit(self) -> None:
        """Commit the position after every message `poll` returned (synchronously)."""
        self._commit(self._positions())

    def close(self) -> None:
        """Commit, leave the group (the eager revoke commits once more) and close."""
        try:
            if self._generation is not None:
                self._commit(self._positions())
            self._consumer.close()
        finally:
            self._targets.close()

    def __enter__(self) -> RackAwareConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- rebalances -----------------------------------------------------------------------

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        generation = generation_of(consumer.consumer_group_metadata())
        self._owned = frozenset((p.topic, p.partition) for p in partitions)
        self._lent.clear()
        self._hold_back.clear()
        # A description from before this generation may list a member that has left:
        # lending to it would leave the partition unread until the next rebalance.
        self._members = _UNKNOWN
        self._partitions = self._subscribed_partitions()
        committed = self._committed(sorted(self._owned), attempts=3)
        starts = {tp: self._start(tp, committed.get(tp, (-1, None))[0]) for tp in self._owned}
        self._assign(starts, {tp: "" for tp in self._owned})
        self._generation = generation
        self._next_check = 0.0
        log.info("group %s generation %d: owns %d partitions", self.group, generation,
                 len(self._owned))

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        # The eager barrier: the next generation starts only after every member has been
        # here, so what this member read (its own and borrowed partitions) is committed
        # before anyone else reads it.
        try:
            self._commit(self._positions(), attempts=3)
        finally:
            self._forget()

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        log.warning("group %s: this member was dropped from the group (session or poll "
                    "interval exceeded); its uncommitted positions are lost, others read "
                    "on from the last commit", self.group)
        self._forget()

    def _forget(self) -> None:
        self._generation = None
        self._owned = frozenset()
        self._pos, self._meta, self._pending = {}, {}, {}
        self._members = _UNKNOWN
        self.reading = frozenset()
        self.view = TargetView({}, False, "rebalancing")

    # --- the switch -----------------------------------------------------------------------

    def _reconcile(self) -> None:
        assert self._generation is not None
        gen, me = self._generation, self._consumer.memberid()
        if self._pending:
            self._commit(self._positions())  # owed from a failed attempt: first
            if self._pending:
                return
        record = self._targets.poll()
        members, stable, helpers = self._membership(record is not None)
        self.view = target_view(record, members, me, stable, helpers)
        offsets, tokens = self._tokens()
        now = time.monotonic()
        for tp, borrower in list(self._lent.items()):
            token = tokens.get(tp)
            if token is None or token.generation != gen or token.holder == me:
                self._hold_back[(tp, borrower)] = now + self._hold_back_seconds
                del self._lent[tp]
        hold = {k for k, until in self._hold_back.items() if until > now}
        nxt = step(me, gen, self._owned, tokens, self.view, hold)
        if nxt.read == frozenset(self._pos) and not nxt.lend and not nxt.give_back:
            return
        self._switch(nxt, offsets, tokens)

    def _switch(self, nxt: Step, offsets: Mapping[TP, int], tokens: Mapping[TP, Token]) -> None:
        assert self._generation is not None
        gen, me = self._generation, self._consumer.memberid()
        owed: dict[TP, tuple[int, str]] = self._positions()
        for tp, borrower in nxt.lend.items():
            at = self._pos.get(tp, offsets.get(tp, -1))
            owed[tp] = (self._start(tp, at), Token(gen, me, borrower).text())
        for tp, owner in nxt.give_back.items():
            at = self._pos.get(tp, offsets.get(tp, -1))
            owed[tp] = (self._start(tp, at), Token(gen, owner, owner).text())
        starts: dict[TP, int] = {}
        meta: dict[TP, str] = {}
        for tp in nxt.read:
            if tp in self._pos:
                starts[tp], meta[tp] = self._pos[tp], self._meta[tp]
            else:
                starts[tp] = self._start(tp, offsets.get(tp, -1))
                token = tokens.get(tp)
                meta[tp] = "" if tp in self._owned else Token(gen, token.owner if token
                                                              else me, me).text()
        # Stop reading what leaves before its token names the next holder: assign() drops
        # whatever was fetched for it and not yet delivered.
        self._assign(starts, meta)
        self._commit(owed)
        self._lent.update(nxt.lend)
        self.switches += 1
        log.info("group %s: reading %d partitions (lent %d, gave back %d): %s", self.group,
                 len(starts), len(nxt.lend), len(nxt.give_back), self.view.why)

    # --- Kafka calls ----------------------------------------------------------------------

    def _assign(self, starts: Mapping[TP, int], meta: Mapping[TP, str]) -> None:
        from confluent_kafka import TopicPartition

        self._consumer.assign([TopicPartition(t, p, off) for (t, p), off in
                               sorted(starts.items())])
        self._pos, self._meta = dict(starts), dict(meta)
        self.reading = frozenset(starts)

    def _positions(self) -> dict[TP, tuple[int, str]]:
        return {tp: (at, self._meta.get(tp, "")) for tp, at in self._pos.items()}

    def _commit(self, offsets: Mapping[TP, tuple[int, str]], attempts: int = 1) -> None:
        """Commit ``offsets`` and whatever is still owed; what fails stays owed (retried
        before the next switch and at the next revoke)."""
        from confluent_kafka import KafkaException, TopicPartition

        self._pending.update(offsets)
        if not self._pending:
            return
        batch = [TopicPartition(t, p, off, metadata=m)
                 for (t, p), (off, m) in sorted(self._pending.items())]
        for attempt in range(attempts):
            try:
                done = self._consumer.commit(offsets=batch, asynchronous=False)
            except KafkaException as exc:
                log.warning("group %s: commit of %d offsets failed (%s); kept to retry",
                            self.group, len(batch), exc)
                time.sleep(0.2 * (attempt + 1))
                continue
            failed = {(tp.topic, tp.partition) for tp in done or [] if tp.error is not None}
            self._pending = {tp: v for tp, v in self._pending.items() if tp in failed}
            if not self._pending:
                return

    def _committed(self, tps: Sequence[TP], attempts: int = 1
                   ) -> dict[TP, tuple[int, str | None]]:
        from confluent_kafka import KafkaException, TopicPartition

        if not tps:
            return {}
        for attempt in range(attempts):
            try:
                found = self._consumer.committed([TopicPartition(t, p) for t, p in tps],
                                                 timeout=self._timeout)
                break
            except KafkaException:
                if attempt + 1 == attempts:
                    raise
                time.sleep(0.5 * (attempt + 1))
        return {(tp.topic, tp.partition): (tp.offset, tp.metadata) for tp in found
                if tp.error is None}

    def _tokens(self) -> tuple[dict[TP, int], dict[TP, Token]]:
        committed = self._committed(self._partitions)
        offsets = {tp: off for tp, (off, _) in committed.items()}
        tokens = {tp: token for tp, (_, meta) in committed.items()
                  if (token := parse_token(meta)) is not None}
        return offsets, tokens

    def _start(self, tp: TP, committed: int) -> int:
        """Where reading ``tp`` starts: the committed offset, else auto.offset.reset made
        explicit (so a later switch never resets a second time and skips what came)."""
        from confluent_kafka import TopicPartition

        if committed >= 0:
            return committed
        low, high = self._consumer.get_watermark_offsets(TopicPartition(*tp),
                                                         timeout=self._timeout)
        return int(low if self._reset in ("earliest", "smallest", "beginning") else high)

    def _subscribed_partitions(self) -> list[TP]:
        meta = self._consumer.list_topics(timeout=self._timeout)
        patterns = [re.compile(t) for t in self._topics if t.startswith("^")]
        names = [t for t in meta.topics if t in self._topics
                 or any(p.match(t) for p in patterns)]
        return sorted((t, p) for t in names for p in meta.topics[t].partitions)

    def _membership(self, wanted: bool) -> tuple[frozenset[str] | None, bool, frozenset[str]]:
        """The group's members, whether it is stable, and which members run the helper;
        described at most every membership_seconds, and at once when the target changed."""
        from confluent_kafka import ConsumerGroupState

        at, version, members, helpers, stable = self._members
        now = time.monotonic()
        if not wanted:
            return None, False, frozenset()
        if now - at < self._membership_seconds and version == self._targets.version:
            return members, stable, helpers
        try:
            found = self._admin.describe_consumer_groups(
                [self.group], request_timeout=self._timeout)[self.group].result(
                timeout=self._timeout)
        except Exception as exc:  # a slow or moving coordinator: not applied this round
            log.warning("could not describe group %s: %s", self.group, exc)
            return None, False, frozenset()
        members = frozenset(m.member_id for m in found.members)
        helpers = frozenset(m.member_id for m in found.members
                            if str(m.client_id).endswith(MARK))
        stable = found.state == ConsumerGroupState.STABLE
        self._members = (now, self._targets.version, members, helpers, stable)
        return members, stable, helpers
