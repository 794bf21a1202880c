"""DescribeLogDirs is asked again when the first call fails: the admin's old connection to
a broker that restarted fails once, and a snapshot must not report that broker's last
known dirs (a replaced disk still offline) when the broker can answer."""

from __future__ import annotations

from core.live import describe_dirs

REPLY = {"log_dirs": [{"log_dir": "/d0", "error_code": 0, "total_bytes": 100,
                       "usable_bytes": 50, "topics": []}]}


class Admin:
    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, 0

    def describe_log_dirs(self, brokers: list[int]) -> list[dict]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("connection reset by a restarted broker")
        return [REPLY]


def test_a_broker_failing_once_is_asked_again_and_its_dirs_are_current() -> None:
    admin = Admin(failures=1)
    found = describe_dirs(admin, 0, pause=0.0)
    assert found is not None and found.dirs["/d0"]["online"] is True
    assert admin.calls == 2


def test_a_broker_not_ready_twice_just_after_registering_is_asked_a_third_time() -> None:
    admin = Admin(failures=2)
    found = describe_dirs(admin, 0, pause=0.0)
    assert found is not None and admin.calls == 3


def test_a_broker_that_never_answers_gives_none() -> None:
    admin = Admin(failures=5)
    assert describe_dirs(admin, 0, pause=0.0) is None
    assert admin.calls == 3
