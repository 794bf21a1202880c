"""One-click approval links: signed, expiring, single-use, bound to one action.

A token is `base64url(payload) "." base64url(HMAC-SHA256(key, "link|" payload))` with
payload `v1|<action_id>|<expires unix s>|<nonce>`. The MAC is checked (constant time)
before any field is read, so a forged token learns nothing. Single use is enforced by the
store's used_links table, so it holds across restarts and across service replicas.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from remediation.executor.store_side import LinkAlreadyUsed

MIN_SECRET_BYTES = 32
_NONCE = re.compile(r"[A-Za-z0-9_-]{16,64}")
_ACTION_ID = re.compile(r"[0-9a-f]{64}")


class Refusal(StrEnum):
    TAMPERED = "tampered"
    EXPIRED = "expired"
    ALREADY_USED = "already used"
    WRONG_ACTION = "wrong action"


class LinkRefused(Exception):
    """An approval link that must not approve anything; `reason` says which check failed."""

    def __init__(self, reason: Refusal, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class UsedLinks(Protocol):
    """The part of the action store that remembers used nonces."""

    def link_used(self, nonce: str) -> bool: ...

    def consume_link(self, nonce: str, action_id: str) -> None: ...


@dataclass(frozen=True, slots=True)
class LinkClaims:
    action_id: str
    expires_at: datetime
    nonce: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class LinkSigner:
    """Signs and checks approval links and the confirm form's CSRF token with one secret."""

    def __init__(self, secret: bytes, used: UsedLinks | None = None) -> None:
        if len(secret) < MIN_SECRET_BYTES:
            raise ValueError(
                f"approval link secret is {len(secret)} bytes; use at least "
                f"{MIN_SECRET_BYTES} random bytes (e.g. `python -c 'import secrets; "
                "print(secrets.token_hex(32))'`)"
            )
        # Separate keys per use, so a CSRF token can never pass as a link MAC.
        self._link_key = hmac.new(secret, b"selfheal link", hashlib.sha256).digest()
        self._csrf_key = hmac.new(secret, b"selfheal csrf", hashlib.sha256).digest()
        self._used = used

    def sign(self, action_id: str, expires_at: datetime, nonce: str | None = None) -> str:
        """A URL-safe token that approves `action_id` once, until `expires_at`."""
        if not _ACTION_ID.fullmatch(action_id):
            raise ValueError(f"action id must be 64 lowercase hex characters, got {action_id!r}")
        if expires_at.tzinfo is None:
            raise ValueError("expires_at needs a time zone (use UTC)")
        nonce = nonce or secrets.token_urlsafe(16)
        if not _NONCE.fullmatch(nonce):
            raise ValueError("nonce must be 16-64 URL-safe base64 characters")
        payload = f"v1|{action_id}|{int(expires_at.timestamp())}|{nonce}".encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def verify(self, token: str, now: datetime, action_id: str | None = None) -> LinkClaims:
        """The token's claims if it is genuine, unexpired, unused and (if given) for
        `action_id`; else LinkRefused. Does not use the token up: see `redeem`."""
        claims = self._claims(token)
        if now.timestamp() >= claims.expires_at.timestamp():
            raise LinkRefused(Refusal.EXPIRED, f"this approval link expired at "
                              f"{claims.expires_at:%Y-%m-%d %H:%M:%S} UTC; ask for a new one")
        if action_id is not None and not hmac.compare_digest(claims.action_id, action_id):
            raise LinkRefused(Refusal.WRONG_ACTION, "this approval link is for another action; "
                              "open the link from the alert about this action")
        if self._used is not None and self._used.link_used(claims.nonce):
            raise LinkRefused(Refusal.ALREADY_USED, "this approval link was already used; "
                              "open the action page to see what happened")
        return claims

    def redeem(self, token: str, now: datetime, action_id: str) -> LinkClaims:
        """Verify and use the token up, atomically in the store: the second call refuses."""
        if self._used is None:
            raise RuntimeError("redeem needs a store to remember used links; pass used=store")
        claims = self.verify(token, now, action_id)
        try:
            self._used.consume_link(claims.nonce, claims.action_id)
        except LinkAlreadyUsed as exc:  # a concurrent click won the race
            raise LinkRefused(Refusal.ALREADY_USED, str(exc)) from None
        return claims

    def csrf_token(self, nonce: str) -> str:
        """The confirm form's hidden field: binds the POST to the link that showed it."""
        return _b64(hmac.new(self._csrf_key, nonce.encode() + b"|csrf", hashlib.sha256).digest())

    def check_csrf(self, nonce: str, token: str) -> bool:
        return hmac.compare_digest(self.csrf_token(nonce).encode(), token.encode("utf-8",
                                                                                "replace"))

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._link_key, b"link|" + payload, hashlib.sha256).digest()

    def _claims(self, token: str) -> LinkClaims:
        tampered = LinkRefused(Refusal.TAMPERED, "this approval link is damaged or forged; "
                               "copy the whole link from the alert, or ask for a new one")
        try:
            body, mac = token.split(".")
            payload, given = _unb64(body), _unb64(mac)
        except (ValueError, binascii.Error):
            raise tampered from None
        if not hmac.compare_digest(self._mac(payload), given):
            raise tampered
        try:
            version, action_id, expires, nonce = payload.decode("ascii").split("|")
            if version != "v1":
                raise ValueError(version)
            when = datetime.fromtimestamp(int(expires), UTC)
        except (ValueError, UnicodeDecodeError, OverflowError, OSError):
            raise tampered from None  # a genuine MAC over a payload we never write
        return LinkClaims(action_id, when, nonce)
