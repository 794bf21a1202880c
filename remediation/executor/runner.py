"""The executor: takes actions in, decides by policy, and drives each one to its end.

Level-triggered, like a Kubernetes controller: every step re-reads the live cluster,
compares it with the action's target and does the smallest next thing. Nothing depends
on remembering what happened in memory: what the executor started (and the configs it
must put back) is in the action's journal in the store, written *before* the call to
Kafka, so a restarted or standby executor resumes an action mid-flight without starting
a second reassignment.

Actions on different partitions that set different throttle configs run side by side
(`sidebyside.py`): one that is slow or stuck does not hold back the next fix.

This module is intake and the loop; stepping an executing action is `moving.py`, its
end (verification, revert, a target that died) `ending.py`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from core import clock
from core.acls import is_denied
from core.plan.disks import DEFAULT_THRESHOLD
from core.signing import ActionSigner, SignatureError
from remediation.executor import checks, replan, sharing, sidebyside
from remediation.executor.actions import ActionError, parse_action_json, stored_action
from remediation.executor.cluster import ClusterError, KafkaCluster
from remediation.executor.ending import Timeouts
from remediation.executor.lifecycle import (
    PAGE_OPERATOR,
    IllegalTransition,
    State,
    reopen_refusal,
)
from remediation.executor.moving import Moves
from remediation.executor.policy import ClusterHealth, Policy, Ruling
from remediation.executor.store import ActionRow, ActionStore
from remediation.executor.throttling import ACTOR, Throttles
from remediation.executor.view import LiveView
from schemas.records import Action

HOUR = timedelta(hours=1)
DEFAULT_TIMEOUTS = Timeouts()
# Open pages are held against the live cluster this often (one read for all of them).
PAGE_CHECK_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Received:
    """What became of one record from the actions topic."""

    outcome: str  # rejected | duplicate | proposed | reopened | superseded
    reason: str
    action_id: str | None = None
    state: State | None = None


DENIED_MAX_SECONDS = 60.0


class Executor(Moves):
    """Intake decisions and the execution loop over one store and one cluster."""

    def __init__(self, store: ActionStore, cluster: KafkaCluster, policy: Policy, *,
                 signer: ActionSigner,
                 skew_threshold: float = DEFAULT_THRESHOLD,
                 timeouts: Timeouts = DEFAULT_TIMEOUTS,
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
        self._replans: set[str] | None = None
        self.errors = 0  # Kafka calls that failed (retried on the next tick)
        self.failing_since: float | None = None  # monotonic time of the first of a run of them
        # A denied call is asked again after 1, 2, 4 ... DENIED_MAX_SECONDS, not each tick
        self._denials = 0
        self._denied_until = 0.0

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
        if not verdict.applies and verdict.page:
            return self._await_operator(row, verdict.reason, outcome)
        if not verdict.applies:
            done = self.store.transition(row.id, State.SUPERSEDED, ACTOR, verdict.reason)
            return Received("superseded", verdict.reason, row.id, done.state)
        action = self._trim(row, action, verdict)
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

    def _await_operator(self, row: ActionRow, reason: str, outcome: str) -> Received:
        """An operator's reassignment blocks the fix for good: page, and wait for them
        (approving re-checks first, so the fix runs only once theirs is gone)."""
        self.store.update_journal(row.id, decision={"mode": "approve", "reasons": [reason],
                                                    "page": True})
        done = self.store.transition(row.id, State.AWAITING_APPROVAL, ACTOR, reason)
        if self._notify is not None:
            self._notify(done, Ruling("approve", (reason,), page=True))
        return Received(outcome, reason, row.id, done.state)

    # --- the loop -----------------------------------------------------------------------

    def tick(self) -> None:
        """One pass: expire stale approvals, advance what runs, start the next approved."""
        if not self.is_leader():
            return
        self.store.expire_overdue(self.policy.limits.approval_ttl_seconds, ACTOR)
        if time.monotonic() < self._denied_until:
            return
        rows = self.store.in_flight()
        running = [r for r in rows if r.state in (State.EXECUTING, State.VERIFYING)]
        try:
            # Its read may meet a broker just restarted (ClusterError) like any other: a
            # pass whose page check raised stopped the executor and rebuilt its clients.
            self._resolve_pages()
            for row in running:
                self.step(row)
            self._replan_failed()
            self._start_approved()
            self.throttles.restore_left()
            self._last_error = None
            self.failing_since = None
            self._denials = 0
        except ClusterError as exc:
            self.errors += 1
            delay = None
            if is_denied(exc):  # the cluster answers: no new clients, a backoff
                delay = min(DENIED_MAX_SECONDS, 2.0 ** self._denials)
                self._denials += 1
                self._denied_until = time.monotonic() + delay
            elif self.failing_since is None:
                self.failing_since = time.monotonic()
            self._note_silent(running)
            if str(exc) != self._last_error:  # say it once, not every tick
                then = f"asking again in {delay:g} s, then less often" if delay else "retrying"
                self._log(f"{exc}; {then}")
                self._last_error = str(exc)

    def _start_approved(self) -> None:
        """Start each approved action nothing in flight stands in the way of
        (`sidebyside.blocker`); one that waits says for what, once."""
        rows = self.store.in_flight()
        approved = [r for r in rows if r.state is State.APPROVED]
        if not approved:
            return
        running = [(r.id, sharing.in_force(r), r.journal) for r in rows
                   if r.state in (State.EXECUTING, State.VERIFYING)]
        for row in approved:
            action = sharing.in_force(row)
            why = sidebyside.blocker(action, self._read(action), running) if running else None
            if why is not None:
                if row.journal.get("waiting") != why:
                    self.store.update_journal(row.id, waiting=why)
                    self.store.note(row.id, ACTOR, f"waits to start: {why}")
                continue
            self.step(row)
            row = self._fresh(row)
            if row.state in (State.EXECUTING, State.VERIFYING):
                running.append((row.id, action, row.journal))

    def _replan_failed(self) -> None:
        """Plan again the partitions of fixes whose target died (`replan.py`), through
        the intake, as soon as their cancels have landed."""
        if self._replans is None:  # first tick: also those an earlier executor left
            self._replans = {r.id for r in self.store.list(State.FAILED) if replan.pending(r)}
        for action_id in sorted(self._replans):
            row = self.store.get(action_id)
            if row is None or not replan.pending(row):
                self._replans.discard(action_id)
                continue
            made = replan.fresh_plan(row, self._read(stored_action(row.record)), self.signer)
            if made == "wait":
                continue
            self._replans.discard(action_id)
            if isinstance(made, str):
                replan.link(self.store, row, None, made)
                continue
            got = self.receive(made.to_json(), source=f"replan of {row.id[:12]}")
            replan.link(self.store, row, got.action_id, f"{got.outcome}: {got.reason}")
            self._log(f"action {row.id[:12]}'s partitions planned again: {got.outcome} "
                      f"{(got.action_id or '')[:12]}")

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
        action = sharing.in_force(row)
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
