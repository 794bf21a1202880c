"""How an executing action ends: verified on the live cluster, reverted, or failed.

The executor's last word on an action is here. `succeeded` only when the live cluster
shows the target state healthy (`progress.verify`); every other end puts back what the
action changed that can be put back (its reassignments and dir moves in flight, its
throttles) and says in the audit what was done. A target that died mid-way
(`targets.dead`) ends the action at once, naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from core import clock
from remediation.executor import checks, progress, sharing, targets
from remediation.executor.cluster import KafkaCluster
from remediation.executor.lifecycle import State
from remediation.executor.policy import Policy
from remediation.executor.store import ActionRow, ActionStore
from remediation.executor.throttling import ACTOR, Throttles
from remediation.executor.view import LiveView
from schemas.records import Action

# Metadata, the reassignment list and DescribeLogDirs come from different brokers at
# different moments: a move that looks neither in flight nor done is believed only after
# it has looked so for this long.
STALL_GRACE = timedelta(seconds=15)


@dataclass(frozen=True, slots=True)
class Timeouts:
    execution_seconds: float = 3600.0  # moves not done by then are reverted: failed
    verify_seconds: float = 120.0  # target state not seen by then: failed
    stall_seconds: float = 300.0  # no bytes moved this long: reported stalled (stall.py)


class Ending:
    """The executor's ends of an action; `Executor` (runner.py) is the whole of it."""

    store: ActionStore
    cluster: KafkaCluster
    policy: Policy
    throttles: Throttles
    timeouts: Timeouts
    _clock: Callable[[], datetime]
    _log: Callable[[str], None]
    _replans: set[str] | None  # failed fixes to plan again; None: not yet read from the store

    def _read(self, action: Action) -> LiveView:
        """The live cluster as far as this action is concerned: all brokers and dirs, the
        partitions of its topics (see `KafkaCluster.read`)."""
        wanted = action.targets()
        return self.cluster.read(future_of={b for t in wanted for b in t.replicas},
                                 topics={t.topic for t in wanted})

    def _fresh(self, row: ActionRow) -> ActionRow:
        found = self.store.get(row.id)
        assert found is not None  # actions are never deleted
        return found

    def _to_verifying(self, row: ActionRow, reason: str) -> None:
        self.throttles.restore(row.id)
        row = self.store.transition(row.id, State.VERIFYING, ACTOR, reason)
        self.store.update_journal(row.id, verifying_at=clock.text(self._clock()))
        self._verify(self._fresh(row), sharing.in_force(row))

    def _verify(self, row: ActionRow, action: Action) -> None:
        self.throttles.restore(row.id)  # in case the executor stopped between the moves and here
        view = self._read(action)
        gone = targets.dead(action, view, row.journal)
        if gone:
            self._target_died(row, action, view, gone)
            return
        self._answers_again(row, view)
        problems = progress.verify(action, view)
        if not problems:
            done = f"{len(action.targets())} partitions in their target state"
            self._progress(row, f"done: {done}")  # what the live cluster shows, not a count
            self.store.transition(row.id, State.SUCCEEDED, ACTOR,
                                  f"verified on the live cluster: {done}, every target "
                                  "replica online, in sync and in its planned dir")
            return
        if action.type == "rebalance_leaders":
            # A preferred leader that was still catching up may be electable now.
            self.cluster.elect_preferred(action.elections())
        since = clock.parse(row.journal.get("verifying_at", clock.text(self._clock())))
        waited = (self._clock() - since).total_seconds()
        if waited > self.timeouts.verify_seconds:
            self._fail(row, f"target state not reached {waited:.0f} s after the moves: "
                            + checks.summarise(problems))
        else:
            self._progress(row, "verifying: " + checks.summarise(problems))

    def _target_died(self, row: ActionRow, action: Action, view: LiveView,
                     gone: list[targets.DeadTarget]) -> None:
        """A target is gone: that part cannot finish. Cancel the reassignments onto a
        dead broker (Kafka puts the original replicas back), count the moves into a
        failed dir as lost (their future replicas went with it; the replicas stay where
        they were), and end the action failed, the rest reverted as for any failure."""
        died = "; ".join(g.describe() for g in gone)
        # A fix's partitions are still short of a copy: planned again at once (replan.py).
        again = sorted({tp for g in gone for tp in g.partitions}
                       if action.type == "fix_offline_replicas" else ())
        self.store.update_journal(row.id, replan=[list(tp) for tp in again], target_died={
            "at": clock.text(self._clock()),
            "targets": [{"broker": g.broker, "log_dir": g.path,
                         "partitions": [list(tp) for tp in g.partitions]} for g in gone]})
        if again and self._replans is not None:
            self._replans.add(row.id)
        done: list[str] = []
        onto_dead = sorted({tp for g in gone if g.path is None for tp in g.partitions
                            if tp in view.reassigning})
        if onto_dead:
            errors = self.cluster.reassign(dict.fromkeys(onto_dead))
            done.append(f"{len(onto_dead) - len(errors)} reassignments onto it cancelled, "
                        "their original replicas back"
                        + (f" (refused: {_errors(errors)})" if errors else ""))
            broken = targets.back_to_broken(action, view, set(onto_dead) - set(errors))
            if broken:
                done.append("still short of a copy: " + checks.summarise(broken))
        lost = [f"{t}-{p} on broker {g.broker}" for g in gone if g.path is not None
                for (t, p) in g.partitions]
        if lost:
            done.append(f"{len(lost)} replica moves into it lost (the replicas stay in "
                        f"their old dirs): {checks.summarise(lost)}")
        if row.state is State.VERIFYING:
            self._fail(row, f"a target died: {died}" + ("; " + "; ".join(done) if done else ""))
            return
        # The cancels above leave the dead part out of `view`'s in-flight list for revert.
        rest = LiveView(view.model, {tp: r for tp, r in view.reassigning.items()
                                     if tp not in onto_dead}, view.future,
                        view.all_dir_bytes, view.all_leaders, view.answered)
        self._revert(row, action, rest, State.FAILED, ACTOR,
                     f"a target died mid-way: {died}" + ("; " + "; ".join(done) if done else ""))

    # --- a target that stops answering --------------------------------------------------

    def _note_silent(self, rows: list[ActionRow]) -> None:
        """A target broker that stops answering (killed, restarting) holds every read back
        (`KafkaCluster.read`): each action copying onto it says so once in its audit,
        so a target that dies and returns within seconds is on record."""
        silent: frozenset[int] = getattr(self.cluster, "silent", frozenset)()
        for row in rows if silent else ():
            was = dict(row.journal.get("silent") or {})
            new = sorted(b for b in targets.adding_to(row.journal) & silent
                         if str(b) not in was)
            if not new:
                continue
            now = clock.text(self._clock())
            self.store.update_journal(row.id, silent={**was, **{str(b): now for b in new}})
            for b in new:
                self.store.note(row.id, ACTOR, f"target broker {b} stopped answering (down or "
                                "restarting?): nothing is decided for this action until it "
                                "answers again or is gone")

    def _answers_again(self, row: ActionRow, view: LiveView) -> None:
        was = dict(row.journal.get("silent") or {})
        back = sorted(b for b in was if view.heard(int(b)))
        if not back:
            return
        self.store.update_journal(row.id, silent={b: t for b, t in was.items()
                                                  if b not in back} or None)
        for b in back:
            gap = (self._clock() - clock.parse(was[b])).total_seconds()
            self.store.note(row.id, ACTOR, f"target broker {b} answers again ({gap:.0f} s after "
                            "it stopped): its copies go on")

    # --- reverting, throttles, bookkeeping ---------------------------------------------

    def _revert(self, row: ActionRow, action: Action, view: LiveView, end: State, actor: str,
                reason: str) -> None:
        """Cancel what is in flight for this action, restore configs, and end it."""
        ours = {(t.topic, t.partition) for t in action.targets()}
        flying = {tp: None for tp in ours if tp in view.reassigning}
        undone: list[str] = []
        if flying:
            errors = self.cluster.reassign(flying)
            undone.append(f"{len(flying) - len(errors)} reassignments cancelled")
        back = {}
        for (t, p, b) in view.future:
            part = view.partition(t, p)
            if (t, p) in ours and part is not None:
                current = next((r.log_dir for r in part.replicas if r.broker == b), None)
                if current is not None:
                    back[(t, p, b)] = current
        if back:
            refused = self.cluster.move_dirs(back)
            undone.append(f"{len(back) - len(refused)} log dir moves stopped"
                          + (f" ({_errors(refused)} refused)" if refused else ""))
        self.throttles.restore(row.id)
        tail = ("; reverted: " + ", ".join(undone)) if undone else "; nothing else was in flight"
        if end is State.CANCELLED:
            self.store.transition(row.id, State.CANCELLED, actor, reason + tail)
        else:
            self._fail(row, reason + tail)

    def _fail(self, row: ActionRow, reason: str) -> None:
        self.throttles.restore(row.id)
        self.store.transition(row.id, State.FAILED, ACTOR, reason)
        self._log(f"action {row.id[:12]} failed: {reason}")

    def _stalled(self, row: ActionRow) -> bool:
        """True once submitted moves have looked neither in flight nor done for the grace."""
        since = row.journal.get("stalled_since")
        if since is None:
            self.store.update_journal(row.id, stalled_since=clock.text(self._clock()))
            return False
        return self._clock() - clock.parse(since) > STALL_GRACE

    def _moving(self, row: ActionRow) -> None:
        if row.journal.get("stalled_since") is not None:
            self.store.update_journal(row.id, stalled_since=None)

    def _left(self, row: ActionRow, st: progress.Status) -> None:
        """Partitions not yet at their target, for /metrics' bytes left to move."""
        left = len(st.in_flight) + len(st.not_started)
        if row.journal.get("partitions_left") != left:
            self.store.update_journal(row.id, partitions_left=left)

    def _progress(self, row: ActionRow, text: str) -> None:
        if row.journal.get("progress") != text:
            self.store.update_journal(row.id, progress=text)


def _errors(errors: dict[Any, str]) -> str:
    return checks.summarise(f"{'-'.join(map(str, k))}: {v}" for k, v in sorted(errors.items()))
