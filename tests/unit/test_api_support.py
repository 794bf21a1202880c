"""Which calls brokers of different Kafka versions disagree on (core.api_support), and
what the collector says about it (streams.collect.api_watch)."""

from __future__ import annotations

from typing import Any

import pytest

from core.api_support import (
    CONSUMER_GROUP_DESCRIBE,
    DESCRIBE_LOG_DIRS,
    LIST_GROUPS,
    behind,
    gap_line,
    gaps,
)
from streams.collect.api_watch import ApiWatch

# What each line answers for the calls the table names (the versions are the ones the
# sandbox's 3.9 and 4.4 brokers answer; KIP-896 raised 4.x's minimums).
OLD = {DESCRIBE_LOG_DIRS: (0, 4), LIST_GROUPS: (0, 5)}
NEW = {DESCRIBE_LOG_DIRS: (1, 5), LIST_GROUPS: (0, 5), CONSUMER_GROUP_DESCRIBE: (0, 1)}


def calls(versions: dict[int, dict[int, tuple[int, int]]]) -> dict[str, Any]:
    return {g.capability.call: (g.missing, g.having) for g in gaps(versions)}


def test_brokers_of_one_version_have_no_gap_whatever_they_lack() -> None:
    assert gaps({1: OLD, 2: OLD, 3: OLD}) == []
    assert gaps({1: NEW, 2: NEW}) == []
    assert gap_line([]) is None


def test_a_rolling_upgrade_half_way_names_each_call_and_the_brokers_without_it() -> None:
    assert calls({1: NEW, 2: OLD, 3: OLD}) == {
        "DescribeLogDirs v5": ((2, 3), (1,)),
        "ConsumerGroupDescribe": ((2, 3), (1,)),
    }
    line = gap_line(gaps({1: NEW, 2: OLD, 3: OLD}))
    assert line is not None and "\n" not in line
    assert "DescribeLogDirs v5 (log-dir cordons) not on brokers 2, 3, only on broker 1" in line
    assert "ConsumerGroupDescribe (KIP-848 groups) not on brokers 2, 3" in line


@pytest.mark.parametrize("versions, expected", [
    # a version range that starts above the one needed counts as not supported
    ({1: {DESCRIBE_LOG_DIRS: (5, 5)}, 2: {DESCRIBE_LOG_DIRS: (0, 5)}},
     {"DescribeLogDirs v4": ((1,), (2,))}),
    # a broker without the key at all
    ({1: {}, 2: {LIST_GROUPS: (0, 5)}}, {"ListGroups v5": ((1,), (2,))}),
    # a broker older than DescribeLogDirs v4 (Kafka < 3.3) beside a 3.9 one
    ({1: {**OLD, DESCRIBE_LOG_DIRS: (0, 3)}, 2: OLD}, {"DescribeLogDirs v4": ((1,), (2,))}),
])
def test_the_decision_table(versions, expected) -> None:
    assert calls(versions) == expected


def test_a_client_clamped_to_the_old_versions_is_behind_once_every_broker_is_new() -> None:
    assert behind(OLD, {1: NEW, 2: NEW}) == ["DescribeLogDirs v5", "ConsumerGroupDescribe"]
    # half-way, the old versions are all the brokers share: nothing to reopen for
    assert behind(OLD, {1: NEW, 2: OLD}) == []
    assert behind(NEW, {1: NEW, 2: NEW}) == []
    assert behind(OLD, {}) == []


class _Admin:
    """Only what ApiWatch reads: each broker's ApiVersions and the negotiated copy."""

    def __init__(self, brokers: dict[int, dict[int, tuple[int, int]]],
                 used: dict[int, tuple[int, int]]) -> None:
        self.brokers = brokers
        self._manager = type("M", (), {"broker_version_data":
                                       type("D", (), {"api_versions": used})()})()


@pytest.fixture
def fake_versions(monkeypatch):
    import core.api_support as api

    monkeypatch.setattr(api, "broker_versions",
                        lambda admin, b: admin.brokers.get(b))


def test_the_collector_says_the_gap_once_and_says_when_it_closes(fake_versions) -> None:
    said: list[str] = []
    watch = ApiWatch(said.append)
    assert watch.check(_Admin({1: OLD, 2: OLD}, OLD), [1, 2]) is False
    assert said == []
    for _ in range(3):
        assert watch.check(_Admin({1: NEW, 2: OLD}, OLD), [1, 2]) is False
    assert len(said) == 1 and said[0].startswith("WARNING brokers run different Kafka")
    assert "not on broker 2, only on broker 1" in said[0]
    # the upgrade finished: the gap closes, and the client opened on 3.9 is reopened
    assert watch.check(_Admin({1: NEW, 2: NEW}, OLD), [1, 2]) is True
    assert said[1] == "every broker answers the same calls again (no Kafka versions mixed)"
    assert "reopening it" in said[2]
    assert watch.check(_Admin({1: NEW, 2: NEW}, NEW), [1, 2]) is False
    assert len(said) == 3


def test_a_broker_that_does_not_answer_is_left_out_not_taken_for_old(fake_versions) -> None:
    said: list[str] = []
    assert ApiWatch(said.append).check(_Admin({1: NEW}, NEW), [1, 2]) is False
    assert said == []


def test_the_doctor_line(fake_versions) -> None:
    from selfheal.doctor_checks import OK, WARN, broker_versions

    same = broker_versions(_Admin({1: NEW, 2: NEW}, NEW), [1, 2, 3])
    assert same.status == OK and "2 brokers answer the same calls" in same.detail
    assert "broker(s) 3 did not answer" in same.detail
    mixed: Any = broker_versions(_Admin({1: NEW, 2: OLD}, OLD), [1, 2])
    assert mixed.status == WARN and "not on broker 2" in mixed.detail
