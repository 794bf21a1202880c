"""Every Admin call the product makes, on Kafka 3.9 in KRaft mode (admin_calls.py)."""

from __future__ import annotations

import pytest

from tests.integration.admin_calls import check_every_admin_call

pytestmark = pytest.mark.integration


def test_every_admin_call_the_product_makes_works_on_3_9_kraft(kraft39_sandbox):
    check_every_admin_call(kraft39_sandbox)
