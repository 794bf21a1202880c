"""Backoff between a collector's failed attempts."""

from __future__ import annotations

import pytest

from streams.collect.backoff import Backoff


def test_delays_double_from_initial_up_to_the_maximum():
    backoff = Backoff(1.0, 10.0)
    assert [backoff.failure() for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert backoff.failures == 6


def test_a_success_starts_again_from_initial():
    backoff = Backoff(0.5, 60.0)
    backoff.failure()
    backoff.failure()
    backoff.success()
    assert backoff.failure() == 0.5


def test_a_long_outage_stays_at_the_maximum():
    backoff = Backoff(1.0, 60.0)
    for _ in range(2000):
        delay = backoff.failure()
    assert delay == 60.0


@pytest.mark.parametrize("initial, maximum", [(0.0, 1.0), (-1.0, 1.0), (5.0, 1.0)])
def test_bad_bounds_name_the_config_keys(initial, maximum):
    with pytest.raises(ValueError, match="backoff_initial_seconds"):
        Backoff(initial, maximum)
