"""Driving an approved action's moves, one step per tick, from the live cluster.

Each step re-reads the cluster and does the smallest next thing: start (re-read first),
submit the reassignment or the dir moves (journaled before the call), watch them, and
hand over to verification (`ending.py`). Before anything else a step checks the
action's targets: one that died ends the action at once (`targets.dead`).
"""

from __future__ import annotations

from collections.abc import Callable

from core import clock
from remediation.executor import checks, cordoning, progress, sharing, stall, targets, throttle
from remediation.executor.checks import CORDON_TYPES
from remediation.executor.ending import Ending, _errors
from remediation.executor.lifecycle import State
from remediation.executor.store import ActionRow
from remediation.executor.throttling import ACTOR
from remediation.executor.view import LiveView, dir_moves
from schemas.records import Action


class Moves(Ending):
    """The executing part of the executor; `Executor` (runner.py) is the whole of it."""

    skew_threshold: float
    _publish: Callable[[Action], None] | None

    def _start(self, row: ActionRow, action: Action) -> None:
        view = self._read(action)
        verdict = checks.applies(action, view, self.skew_threshold)
        if not verdict.applies:
            self.store.transition(row.id, State.SUPERSEDED, ACTOR,
                                  f"re-read before acting: {verdict.reason}")
            return
        action = self._trim(row, action, verdict)
        row = self.store.transition(row.id, State.EXECUTING, ACTOR, f"{verdict.reason}; starting")
        # Which replicas are new, kept for the target checks: once a reassignment is
        # done the live cluster no longer says.
        self.store.update_journal(row.id, started_at=clock.text(self._clock()),
                                  attempt=row.attempts, adding=targets.adding(action, view))
        self._advance(self._fresh(row), action, view)

    def _trim(self, row: ActionRow, action: Action, verdict: checks.Verdict) -> Action:
        """Leave the partitions an operator is reassigning out of the action for good
        (journalled: every later step reads it `sharing.in_force`); the rest."""
        if not verdict.trimmed:
            return action
        trimmed = sorted({*row.journal.get("trimmed", ()), *verdict.trimmed})
        self.store.update_journal(row.id, trimmed=trimmed)
        self.store.note(row.id, ACTOR, f"trimmed, left to the operator: {', '.join(trimmed)} "
                        f"({verdict.reason})")
        return sharing.without(action, trimmed)

    def _advance(self, row: ActionRow, action: Action, view: LiveView | None = None) -> None:
        view = view or self._read(action)
        if row.cancel_request is not None:
            who = row.cancel_request
            self._revert(row, action, view, State.CANCELLED, who["actor"],
                         f"cancelled by {who['actor']}: {who['reason']}")
            return
        gone = targets.dead(action, view, row.journal)
        if gone:
            self._target_died(row, action, view, gone)
            return
        self._answers_again(row, view)
        started = clock.parse(row.journal.get("started_at", clock.text(self._clock())))
        elapsed = (self._clock() - started).total_seconds()
        if elapsed > self.timeouts.execution_seconds:
            self._revert(row, action, view, State.FAILED, ACTOR,
                         f"not done after {elapsed:.0f} s (execution timeout "
                         f"{self.timeouts.execution_seconds:g} s)")
            return
        back = checks.returned_broker(action, view)
        if back is not None:
            st = progress.status(action, view)
            self._revert(row, action, view, State.CANCELLED, ACTOR,
                         f"broker {back} came back while its replicas were re-replicated: the "
                         f"remaining moves are cancelled ({len(st.done)} of "
                         f"{len(action.targets())} partitions had their new replicas; the "
                         "others keep theirs, its own among them)")
            return
        if action.type == "move_replica_dirs":
            self._advance_dirs(row, action, view)
        elif action.type in CORDON_TYPES:
            self._advance_cordon(row, action)
        elif action.type == "assign_consumers":
            if self._publish is None:
                self._fail(row, "no event bus to publish the consumer assignment to")
                return
            self._publish(action)
            self._to_verifying(row, "assignment published to the consumer-assignments topic")
        else:
            self._advance_reassignment(row, action, view)

    def _advance_cordon(self, row: ActionRow, action: Action) -> None:
        """Cordon a dir (what was there journalled first, so a restarted executor still
        knows the cordon is ours), or lift the cordon of ours on it."""
        broker, path = int(action.plan["broker"]), str(action.plan["log_dir"])
        why_not = cordoning.why_not(self.cluster)
        if why_not is not None:
            self._fail(row, why_not)  # retrying cannot help: the cluster cannot cordon
            return
        if action.type == "cordon_log_dir":
            entry = row.journal.get("cordon")
            if entry is None:
                entry = cordoning.prepare(self.cluster, broker, path)
                self.store.update_journal(row.id, cordon=entry)
            cordoning.apply(self.cluster, dict(entry))
            self._to_verifying(row, f"log dir {path} on broker {broker} cordoned" if entry[
                "added"] else f"log dir {path} on broker {broker} was cordoned already (not "
                "by selfheal): left as it is, and it will not be lifted by selfheal")
            return
        found = cordoning.ours(self.store, action.cluster_id, broker, path)
        if found is None:
            self._to_verifying(row, f"no cordon of selfheal's on log dir {path} of broker "
                                    f"{broker}: nothing lifted (an operator's stays)")
            return
        owner, entry = found
        cordoning.uncordon(self.cluster, entry)
        self.store.update_journal(owner, cordon={**entry, "lifted": True})
        self._to_verifying(row, f"selfheal's cordon of log dir {path} on broker {broker} "
                                f"lifted (it was set by {owner[:12]}); the broker's other "
                                "cordoned.log.dirs entries are as they were")

    def _advance_reassignment(self, row: ActionRow, action: Action, view: LiveView) -> None:
        st = progress.status(action, view)
        self._left(row, st)
        journal = row.journal
        if st.not_started:
            if not journal.get("submitted"):
                self._submit_reassignment(row, action, view)
            elif self._stalled(row):
                self._revert(row, action, view, State.FAILED, ACTOR,
                             "the reassignment selfheal submitted is no longer in progress and "
                             "its target was not reached (cancelled outside selfheal?): "
                             + checks.summarise(st.not_started))
            return
        self._moving(row)
        if st.in_flight:
            self._watch(row, action, view)
            rate = self.policy.limits.inter_broker_throttle_bytes_per_s
            self._progress(row, f"{len(st.done)} of {len(action.targets())} partitions done; "
                                + checks.summarise(st.in_flight)
                                + progress.time_left(action, view, rate))
            return
        # Every replica list is at its target. A fix may still have replicas to put in the
        # dirs the plan names; a leader plan has its elections to run.
        if action.type == "fix_offline_replicas" and not self._dirs_in_place(row, action, view):
            return
        if action.type == "rebalance_leaders" and not journal.get("elected"):
            elect, theirs = sharing.electable(action, view)
            errors = self.cluster.elect_preferred(elect) if elect else {}
            self.store.update_journal(row.id, elected=True)
            self.store.note(row.id, ACTOR, f"preferred election run for {len(elect)} "
                            "partitions" + (f"; not yet: {errors}" if errors else "")
                            + (f"; not elected, an operator is reassigning them: "
                               f"{', '.join(theirs)}" if theirs else ""))
        self._to_verifying(row, f"all {len(action.targets())} partitions at their target "
                                "replicas")

    def _watch(self, row: ActionRow, action: Action, view: LiveView) -> None:
        stall.watch(self.store, row, self._clock(), stall.copied(action, view),
                    self.timeouts.stall_seconds)

    def _submit_reassignment(self, row: ActionRow, action: Action, view: LiveView) -> None:
        wanted = {(t.topic, t.partition): list(t.replicas) for t in action.targets()}
        if action.type == "fix_offline_replicas":
            self.throttles.apply(row.id, "inter", throttle.inter_broker(
                action, view, self.policy.limits.inter_broker_throttle_bytes_per_s))
            # As kafka-reassign-partitions does: name the dir of each new replica first, so
            # the broker creates it there (it answers ReplicaNotAvailable until then).
            preferred = {(t.topic, t.partition, b): path for t in action.targets()
                         for b in t.replicas if (path := t.dir_of(b)) is not None
                         and b not in view.model.brokers_with_offline_dir}
            self.cluster.move_dirs(preferred)
        # Marked submitted only once Kafka answered. A crash or a failed call before that
        # leaves it unmarked, and the next step re-reads first: a reassignment Kafka did
        # take shows as in flight (or done) there and is never submitted again.
        self.store.update_journal(row.id, submitted_at=clock.text(self._clock()))
        errors = self.cluster.reassign(wanted)
        self.store.update_journal(row.id, submitted=True)
        accepted = len(wanted) - len(errors)
        self.store.note(row.id, ACTOR, f"reassignment submitted for {accepted} partitions"
                        + (f"; refused: {_errors(errors)}" if errors else ""))
        if errors:
            self._revert(row, action, self._read(action), State.FAILED, ACTOR,
                         f"Kafka refused the reassignment of {_errors(errors)}")

    def _dirs_in_place(self, row: ActionRow, action: Action, view: LiveView) -> bool:
        """Moves replicas into the dirs the plan names once they exist; True when none left."""
        moves = dir_moves(action, view)
        flying = [k for k in view.future if k[:2] in {(t.topic, t.partition)
                                                      for t in action.targets()}]
        if not moves:
            return not flying
        if row.journal.get("dirs_submitted"):
            self._progress(row, f"{len(moves)} replicas still outside their planned dir")
            return not flying  # a broker may have declined; verification will say so
        self.throttles.apply(row.id, "intra", throttle.intra_broker(
            moves, self.policy.limits.intra_broker_throttle_bytes_per_s))
        errors = self.cluster.move_dirs(moves)
        self.store.update_journal(row.id, dirs_submitted=True)
        self.store.note(row.id, ACTOR, f"{len(moves)} replicas moved to their planned dirs"
                        + (f"; refused: {_errors(errors)}" if errors else ""))
        return False

    def _advance_dirs(self, row: ActionRow, action: Action, view: LiveView) -> None:
        moves = dir_moves(action, view)
        st = progress.status(action, view)
        self._left(row, st)
        if moves and not row.journal.get("submitted"):
            self.throttles.apply(row.id, "intra", throttle.intra_broker(
                moves, self.policy.limits.intra_broker_throttle_bytes_per_s))
            self.store.update_journal(row.id, submitted_at=clock.text(self._clock()))
            errors = self.cluster.move_dirs(moves)  # as for reassignments: marked when answered
            self.store.update_journal(row.id, submitted=True)
            self.store.note(row.id, ACTOR, f"log dir moves submitted for {len(moves)} replicas"
                            + (f"; refused: {_errors(errors)}" if errors else ""))
            if errors:
                self._revert(row, action, self._read(action), State.FAILED, ACTOR,
                             f"Kafka refused the move of {_errors(errors)}")
            return
        if st.in_flight:
            self._moving(row)
            self._watch(row, action, view)
            self._progress(row, checks.summarise(st.in_flight))
            return
        if st.not_started:
            # Not in place and not moving: a move not yet visible, or one that ended
            # without arriving (its future replica vanished); never "in place".
            if self._stalled(row):
                self._revert(row, action, view, State.FAILED, ACTOR,
                             "the log dir moves selfheal submitted are no longer in progress "
                             "and the replicas are not in their target dirs: "
                             + checks.summarise(st.not_started))
            return
        self._to_verifying(row, f"all {len(action.targets())} partitions in their target dirs")
