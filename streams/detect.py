"""Detection: per-cluster state in, decisions out. Pure; the Spark job only feeds it.

One `ClusterState` per monitored cluster holds only what is wrong (open offline-dir
episodes, failure signals not yet tied to a dir, skew and leader spells, paged brokers)
plus a reference to the latest snapshot, never the snapshot itself: the planner fetches
that by its Kafka coordinates when a decision needs it (streams/propose.py).

Offline dirs. A ZooKeeper notification names at most the broker, so it is held as a
*pending* failure signal; the dir comes from the per-dir gauge, a KRaft event, or the
snapshot the collector takes at once. The first of those opens an *episode* for
(broker, dir), dated by the earliest signal that matches it. An episode is proposed once
(`fix_offline_replicas`) as soon as a snapshot taken at or after that signal exists to
plan from (an older one may not know partitions created since; the collector takes one
at once on a failure), or, failing that, after `fresh_snapshot_wait_ms` of event time
with the latest snapshot and the dir marked offline. The wait runs out only while the
snapshot source is stalled: a source that is merely behind the others (it still brings
newer snapshots, a few a batch after a long one) is waited for, up to four waits, since
planning from a snapshot older than the failure misses the topics created since. An
episode ends when newer evidence shows the dir online (or gone from the broker), so the
event, the gauge and every later snapshot reporting the same failure propose nothing
more.

Times are epoch milliseconds of event time. Signals of one batch are applied in event
time order, so a notification that arrives together with the snapshot it caused still
dates the episode.
"""

from __future__ import annotations

from collections.abc import Iterable

from streams.deltas import see_delta
from streams.detect_cordons import CordonRules
from streams.detect_groups import GroupRules
from streams.detect_types import (
    BROKER_LEFT,
    DEAD_BROKER,
    FIX_OFFLINE,
    MOVE_DIRS,
    ORDER,
    PAGE,
    REBALANCE_LEADERS,
    SNAPSHOT,
    BrokerBack,
    BrokerGone,
    ClusterState,
    Decision,
    DeltaSeen,
    DetectSettings,
    DirOnline,
    Episode,
    Failure,
    Ms,
    Note,
    Pending,
    Signal,
    SnapshotSeen,
    Spell,
)

# --- the state machine ---------------------------------------------------------------


class Detector:
    """Applies one batch of signals to one cluster's state and says what to propose."""

    def __init__(self, settings: DetectSettings | None = None) -> None:
        self.settings = settings or DetectSettings()

    def step(self, cluster_id: str, state: ClusterState, signals: Iterable[Signal],
             watermark: Ms = 0) -> tuple[list[Decision], list[Note]]:
        """Update ``state`` in place with ``signals``; return the decisions and notes."""
        run = _Step(self.settings, cluster_id, state)
        for signal in sorted(signals, key=lambda s: (s.time, ORDER[type(s)])):
            state.newest = max(state.newest, signal.time)
            if isinstance(signal, Failure):
                run.failure(signal)
            elif isinstance(signal, DirOnline):
                run.dir_online(signal)
            elif isinstance(signal, BrokerGone):
                run.broker_gone(signal.broker, signal.time)
            elif isinstance(signal, BrokerBack):
                run.broker_back(signal.broker, signal.time)
            elif isinstance(signal, DeltaSeen):
                see_delta(run, signal)
            else:
                run.snapshot(signal)
        run.finish(max(watermark, 0) or state.newest)
        return run.decisions, run.notes


class _Step(GroupRules, CordonRules):
    """One `Detector.step`: the rules, with the batch's decisions collected on the way."""

    def __init__(self, settings: DetectSettings, cluster_id: str, state: ClusterState) -> None:
        self.settings = settings
        self.cluster_id = cluster_id
        self.state = state
        self.decisions: list[Decision] = []
        self.snapshot_moved = False
        self.notes: list[Note] = []
        # Broker-less pending signals used by an episode this step: other episodes opened
        # in the same step (several dirs in one snapshot) may match them too.
        self.used: list[Pending] = []

    # -- offline dirs ---------------------------------------------------------------

    def failure(self, signal: Failure) -> None:
        if signal.broker is not None and signal.log_dir is not None:
            self.offline(signal.broker, signal.log_dir, signal.time, signal.source)
            return
        if self.explained(signal):
            return
        self.state.pending.append(Pending(signal.time, signal.source, signal.broker))

    def explained(self, signal: Failure) -> bool:
        """A dir-less signal that an open episode already accounts for. A broker keeps
        reporting its offline dirs (the count gauge every scrape), so any open episode
        on that broker explains it; a broker-less notification only one opened near it."""
        window = self.settings.signal_window_ms
        for e in self.state.episodes.values():
            if signal.broker is not None and e.broker != signal.broker:
                continue
            if signal.broker is None and abs(e.since - signal.time) > window:
                continue
            if not e.proposed and signal.time < e.since:
                e.since, e.trigger = signal.time, signal.source
            return True
        return False

    def offline(self, broker: int, log_dir: str, time: Ms, source: str) -> None:
        """Evidence that (broker, log_dir) is offline at ``time``."""
        state = self.state
        episode = state.episodes.get((broker, log_dir))
        if episode is not None:
            episode.evidence = max(episode.evidence, time)
            return
        if state.returned.get((broker, log_dir), time) > time:
            return  # taken before the dir came back: that failure is over
        since, trigger = time, source
        window = self.settings.signal_window_ms
        keep: list[Pending] = []
        for p in state.pending:
            if p.broker in (broker, None) and abs(p.time - time) <= window:
                if p.time < since:
                    since, trigger = p.time, p.source
                if p.broker is None:
                    self.used.append(p)
                continue  # a broker's own signal belongs to this episode alone
            keep.append(p)
        for p in self.used:  # broker-less signals another episode of this step matched
            if abs(p.time - time) <= window and p.time < since:
                since, trigger = p.time, p.source
        state.pending = keep
        state.episodes[(broker, log_dir)] = Episode(broker, log_dir, since, trigger, time)

    def dir_online(self, signal: DirOnline) -> None:
        episode = self.state.episodes.get((signal.broker, signal.log_dir))
        if episode is not None and signal.time > episode.evidence:
            self.end(episode)
            self.came_back(signal.broker, signal.log_dir, signal.time)

    def end(self, episode: Episode) -> None:
        state = self.state
        del state.episodes[(episode.broker, episode.log_dir)]
        if not any(b == episode.broker for b, _ in state.episodes):
            state.paged.pop(episode.broker, None)

    def broker_gone(self, broker: int, time: Ms) -> None:
        """A broker that stops after a dir failed: Kafka halts one when every dir fails,
        and an operator stops one to replace a disk. Paged by `page_departed` unless it
        is back within the grace."""
        state = self.state
        if broker in state.paged or state.back.get(broker, -1) > time:
            return  # paged already; or it registered again after this
        if not self.failing(broker):
            # Gone with nothing failing: a crash or a lost machine; re-replicated after
            # the grace unless it comes back.
            state.dead[broker] = min(time, state.dead.get(broker, time))
            return
        state.departed[broker] = min(time, state.departed.get(broker, time))

    def broker_back(self, broker: int, time: Ms) -> None:
        """The broker registered again: a departure before that is over (a restart, not
        a halt; a later departure is a new death). Snapshots say the same when they show
        it alive; this does not wait for one."""
        state = self.state
        state.back[broker] = max(time, state.back.get(broker, time))
        if state.departed.get(broker, time + 1) <= time:
            del state.departed[broker]
        if state.dead.get(broker, time + 1) <= time:
            del state.dead[broker]
        if state.healed.get(broker, time + 1) <= time:
            del state.healed[broker]

    def failing(self, broker: int) -> bool:
        return any(e.broker == broker for e in self.state.episodes.values()) or any(
            p.broker == broker for p in self.state.pending)

    def page_departed(self) -> None:
        state = self.state
        for broker, gone in sorted(state.departed.items()):
            if broker in state.paged or not self.failing(broker):
                del state.departed[broker]  # paged otherwise, or its failure is over
            elif state.newest - gone >= self.settings.broker_return_grace_ms:
                del state.departed[broker]
                self.page_stopped(broker)

    def page_stopped(self, broker: int) -> None:
        state = self.state
        mine = [e for e in state.episodes.values() if e.broker == broker]
        signalled = [p for p in state.pending if p.broker == broker]
        dirs = sorted(e.log_dir for e in mine)
        since = min([e.since for e in mine] + [p.time for p in signalled])
        trigger = min([(e.since, e.trigger) for e in mine]
                      + [(p.time, p.source) for p in signalled])[1]
        what = f"log dir {', '.join(dirs)}" if dirs else "a log dir"
        grace = self.settings.broker_return_grace_ms / 1000
        self.page(broker, since, trigger, dirs, state.newest,
                  f"broker {broker} stopped after {what} failed and has not come back in "
                  f"{grace:.0f} s (Kafka halts a broker when no log dir is left); replace "
                  "the failed disks and restart it")

    def page(self, broker: int, event_time: Ms, trigger: str, dirs: list[str], now: Ms,
             reason: str) -> None:
        self.state.paged[broker] = now
        self.decisions.append(Decision(
            PAGE, self.cluster_id, event_time, trigger, broker, dirs[0] if dirs else None,
            self.state.snapshot, tuple((broker, d) for d in dirs), reason))

    # -- snapshots ------------------------------------------------------------------

    def snapshot(self, seen: SnapshotSeen) -> None:
        state = self.state
        if state.snapshot is not None and seen.time < state.snapshot.taken_at:
            return  # an older snapshot arriving late says nothing new
        if state.snapshot is None or seen.time > state.snapshot.taken_at:
            self.snapshot_moved = True  # the source moved on in this batch
        state.snapshot = seen.ref
        if state.delta is not None and state.delta.taken_at <= seen.time:
            state.delta = None  # the full snapshot says all the delta said
        facts = seen.facts
        state.brokers = {b: (facts.alive.get(b, False), len(d)) for b, d in facts.dirs.items()}
        for broker in [b for b in state.departed if facts.alive.get(b, False)]:
            del state.departed[broker]  # back: a restart, not a halt
        for broker in [b for b in {*state.dead, *state.healed} if facts.alive.get(b, False)]:
            state.dead.pop(broker, None)  # back: a later death is a new one
            state.healed.pop(broker, None)
        for (broker, log_dir), episode in list(state.episodes.items()):
            if seen.time <= episode.evidence:
                continue
            if broker not in facts.dirs:  # the broker left the cluster
                self.end(episode)
                continue
            if not facts.alive.get(broker, False):
                continue  # a dead broker's dirs are last known, not current
            online = facts.dirs[broker].get(log_dir)
            if online is None or online:  # back online, or removed from log.dirs
                self.end(episode)
                if online:
                    self.came_back(broker, log_dir, seen.time)
        for broker, dirs in sorted(facts.dirs.items()):
            if not facts.alive.get(broker, False):
                self.broker_gone(broker, seen.time)
                continue
            for log_dir, online in sorted(dirs.items()):
                if not online:
                    self.offline(broker, log_dir, seen.time, SNAPSHOT)
        self.skew(seen)
        self.cordons(seen)
        self.leaders(seen)
        self.consumers(seen)

    def skew(self, seen: SnapshotSeen) -> None:
        spells = self.state.skew
        for broker in [b for b in spells if b not in seen.facts.skewed]:
            del spells[broker]
        for broker, ratio in sorted(seen.facts.skewed.items()):
            spell = spells.setdefault(broker, Spell(seen.time))
            if spell.proposed or seen.time - spell.since < self.settings.skew_window_ms:
                continue
            spell.proposed = True
            lasted = (seen.time - spell.since) / 1000
            self.decisions.append(Decision(
                MOVE_DIRS, self.cluster_id, seen.time, SNAPSHOT, broker, None, seen.ref, (),
                f"broker {broker}'s fullest log dir holds {ratio:.2f}x its broker's mean "
                f"usage, for {lasted:.0f} s now"))

    def leaders(self, seen: SnapshotSeen) -> None:
        state = self.state
        degraded = bool(state.episodes) or not all(seen.facts.alive.values())
        if degraded or seen.facts.leaders is None:
            # A degraded cluster's leadership is the offline fix's business: the window
            # starts again once it is whole.
            state.leaders = None
            return
        spell = state.leaders = state.leaders or Spell(seen.time)
        if spell.proposed or seen.time - spell.since < self.settings.leader_window_ms:
            return
        spell.proposed = True
        self.decisions.append(Decision(
            REBALANCE_LEADERS, self.cluster_id, seen.time, SNAPSHOT, None, None, seen.ref,
            (), seen.facts.leaders))

    # -- end of batch ---------------------------------------------------------------

    def heal_dead(self) -> None:
        """A broker gone past the grace with nothing else failing: one fix for every
        replica it held, once per death (the executor's breaker stops it when too many
        brokers are down at once)."""
        state = self.state
        if state.snapshot is None:
            return
        for broker, gone in sorted(state.dead.items()):
            if state.healed.get(broker) == gone or self.failing(broker):
                continue
            if state.newest - gone < self.settings.broker_death_grace_ms:
                continue
            if state.snapshot.taken_at < gone:
                continue  # plan from a snapshot that knows the broker is gone
            state.healed[broker] = gone
            grace = self.settings.broker_death_grace_ms / 1000
            self.decisions.append(Decision(
                DEAD_BROKER, self.cluster_id, gone, BROKER_LEFT, broker, None,
                state.snapshot, (),
                f"broker {broker} left the cluster and has not come back in {grace:.0f} s",
                cordoned=self.cordoned_now()))

    def finish(self, clock: Ms) -> None:
        state = self.state
        if self.snapshot_moved:
            state.snapshot_moved = state.newest
        self.page_dead_dirs()
        self.page_departed()
        self.heal_dead()
        if state.snapshot is not None:
            offline = tuple(sorted(state.episodes))
            for key in offline:
                episode = state.episodes[key]
                if episode.proposed or not self.plannable(episode):
                    continue
                episode.proposed = True
                self.decisions.append(Decision(
                    FIX_OFFLINE, self.cluster_id, episode.since, episode.trigger,
                    episode.broker, episode.log_dir, state.snapshot, offline,
                    f"log dir {episode.log_dir} on broker {episode.broker} is offline",
                    delta=state.delta, cordoned=self.cordoned_now()))
        expired = [p for p in state.pending if p.time + self.settings.signal_window_ms < clock]
        for p in expired:
            where = f"broker {p.broker}" if p.broker is not None else "an unnamed broker"
            self.notes.append(Note(
                self.cluster_id, p.time,
                f"a log-dir failure signalled on {where} ({p.source}) was never tied to a "
                f"dir: no metric or snapshot named one within "
                f"{self.settings.signal_window_ms / 1000:.0f} s; check the collectors"))
        state.pending = [p for p in state.pending if p not in expired]

    def plannable(self, episode: Episode) -> bool:
        """The latest snapshot was taken after the episode began, or the wait for one is
        over (measured on the newest event time: the watermark lags by its delay): the
        snapshot source has not moved on for a whole wait, or four waits have passed."""
        state, wait = self.state, self.settings.fresh_snapshot_wait_ms
        snapshot = state.snapshot
        if snapshot is None:
            return False
        if snapshot.taken_at >= episode.since or (
                state.delta is not None and state.delta.taken_at >= episode.since):
            return True  # a delta: the failure's own evidence, after it
        waited = state.newest - episode.since
        stalled = state.newest - state.snapshot_moved >= wait
        return waited >= 4 * wait or (waited >= wait and stalled)

    def page_dead_dirs(self) -> None:
        """Every dir of a broker offline: software can move replicas away, but only an
        operator can give the broker a disk again."""
        state = self.state
        by_broker: dict[int, list[Episode]] = {}
        for e in state.episodes.values():
            by_broker.setdefault(e.broker, []).append(e)
        for broker, episodes in sorted(by_broker.items()):
            known = state.brokers.get(broker)
            if broker in state.paged or known is None or len(episodes) < known[1]:
                continue
            dirs = sorted(e.log_dir for e in episodes)
            last = max(episodes, key=lambda e: e.since)
            self.page(broker, last.since, last.trigger, dirs, state.newest,
                      f"every log dir of broker {broker} is offline ({', '.join(dirs)}); "
                      "replace the disks and restart the broker")
