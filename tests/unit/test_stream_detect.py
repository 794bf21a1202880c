"""The detection state machine (streams/detect.py), without Spark: signals in, decisions out."""

from __future__ import annotations

from streams.detect import Detector
from streams.detect_types import (
    BROKER_LEFT,
    DEAD_BROKER,
    FIX_OFFLINE,
    LOGDIR_EVENT,
    METRIC,
    MOVE_DIRS,
    PAGE,
    REBALANCE_LEADERS,
    SNAPSHOT,
    BrokerBack,
    BrokerGone,
    ClusterState,
    Decision,
    DetectSettings,
    DirOnline,
    Failure,
    SnapshotFacts,
    SnapshotRef,
    SnapshotSeen,
)

T0 = 1_800_000_000_000  # ms
SETTINGS = DetectSettings(skew_window_ms=60_000, leader_window_ms=60_000,
                          signal_window_ms=120_000)
DIRS = {0: ("/b0/d0", "/b0/d1"), 1: ("/b1/d0", "/b1/d1"), 2: ("/b2/d0", "/b2/d1")}


def snap(t: int, offline=(), dead=(), skewed=None, leaders=None, offset=None) -> SnapshotSeen:
    """A snapshot at ``t`` with the (broker, dir) pairs in ``offline`` offline."""
    facts = SnapshotFacts(
        dirs={b: {d: (b, d) not in offline for d in dirs} for b, dirs in DIRS.items()},
        alive={b: b not in dead for b in DIRS},
        skewed=skewed or {},
        leaders=leaders,
    )
    ref = SnapshotRef("selfheal.cluster-snapshots", 0, offset if offset is not None else t, t)
    return SnapshotSeen(t, ref, facts)


class Run:
    """One cluster's detector and state, stepped batch by batch like the job does."""

    def __init__(self, settings: DetectSettings = SETTINGS) -> None:
        self.detector = Detector(settings)
        self.state = ClusterState()
        self.notes: list[str] = []

    def batch(self, *signals, watermark: int = 0) -> list[Decision]:
        # Through JSON every time, as the state store keeps it.
        self.state = ClusterState.from_json(self.state.to_json())
        decisions, notes = self.detector.step("c1", self.state, signals, watermark)
        self.notes += [n.text for n in notes]
        return [Decision.from_json(d.to_json()) for d in decisions]


def test_zookeeper_notification_then_snapshot_proposes_one_fix_dated_by_the_notification():
    run = Run()
    assert run.batch(snap(T0 - 60_000)) == []
    (fix,) = run.batch(Failure(T0, LOGDIR_EVENT), snap(T0 + 1000, offline={(1, "/b1/d1")}))
    assert (fix.type, fix.broker, fix.log_dir) == (FIX_OFFLINE, 1, "/b1/d1")
    assert (fix.event_time, fix.trigger_kind) == (T0, LOGDIR_EVENT)
    assert fix.snapshot.taken_at == T0 + 1000 and fix.offline_dirs == ((1, "/b1/d1"),)
    # The gauge, the event's twin with the broker set, and later snapshots: same failure.
    assert run.batch(Failure(T0 + 2000, LOGDIR_EVENT, broker=1),
                     Failure(T0 + 5000, METRIC, 1, "/b1/d1"),
                     snap(T0 + 60_000, offline={(1, "/b1/d1")})) == []
    assert run.state.pending == [] and run.notes == []


def test_a_notification_with_the_broker_set_dates_the_episode_too():
    run = Run()
    run.batch(snap(T0 - 60_000))
    run.batch(Failure(T0, LOGDIR_EVENT, broker=2))
    (fix,) = run.batch(snap(T0 + 900, offline={(2, "/b2/d0")}))
    assert (fix.broker, fix.log_dir, fix.event_time, fix.trigger_kind) == (
        2, "/b2/d0", T0, LOGDIR_EVENT)


def test_a_notification_read_after_its_snapshot_is_not_a_new_failure():
    run = Run()
    (fix,) = run.batch(snap(T0 + 1000, offline={(0, "/b0/d0")}))
    assert fix.trigger_kind == SNAPSHOT
    assert run.batch(Failure(T0, LOGDIR_EVENT)) == []
    assert run.state.pending == []
    # ... and it is not left over to date the next failure.
    (later,) = run.batch(snap(T0 + 30_000, offline={(0, "/b0/d0"), (2, "/b2/d1")}))
    assert (later.broker, later.event_time, later.trigger_kind) == (2, T0 + 30_000, SNAPSHOT)


def test_gauge_first_waits_for_a_snapshot_taken_after_the_failure():
    # A snapshot from before the failure may not know a topic created since: the fix
    # would miss its partitions. The collector takes a snapshot at once on a failure.
    run = Run()
    run.batch(snap(T0 - 10_000))
    assert run.batch(Failure(T0, METRIC, 0, "/b0/d1")) == []
    assert run.batch(Failure(T0 + 2000, METRIC, 0, "/b0/d1"), snap(T0 - 5000)) == []
    (fix,) = run.batch(snap(T0 + 700, offline={(0, "/b0/d1")}))
    assert (fix.trigger_kind, fix.event_time, fix.snapshot.taken_at) == (
        METRIC, T0, T0 + 700)
    assert run.batch(snap(T0 + 5000, offline={(0, "/b0/d1")})) == []


def test_with_no_newer_snapshot_the_older_one_is_used_after_the_wait():
    run = Run(DetectSettings(fresh_snapshot_wait_ms=15_000))
    run.batch(snap(T0 - 30_000))
    assert run.batch(Failure(T0, METRIC, 0, "/b0/d1")) == []
    assert run.batch(Failure(T0 + 14_000, METRIC, 0, "/b0/d1")) == []
    (fix,) = run.batch(Failure(T0 + 16_000, METRIC, 0, "/b0/d1"))
    assert (fix.trigger_kind, fix.event_time, fix.snapshot.taken_at) == (
        METRIC, T0, T0 - 30_000)
    assert fix.offline_dirs == ((0, "/b0/d1"),)  # the planner marks it offline itself
    assert run.batch(snap(T0 + 20_000, offline={(0, "/b0/d1")})) == []


def test_a_snapshot_source_behind_the_others_is_waited_for_not_planned_around():
    # After a long batch the snapshot source trails (a few snapshots a batch): the
    # metrics' event time passes the wait while snapshots older than the failure still
    # arrive. Planning from one of those would miss the topics created since.
    run = Run(DetectSettings(fresh_snapshot_wait_ms=15_000))
    run.batch(snap(T0 - 30_000))
    assert run.batch(Failure(T0, METRIC, 0, "/b0/d1"), snap(T0 - 25_000)) == []
    assert run.batch(Failure(T0 + 20_000, METRIC, 0, "/b0/d1"), snap(T0 - 20_000)) == []
    assert run.batch(Failure(T0 + 40_000, METRIC, 0, "/b0/d1"), snap(T0 - 5000)) == []
    (fix,) = run.batch(Failure(T0 + 45_000, METRIC, 0, "/b0/d1"),
                       snap(T0 + 500, offline={(0, "/b0/d1")}))
    assert (fix.event_time, fix.snapshot.taken_at) == (T0, T0 + 500)


def test_a_snapshot_source_that_never_catches_up_is_planned_around_after_four_waits():
    run = Run(DetectSettings(fresh_snapshot_wait_ms=15_000))
    run.batch(snap(T0 - 100_000))
    assert run.batch(Failure(T0, METRIC, 0, "/b0/d1"), snap(T0 - 90_000)) == []
    assert run.batch(Failure(T0 + 59_000, METRIC, 0, "/b0/d1"), snap(T0 - 80_000)) == []
    (fix,) = run.batch(Failure(T0 + 61_000, METRIC, 0, "/b0/d1"), snap(T0 - 70_000))
    assert fix.snapshot.taken_at == T0 - 70_000


def test_kraft_event_naming_the_dir_proposes_without_a_gauge():
    run = Run()
    run.batch(snap(T0 - 30_000))
    assert run.batch(Failure(T0, LOGDIR_EVENT, 2, "/b2/d0")) == []
    (fix,) = run.batch(snap(T0 + 100, offline={(2, "/b2/d0")}))
    assert (fix.trigger_kind, fix.broker, fix.log_dir) == (LOGDIR_EVENT, 2, "/b2/d0")


def test_a_failure_before_any_snapshot_waits_for_one():
    run = Run()
    assert run.batch(Failure(T0, METRIC, 1, "/b1/d0")) == []
    (fix,) = run.batch(snap(T0 + 2000, offline={(1, "/b1/d0")}))
    assert (fix.event_time, fix.trigger_kind) == (T0, METRIC)


def test_two_dirs_in_one_snapshot_share_the_dirless_notification_and_list_each_other():
    run = Run()
    decisions = run.batch(Failure(T0, LOGDIR_EVENT),
                          snap(T0 + 1000, offline={(0, "/b0/d0"), (1, "/b1/d1")}))
    assert [(d.broker, d.event_time) for d in decisions] == [(0, T0), (1, T0)]
    assert decisions[0].offline_dirs == ((0, "/b0/d0"), (1, "/b1/d1"))


def test_a_dir_back_online_ends_the_episode_and_a_new_failure_proposes_again():
    run = Run()
    run.batch(snap(T0, offline={(1, "/b1/d1")}))
    assert run.batch(snap(T0 + 60_000)) == [] and run.state.episodes == {}
    assert run.batch(Failure(T0 + 120_000, METRIC, 1, "/b1/d1")) == []
    (again,) = run.batch(snap(T0 + 120_500, offline={(1, "/b1/d1")}))
    assert again.event_time == T0 + 120_000


def test_stale_online_evidence_does_not_end_an_episode():
    run = Run()
    run.batch(snap(T0 - 10_000), Failure(T0, METRIC, 1, "/b1/d1"))
    # A gauge scraped before the failure, and a snapshot taken before it, arrive late.
    run.batch(DirOnline(T0 - 5000, 1, "/b1/d1"), snap(T0 - 1000))
    assert (1, "/b1/d1") in run.state.episodes
    (fix,) = run.batch(snap(T0 + 30_000, offline={(1, "/b1/d1")}))
    assert fix.event_time == T0
    assert run.batch(snap(T0 + 35_000, offline={(1, "/b1/d1")})) == []
    run.batch(DirOnline(T0 + 40_000, 1, "/b1/d1"))
    assert run.state.episodes == {}


def test_restart_from_the_saved_state_and_replay_proposes_nothing():
    run = Run()
    batch = [snap(T0 - 60_000), Failure(T0, LOGDIR_EVENT),
             snap(T0 + 1000, offline={(1, "/b1/d1")})]
    assert len(run.batch(*batch)) == 1
    restarted = Run()
    restarted.state = ClusterState.from_json(run.state.to_json())
    assert restarted.batch(*batch) == []


def test_a_dirless_signal_nothing_explains_expires_with_a_note():
    run = Run()
    run.batch(snap(T0 - 1000))
    run.batch(Failure(T0, LOGDIR_EVENT, broker=2))
    assert len(run.state.pending) == 1
    run.batch(watermark=T0 + 121_000)
    assert run.state.pending == []
    assert "broker 2" in run.notes[0] and "check the collectors" in run.notes[0]
    (fix,) = run.batch(snap(T0 + 300_000, offline={(2, "/b2/d0")}))
    assert fix.event_time == T0 + 300_000  # not dated by the stale signal


def test_the_count_gauge_repeating_during_an_episode_leaves_nothing_pending():
    run = Run()
    run.batch(snap(T0, offline={(1, "/b1/d0")}))
    for k in range(1, 6):
        run.batch(Failure(T0 + k * 10_000, METRIC, broker=1))
    assert run.state.pending == []


def test_every_dir_of_a_broker_offline_pages_the_operator_once():
    run = Run()
    run.batch(snap(T0 - 60_000))
    first = run.batch(Failure(T0, METRIC, 0, "/b0/d0"), snap(T0 + 500, offline={(0, "/b0/d0")}))
    assert [d.type for d in first] == [FIX_OFFLINE]
    second = run.batch(Failure(T0 + 3000, METRIC, 0, "/b0/d1"))
    assert [d.type for d in second] == [PAGE]  # no snapshot to plan d1 from yet
    both = {(0, "/b0/d0"), (0, "/b0/d1")}
    assert [d.type for d in run.batch(snap(T0 + 3500, offline=both))] == [FIX_OFFLINE]
    page = next(d for d in second if d.type == PAGE)
    assert page.broker == 0 and page.offline_dirs == ((0, "/b0/d0"), (0, "/b0/d1"))
    assert "every log dir of broker 0" in page.reason
    assert run.batch(snap(T0 + 5000, offline={(0, "/b0/d0"), (0, "/b0/d1")}),
                     BrokerGone(T0 + 6000, 0)) == []


def test_a_broker_that_stops_after_a_dir_failure_and_stays_down_pages_the_operator():
    run = Run(DetectSettings(broker_return_grace_ms=60_000))
    run.batch(snap(T0 - 60_000))
    run.batch(Failure(T0, LOGDIR_EVENT, broker=1))
    assert run.batch(snap(T0 + 1500, dead={1})) == []  # maybe a restart: the grace runs
    assert run.batch(BrokerGone(T0 + 2000, 1), snap(T0 + 31_000, dead={1})) == []
    (page,) = run.batch(snap(T0 + 61_500, dead={1}))
    assert (page.type, page.broker, page.event_time) == (PAGE, 1, T0)
    assert "stopped" in page.reason and "not come back in 60 s" in page.reason
    assert run.batch(BrokerGone(T0 + 62_000, 1), snap(T0 + 90_000, dead={1})) == []


def test_a_broker_restarted_within_the_grace_is_not_paged():
    # What an operator does after replacing the disk: stop the broker, start it again.
    run = Run(DetectSettings(broker_return_grace_ms=60_000))
    run.batch(snap(T0 - 60_000))
    run.batch(Failure(T0, METRIC, 1, "/b1/d1"), snap(T0 + 500, offline={(1, "/b1/d1")}))
    assert run.batch(BrokerGone(T0 + 20_000, 1), snap(T0 + 21_000, offline={(1, "/b1/d1")},
                                                      dead={1})) == []
    assert run.batch(snap(T0 + 40_000)) == []  # back, with a working disk
    assert run.batch(snap(T0 + 100_000)) == [] and run.state.departed == {}
    assert run.state.episodes == {}


def test_a_dead_brokers_episode_waits_for_it_and_ends_when_it_leaves_the_cluster():
    run = Run()
    run.batch(snap(T0, offline={(2, "/b2/d0")}))
    run.batch(snap(T0 + 60_000, offline={(2, "/b2/d0")}, dead={2}))
    assert (2, "/b2/d0") in run.state.episodes  # its dirs are only last known
    gone = snap(T0 + 120_000)
    del gone.facts.dirs[2], gone.facts.alive[2]  # decommissioned
    assert run.batch(gone) == [] and run.state.episodes == {} and run.state.paged == {}


def test_a_broker_going_down_without_a_failure_is_not_paged():
    run = Run()
    run.batch(snap(T0))
    assert run.batch(BrokerGone(T0 + 1000, 2), snap(T0 + 2000, dead={2})) == []


def test_skew_is_proposed_once_it_lasted_the_window_and_again_after_it_cleared():
    run = Run()
    assert run.batch(snap(T0, skewed={2: 1.4})) == []
    assert run.batch(snap(T0 + 30_000, skewed={2: 1.5})) == []
    (move,) = run.batch(snap(T0 + 61_000, skewed={2: 1.5}))
    assert (move.type, move.broker, move.event_time) == (MOVE_DIRS, 2, T0 + 61_000)
    assert move.snapshot.taken_at == T0 + 61_000
    assert run.batch(snap(T0 + 200_000, skewed={2: 1.5})) == []
    run.batch(snap(T0 + 300_000))  # evened out
    assert run.batch(snap(T0 + 310_000, skewed={2: 1.3})) == []


def test_a_skew_interrupted_before_the_window_starts_over():
    run = Run()
    run.batch(snap(T0, skewed={1: 1.4}))
    run.batch(snap(T0 + 40_000))
    assert run.batch(snap(T0 + 70_000, skewed={1: 1.4})) == []


def test_leader_imbalance_is_proposed_after_its_window_unless_the_cluster_is_degraded():
    run = Run()
    why = "broker 0 leads 9 partitions; its fair share is 4.0"
    run.batch(snap(T0, leaders=why))
    run.batch(snap(T0 + 30_000, leaders=why, offline={(1, "/b1/d0")}))  # resets the window
    run.batch(snap(T0 + 40_000, leaders=why))
    assert run.batch(snap(T0 + 80_000, leaders=why)) == []
    (rebalance,) = run.batch(snap(T0 + 101_000, leaders=why))
    assert (rebalance.type, rebalance.reason) == (REBALANCE_LEADERS, why)
    assert run.batch(snap(T0 + 200_000, leaders=why)) == []


def test_an_older_snapshot_arriving_late_is_ignored():
    run = Run()
    run.batch(snap(T0 + 60_000, offline={(1, "/b1/d1")}))
    assert run.batch(snap(T0)) == []
    assert (1, "/b1/d1") in run.state.episodes
    assert run.state.snapshot.taken_at == T0 + 60_000


# --- a broker that dies ------------------------------------------------------------------


def test_a_broker_gone_past_the_grace_is_re_replicated_once():
    run = Run()
    run.batch(snap(T0 - 60_000))
    assert run.batch(BrokerGone(T0, 2), snap(T0 + 1000, dead={2})) == []
    assert run.batch(snap(T0 + 59_000, dead={2})) == []  # still within the grace
    (fix,) = run.batch(snap(T0 + 61_000, dead={2}))
    assert (fix.type, fix.broker, fix.log_dir, fix.trigger_kind) == (
        DEAD_BROKER, 2, None, BROKER_LEFT)
    assert fix.event_time == T0 and fix.snapshot.taken_at == T0 + 61_000
    assert fix.reason == "broker 2 left the cluster and has not come back in 60 s"
    # Every later snapshot still shows it gone: the same death is healed once.
    assert run.batch(BrokerGone(T0 + 70_000, 2), snap(T0 + 120_000, dead={2})) == []


def test_a_broker_back_within_the_grace_gets_nothing_and_a_second_death_is_healed_again():
    run = Run()
    run.batch(snap(T0 - 60_000))
    run.batch(BrokerGone(T0, 1))
    assert run.batch(snap(T0 + 30_000)) == []  # back (a restart)
    assert run.batch(snap(T0 + 90_000)) == [] and run.state.dead == {}
    run.batch(BrokerGone(T0 + 100_000, 1))
    (first,) = run.batch(snap(T0 + 161_000, dead={1}))
    assert (first.type, first.event_time) == (DEAD_BROKER, T0 + 100_000)
    run.batch(snap(T0 + 170_000))  # back after its fix was proposed
    run.batch(BrokerGone(T0 + 200_000, 1))
    (second,) = run.batch(snap(T0 + 261_000, dead={1}))
    assert (second.type, second.event_time) == (DEAD_BROKER, T0 + 200_000)


def test_a_registration_ends_a_death_before_any_snapshot_shows_the_broker():
    # A whole-cluster restart: the snapshots resume only after the other sources, whose
    # records move the clock past the grace; the broker's registration says it is back.
    run = Run()
    run.batch(snap(T0 - 60_000))
    run.batch(BrokerGone(T0, 0))
    assert run.batch(BrokerBack(T0 + 75_000, 0), DirOnline(T0 + 80_000, 1, "/b1/d0")) == []
    assert run.state.dead == {} and run.state.back == {0: T0 + 75_000}
    # a later death is a new one, healed after its own grace
    run.batch(BrokerGone(T0 + 100_000, 0))
    (fix,) = run.batch(snap(T0 + 161_000, dead={0}))
    assert (fix.type, fix.event_time) == (DEAD_BROKER, T0 + 100_000)


def test_a_departure_that_arrives_after_the_return_is_over_already():
    # The bus delivered the deregistration late (after the registration that followed
    # it): no death starts, and no page for a broker that runs.
    run = Run()
    run.batch(snap(T0 - 60_000))
    run.batch(BrokerBack(T0 + 20_000, 2))
    assert run.batch(BrokerGone(T0, 2)) == [] and run.state.dead == {}
    assert run.batch(DirOnline(T0 + 90_000, 1, "/b1/d0"), snap(T0 + 91_000)) == []
    # and one with a failure open is not held as departed either
    (fix,) = run.batch(Failure(T0 + 100_000, METRIC, 1, "/b1/d1"),
                       snap(T0 + 101_000, offline={(1, "/b1/d1")}))
    run.batch(BrokerBack(T0 + 130_000, 1))
    run.batch(BrokerGone(T0 + 120_000, 1))
    assert run.state.departed == {}


def test_a_broker_that_stops_after_its_dir_failed_is_paged_not_re_replicated_twice():
    run = Run()
    run.batch(snap(T0 - 60_000))
    (fix,) = run.batch(Failure(T0, METRIC, 0, "/b0/d1"), snap(T0 + 1000, offline={(0, "/b0/d1")}))
    assert fix.type == FIX_OFFLINE
    decisions = run.batch(BrokerGone(T0 + 5000, 0), snap(T0 + 70_000, dead={0},
                                                          offline={(0, "/b0/d1")}))
    assert [d.type for d in decisions] == [PAGE]


def test_two_brokers_killed_at_once_are_two_deaths_and_a_prior_signal_makes_a_later_page():
    # The chaos test's settings (a 20 s death grace, the 60 s return grace). Killed with no
    # failure signal: two dead-broker decisions at the death grace. A dir signal read
    # before a deregistration makes that broker a departure instead, paged only after the
    # return grace: a page 20 s after the death is never that one.
    settings = DetectSettings(broker_death_grace_ms=20_000, broker_return_grace_ms=60_000)
    run = Run(settings)
    run.batch(snap(T0 - 60_000))
    run.batch(BrokerGone(T0, 1), BrokerGone(T0 + 100, 2))
    decisions = run.batch(snap(T0 + 21_000, dead={1, 2}))
    assert [(d.type, d.broker) for d in decisions] == [(DEAD_BROKER, 1), (DEAD_BROKER, 2)]
    signalled = Run(settings)
    signalled.batch(snap(T0 - 60_000))
    signalled.batch(Failure(T0 - 500, METRIC, 1), BrokerGone(T0, 1), BrokerGone(T0 + 100, 2))
    assert [(d.type, d.broker) for d in signalled.batch(snap(T0 + 21_000, dead={1, 2}))] == [
        (DEAD_BROKER, 2)]
    (page,) = signalled.batch(snap(T0 + 61_000, dead={1, 2}))
    assert (page.type, page.broker) == (PAGE, 1) and "stopped after" in page.reason
