"""The executor's disk moves and leader rebalance on Kafka 4.4, KRaft only: the same
bodies as test_executor_moves.py runs on 3.9 ZooKeeper."""

from __future__ import annotations

import pytest

from tests.conftest import prove
from tests.integration.test_executor_moves import (
    even_out_a_skewed_broker,
    rebalance_leaders_as_planned,
)

pytestmark = pytest.mark.integration


def test_a_skewed_broker_is_evened_out_on_4_4(kraft_sandbox, tmp_path, record_property):
    even_out_a_skewed_broker(kraft_sandbox, tmp_path)
    prove(record_property, kraft_sandbox, "disk moves")


def test_leaders_are_rebalanced_as_planned_on_4_4(kraft_sandbox, tmp_path, record_property):
    rebalance_leaders_as_planned(kraft_sandbox, tmp_path)
    prove(record_property, kraft_sandbox, "leaders")
