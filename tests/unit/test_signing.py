"""Signed actions: a hash anyone can compute proves nothing; the HMAC does."""

from __future__ import annotations

import json

import pytest

from core.config import ConfigError, load
from core.signing import ActionSigner, SignatureError, signer
from remediation.executor.actions import parse_action, parse_action_json
from schemas.records import Action
from tests.unit.action_records import fix_offline, with_id

KEY = "k" * 64


def test_a_signed_record_verifies_after_crossing_the_wire():
    signed = ActionSigner(KEY).sign(fix_offline())
    ActionSigner(KEY).verify(parse_action_json(json.dumps(signed).encode()))


def test_a_field_left_out_and_the_same_field_null_sign_alike():
    record = fix_offline(trigger={"kind": "manual"})  # broker and log_dir left out
    signed = ActionSigner(KEY).sign(record)
    assert signed["trigger"] == {"kind": "manual", "broker": None, "log_dir": None}
    ActionSigner(KEY).verify(Action.from_dict({**record, "signature": signed["signature"]}))


def test_an_unsigned_record_with_a_correct_hash_is_refused():
    with pytest.raises(SignatureError, match="^unsigned"):
        ActionSigner(KEY).verify(Action.from_dict(fix_offline()))
    with pytest.raises(SignatureError, match="^unsigned"):
        ActionSigner(KEY).verify(Action.from_dict({**fix_offline(), "signature": None}))


def test_another_keys_signature_is_refused():
    forged = ActionSigner("x" * 64).sign(fix_offline())
    with pytest.raises(SignatureError, match="does not match"):
        ActionSigner(KEY).verify(Action.from_dict(forged))


def test_a_record_altered_after_signing_is_refused_even_with_its_id_recomputed():
    signed = ActionSigner(KEY).sign(fix_offline())
    signed["plan"]["partitions"][0]["replicas"] = [1, 2, 5]
    with_id(signed)  # the id is a public hash: a forger recomputes it
    with pytest.raises(SignatureError, match="does not match"):
        ActionSigner(KEY).verify(parse_action(signed))


def test_a_signature_of_the_wrong_shape_says_what_is_expected():
    shaped = Action.from_stored({**fix_offline(), "signature": "md5:abc"})  # not the schema's
    with pytest.raises(SignatureError, match="expected 'hmac-sha256:<hex>'"):
        ActionSigner(KEY).verify(shaped)


def test_signing_a_typed_action_gives_the_same_signature_as_signing_its_record():
    record = fix_offline()
    action = Action.from_dict(record)
    assert ActionSigner(KEY).sign_action(action).signature == \
        ActionSigner(KEY).sign(record)["signature"]
    ActionSigner(KEY).verify(Action.from_json(ActionSigner(KEY).sign_action(action).to_json()))


def test_without_a_key_the_error_says_how_to_set_one():
    config = load(env={}, use_fallbacks=False)
    with pytest.raises(ConfigError, match=r"set \[cluster\] action_signing_key"):
        signer(config)


def test_a_short_key_is_refused_by_the_config():
    with pytest.raises(ConfigError, match="at least 32 characters"):
        load(env={"SELFHEAL_CLUSTER_ACTION_SIGNING_KEY": "short"}, use_fallbacks=False)
