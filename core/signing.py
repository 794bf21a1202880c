"""Signed actions: only what the job (or an operator with the config) proposed can run.

An action id is a hash anyone can compute, so it proves nothing about who wrote the
record. Every action on the bus therefore carries ``signature``: ``hmac-sha256:`` and the
hex HMAC-SHA256, under ``[cluster] action_signing_key``, of the record's canonical JSON
without the signature (sorted keys, no whitespace), as the typed record writes it, so a
field left out and the same field written null sign alike.
`serve` verifies before it stores anything; a record without a signature, or with one
that does not match, is refused with the reason and dead-lettered.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from core.config import Config, ConfigError
from schemas.actions import canonical_json
from schemas.records import Action

FIELD = "signature"
SCHEME = "hmac-sha256:"


class SignatureError(ValueError):
    """An action whose signature is missing or does not verify; the message says which."""


class ActionSigner:
    """Signs and verifies action records with one key."""

    def __init__(self, key: str) -> None:
        self._key = hashlib.sha256(b"selfheal action|" + key.encode("utf-8")).digest()

    def _mac(self, record: Mapping[str, Any]) -> str:
        body = {k: v for k, v in record.items() if k != FIELD}
        text = canonical_json(body).encode("utf-8")
        return SCHEME + hmac.new(self._key, text, hashlib.sha256).hexdigest()

    def sign_action(self, action: Action) -> Action:
        """The action with its signature, over its record as the wire carries it."""
        return dataclasses.replace(action, signature=self._mac(action.to_dict()))

    def sign(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """A schema-valid action record, signed (any old signature replaced); its fields as
        the typed record writes them."""
        return self.sign_action(Action.from_dict(record)).to_dict()

    def verify(self, action: Action) -> None:
        """Raise `SignatureError` unless ``action`` carries this key's signature of itself."""
        given = action.signature
        if given is None:
            raise SignatureError(
                "unsigned: the record carries no signature, so nothing says the job or an "
                "operator proposed it; actions are signed by `selfheal stream` and "
                "`selfheal execute` with [cluster] action_signing_key")
        if not given.startswith(SCHEME):
            raise SignatureError(f"signature: expected '{SCHEME}<hex>', got {given!r:.80}")
        if not hmac.compare_digest(given, self._mac(action.to_dict())):
            raise SignatureError(
                "signature does not match: the record was altered after it was signed, or "
                "signed with another key (check that the job, the CLI and serve share "
                "[cluster] action_signing_key)")


def signer(config: Config) -> ActionSigner:
    """The signer of the configured cluster; `ConfigError` saying how to set the key."""
    key = config.cluster.action_signing_key
    if key is None:
        raise ConfigError(
            "no action signing key: set [cluster] action_signing_key (or "
            "SELFHEAL_CLUSTER_ACTION_SIGNING_KEY) to one long random secret shared by "
            "`selfheal stream`, `selfheal serve` and `selfheal execute`, e.g. the output of "
            "`python3 -c 'import secrets; print(secrets.token_hex(32))'`; the sandbox "
            "makes one for you")
    return ActionSigner(key)
