"""The executor: takes actions in, decides by policy, and drives each one to its end.

Level-triggered, like a Kubernetes controller: every step re-reads the live cluster,
compares it with the action's target and does the smallest next thing. Nothing depends
on remembering what happened in memory: what the executor started (and the configs it
must put back) is in the action's journal in the store, written *before* the call to
Kafka, so a restarted or standby executor resumes an action mid-flight without starting
a second reassignment.

One action executes at a time: throttles are per broker and per topic, and two actions
restoring "what was there before" in the wrong order would leave one's throttle behind.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from core import clock
from core.plan.disks import DEFAULT_THRESHOLD
from core.signing import ActionSigner, SignatureError
from remediation.executor import checks, progress, throttle
from remediation.executor.actions import ActionError, parse_action_json, stored_action
from remediation.executor.cluster import ClusterError, KafkaCluster
from remediation.executor.lifecycle import (
    PAGE_OPERATOR,
    IllegalTransition,
    State,
    reopen_refusal,
)
from remediation.executor.policy import ClusterHealth, Policy, Ruling
from remediation.executor.store import ActionRow, ActionStore
from remediation.executor.throttling import ACTOR, Throttles
from remediation.executor.view import LiveView, dir_moves
from schemas.records import Action

HOUR = timedelta(hours=1)
# Metadata, the reassignment list and DescribeLogDirs come from different brokers at
# different moments: a move that looks neither in flight nor done is believed only after
# it has looked so for this long.
STALL_GRACE = timedelta(seconds=15)
# Open pages are held against the live cluster this often (one read for all of them).
PAGE_CHECK_SECONDS = 10.0
# A broker applies a dynamic config moments after the alter returns (a ZooKeeper
# notification, or the KRaft metadata log); a move submitted in between runs unthrottled.


@dataclass(frozen=True, slots=True)
class Timeouts:
    execution_seconds: float = 3600.0  # moves not done by then are reverted: failed
    verify_seconds: float = 120.0  # target state not seen by then: failed


@dataclass(frozen=True, slots=True)
class Received:
    """What became of one record from the actions topic."""

    outcome: str  # rejected | duplicate | proposed | reopened | superseded
    reason: str
    action_id: str | None = None
    state: State | None = None



class Executor:
    """Intake decisions and the execution loop over one store and one cluster."""

    def __init__(self, store: ActionStore, cluster: KafkaCluster, policy: Policy, *,
                 signer: ActionSigner,
                 skew_threshold: float = DEFAULT_THRESHOLD,
                 timeouts: Timeouts = Timeouts(),
                 clock: Callable[[], datetime] = clock.now,
                 notify: Callable[[ActionRow, Ruling], None] | None = None,
                 publish: Callable[[Action], None] | None = None,
                 is_leader: Callable[[], bool] = lambda: True,
                 log: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.cluster = cluster
        self.policy = policy
        self.signer = signer
        self._next_page_check = 0.0
        self.throttles = Throttles(store, cluster)
        self.skew_threshold = skew_threshold  # a dir move's premise (checks.applies)
        self.timeouts = timeouts
        self._clock = clock
        self._notify = notify
        self._publish = publish
        self.is_leader = is_leader
        self._log = log or (lambda m: print(f"selfheal executor: {m}", file=sys.stderr,
                                            flush=True))
        self._last_error: str | None = None
        self._seen: set[str] = set()  # actions this executor has stepped
        self.errors = 0  # Kafka calls that failed (retried on the next tick)
        self.failing_since: float | None = None  # monotonic time of the first of a run of them

    # --- intake -------------------------------------------------------------------------

    def receive(self, raw: bytes | str | None, source: str | None = None) -> Received:
        """One record from the actions topic: refuse, ignore, or propose and decide.

        Raises ClusterError when the cluster cannot be read: the caller retries the same
        record later, so nothing is decided on a guess.
        """
        try:
            action = parse_action_json(raw)
        except ActionError as exc:
            reason = f"malformed action record: {exc}"
            self.store.reject(raw or b"", reason, ACTOR, source=source)
            return Received("rejected", reason)
        try:
            self.signer.verify(action)
        except SignatureError as exc:
            reason = f"refused, nothing executed: {exc}"
            self.store.reject(raw or b"", reason, ACTOR, action_id=action.action_id,
                              source=source)
            return Received("rejected", reason, action.action_id)
        view = self._read(action)
        bad = checks.problems(action, view)
        if bad:
            reason = "refused, nothing executed: " + checks.summarise(bad)
            self.store.reject(raw or b"", reason, ACTOR, action_id=action.action_id, source=source)
            return Received("rejected", reason, action.action_id)
        proposed = self.store.propose(action, ACTOR, source=source)
        row = proposed.row
        previous: ActionRow | None = None
        if proposed.duplicate:
            if row.open:
                return Received("duplicate", "already known and open", row.id, row.state)
            refusal = reopen_refusal(row.state)
            verdict = checks.applies(action, view, self.skew_threshold)
            if refusal is not None or not verdict.applies:
                why = refusal or verdict.reason
                self.store.note(row.id, ACTOR, f"not re-opened: {why}")
                return Received("duplicate", why, row.id, row.state)
            previous = row
            row = self.store.reopen(action, ACTOR, f"re-proposed, the problem is back "
                                    f"(attempt {row.attempts + 1}; last one {row.state}): "
                                    f"{verdict.reason}", source=source)
        return self._decide(row, action, view, previous)

    def _decide(self, row: ActionRow, action: Action, view: LiveView,
                previous: ActionRow | None) -> Received:
        outcome = "reopened" if previous is not None else "proposed"
        verdict = checks.applies(action, view, self.skew_threshold)
        if not verdict.applies:
            done = self.store.transition(row.id, State.SUPERSEDED, ACTOR, verdict.reason)
            return Received("superseded", verdict.reason, row.id, done.state)
        health = ClusterHealth.from_model(view.model, view.reassignments_per_broker())
        moved = self.store.moved_bytes_since(self._clock() - HOUR)
        decision = self.policy.decide(action, health, moved)
        if previous is not None and previous.state is State.FAILED and decision.mode == "auto":
            decision = replace(decision, mode="approve", reasons=(
                *decision.reasons, f"the last attempt failed ({previous.error}); a human "
                "looks before it runs again"))
        self.store.update_journal(row.id, decision={"mode": decision.mode,
                                                    "reasons": list(decision.reasons),
                                                    "page": decision.page})
        reason = "; ".join(decision.reasons)
        if decision.mode == "auto":
            done = self.store.transition(row.id, State.APPROVED, "policy", reason)
        else:
            # "refuse" (Kafka would refuse it) is caught as stale by `applies` above, so
            # what is left waits for a human, who sees every reason on the page.
            done = self.store.transition(row.id, State.AWAITING_APPROVAL, "policy", reason)
            if self._notify is not None:
                self._notify(done, decision)
        return Received(outcome, reason, row.id, done.state)

    # --- the loop -----------------------------------------------------------------------

    def tick(self) -> None:
        """One pass: expire stale approvals, advance what runs, start the next approved."""
        if not self.is_leader():
            return
        self.store.expire_overdue(self.policy.limits.approval_ttl_seconds, ACTOR)
        self._resolve_pages()
        rows = self.store.in_flight()
        running = [r for r in rows if r.state in (State.EXECUTING, State.VERIFYING)]
        try:
            for row in running:
                self.step(row)
            if not running:
                approved = [r for r in rows if r.state is State.APPROVED]
                if approved:
                    self.step(approved[0])
            self._last_error = None
            self.failing_since = None
        except ClusterError as exc:
            self.errors += 1
            if self.failing_since is None:
                self.failing_since = time.monotonic()
            if str(exc) != self._last_error:  # say it once, not every tick
                self._log(f"{exc}; retrying")
                self._last_error = str(exc)

    def _resolve_pages(self) -> None:
        """Close the pages whose problem the live cluster no longer shows (at most every
        `PAGE_CHECK_SECONDS`, one read for all of them): a page lives like an alert."""
        now = time.monotonic()
        if now < self._next_page_check:
            return
        self._next_page_check = now + PAGE_CHECK_SECONDS
        pages = [r for r in self.store.open_actions()
                 if r.type == PAGE_OPERATOR and r.state is State.AWAITING_APPROVAL]
        if not pages:
            return
        view = self.cluster.read(topics=())
        for row in pages:
            resolved = checks.page_resolved(stored_action(row.record), view)
            if resolved is None:
                continue
            try:
                self.store.transition(row.id, State.SUCCEEDED, ACTOR, resolved,
                                      expect=frozenset({State.AWAITING_APPROVAL}))
            except IllegalTransition:
                continue  # a person closed it meanwhile
            self._log(f"page {row.id[:12]} {resolved}")

    def step(self, row: ActionRow) -> None:
        """Advance one action by one step, from whatever state it is in."""
        if not self.is_leader():
            return
        action = stored_action(row.record)
        if row.id not in self._seen:
            self._seen.add(row.id)
            if row.state is not State.APPROVED:
                self.store.note(row.id, ACTOR, f"picked up {row.state} after a restart or a "
                                "takeover; resuming from the journal and the live cluster")
        if row.state is State.APPROVED:
            self._start(row, action)
        elif row.state is State.EXECUTING:
            self._advance(row, action)
        elif row.state is State.VERIFYING:
            self._verify(row, action)

    def _read(self, action: Action) -> LiveView:
        """The live cluster as far as this action is concerned: all brokers and dirs, the
        partitions of its topics (see `KafkaCluster.read`)."""
        targets = action.targets()
        return self.cluster.read(future_of={b for t in targets for b in t.replicas},
                                 topics={t.topic for t in targets})

    def _fresh(self, row: ActionRow) -> ActionRow:
        found = self.store.get(row.id)
        assert found is not None  # actions are never deleted
        return found

    def _start(self, row: ActionRow, action: Action) -> None:
        view = self._read(action)
        verdict = checks.applies(action, view, self.skew_threshold)
        if not verdict.applies:
            self.store.transition(row.id, State.SUPERSEDED, ACTOR,
                                  f"re-read before acting: {verdict.reason}")
            return
        row = self.store.transition(row.id, State.EXECUTING, ACTOR, f"{verdict.reason}; starting")
        self.store.update_journal(row.id, started_at=clock.text(self._clock()),
                                  attempt=row.attempts)
        self._advance(self._fresh(row), action, view)

    def _advance(self, row: ActionRow, action: Action, view: LiveView | None = None) -> None:
        view = view or self._read(action)
        if row.cancel_request is not None:
            who = row.cancel_request
            self._revert(row, action, view, State.CANCELLED, who["actor"],
                         f"cancelled by {who['actor']}: {who['reason']}")
            return
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
        elif action.type == "assign_consumers":
            if self._publish is None:
                self._fail(row, "no event bus to publish the consumer assignment to")
                return
            self._publish(action)
            self._to_verifying(row, "assignment published to the consumer-assignments topic")
        else:
            self._advance_reassignment(row, action, view)

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
            errors = self.cluster.elect_preferred(action.elections())
            self.store.update_journal(row.id, elected=True)
            self.store.note(row.id, ACTOR, f"preferred election run for "
                            f"{len(action.elections())} partitions"
                            + (f"; not yet: {errors}" if errors else ""))
        self._to_verifying(row, f"all {len(action.targets())} partitions at their target "
                                "replicas")

    def _submit_reassignment(self, row: ActionRow, action: Action, view: LiveView) -> None:
        targets = {(t.topic, t.partition): list(t.replicas) for t in action.targets()}
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
        errors = self.cluster.reassign(targets)
        self.store.update_journal(row.id, submitted=True)
        accepted = len(targets) - len(errors)
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
            self._progress(row, checks.summarise(st.in_flight))
            return
        if moves:
            if self._stalled(row):
                self._revert(row, action, view, State.FAILED, ACTOR,
                             "the log dir moves selfheal submitted are no longer in progress "
                             "and the replicas are not in their target dirs: "
                             + checks.summarise(st.not_started))
            return
        self._to_verifying(row, f"all {len(action.targets())} partitions in their target dirs")

    def _to_verifying(self, row: ActionRow, reason: str) -> None:
        self.throttles.restore(row.id)
        row = self.store.transition(row.id, State.VERIFYING, ACTOR, reason)
        self.store.update_journal(row.id, verifying_at=clock.text(self._clock()))
        self._verify(self._fresh(row), stored_action(row.record))

    def _verify(self, row: ActionRow, action: Action) -> None:
        self.throttles.restore(row.id)  # in case the executor stopped between the moves and here
        view = self._read(action)
        problems = progress.verify(action, view)
        if not problems:
            done = f"{len(action.targets())} partitions in their target state"
            self._progress(row, f"done: {done}")  # what the live cluster shows, not a count
            self.store.transition(row.id, State.SUCCEEDED, ACTOR,
                                  f"verified on the live cluster: {done}")
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
            self.cluster.move_dirs(back)
            undone.append(f"{len(back)} log dir moves stopped")
        self.throttles.restore(row.id)
        tail = ("; reverted: " + ", ".join(undone)) if undone else "; nothing was in flight"
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
