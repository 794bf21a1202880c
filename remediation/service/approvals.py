"""What an operator can do to an action: approve (by link or API), reject, cancel, resolve.

Every refusal (a tampered, expired, replayed or foreign link; a move the lifecycle does
not allow) changes nothing and leaves an audit line saying why, so a probe at the
approval endpoint is as visible as an approval.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from core import clock
from remediation.executor.lifecycle import IllegalTransition, State
from remediation.executor.store import ActionRow, ActionStore, UnknownAction
from remediation.service.links import LinkClaims, LinkRefused, LinkSigner, Refusal

AWAITING = frozenset({State.AWAITING_APPROVAL})
LINK_PATH = "/approve/"


class NotAllowed(Exception):
    """An operator request that was refused; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Link:
    url: str
    token: str
    expires_at: datetime


class Approvals:
    """Approval links and operator decisions over one store."""

    def __init__(self, store: ActionStore, signer: LinkSigner, base_url: str,
                 ttl_seconds: float) -> None:
        self.store = store
        self.signer = signer
        self.base_url = base_url.rstrip("/")
        self.ttl = timedelta(seconds=ttl_seconds)

    # --- links --------------------------------------------------------------------------

    def link(self, row: ActionRow, now: datetime | None = None) -> Link:
        """A fresh single-use link; it expires when the action's wait for approval does
        (pages never expire, their links last one TTL from now)."""
        now = now or clock.now()
        waiting_since = clock.parse(row.updated_at)
        expires = waiting_since + self.ttl
        if row.type == "page_operator" or expires <= now:
            expires = now + self.ttl
        token = self.signer.sign(row.id, expires)
        return Link(f"{self.base_url}{LINK_PATH}{token}", token, expires)

    def check_link(self, token: str, now: datetime | None = None) -> tuple[LinkClaims, ActionRow]:
        """The claims and action of a link that may approve now; LinkRefused otherwise
        (audited). Uses nothing up: a GET must not spend the link."""
        now = now or clock.now()
        try:
            claims = self.signer.verify(token, now)
        except LinkRefused as exc:
            self._refused(token, exc, None)
            raise
        row = self.store.get(claims.action_id)
        if row is None or row.state is not State.AWAITING_APPROVAL:
            state = "unknown" if row is None else row.state.value
            closed = LinkRefused(Refusal.WRONG_ACTION, f"this action is {state}, not waiting "
                                 "for approval; open the action page to see what happened")
            self._refused(token, closed, claims.action_id)
            raise closed
        return claims, row

    def approve_by_link(self, token: str, csrf: str, now: datetime | None = None) -> ActionRow:
        """The confirm button: check the form's CSRF token, spend the link, approve."""
        now = now or clock.now()
        claims, row = self.check_link(token, now)
        if not self.signer.check_csrf(claims.nonce, csrf):
            forged = LinkRefused(Refusal.TAMPERED, "the confirm form did not come from the "
                                 "approval page; open the link from the alert again")
            self._refused(token, forged, claims.action_id)
            raise forged
        try:
            self.signer.redeem(token, now, claims.action_id)
        except LinkRefused as exc:
            self._refused(token, exc, claims.action_id)
            raise
        return self._decide(row.id, f"link {claims.nonce[:8]}", "approved with the one-click "
                            "link", approve=True)

    def _refused(self, token: str, exc: LinkRefused, action_id: str | None) -> None:
        self.store.reject(token, f"approval link refused ({exc.reason}): {exc}; nothing changed",
                          actor="http", action_id=action_id)

    # --- API ----------------------------------------------------------------------------

    def approve(self, action_id: str, actor: str, reason: str | None = None) -> ActionRow:
        """Approve an action waiting for one; for a page, mark it resolved."""
        return self._decide(action_id, actor, reason or "approved through the API",
                            approve=True)

    def reject(self, action_id: str, actor: str, reason: str | None = None) -> ActionRow:
        return self._decide(action_id, actor, reason or "rejected through the API",
                            approve=False)

    def cancel(self, action_id: str, actor: str, reason: str | None = None) -> ActionRow:
        """Cancel before it runs, or ask the executor to revert it while it runs."""
        why = f"cancelled by {actor}" + (f": {reason}" if reason else "")
        try:
            return self.store.request_cancel(action_id, actor, why)
        except UnknownAction as exc:
            raise NotAllowed(str(exc), 404) from None
        except IllegalTransition as exc:
            raise NotAllowed(str(exc)) from None

    def _decide(self, action_id: str, actor: str, reason: str, approve: bool) -> ActionRow:
        row = self.store.get(action_id)
        if row is None:
            raise NotAllowed(str(UnknownAction(action_id)), 404)
        if approve:
            target = State.SUCCEEDED if row.type == "page_operator" else State.APPROVED
            if row.type == "page_operator":
                reason = f"resolved by {actor}: {reason}"
        else:
            target = State.CANCELLED
            reason = f"rejected by {actor}: {reason}"
        try:
            return self.store.transition(action_id, target, actor, reason, expect=AWAITING)
        except IllegalTransition as exc:
            raise NotAllowed(str(exc)) from None
