"""Throttles: what an action sets, that an operator's values survive, and what is restored."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import patch

from remediation.executor.actions import parse_action
from remediation.executor.store import ActionStore
from remediation.executor.throttle import (
    DIR_RATE,
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    changes,
    describe,
    inter_broker,
    intra_broker,
    merged,
    saved_values,
)
from remediation.executor.throttling import Throttles
from tests.unit.action_records import fix_offline
from tests.unit.test_executor_checks import BROKEN, cluster, fix, leaders, partition


def test_a_copy_throttles_its_online_sources_and_its_new_replicas() -> None:
    view = cluster(BROKEN, partition("t", 1, [1, 2]), offline=(3,))
    wanted = inter_broker(fix([1, 4]), view, 1000)
    assert wanted == {
        "broker:1": {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"},
        "broker:4": {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"},
        # broker 3's replica is offline: it serves nothing and is not throttled
        "topic:t": {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: "0:4"},
    }


def test_no_throttle_for_a_reorder_or_a_zero_rate() -> None:
    view = cluster(partition("t", 0, [1, 2, 3]))
    assert inter_broker(leaders([2, 1, 3]), view, 1000) == {}
    assert inter_broker(fix([1, 4]), cluster(BROKEN, offline=(3,)), 0) == {}
    assert intra_broker({("t", 0, 2): "/d2"}, 0) == {}
    assert intra_broker({("t", 0, 2): "/d2", ("t", 1, 2): "/d1"}, 5) == {
        "broker:2": {DIR_RATE: "5"}}


def test_an_operators_replica_lists_are_kept_and_star_stays_star() -> None:
    wanted = {"topic:t": {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: "0:4"}}
    found = {"topic:t": {LEADER_REPLICAS: "7:2,0:1", FOLLOWER_REPLICAS: "*"}}
    assert merged(wanted, found) == {
        "topic:t": {LEADER_REPLICAS: "0:1,7:2", FOLLOWER_REPLICAS: "*"}}


def test_only_changed_keys_are_sent_and_the_found_values_are_saved() -> None:
    wanted = {"broker:1": {LEADER_RATE: "10", FOLLOWER_RATE: "10"}}
    found = {"broker:1": {LEADER_RATE: "10", FOLLOWER_RATE: None}}
    assert changes(wanted, found) == {"broker:1": {FOLLOWER_RATE: "10"}}
    assert saved_values(wanted, found) == {"broker:1": {LEADER_RATE: "10", FOLLOWER_RATE: None}}
    assert describe(saved_values(wanted, found)) == (
        f"broker:1 {FOLLOWER_RATE}=(unset), {LEADER_RATE}=10")


class _LateBrokers:
    """A cluster whose brokers report an altered config only `lag` describes after the
    alter (as a ZooKeeper-mode broker applies a dynamic config when its change
    notification arrives): the delay the sandbox cannot produce on demand."""

    def __init__(self, lag: int) -> None:
        self.lag = lag
        self.applied: dict[str, dict[str, str | None]] = {}
        self.pending: list[tuple[int, dict[str, dict[str, str | None]]]] = []
        self.describes = 0
        self.default: dict[str, str] = {}  # the operator's cluster-wide default rates

    def configs(self, resources, keys):  # type: ignore[no-untyped-def]
        self.describes += 1
        for _, change in [p for p in self.pending if p[0] <= self.describes]:
            for res, values in change.items():
                self.applied.setdefault(res, {}).update(values)
        self.pending = [p for p in self.pending if p[0] > self.describes]
        return {r: {k: self.applied.get(r, {}).get(k) for k in keys} for r in resources}

    def alter_configs(self, configs) -> None:  # type: ignore[no-untyped-def]
        self.pending.append((self.describes + self.lag, configs))

    def beneath(self, brokers, keys):  # type: ignore[no-untyped-def]
        """The cluster-wide default an operator set (broker resource ""), if any."""
        return {r: {k: (self.default[k], "the cluster-wide default") for k in keys
                    if k in self.default} for r in brokers}


def test_a_restore_returns_once_every_broker_reports_it_and_says_when_one_is_late(
        tmp_path: Path) -> None:
    store = ActionStore(tmp_path / "actions.db")
    action = parse_action(fix_offline())
    store.propose(action)
    cluster = _LateBrokers(lag=3)
    throttles = Throttles(store, cluster)  # type: ignore[arg-type]
    wanted = intra_broker({("t", 0, 1): "/d1", ("t", 1, 2): "/d2"}, 1000)
    throttles.apply(action.action_id, "intra", wanted)
    assert cluster.applied == wanted  # apply waited for both brokers
    throttles.restore(action.action_id)
    # Back to unset on both brokers by the time restore returns: nothing left behind.
    assert cluster.configs(["broker:1", "broker:2"], [DIR_RATE]) == {
        "broker:1": {DIR_RATE: None}, "broker:2": {DIR_RATE: None}}
    reasons = [e.reason for e in store.audit(action.action_id)]
    assert not any("not yet applied" in r for r in reasons), reasons

    # A broker that never applies the restore within the wait is named, not waited on forever.
    other = ActionStore(tmp_path / "other.db")
    other.propose(action)
    stuck = _LateBrokers(lag=1)
    late = Throttles(other, stuck)  # type: ignore[arg-type]
    late.apply(action.action_id, "intra", wanted)
    stuck.lag = 10**9
    with patch("remediation.executor.throttling.THROTTLE_VISIBLE_SECONDS", 0.3):
        late.restore(action.action_id)
    reasons = [e.reason for e in other.audit(action.action_id)]
    assert reasons[-1] == ("restored configs not yet applied by broker:1, broker:2 "
                           "after 0 s; going on"), reasons


def test_a_lower_rate_an_operator_set_is_kept_and_the_audit_says_so(tmp_path: Path) -> None:
    store = ActionStore(tmp_path / "actions.db")
    action = parse_action(fix_offline())
    store.propose(action)
    cluster = _LateBrokers(lag=0)
    cluster.applied = {"broker:0": {LEADER_RATE: "20000", FOLLOWER_RATE: "20000"},
                       "broker:1": {LEADER_RATE: str(100 * 1024 * 1024)},
                       "topic:t": {LEADER_REPLICAS: "7:2"}}
    ours = str(50 * 1024 * 1024)
    wanted = {"broker:0": {LEADER_RATE: ours, FOLLOWER_RATE: ours},
              "broker:1": {LEADER_RATE: ours, FOLLOWER_RATE: ours},
              "topic:t": {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: "0:4"}}
    Throttles(store, cluster).apply(action.action_id, "inter", wanted)  # type: ignore[arg-type]
    # Broker 0's lower rate stays; broker 1's higher one is lowered to ours (the stricter).
    assert cluster.applied["broker:0"] == {LEADER_RATE: "20000", FOLLOWER_RATE: "20000"}
    assert cluster.applied["broker:1"] == {LEADER_RATE: ours, FOLLOWER_RATE: ours}
    assert cluster.applied["topic:t"] == {LEADER_REPLICAS: "0:1,7:2", FOLLOWER_REPLICAS: "0:4"}
    reasons = [e.reason for e in store.audit(action.action_id)]
    assert ("broker 0 keeps the existing 20000 B/s, lower than our 50 MiB/s "
            "(leader/follower.replication.throttled.rate)") in reasons, reasons
    assert "topic t keeps its throttled replicas (leader: 7:2), ours added" in reasons
    assert not any(r.startswith("broker 1 keeps") for r in reasons), reasons

    Throttles(store, cluster).restore(action.action_id)  # type: ignore[arg-type]
    assert cluster.applied == {"broker:0": {LEADER_RATE: "20000", FOLLOWER_RATE: "20000"},
                               "broker:1": {LEADER_RATE: str(100 * 1024 * 1024),
                                            FOLLOWER_RATE: None},
                               "topic:t": {LEADER_REPLICAS: "7:2", FOLLOWER_REPLICAS: None}}


def test_a_value_an_operator_changed_while_the_action_ran_is_theirs(tmp_path: Path) -> None:
    store = ActionStore(tmp_path / "actions.db")
    action = parse_action(fix_offline())
    store.propose(action)
    cluster = _LateBrokers(lag=0)
    wanted = intra_broker({("t", 0, 1): "/d1", ("t", 1, 2): "/d2"}, 1000)
    throttles = Throttles(store, cluster)  # type: ignore[arg-type]
    throttles.apply(action.action_id, "intra", wanted)
    cluster.applied["broker:2"][DIR_RATE] = "5000"  # the operator raises broker 2's
    throttles.restore(action.action_id)
    assert cluster.applied == {"broker:1": {DIR_RATE: None}, "broker:2": {DIR_RATE: "5000"}}
    reasons = [e.reason for e in store.audit(action.action_id)]
    assert (f"broker 2 {DIR_RATE} was changed to 5000 B/s while the action ran (it set "
            "1000 B/s); the operator's value stays (not put back to (unset))") in reasons
    assert reasons[-1] == f"throttle removed, configs restored: broker:1 {DIR_RATE}=(unset)"


class _DownBroker(_LateBrokers):
    """Broker 2 is down: it takes no config change (the real one fails every try), and its
    rate stays at what the action set until it is back."""

    def __init__(self) -> None:
        super().__init__(lag=0)
        self.down = {"broker:2"}

    def alter_configs(self, configs) -> None:  # type: ignore[no-untyped-def]
        assert not self.down & set(configs), f"altered a down broker: {configs}"
        super().alter_configs(configs)

    def up_brokers(self) -> set[str]:
        return {"broker:1", "broker:2"} - self.down

    @property
    def last_view(self):  # type: ignore[no-untyped-def]
        class View:
            class model:  # noqa: N801 - the shape restore() reads
                brokers = (1, 2)
                alive = (1,) if "broker:2" in self.down else (1, 2)
        return View()


def test_a_throttle_left_on_a_down_broker_is_put_back_when_it_returns(tmp_path: Path) -> None:
    store = ActionStore(tmp_path / "actions.db")
    action = parse_action(fix_offline())
    store.propose(action)
    cluster = _DownBroker()
    cluster.down = set()
    throttles = Throttles(store, cluster)  # type: ignore[arg-type]
    throttles.apply(action.action_id, "intra",
                    intra_broker({("t", 0, 1): "/d1", ("t", 1, 2): "/d2"}, 1000))
    cluster.down = {"broker:2"}
    throttles.restore(action.action_id)
    assert cluster.applied == {"broker:1": {DIR_RATE: None}, "broker:2": {DIR_RATE: "1000"}}
    assert [r.id for r in store.with_throttles_left()] == [action.action_id]
    throttles.restore_left()  # still down: nothing tried, nothing changed
    assert cluster.applied["broker:2"] == {DIR_RATE: "1000"}
    cluster.down = set()
    throttles.restore_left()
    assert cluster.applied == {"broker:1": {DIR_RATE: None}, "broker:2": {DIR_RATE: None}}
    assert store.with_throttles_left() == ()
    reasons = [e.reason for e in store.audit(action.action_id)]
    assert reasons[-1] == (f"broker:2 back: the throttle left on it put back: "
                           f"broker:2 {DIR_RATE}=(unset)")


def test_a_lower_cluster_wide_default_is_kept_and_never_deleted(tmp_path: Path) -> None:
    """An operator's default (kafka-configs --entity-default) applies to every broker
    without a rate of its own: where it is the stricter, ours is not set over it."""
    store = ActionStore(tmp_path / "actions.db")
    action = parse_action(fix_offline())
    store.propose(action)
    cluster = _LateBrokers(lag=0)
    cluster.default = {LEADER_RATE: "20000", FOLLOWER_RATE: "20000"}
    cluster.applied = {"broker:1": {LEADER_RATE: str(100 * 1024 * 1024)}}  # its own, higher
    ours = str(50 * 1024 * 1024)
    wanted = {"broker:0": {LEADER_RATE: ours, FOLLOWER_RATE: ours},
              "broker:1": {LEADER_RATE: ours, FOLLOWER_RATE: ours}}
    Throttles(store, cluster).apply(action.action_id, "inter", wanted)  # type: ignore[arg-type]
    # Broker 0 still applies the default; broker 1's own rate (over the default) is
    # lowered to ours, and its follower rate, the default's, is left to the default.
    assert cluster.applied == {"broker:1": {LEADER_RATE: ours}}
    reasons = [e.reason for e in store.audit(action.action_id)]
    assert ("broker 0 keeps the cluster-wide default 20000 B/s, lower than our 50 MiB/s "
            "(leader/follower.replication.throttled.rate)") in reasons, reasons
    assert (f"broker 1 keeps the cluster-wide default 20000 B/s, lower than our 50 MiB/s "
            f"({FOLLOWER_RATE})") in reasons, reasons
    Throttles(store, cluster).restore(action.action_id)  # type: ignore[arg-type]
    assert cluster.applied == {"broker:1": {LEADER_RATE: str(100 * 1024 * 1024)}}


def test_a_higher_cluster_wide_default_is_overridden_per_broker_and_comes_back() -> None:
    ours = str(50 * 1024 * 1024)
    wanted = {"broker:0": {LEADER_RATE: ours, FOLLOWER_RATE: ours}}
    default = {"broker:0": {LEADER_RATE: (str(10**9), "the cluster-wide default")}}
    target = merged(wanted, {"broker:0": {LEADER_RATE: None, FOLLOWER_RATE: None}}, default)
    assert target == wanted  # ours, per broker; the default itself is never written
    # Restored: the per-broker keys deleted, so the broker applies the default again.
    assert saved_values(target, {}) == {"broker:0": {LEADER_RATE: None, FOLLOWER_RATE: None}}
