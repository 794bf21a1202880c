"""Approval links: a genuine link approves once; anything else is refused with its reason."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from remediation.executor.store import ActionStore
from remediation.service.links import LinkRefused, LinkSigner, Refusal
from tests.unit.action_records import action_id

SECRET = b"k" * 32
NOW = datetime(2026, 11, 22, 4, 0, tzinfo=UTC)
AID = action_id("a")


@pytest.fixture
def signer(tmp_path: Path) -> LinkSigner:
    return LinkSigner(SECRET, used=ActionStore(tmp_path / "a.db"))


def test_a_genuine_link_carries_its_claims(signer: LinkSigner) -> None:
    token = signer.sign(AID, NOW + timedelta(hours=1))
    claims = signer.verify(token, NOW, AID)
    assert claims.action_id == AID and claims.expires_at == NOW + timedelta(hours=1)
    assert len(claims.nonce) >= 16
    assert all(c.isalnum() or c in "-_." for c in token)  # safe in a URL as is


def test_two_links_for_one_action_differ_by_nonce(signer: LinkSigner) -> None:
    expires = NOW + timedelta(hours=1)
    assert signer.sign(AID, expires) != signer.sign(AID, expires)


def _flip(token: str, index: int) -> str:
    raw = bytearray(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    raw[index] ^= 0x01
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode() + "." + token.split(".")[1]


@pytest.mark.parametrize("mangle", [
    lambda t: _flip(t, 5),                     # one bit of the action id
    lambda t: _flip(t, 70),                    # one bit of the expiry
    lambda t: t[:-2] + ("AA" if t[-2:] != "AA" else "BB"),  # the MAC
    lambda t: t.replace(".", ""),              # malformed
    lambda t: "not a token",
    lambda t: "",
])
def test_a_tampered_link_is_refused(signer: LinkSigner, mangle: object) -> None:
    token = mangle(signer.sign(AID, NOW + timedelta(hours=1)))  # type: ignore[operator]
    with pytest.raises(LinkRefused) as info:
        signer.verify(token, NOW, AID)
    assert info.value.reason is Refusal.TAMPERED
    assert "damaged or forged" in str(info.value)


def test_a_link_signed_with_another_secret_is_refused(signer: LinkSigner) -> None:
    other = LinkSigner(b"x" * 32).sign(AID, NOW + timedelta(hours=1))
    with pytest.raises(LinkRefused) as info:
        signer.verify(other, NOW, AID)
    assert info.value.reason is Refusal.TAMPERED


def test_an_expired_link_is_refused(signer: LinkSigner) -> None:
    token = signer.sign(AID, NOW + timedelta(minutes=5))
    signer.verify(token, NOW + timedelta(minutes=4), AID)
    with pytest.raises(LinkRefused, match="expired at 2026-11-22 04:05:00 UTC") as info:
        signer.verify(token, NOW + timedelta(minutes=5), AID)
    assert info.value.reason is Refusal.EXPIRED


def test_a_link_works_once(signer: LinkSigner) -> None:
    token = signer.sign(AID, NOW + timedelta(hours=1))
    assert signer.redeem(token, NOW, AID).action_id == AID
    for attempt in (signer.verify, signer.redeem):
        with pytest.raises(LinkRefused) as info:
            attempt(token, NOW, AID)
        assert info.value.reason is Refusal.ALREADY_USED


def test_a_link_for_another_action_is_refused(signer: LinkSigner) -> None:
    token = signer.sign(AID, NOW + timedelta(hours=1))
    with pytest.raises(LinkRefused) as info:
        signer.redeem(token, NOW, action_id("b"))
    assert info.value.reason is Refusal.WRONG_ACTION
    assert signer.redeem(token, NOW, AID)  # the refusal did not use it up


def test_csrf_tokens_bind_to_the_nonce_and_the_secret(signer: LinkSigner) -> None:
    csrf = signer.csrf_token("nonce-0123456789ab")
    assert signer.check_csrf("nonce-0123456789ab", csrf)
    assert not signer.check_csrf("nonce-0123456789ac", csrf)
    assert not signer.check_csrf("nonce-0123456789ab", csrf[:-1] + "A")
    assert not LinkSigner(b"x" * 32).check_csrf("nonce-0123456789ab", csrf)
    assert not signer.check_csrf("nonce-0123456789ab", "ünïcode")


def test_a_short_secret_is_refused_with_how_to_make_one() -> None:
    with pytest.raises(ValueError, match="at least 32 random bytes"):
        LinkSigner(b"short")
