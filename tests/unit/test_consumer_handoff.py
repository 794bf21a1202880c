"""The rack-aware consumer helper's rules: tokens, when a target applies, and each step a
member takes; a simulation of members with disagreeing views keeps every partition read
by one member at most."""

from __future__ import annotations

import random
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediation.consumers.consumer import ConfigError, _check
from remediation.consumers.handoff import (
    TOKEN_MAX_BYTES,
    TargetView,
    Token,
    generation_of,
    parse_token,
    step,
    target_view,
)
from schemas.records import ConsumerAssignment

T = "orders"


def tp(p: int) -> tuple[str, int]:
    return (T, p)


def record(assignment: dict[str, list[int]], members: list[str] | None = None
           ) -> ConsumerAssignment:
    doc = {"version": 1, "cluster_id": "c1", "event_time": "2026-11-25T09:00:00Z",
           "group": "billing", "strategy": "range", "cross_rack": 0,
           "assignment": {m: [{"topic": T, "partition": p} for p in ps]
                          for m, ps in assignment.items()}}
    if members is not None:
        doc["members"] = members
    return ConsumerAssignment.from_dict(doc)


def applying(readers: dict[int, str]) -> TargetView:
    return TargetView({tp(p): m for p, m in readers.items()}, True, "test")


NONE = TargetView({}, False, "no target")


# --- tokens -----------------------------------------------------------------------------


def test_a_token_reads_back_from_its_commit_metadata():
    token = Token(7, "a-1", "b-2")
    assert parse_token(token.text()) == token
    assert len(token.text()) < TOKEN_MAX_BYTES


@pytest.mark.parametrize("metadata", [
    None, "", "checkpoint=42", '{"selfheal":2,"g":1,"owner":"a","holder":"b"}',
    '{"selfheal":1,"g":"1","owner":"a","holder":"b"}',
    '{"selfheal":1,"g":true,"owner":"a","holder":"b"}',
    '{"selfheal":1,"g":1,"owner":"","holder":"b"}', '{"selfheal":1,"g":1', '{"selfheal"' +
    "[" * 100, '{"selfheal":1,"g":1,"owner":"a","holder":"' + "b" * TOKEN_MAX_BYTES + '"}',
])
def test_other_or_broken_metadata_is_no_token(metadata):
    assert parse_token(metadata) is None


def test_the_generation_is_read_from_librdkafkas_group_metadata():
    raw = (b"CGMDv2:" + (42).to_bytes(4, sys.byteorder, signed=True)
           + b"billing\x00rdkafka-8b78\x00\x01")
    assert generation_of(raw) == 42


def test_unknown_group_metadata_says_which_client_version_to_use():
    with pytest.raises(ValueError, match="confluent-kafka 2.x"):
        generation_of(b"CGMDv9:\x01\x00\x00\x00")


# --- when a target applies ----------------------------------------------------------------


def test_a_record_without_members_is_planned_for_its_assignments_keys():
    assert record({"a": [0], "b": []}).membership() == {"a", "b"}
    assert record({"a": [0]}, members=["a", "b"]).membership() == {"a", "b"}


def test_a_target_applies_only_to_the_members_it_was_planned_for():
    r = record({"a": [0], "b": [1]})
    assert target_view(r, {"a", "b"}, "a", True).applies
    assert not target_view(r, {"a", "b", "c"}, "a", True).applies
    assert "3 members now" in target_view(r, {"a", "b", "c"}, "a", True).why
    assert not target_view(r, {"a"}, "a", True).applies
    assert not target_view(r, {"a", "b"}, "c", True).applies
    assert not target_view(r, {"a", "b"}, "a", False).applies  # rebalancing
    assert not target_view(None, {"a", "b"}, "a", True).applies


def test_a_target_waits_until_every_member_runs_the_helper():
    r = record({"a": [0], "b": [1]})
    view = target_view(r, {"a", "b"}, "a", True, helpers={"a"})
    assert not view.applies and "b" in view.why
    assert target_view(r, {"a", "b"}, "a", True, helpers={"a", "b"}).applies


def test_a_target_giving_one_partition_to_two_members_is_ignored():
    view = target_view(record({"a": [0], "b": [0]}), {"a", "b"}, "a", True)
    assert not view.applies and "both" in view.why


# --- a step -----------------------------------------------------------------------------


def test_without_a_target_a_member_reads_what_the_group_gave_it():
    assert step("a", 3, {tp(0), tp(1)}, {}, NONE).read == {tp(0), tp(1)}


def test_an_owner_lends_what_the_target_gives_another_member():
    s = step("a", 3, {tp(0), tp(1)}, {}, applying({0: "a", 1: "b"}))
    assert s.read == {tp(0)} and s.lend == {tp(1): "b"} and s.give_back == {}


def test_a_borrower_reads_a_partition_once_its_token_names_it():
    target = applying({0: "a", 1: "b"})
    assert step("b", 3, set(), {}, target).read == set()  # not lent yet
    lent = {tp(1): Token(3, "a", "b")}
    assert step("b", 3, set(), lent, target).read == {tp(1)}


def test_an_owner_never_reads_what_it_lent_even_when_the_target_goes():
    lent = {tp(1): Token(3, "a", "b")}
    assert step("a", 3, {tp(0), tp(1)}, lent, NONE).read == {tp(0)}


def test_a_borrower_gives_back_what_its_target_no_longer_gives_it():
    lent = {tp(1): Token(3, "a", "b")}
    s = step("b", 3, set(), lent, NONE)
    assert s.read == set() and s.give_back == {tp(1): "a"}
    s = step("b", 3, set(), lent, applying({1: "c"}))
    assert s.give_back == {tp(1): "a"}


def test_an_owner_reads_again_what_was_given_back():
    back = {tp(1): Token(3, "a", "a")}
    assert step("a", 3, {tp(1)}, back, NONE).read == {tp(1)}


def test_tokens_of_an_earlier_generation_are_void():
    old = {tp(1): Token(2, "a", "b")}
    assert step("a", 3, {tp(1)}, old, NONE).read == {tp(1)}
    s = step("b", 3, set(), old, applying({1: "b"}))
    assert s.read == set() and s.give_back == {}


def test_an_owner_holds_back_from_a_member_that_just_gave_back():
    back = {tp(1): Token(3, "a", "a")}
    s = step("a", 3, {tp(1)}, back, applying({1: "b"}), hold_back={(tp(1), "b")})
    assert s.read == {tp(1)} and s.lend == {}


# --- the rules under disagreement ---------------------------------------------------------


def _simulate(seed: int, members: int, partitions: int, targets: int, events: int) -> None:
    """Members with their own (changing) target views act in random order; each step is
    split into its read of the tokens and its writes, with others acting in between, as
    they do on Kafka. At no moment may two members read one partition."""
    rng = random.Random(seed)
    names = [f"m{i}" for i in range(members)]
    gen = 5
    owner = {p: names[p % members] for p in range(partitions)}
    owned = {m: {tp(p) for p, o in owner.items() if o == m} for m in names}
    versions = [applying({p: rng.choice(names) for p in range(partitions)})
                for _ in range(targets)] + [NONE]
    view = {m: rng.choice(versions) for m in names}
    tokens: dict[tuple[str, int], Token] = {}
    reading = {m: set(owned[m]) for m in names}
    seen: dict[str, dict[tuple[str, int], Token] | None] = {m: None for m in names}
    for _ in range(events):
        m = rng.choice(names)
        roll = rng.random()
        if roll < 0.1:
            view[m] = rng.choice(versions)
        elif seen[m] is None:
            seen[m] = dict(tokens)  # the member reads the committed offsets
        else:
            s = step(m, gen, owned[m], seen[m], view[m])
            seen[m] = None
            reading[m] = set(s.read)  # assign() first: stop what leaves
            for p, borrower in s.lend.items():
                tokens[p] = Token(gen, m, borrower)
            for p, back_to in s.give_back.items():
                tokens[p] = Token(gen, back_to, back_to)
        for p in range(partitions):
            readers = [n for n in names if tp(p) in reading[n]]
            assert len(readers) <= 1, (p, readers, tokens.get(tp(p)))
    # once every member sees the same view, a few rounds settle on it
    final = rng.choice(versions)
    for _ in range(4):
        for m in names:
            s = step(m, gen, owned[m], dict(tokens), final)
            reading[m] = set(s.read)
            for p, borrower in s.lend.items():
                tokens[p] = Token(gen, m, borrower)
            for p, back_to in s.give_back.items():
                tokens[p] = Token(gen, back_to, back_to)
    want = {m: {p for p, r in final.readers.items() if r == m} for m in names} \
        if final.applies else owned
    assert reading == want


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(2, 4), st.integers(1, 8), st.integers(1, 3))
def test_no_partition_is_ever_read_by_two_members_and_agreeing_views_converge(
        seed, members, partitions, targets):
    _simulate(seed, members, partitions, targets, events=200)


# --- settings ------------------------------------------------------------------------------


@pytest.mark.parametrize("settings_, fix", [
    ({}, "group.id"),
    ({"group.id": "g", "partition.assignment.strategy": "cooperative-sticky"}, "eager"),
    ({"group.id": "g", "group.protocol": "consumer"}, "KIP-848"),
    ({"group.id": "g", "enable.auto.commit": True}, "commits itself"),
])
def test_settings_the_helper_cannot_work_with_are_refused_with_the_fix(settings_, fix):
    with pytest.raises(ConfigError, match=fix):
        _check(settings_)


def test_range_and_roundrobin_groups_are_accepted():
    _check({"group.id": "g", "client.rack": "r1", "partition.assignment.strategy": "range"})
    _check({"group.id": "g", "client.rack": "r1",
            "partition.assignment.strategy": "range,roundrobin"})
